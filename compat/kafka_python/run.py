"""kafka-python's own integration suite (from its PyPI sdist) against kafkalite or Apache Kafka.

    python -m compat.kafka_python.run [--target kafkalite|kafka|both] [--update-allowlist]

starts the broker(s) (compat.targets.running_target, with `overrides_for(target)`), runs the
suite, prints the counts and exits 1 when a test of `tests.allow` does not pass (on either
broker: on Kafka that means the allowlist is wrong). `main(bootstrap, target) -> Counts` runs
it against a broker that is already up (the CI entry point is compat/test_third_party.py).

Setup, cached under .cache/kafka_python/ and done once (a second run downloads nothing):
the kafka-python sdist (`pip download --no-binary :all: --no-deps`), a venv with kafka-python
installed from it plus requirements.txt, and a suite directory with the sdist's `test/` and
the shims in shim/: the sdist lacks test/service.py and test/__init__.py, and its fixtures
spawn Kafka themselves unless KAFKA_URI names an external broker, which is how we point them
at ours (KAFKA_VERSION is required too; see `suite_kafka_version`).

Run: test/integration/test_{admin,consumer,producer}_integration.py, all of it (55 tests,
about 20 s on Kafka). Not run: test_sasl_integration.py (skips itself with KAFKA_URI) and
test_ssl_integration.py (spawns its own SSL broker).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from compat.kafka_dist import CompatSetupError, kafka_version
from compat.kafka_python.common import (
    CACHE,
    ERROR,
    FAILED,
    PASSED,
    SKIPPED,
    Counts,
    check_call,
    cli,
    locked,
    read_allowlist,
    run_group,
    run_setup,
    tail,
)

KAFKA_PYTHON_VERSION = "3.0.12"  # latest on PyPI when this was written

HERE = Path(__file__).resolve().parent
ALLOWLIST = HERE / "tests.allow"
REQUIREMENTS = HERE / "requirements.txt"
SHIMS = {  # shim file -> its place in the suite directory
    "service.py": "test/service.py",
    "suite_conftest.py": "test/conftest.py",
}
WORK = CACHE / "kafka_python"
SDIST = WORK / "sdist" / f"kafka_python-{KAFKA_PYTHON_VERSION}.tar.gz"
VENV = WORK / f"venv-{KAFKA_PYTHON_VERSION}"
SUITE = WORK / f"suite-{KAFKA_PYTHON_VERSION}"
LOGS = WORK / "logs"

TEST_FILES = (
    "test/integration/test_admin_integration.py",
    "test/integration/test_consumer_integration.py",
    "test/integration/test_producer_integration.py",
)
PER_TEST_TIMEOUT = 90  # seconds (pytest-timeout)
SUITE_TIMEOUT = 900  # seconds, the whole pytest run

AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}
# What kafka-python's own broker template sets (servers/resources/default/kafka.properties in
# its repository): 4 partitions per topic (tests rely on it), session timeouts down to 1 s
# (test_group uses 3 s), no initial rebalance delay, 2 offsets partitions, and an authorizer
# that allows what no ACL names (test_create_describe_delete_acls). Both brokers.
OVERRIDES: dict[str, str] = {
    "num.partitions": "4",
    "group.min.session.timeout.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "2",
    **AUTHORIZER,
}
# Real Kafka only: the suite assumes node id 0 (test_create_partitions assigns replicas to
# broker 0; compat.kafka_server uses node.id 1). kafkalite's node id is 0 already and it
# rejects unknown properties.
TARGET_OVERRIDES: dict[str, dict[str, str]] = {"kafka": {"node.id": "0"}}

ALLOWLIST_HEADER = f"""
kafka-python {KAFKA_PYTHON_VERSION} integration tests that MUST pass on kafkalite
(python -m compat.kafka_python.run; regenerate with --target both --update-allowlist).
Tests not listed fail on kafkalite: compat/FINDINGS.md, section "kafka-python", says why.
"""


def overrides_for(target: str) -> dict[str, str]:
    return {**OVERRIDES, **TARGET_OVERRIDES.get(target, {})}


def _digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()


def _run_setup(cmd: list[str], what: str) -> None:
    run_setup(cmd, what, "is PyPI reachable?", timeout=900)


def _download_sdist() -> None:
    if SDIST.is_file():
        return
    print(f"compat: downloading the kafka-python {KAFKA_PYTHON_VERSION} sdist", file=sys.stderr)
    partial = SDIST.parent / "partial"
    shutil.rmtree(partial, ignore_errors=True)
    _run_setup(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--disable-pip-version-check",
            "--no-binary",
            ":all:",
            "--no-deps",
            f"kafka-python=={KAFKA_PYTHON_VERSION}",
            "-d",
            str(partial),
        ],
        f"pip download kafka-python=={KAFKA_PYTHON_VERSION}",
    )
    (partial / SDIST.name).rename(SDIST)
    shutil.rmtree(partial, ignore_errors=True)


def _ensure_venv() -> Path:
    python = VENV / "bin" / "python"
    stamp = VENV / ".compat-stamp"
    want = _digest(SDIST.name, REQUIREMENTS.read_bytes())
    if python.is_file() and stamp.is_file() and stamp.read_text() == want:
        return python
    print(f"compat: creating {VENV}", file=sys.stderr)
    shutil.rmtree(VENV, ignore_errors=True)
    _run_setup([sys.executable, "-m", "venv", str(VENV)], f"creating the venv {VENV}")
    _run_setup(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "-q",
            str(SDIST),
            "-r",
            str(REQUIREMENTS),
        ],
        f"installing kafka-python {KAFKA_PYTHON_VERSION} and its test requirements",
    )
    stamp.write_text(want)
    return python


def ensure_suite(suite: Path = SUITE, places: dict[str, str] = SHIMS) -> Path:
    """The sdist's tests in `suite` with the shims (file in shim/ -> its place there);
    compat/kafka_python/security.py makes a directory of its own with more shims."""
    stamp = suite / ".compat-stamp"
    shims = {name: (HERE / "shim" / name).read_bytes() for name in sorted(places)}
    want = _digest(SDIST.name, *shims.values())
    if stamp.is_file() and stamp.read_text() == want:
        return suite
    shutil.rmtree(suite, ignore_errors=True)
    prefix = f"kafka_python-{KAFKA_PYTHON_VERSION}/"
    with tarfile.open(SDIST) as archive:
        members = [m for m in archive.getmembers() if m.name.startswith(prefix + "test/")]
        for member in members:
            member.name = member.name[len(prefix) :]
        archive.extractall(suite, members=members, filter="data")
    if not (suite / "test" / "integration" / "conftest.py").is_file():
        raise CompatSetupError(f"{SDIST.name} has no test/integration/conftest.py")
    (suite / "test" / "__init__.py").touch()  # else `test` is the stdlib's regression tests
    for name, data in shims.items():
        (suite / places[name]).parent.mkdir(parents=True, exist_ok=True)
        (suite / places[name]).write_bytes(data)
    # Our own ini: the sdist's pyproject options (DEBUG logging, 300 s timeouts) stay out.
    (suite / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    stamp.write_text(want)
    return suite


def ensure_setup() -> Path:
    """Download and install what the suite needs (once); returns the venv's python."""
    with locked(WORK / ".lock"):
        _download_sdist()
        python = _ensure_venv()
        ensure_suite()
    return python


