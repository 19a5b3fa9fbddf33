"""Apache Kafka's command-line tools (kafka-acls, kafka-features, kafka-leader-election,
kafka-log-dirs, kafka-configs, kafka-transactions, kafka-reassign-partitions, kafka-topics,
kafka-share-groups, kafka-console-share-consumer)
run with `java -cp` against a broker, from jars cached under .cache/kafka-tools/<version>/.

`tools_lib()` downloads org.apache.kafka:kafka-tools (pinned in compat/kafka-tools-pom.xml) on
first use (kafkalite/maven_dist.py, as for the broker); `run_tool(tool, bootstrap, *args)` runs
one tool by its script name and returns its exit code and output. Missing Java or Maven,
or a failed download, raise `CompatSetupError` with a one-line message.

    python -m compat.kafka_tools kafka-acls --bootstrap-server localhost:9092 --list
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from compat.kafka_dist import ROOT, CompatSetupError, java_executable
from kafkalite.maven_dist import MavenDist

TOOLS_DIST = MavenDist(
    name="Apache Kafka's tools",
    pom=Path(__file__).resolve().parent / "kafka-tools-pom.xml",
    version_property="kafka.tools.version",
    default_cache=ROOT / ".cache" / "kafka-tools",
    cache_env="KAFKALITE_KAFKA_TOOLS_CACHE",
    main_jar="kafka-tools-{version}",
    log_prefix="compat",
)

# A tool runs for seconds: the C1 compiler and the serial collector start it with about a
# third less CPU (measured 7.1-7.6 s -> 4.9-5.1 s for kafka-share-groups --list on a loaded
# machine), which is what a test suite running dozens of them waits for.
SHORT_RUN_JVM = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")

# Script name (bin/<name>.sh in Kafka's distribution) -> its main class.
TOOLS = {
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",  # Scala, in core, up to 4.3
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-console-share-consumer": "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
}


@dataclass(frozen=True)
class ToolRun:
    exit_code: int
    stdout: str
    stderr: str


def tools_lib() -> Path:
    """The directory of the tools' jars, downloaded on first use (idempotent)."""
    return TOOLS_DIST.lib()


def run_tool(tool: str, bootstrap: str, *args: str, timeout: float = 120.0) -> ToolRun:
    """Run `tool --bootstrap-server <bootstrap> args...`; its exit code and output."""
    cmd = [
        java_executable(),
        "-Xmx256m",
        *SHORT_RUN_JVM,
        "-cp",
        f"{tools_lib()}/*",
        TOOLS[tool],
        "--bootstrap-server",
        bootstrap,
        *args,
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return ToolRun(result.returncode, result.stdout, result.stderr)


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in TOOLS:
        print(f"usage: python -m compat.kafka_tools {{{','.join(TOOLS)}}} ARGS...", file=sys.stderr)
        return 2
    try:
        cmd = [java_executable(), "-cp", f"{tools_lib()}/*", TOOLS[argv[0]], *argv[1:]]
    except CompatSetupError as exc:
        print(f"compat: {exc}", file=sys.stderr)
        return 2
    return subprocess.run(cmd).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
