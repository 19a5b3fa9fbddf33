"""The Kafka connector jars for Spark (format("kafka")), resolved from Maven Central once.

    python -m spark_jobs.jars [--refresh] [--connector-version V] [--token-provider-version V]
        [--spark-jars]

`--spark-jars` prints only the comma-separated list, for `spark-submit --jars`.

The connector is `org.apache.spark:spark-sql-kafka-0-10_2.13` at the installed pyspark's
version. Its dependencies that pyspark does not ship (kafka-clients, commons-pool2,
spark-token-provider-kafka-0-10) are copied by Maven (`dependency:copy-dependencies`) into
the gitignored `.cache/spark-jars/<pyspark version>/`; a marker file (`resolved.json`,
written last) makes every later call a no-op without Maven or network. Everything pyspark
already ships (spark-*, scala-*, hadoop-client-*, slf4j, lz4, snappy, zstd, jsr305, ...) is
left out, first by the pom's exclusions (so it is not even downloaded), then by comparing
artifact ids with pyspark's own `jars/` directory, so no second copy of a library ends up
on the classpath.

Fallback when a version is not on Maven Central: Spark's Python package can be on PyPI
before (or without) the Maven artifacts. If the connector at pyspark's exact version is
missing, the newest published release of the same major version below it is used; if
spark-token-provider-kafka-0-10 at the connector's version is missing, the newest
published release below that. Both choices are printed and recorded in the marker.
(Checked when this was written: pyspark 4.3.0 with spark-sql-kafka 4.2.0 and
spark-token-provider-kafka 4.0.0; a static link check of every method and field the two
jars reference found them all in Spark 4.3.0's jars, except two log keys used only when
obtaining Kafka delegation tokens, i.e. with Kerberos.)

Needs Java >= 17 (Spark 4) and, for the first resolution only, Maven (`mvn`). Problems are
raised as `SetupError` with a one-line message; the command-line tools print it and exit
with code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

SCALA_BINARY = "2.13"
CONNECTOR = f"spark-sql-kafka-0-10_{SCALA_BINARY}"
TOKEN_PROVIDER = f"spark-token-provider-kafka-0-10_{SCALA_BINARY}"
SPARK_GROUP = "org.apache.spark"
MIN_JAVA = 17

REPO_ROOT = Path(__file__).resolve().parents[1]
CACHE_ROOT = Path(os.environ.get("SPARK_JOBS_JAR_CACHE", REPO_ROOT / ".cache" / "spark-jars"))
MAVEN_REPO = os.environ.get("SPARK_JOBS_MAVEN_REPO", "https://repo.maven.apache.org/maven2")
MARKER = "resolved.json"

# Transitive dependencies of the connector that pyspark already ships (checked again against
# pyspark's jars/ after copying). Maven >= 3.2.1 understands the "*" artifact wildcard.
PROVIDED_BY_SPARK = [
    ("org.scala-lang", "*"),
    ("org.scala-lang.modules", "*"),
    ("org.apache.hadoop", "*"),
    ("org.slf4j", "*"),
    ("org.xerial.snappy", "*"),
    ("org.lz4", "*"),
    ("at.yawk.lz4", "*"),
    ("com.github.luben", "*"),
    ("com.google.code.findbugs", "*"),
    (SPARK_GROUP, f"spark-tags_{SCALA_BINARY}"),
]


class SetupError(RuntimeError):
    """Java, Maven or the connector jars are not usable; the message is one line."""


@dataclass(frozen=True)
class ResolvedJars:
    spark_version: str
    connector_version: str
    token_provider_version: str
    jars: tuple[Path, ...]

    @property
    def classpath(self) -> str:
        """The value for `spark.jars`."""
        return ",".join(str(jar) for jar in self.jars)


# --- Java and Maven -------------------------------------------------------------------------


def java_command() -> str:
    """The java Spark will run: $JAVA_HOME/bin/java if JAVA_HOME is set, else java on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.exists():
            return str(candidate)
        raise SetupError(f"JAVA_HOME={java_home} has no bin/java; Spark needs Java >= {MIN_JAVA}")
    found = shutil.which("java")
    if not found:
        raise SetupError(
            f"java not found on PATH (and JAVA_HOME unset); Spark needs Java >= {MIN_JAVA}"
        )
    return found


def java_major_version(java: str | None = None) -> int:
    java = java or java_command()
    try:
        result = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError as exc:
        raise SetupError(f"cannot run {java}: {exc}") from exc
    match = re.search(r'version "(\d+)(?:\.(\d+))?', result.stderr + result.stdout)
    if not match:
        raise SetupError(f"cannot tell the Java version from `{java} -version`")
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8.0_392" is Java 8
        major = int(match.group(2))
    return major