def suite_kafka_version(python: Path) -> str:
    """KAFKA_VERSION for the suite: the Kafka version compat runs, capped at the newest that
    this kafka-python knows (test_kafka_version_infer expects the version kafka-python infers
    from ApiVersions; tests gate on it). Both targets get the same, so the same tests run."""
    code = (
        "from kafka.protocol.broker_version_data import BROKER_API_VERSIONS as v;"
        "print('.'.join(map(str, max(v))))"
    )
    known = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    newest = tuple(int(x) for x in known.stdout.strip().split("."))
    wanted = tuple(int(x) for x in kafka_version().split(".")[:2])
    return ".".join(map(str, min(newest, wanted)))


def _test_id(nodeid: str) -> str:
    return nodeid.removeprefix("test/integration/")


_RANK = {SKIPPED: 0, PASSED: 1, FAILED: 2, ERROR: 3}


def read_report(path: Path) -> dict[str, str]:
    outcomes: dict[str, str] = {}
    if not path.is_file():
        return outcomes
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        test, outcome = _test_id(entry["nodeid"]), entry["outcome"]
        if _RANK[outcome] >= _RANK.get(outcomes.get(test, SKIPPED), 0):
            outcomes[test] = outcome
    return outcomes


def main(
    bootstrap: str,
    target: str,
    test_files: tuple[str, ...] = TEST_FILES,
    allowlist: Path = ALLOWLIST,
    log_name: str | None = None,
    secure_env: dict[str, str] | None = None,
    suite: Path = SUITE,
) -> Counts:
    """Run the suite against the broker at `bootstrap` ("host:port"); `target` is
    "kafkalite" or "kafka" (which broker that is). compat/kafka_python/cluster.py runs a
    part of it (`test_files`) against a cluster with its own `allowlist`;
    compat/kafka_python/security.py runs the SASL and SSL tests with `secure_env` (the
    listeners for the shim test/kafkalite_listeners.py, instead of KAFKA_URI, which makes
    the SASL tests skip themselves) in a `suite` directory of its own."""
    check_call(bootstrap.split(",")[0], target)
    python = ensure_setup()
    version = suite_kafka_version(python)
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / f"{log_name or target}.log"
    counts = Counts(target, allowed=tuple(read_allowlist(allowlist)), log=log)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    with tempfile.TemporaryDirectory(prefix="kafka-python-report-") as tmp:
        report = Path(tmp) / "report.jsonl"
        env.update(
            KAFKA_URI=f"PLAINTEXT://{bootstrap}",
            KAFKA_VERSION=version,
            KAFKA_ROOT=str(suite),  # must exist; nothing is run from it with KAFKA_URI set
            KAFKALITE_COMPAT_REPORT=str(report),
        )
        plugins: list[str] = []
        if secure_env is not None:
            del env["KAFKA_URI"]
            env.update(secure_env)
            plugins = ["-p", "test.kafkalite_listeners"]
        cmd = [
            str(python),
            "-m",
            "pytest",
            *plugins,
            *test_files,
            "-q",
            "-rfE",
            "--tb=short",
            "--show-capture=no",
            "--durations=10",
            "-W",
            "ignore::DeprecationWarning",
            f"--timeout={PER_TEST_TIMEOUT}",
        ]
        print(
            f"compat: kafka-python {KAFKA_PYTHON_VERSION} suite (KAFKA_VERSION={version})"
            f" against {target} at {bootstrap}; log {log}",
            file=sys.stderr,
            flush=True,
        )
        started = time.monotonic()
        with open(log, "w") as out:
            code, _, _ = run_group(
                cmd, SUITE_TIMEOUT, cwd=suite, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        if code is None:
            counts.notes.append(f"pytest killed after {SUITE_TIMEOUT}s")
        counts.seconds = time.monotonic() - started
        counts.outcomes = read_report(report)
    if not counts.outcomes:
        raise RuntimeError(
            f"kafka-python suite reported no tests (exit {code}):\n{tail(log.read_text())}"
        )
    if code not in (0, 1, None):
        counts.notes.append(f"pytest exited with {code}")
    return counts


if __name__ == "__main__":
    sys.exit(
        cli(
            sys.modules[__name__],
            "kafka-python's integration suite against kafkalite and/or Apache Kafka",
        )
    )
