"""JVM programs on demand: a pom's runtime jars from Maven Central, cached and downloaded once.

A `MavenDist` names a pom (whose `<properties>` pin the version), a cache directory and the jar
that proves a download complete. `lib()` returns `<cache>/<version>/lib`, running on first use

    mvn -q -f <pom> dependency:copy-dependencies -DoutputDirectory=<cache>/<version>/lib.partial

then renaming the directory and writing a marker file: later calls check the marker and run
nothing; a lock file keeps concurrent first uses to one download. Real Apache Kafka (compat/)
and ZooKeeper (kafkalite/cluster/) come this way. A missing or too old `java` (>= 17) or `mvn`,
or a failed download, raise `ProvisionError` with a one-line message.
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
from dataclasses import dataclass
from functools import cache
from pathlib import Path

MIN_JAVA = 17
MARKER = "complete"
DEPENDENCY_PLUGIN = "3.8.1"  # as pinned in the poms
DOWNLOAD_TIMEOUT_S = 1800
_MAVEN_NS = "{http://maven.apache.org/POM/4.0.0}"


class ProvisionError(RuntimeError):
    """A JVM program cannot be provisioned or started (no Java/Maven/network, ...)."""


@dataclass(frozen=True)
class MavenDist:
    name: str  # for messages: "Apache Kafka"
    pom: Path
    version_property: str  # the pom property pinning the version: "kafka.version"
    default_cache: Path
    cache_env: str  # environment variable that moves the cache
    main_jar: str  # the jar a complete download has, "{version}" filled in
    log_prefix: str  # of the progress lines on stderr: "compat"

    def version(self) -> str:
        """The version pinned in the pom."""
        path = f"{_MAVEN_NS}properties/{_MAVEN_NS}{self.version_property}"
        node = ET.parse(self.pom).getroot().find(path)
        if node is None or not (node.text or "").strip():
            raise ProvisionError(f"{self.pom} has no <{self.version_property}> property")
        return node.text.strip()

    def cache_root(self) -> Path:
        return Path(os.environ.get(self.cache_env) or self.default_cache)

    def version_dir(self, version: str | None = None) -> Path:
        return self.cache_root() / (version or self.version())

    def lib(self, version: str | None = None) -> Path:
        """The directory of the jars, downloaded on first use (idempotent)."""
        java_executable(self.name)  # fail early and clearly, before any download
        version = version or self.version()
        target = self.version_dir(version)
        if (target / MARKER).is_file():
            return target / "lib"
        mvn = _mvn_executable(self.name)
        if version != self.version():
            raise ProvisionError(
                f"{self.name} {version} is not cached and the pom pins {self.version()}"
            )
        target.mkdir(parents=True, exist_ok=True)
        # One download at a time (tests, bench and a manual run may start together).
        with open(target / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if (target / MARKER).is_file():
                return target / "lib"
            return self._download(mvn, version, target)

    def _download(self, mvn: str, version: str, target: Path) -> Path:
        lib = target / "lib"
        partial = target / "lib.partial"
        shutil.rmtree(partial, ignore_errors=True)
        cmd = [
            mvn,
            "-q",
            "-B",
            "-f",
            str(self.pom),
            # = dependency:copy-dependencies; the full name reports a network failure as such
            # (the prefix form says "No plugin found for prefix 'dependency'").
            f"org.apache.maven.plugins:maven-dependency-plugin:{DEPENDENCY_PLUGIN}"
            ":copy-dependencies",
            f"-DoutputDirectory={partial}",
        ]
        started = time.monotonic()
        what = f"{self.name} {version}"
        print(f"{self.log_prefix}: downloading {what} from Maven Central ...", file=sys.stderr)
        try:
            result = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=DOWNLOAD_TIMEOUT_S,
                env=_mvn_env(self.name),
            )
        except subprocess.TimeoutExpired:
            raise ProvisionError(f"downloading {what} timed out (30 min)") from None
        if result.returncode != 0:
            detail = _last_error_line(result.stdout + result.stderr)
            raise ProvisionError(
                f"downloading {what} with Maven failed"
                f" (exit {result.returncode}; is Maven Central reachable?): {detail}"
            )
        jars = sorted(partial.glob("*.jar"))
        main_jar = self.main_jar.format(version=version)
        if not any(jar.name.startswith(main_jar) for jar in jars):
            raise ProvisionError(f"Maven finished but {partial} has no {main_jar}.jar")
        size = sum(jar.stat().st_size for jar in jars)
        seconds = time.monotonic() - started
        shutil.rmtree(lib, ignore_errors=True)
        partial.rename(lib)
        (target / MARKER).write_text(f"{what}: {len(jars)} jars, {size} bytes, {seconds:.1f}s\n")
        print(
            f"{self.log_prefix}: {what}: {len(jars)} jars, {size / 2**20:.1f} MiB"
            f" in {seconds:.1f}s -> {lib}",
            file=sys.stderr,
        )
        return lib


@cache
def java_executable(needed_by: str = "this") -> str:
    """Path of a `java` >= 17 (JAVA_HOME first, then PATH), else ProvisionError."""
    needs = f"{needed_by} needs Java >= {MIN_JAVA}"
    java_home = os.environ.get("JAVA_HOME")
    candidate = Path(java_home, "bin", "java") if java_home else None
    java = str(candidate) if candidate and candidate.is_file() else shutil.which("java")
    if not java:
        raise ProvisionError(f"{needs}: no `java` on PATH (or in JAVA_HOME)")
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProvisionError(f"{needs}: `{java} -version` failed: {exc}") from None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not match:
        raise ProvisionError(f"{needs}: cannot parse `{java} -version`")
    major = int(match.group(1))
    if major == 1:  # "1.8.0_x"
        major = int(match.group(2) or 0)
    if major < MIN_JAVA:
        raise ProvisionError(f"{needs}, found Java {major} ({java})")
    return java


def _mvn_executable(needed_by: str) -> str:
    mvn = shutil.which("mvn")
    if not mvn:
        raise ProvisionError(
            f"{needed_by} is downloaded from Maven Central with Maven: no `mvn` on PATH"
        )
    return mvn


def _mvn_env(needed_by: str) -> dict[str, str]:
    env = dict(os.environ)
    # Maven runs on the same Java as the program.
    java = Path(java_executable(needed_by)).resolve()
    env.setdefault("JAVA_HOME", str(java.parent.parent))
    return env


def _last_error_line(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if "[ERROR]" in line and line != "[ERROR]"]
    picked = (errors or lines or ["no output"])[0]
    return re.sub(r"\x1b\[[0-9;]*m", "", picked)[:400]