def check_java() -> int:
    major = java_major_version()
    if major < MIN_JAVA:
        raise SetupError(f"Java {major} found; Spark 4 needs Java >= {MIN_JAVA} (set JAVA_HOME)")
    return major


def maven_command() -> str:
    found = shutil.which("mvn")
    if not found:
        raise SetupError(
            "Maven (mvn) not found on PATH; it is needed once to fetch the Spark Kafka "
            "connector jars from Maven Central"
        )
    return found


# --- versions on Maven Central ----------------------------------------------------------------


def spark_version() -> str:
    import pyspark

    return pyspark.__version__


def pyspark_jars_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


_RELEASE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")


def _release_key(version: str) -> tuple[int, int, int] | None:
    match = _RELEASE.match(version)
    return tuple(int(part) for part in match.groups()) if match else None  # type: ignore[return-value]


def _url(artifact: str, suffix: str = "") -> str:
    return f"{MAVEN_REPO}/{SPARK_GROUP.replace('.', '/')}/{artifact}/{suffix}"


def _published(artifact: str, version: str) -> bool:
    url = _url(artifact, f"{version}/{artifact}-{version}.pom")
    request = urllib.request.Request(url, method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status == 200
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return False
        raise SetupError(f"Maven Central answered {exc.code} for {url}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise SetupError(f"cannot reach Maven Central ({MAVEN_REPO}): {exc}") from exc


def _listed_versions(artifact: str) -> list[str]:
    url = _url(artifact, "maven-metadata.xml")
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            root = ElementTree.fromstring(response.read())
    except (urllib.error.URLError, OSError, ElementTree.ParseError) as exc:
        raise SetupError(f"cannot read {url}: {exc}") from exc
    return [node.text for node in root.iter("version") if node.text]


def pick_version(artifact: str, wanted: str) -> str:
    """`wanted` if Maven Central has it, else the newest release of the same major below it."""
    if _published(artifact, wanted):
        return wanted
    wanted_key = _release_key(wanted.split("-")[0])
    if wanted_key is None:
        raise SetupError(f"{SPARK_GROUP}:{artifact}:{wanted} is not on Maven Central")
    candidates = sorted(
        (
            (key, version)
            for version in _listed_versions(artifact)
            if (key := _release_key(version)) and key[0] == wanted_key[0] and key < wanted_key
        ),
        reverse=True,
    )
    for _, version in candidates:
        if _published(artifact, version):
            return version
    raise SetupError(
        f"{SPARK_GROUP}:{artifact}:{wanted} is not on Maven Central, nor any "
        f"{wanted_key[0]}.x release below it"
    )


# --- resolution ---------------------------------------------------------------------------------


def _pom(connector_version: str, token_provider_version: str) -> str:
    exclusions = "".join(
        f"<exclusion><groupId>{group}</groupId><artifactId>{artifact}</artifactId></exclusion>"
        for group, artifact in PROVIDED_BY_SPARK
    )
    token_exclusion = (
        f"<exclusion><groupId>{SPARK_GROUP}</groupId><artifactId>{TOKEN_PROVIDER}</artifactId>"
        "</exclusion>"
    )
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kafkalite</groupId>
  <artifactId>spark-kafka-connector-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>{SPARK_GROUP}</groupId>
      <artifactId>{CONNECTOR}</artifactId>
      <version>{connector_version}</version>
      <exclusions>{exclusions}{token_exclusion}</exclusions>
    </dependency>
    <dependency>
      <groupId>{SPARK_GROUP}</groupId>
      <artifactId>{TOKEN_PROVIDER}</artifactId>
      <version>{token_provider_version}</version>
      <exclusions>{exclusions}</exclusions>
    </dependency>
  </dependencies>
</project>
"""


_JAR_NAME = re.compile(r"^(?P<artifact>.+?)-(?P<version>\d+\.[^/]*)\.jar$")


def artifact_id(jar_name: str) -> str:
    """`kafka-clients-3.9.2.jar` -> `kafka-clients` (Maven's artifactId-version.jar names)."""
    match = _JAR_NAME.match(jar_name)
    return match.group("artifact") if match else jar_name.removesuffix(".jar")


def shipped_by_pyspark() -> set[str]:
    return {artifact_id(jar.name) for jar in pyspark_jars_dir().glob("*.jar")}


def _read_marker(directory: Path) -> ResolvedJars | None:
    try:
        data = json.loads((directory / MARKER).read_text())
        jars = tuple(directory / name for name in data["jars"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not all(jar.is_file() for jar in jars):
        return None
    return ResolvedJars(
        data["spark_version"], data["connector_version"], data["token_provider_version"], jars
    )


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _log(message: str) -> None:
    print(f"[spark-jars] {message}", file=sys.stderr, flush=True)


def resolve_jars(
    *,
    refresh: bool = False,
    connector_version: str | None = None,
    token_provider_version: str | None = None,
    cache_root: Path | None = None,
) -> ResolvedJars:
    """The connector jars for the installed pyspark, resolving them on first use."""
    version = spark_version()
    directory = Path(cache_root or CACHE_ROOT) / version

    def cached() -> ResolvedJars | None:
        found = None if refresh else _read_marker(directory)
        if found is None or connector_version not in (None, found.connector_version):
            return None
        if token_provider_version not in (None, found.token_provider_version):
            return None
        return found

    if hit := cached():
        return hit
    with _locked(directory.parent / f".{version}.lock"):
        if hit := cached():  # another process resolved them while we waited
            return hit
        return _resolve(version, directory, connector_version, token_provider_version)


def _resolve(
    version: str,
    directory: Path,
    connector_version: str | None,
    token_provider_version: str | None,
) -> ResolvedJars:
    mvn = maven_command()
    check_java()
    connector_version = connector_version or pick_version(CONNECTOR, version)
    if connector_version != version:
        _log(
            f"{SPARK_GROUP}:{CONNECTOR}:{version} is not on Maven Central; "
            f"using {connector_version}, the newest published release below it"
        )
    token_provider_version = token_provider_version or pick_version(
        TOKEN_PROVIDER, connector_version
    )
    if token_provider_version != connector_version:
        _log(
            f"{SPARK_GROUP}:{TOKEN_PROVIDER}:{connector_version} is not on Maven Central; "
            f"using {token_provider_version}"
        )
    _log(f"resolving {CONNECTOR}:{connector_version} with Maven into {directory}")
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="spark-jars-") as work:
        work_dir = Path(work)
        (work_dir / "pom.xml").write_text(_pom(connector_version, token_provider_version))
        staging = work_dir / "jars"
        command = [
            mvn,
            "-q",
            "-B",
            "-f",
            str(work_dir / "pom.xml"),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={staging}",
            "-DincludeScope=runtime",
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            errors = (
                [line for line in result.stdout.splitlines() if line.startswith("[ERROR]")]
                or result.stderr.strip().splitlines()
                or ["(no output)"]
            )
            raise SetupError(f"mvn dependency:copy-dependencies failed: {errors[0]}")
        shipped = shipped_by_pyspark()
        kept: list[str] = []
        for jar in sorted(staging.glob("*.jar")):
            if artifact_id(jar.name) in shipped:
                _log(f"left out {jar.name}: pyspark ships {artifact_id(jar.name)}")
                continue
            shutil.copy2(jar, directory / jar.name)
            kept.append(jar.name)
    names = {artifact_id(name) for name in kept}
    for needed in (CONNECTOR, TOKEN_PROVIDER, "kafka-clients"):
        if needed not in names:
            raise SetupError(f"Maven did not produce {needed} (got {', '.join(kept) or 'nothing'})")
    marker = {
        "spark_version": version,
        "connector_version": connector_version,
        "token_provider_version": token_provider_version,
        "maven_repo": MAVEN_REPO,
        "jars": kept,
    }
    tmp = directory / f"{MARKER}.tmp"
    tmp.write_text(json.dumps(marker, indent=2) + "\n")
    tmp.replace(directory / MARKER)
    _log(f"{len(kept)} jars: {', '.join(kept)}")
    return ResolvedJars(
        version, connector_version, token_provider_version, tuple(directory / n for n in kept)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m spark_jobs.jars",
        description="Resolve the Spark Kafka connector jars (cached) and print them.",
    )
    parser.add_argument("--refresh", action="store_true", help="resolve again with Maven")
    parser.add_argument("--connector-version", help=f"{CONNECTOR} version (default: pyspark's)")
    parser.add_argument("--token-provider-version", help=f"{TOKEN_PROVIDER} version")
    parser.add_argument(
        "--spark-jars", action="store_true", help="print only the list for spark-submit --jars"
    )
    args = parser.parse_args(argv)
    try:
        check_java()
        resolved = resolve_jars(
            refresh=args.refresh,
            connector_version=args.connector_version,
            token_provider_version=args.token_provider_version,
        )
    except SetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.spark_jars:
        print(resolved.classpath)
        return 0
    print(
        f"pyspark {resolved.spark_version}, {CONNECTOR} {resolved.connector_version}, "
        f"{TOKEN_PROVIDER} {resolved.token_provider_version}"
    )
    for jar in resolved.jars:
        print(jar)
    return 0


if __name__ == "__main__":
    sys.exit(main())
