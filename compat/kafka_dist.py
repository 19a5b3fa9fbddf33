"""Apache Kafka on demand: the broker's jars from Maven Central, cached under .cache/kafka/.

`kafka_lib()` returns the directory of jars for the version pinned in compat/kafka-pom.xml
(`<kafka.version>`; the pom says how to bump it), downloading them on first use with

    mvn -q -f compat/kafka-pom.xml dependency:copy-dependencies -DoutputDirectory=<cache>/lib

into `.cache/kafka/<version>/lib` (gitignored), then writing a marker file: later calls check
the marker and run nothing. Missing or too old `java` (>= 17) or `mvn`, or a failed download,
raise `CompatSetupError` with a one-line message. `KAFKALITE_KAFKA_CACHE` moves the cache.

    python -m compat.kafka_dist      # download if needed, print the lib directory
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
POM = Path(__file__).resolve().parent / "kafka-pom.xml"
MIN_JAVA = 17
MARKER = "complete"
DEPENDENCY_PLUGIN = "3.8.1"  # as pinned in the pom
_MAVEN_NS = "{http://maven.apache.org/POM/4.0.0}"


class CompatSetupError(RuntimeError):
    """Real Kafka cannot be provisioned or started (no Java/Maven/network, ...)."""


def kafka_version(pom: Path = POM) -> str:
    """The Kafka version pinned in the pom (`<kafka.version>`)."""
    node = ET.parse(pom).getroot().find(f"{_MAVEN_NS}properties/{_MAVEN_NS}kafka.version")
    if node is None or not (node.text or "").strip():
        raise CompatSetupError(f"{pom} has no <kafka.version> property")
    return node.text.strip()


def cache_root() -> Path:
    return Path(os.environ.get("KAFKALITE_KAFKA_CACHE") or ROOT / ".cache" / "kafka")


def version_dir(version: str | None = None) -> Path:
    return cache_root() / (version or kafka_version())


@cache
def java_executable() -> str:
    """Path of a `java` >= 17 (JAVA_HOME first, then PATH), else CompatSetupError."""
    java_home = os.environ.get("JAVA_HOME")
    candidate = Path(java_home, "bin", "java") if java_home else None
    java = str(candidate) if candidate and candidate.is_file() else shutil.which("java")
    if not java:
        raise CompatSetupError(
            f"real Kafka needs Java >= {MIN_JAVA}: no `java` on PATH (or in JAVA_HOME)"
        )
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CompatSetupError(
            f"real Kafka needs Java >= {MIN_JAVA}: `{java} -version` failed: {exc}"
        ) from None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not match:
        raise CompatSetupError(
            f"real Kafka needs Java >= {MIN_JAVA}: cannot parse `{java} -version`"
        )
    major = int(match.group(1))
    if major == 1:  # "1.8.0_x"
        major = int(match.group(2) or 0)
    if major < MIN_JAVA:
        raise CompatSetupError(f"real Kafka needs Java >= {MIN_JAVA}, found Java {major} ({java})")
    return java


def _mvn_executable() -> str:
    mvn = shutil.which("mvn")
    if not mvn:
        raise CompatSetupError(
            "real Kafka is downloaded from Maven Central with Maven: no `mvn` on PATH"
        )
    return mvn


def kafka_lib(version: str | None = None) -> Path:
    """The directory of the broker's jars, downloaded on first use (idempotent)."""
    java_executable()  # fail early and clearly, before any download
    version = version or kafka_version()
    target = version_dir(version)
    lib = target / "lib"
    if (target / MARKER).is_file():
        return lib
    mvn = _mvn_executable()
    if version != kafka_version():
        raise CompatSetupError(f"Kafka {version} is not cached and the pom pins {kafka_version()}")
    target.mkdir(parents=True, exist_ok=True)
    # One download at a time (tests, bench and a manual run may start together).
    with open(target / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / MARKER).is_file():
            return lib
        return _download(mvn, version, target)


def _download(mvn: str, version: str, target: Path) -> Path:
    lib = target / "lib"
    partial = target / "lib.partial"
    shutil.rmtree(partial, ignore_errors=True)
    cmd = [
        mvn,
        "-q",
        "-B",
        "-f",
        str(POM),
        # = dependency:copy-dependencies; the full name reports a network failure as such
        # (the prefix form says "No plugin found for prefix 'dependency'").
        f"org.apache.maven.plugins:maven-dependency-plugin:{DEPENDENCY_PLUGIN}:copy-dependencies",
        f"-DoutputDirectory={partial}",
    ]
    started = time.monotonic()
    print(f"compat: downloading Apache Kafka {version} from Maven Central ...", file=sys.stderr)
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=_mvn_env())
    except subprocess.TimeoutExpired:
        raise CompatSetupError(f"downloading Apache Kafka {version} timed out (30 min)") from None
    if result.returncode != 0:
        detail = _last_error_line(result.stdout + result.stderr)
        raise CompatSetupError(
            f"downloading Apache Kafka {version} with Maven failed"
            f" (exit {result.returncode}; is Maven Central reachable?): {detail}"
        )
    jars = sorted(partial.glob("*.jar"))
    if not any(jar.name.startswith(f"kafka_2.13-{version}") for jar in jars):
        raise CompatSetupError(f"Maven finished but {partial} has no kafka_2.13-{version}.jar")
    size = sum(jar.stat().st_size for jar in jars)
    shutil.rmtree(lib, ignore_errors=True)
    partial.rename(lib)
    (target / MARKER).write_text(
        f"kafka {version}: {len(jars)} jars, {size} bytes, {time.monotonic() - started:.1f}s\n"
    )
    print(
        f"compat: Apache Kafka {version}: {len(jars)} jars, {size / 2**20:.1f} MiB"
        f" in {time.monotonic() - started:.1f}s -> {lib}",
        file=sys.stderr,
    )
    return lib


def _mvn_env() -> dict[str, str]:
    env = dict(os.environ)
    # Maven runs on the same Java as the broker.
    java = Path(java_executable()).resolve()
    env.setdefault("JAVA_HOME", str(java.parent.parent))
    return env


def _last_error_line(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if "[ERROR]" in line and line != "[ERROR]"]
    picked = (errors or lines or ["no output"])[0]
    return re.sub(r"\x1b\[[0-9;]*m", "", picked)[:400]


def main() -> int:
    try:
        print(kafka_lib())
    except CompatSetupError as exc:
        print(f"compat: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
