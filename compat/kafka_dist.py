"""Apache Kafka on demand: the broker's jars from Maven Central, cached under .cache/kafka/.

`kafka_lib()` returns the directory of jars for the version pinned in compat/kafka-pom.xml
(`<kafka.version>`; the pom says how to bump it), downloading them on first use with

    mvn -q -f compat/kafka-pom.xml dependency:copy-dependencies -DoutputDirectory=<cache>/lib

into `.cache/kafka/<version>/lib` (gitignored), then writing a marker file: later calls check
the marker and run nothing (kafkalite/maven_dist.py does the work, as for ZooKeeper). Missing or
too old `java` (>= 17) or `mvn`, or a failed download, raise `CompatSetupError` with a one-line
message. `KAFKALITE_KAFKA_CACHE` moves the cache.

    python -m compat.kafka_dist      # download if needed, print the lib directory
"""

from __future__ import annotations

import sys
from pathlib import Path

from kafkalite import maven_dist
from kafkalite.maven_dist import MavenDist

ROOT = Path(__file__).resolve().parent.parent
POM = Path(__file__).resolve().parent / "kafka-pom.xml"

# Real Kafka cannot be provisioned or started (no Java/Maven/network, ...).
CompatSetupError = maven_dist.ProvisionError

KAFKA = MavenDist(
    name="Apache Kafka",
    pom=POM,
    version_property="kafka.version",
    default_cache=ROOT / ".cache" / "kafka",
    cache_env="KAFKALITE_KAFKA_CACHE",
    main_jar="kafka_2.13-{version}",
    log_prefix="compat",
)


def kafka_version() -> str:
    """The Kafka version pinned in the pom (`<kafka.version>`)."""
    return KAFKA.version()


def cache_root() -> Path:
    return KAFKA.cache_root()


def version_dir(version: str | None = None) -> Path:
    return KAFKA.version_dir(version)


def java_executable() -> str:
    """Path of a `java` >= 17 (JAVA_HOME first, then PATH), else CompatSetupError."""
    return maven_dist.java_executable("real Kafka")


def kafka_lib(version: str | None = None) -> Path:
    """The directory of the broker's jars, downloaded on first use (idempotent)."""
    return KAFKA.lib(version)


def main() -> int:
    try:
        print(kafka_lib())
    except CompatSetupError as exc:
        print(f"compat: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
