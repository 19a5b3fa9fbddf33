"""franz-go's kgo integration tests (pkg/kgo/*_test.go) against kafkalite or Apache Kafka.

    python -m compat.franz_go.run [--target kafkalite|kafka|both] [--update-allowlist]

starts the broker(s) (compat.targets.running_target), runs the tests, prints the counts and
exits 1 when a test of `tests.allow` does not pass (on either broker: on Kafka that means the
allowlist is wrong). `main(bootstrap, target) -> Counts` runs them against a broker that is
already up (the CI entry point is compat/test_third_party.py).

The franz-go version is the one compat/franz_go/go.mod requires (a module that exists only
to pin it). `go mod download` fetches the module zip from the Go module proxy; the tests run
with `go test` in its pkg/kgo directory in the module cache. Everything Go writes stays under
.cache/go/ (GOPATH, GOMODCACHE, GOCACHE, and XDG_CONFIG_HOME for go env/telemetry); after the
first run nothing is downloaded and the test binary comes from the build cache.

The tests honour KGO_SEEDS (the broker), KGO_TEST_RF (replication factor: 1 here),
KGO_TEST_RECORDS (records per ETL test: `RECORDS`, instead of 500,000), and TLS/SCRAM
variables we leave unset (those tests skip). Only `BROKER_TESTS` run: the kgo tests that talk
to the broker (the other ~115 are unit tests that pass without one). `HANGS_ON_KAFKALITE`
are not run on kafkalite, where they would block until the go test timeout.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from compat.kafka_dist import CompatSetupError
from compat.kafka_python.common import (
    CACHE,
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

HERE = Path(__file__).resolve().parent
ALLOWLIST = HERE / "tests.allow"
MODULE = "github.com/twmb/franz-go"
GO_DIR = CACHE / "go"
LOGS = GO_DIR / "logs"

RECORDS = 5000  # KGO_TEST_RECORDS: the ETL tests' record count (the default is 500,000)
GO_TEST_TIMEOUT = "6m"  # go test -timeout: the whole test binary panics after it
RUN_TIMEOUT = 12 * 60  # seconds, go test including a cold compile (about 1 min)

# The kgo tests that use a broker (reach adm(), newTestClient, testClientOpts or
# getSeedBrokers in helpers_test.go), as of franz-go v1.22.2.
BROKER_TESTS = (
    "Test848RegexBrokerResolves",
    "TestAddRemovePartitions",
    "TestClient_Produce",
    "TestClient_ProduceLargeMessages",
    "TestConsumeMaxDecompressBatchBytes",
    "TestConsumeRegex",
    "TestConsumeRegexShareSkipsInternal",
    "TestConsumeTopicRetrieval",
    "TestConsumeTopicRetrieval_Many",
    "TestDirectPartitionPurge",
    "TestGroupETL",
    "TestGroupSimple",
    "TestHookPollStart",
    "TestIssue1034",
    "TestIssue325",
    "TestIssue337",
    "TestIssue434",
    "TestIssue523",
    "TestIssue648",
    "TestIssue769",
    "TestIssue810",
    "TestIssue831",
    "TestIssue865",
    "TestIssueFetchLargerThanBrokerMaxReadBytes",
    "TestIssueProduceBrokerTooOldFailsRecords",
    "TestIssueProduceSyncManualPartitionNegativeDoesNotPanic",
    "TestPauseIssue489",
    "TestPauseIssueOct2023",
    "TestPing",
    "TestPooling",
    "TestShareGroup",
    "TestShareGroupAckOnClose",
    "TestShareGroupETL",
    "TestShareGroupOffsetsAdmin",
    "TestTxnEtl",
    "TestUnknownGroupOffsetFetchPinned",
)
HANGS_ON_KAFKALITE: dict[str, str] = {}  # none since kafkalite serves transactions

# Both brokers get compat.targets.COMMON_DEFAULTS (no initial rebalance delay, ...); the
# tests create their topics with explicit partition counts and need nothing else.
OVERRIDES: dict[str, str] = {}

ALLOWLIST_HEADER = """
franz-go kgo integration tests (top-level Go test names) that MUST pass on kafkalite
(python -m compat.franz_go.run; regenerate with --target both --update-allowlist).
Tests not listed fail or skip on kafkalite: compat/FINDINGS.md, section "franz-go", says why.
"""


def overrides_for(target: str) -> dict[str, str]:
    return dict(OVERRIDES)


def go_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KGO_")}
    env.update(
        GOPATH=str(GO_DIR / "path"),
        GOMODCACHE=str(GO_DIR / "mod"),
        GOCACHE=str(GO_DIR / "build"),
        # go env and telemetry files live under the user config dir: keep them out of $HOME.
        XDG_CONFIG_HOME=str(GO_DIR / "config"),
        GOFLAGS="-modcacherw",  # a module cache that `rm -rf .cache` can delete
        GOTOOLCHAIN="local",  # never download another Go toolchain
    )
    return env


def _go() -> str:
    go = shutil.which("go")
    if not go:
        raise CompatSetupError("the franz-go suite needs Go: no `go` on PATH")
    return go


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


def _check_go_version(go: str) -> str:
    required = re.search(r"^go (\S+)", (HERE / "go.mod").read_text(), re.M)
    assert required is not None
    try:
        out = subprocess.run(
            [go, "env", "GOVERSION"], capture_output=True, text=True, env=go_env(), timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CompatSetupError(f"`go env GOVERSION` failed: {exc}") from None
    have = out.stdout.strip()
    if _version_tuple(have) < _version_tuple(required.group(1)):
        raise CompatSetupError(
            f"franz-go needs Go >= {required.group(1)} (compat/franz_go/go.mod), found {have}"
        )
    return have


def _run_go(go: str, args: list[str], cwd: Path, what: str, timeout: float) -> str:
    hint = "is the Go module proxy reachable?"
    return run_setup([go, *args], what, hint, timeout, cwd=cwd, env=go_env())


def ensure_setup() -> tuple[str, Path, str]:
    """Download franz-go (once) and build the kgo tests (once, into the build cache);
    returns (go, the pkg/kgo directory, the franz-go version)."""
    go = _go()
    _check_go_version(go)
    with locked(GO_DIR / ".lock"):
        out = _run_go(
            go, ["mod", "download", "-json", MODULE], HERE, f"go mod download {MODULE}", 600
        )
        info = json.loads(out)
        package = Path(info["Dir"]) / "pkg" / "kgo"
        if not (package / "helpers_test.go").is_file():
            raise CompatSetupError(f"{package} has no helpers_test.go: not the expected franz-go")
        # Compile (and vet) the tests without running any; later runs hit the build cache.
        _run_go(go, ["test", "-count=1", "-run", "^$", "."], package, "building kgo tests", 900)
    return go, package, info["Version"]


def parse_events(lines: list[str]) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """go test -json lines -> (top-level outcomes, subtest outcomes, tests that never ended)."""
    final: dict[str, str] = {}
    started: list[str] = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        test, action = event.get("Test"), event.get("Action")
        if not test:
            continue
        if action == "run":
            started.append(test)
        elif action in ("pass", "fail", "skip"):
            final[test] = {"pass": PASSED, "fail": FAILED, "skip": SKIPPED}[action]
    unfinished = [t for t in dict.fromkeys(started) if t not in final]
    for test in unfinished:
        final[test] = FAILED
    top = {t: o for t, o in final.items() if "/" not in t}
    sub = {t: o for t, o in final.items() if "/" in t}
    return top, sub, unfinished


def output_of(lines: list[str], test: str, limit: int = 25) -> str:
    """The last lines a test (or its subtests) printed."""
    out = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        name = event.get("Test") or ""
        if event.get("Action") == "output" and (name == test or name.startswith(test + "/")):
            out.append(event.get("Output", "").rstrip("\n"))
    return "\n".join(out[-limit:])


def main(bootstrap: str, target: str) -> Counts:
    """Run the kgo tests against the broker at `bootstrap` ("host:port"); `target` is
    "kafkalite" or "kafka" (which broker that is)."""
    check_call(bootstrap, target)
    go, package, version = ensure_setup()
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / f"franz-go-{target}.jsonl"
    counts = Counts(target, allowed=tuple(read_allowlist(ALLOWLIST)), log=log)
    skip = sorted(HANGS_ON_KAFKALITE) if target == "kafkalite" else []
    run = [t for t in BROKER_TESTS if t not in skip]
    args = ["test", "-count=1", "-json", f"-timeout={GO_TEST_TIMEOUT}"]
    args += [f"-run=^({'|'.join(run)})$", "."]
    env = go_env()
    env.update(KGO_SEEDS=bootstrap, KGO_TEST_RF="1", KGO_TEST_RECORDS=str(RECORDS))
    print(
        f"compat: franz-go {version} kgo tests ({len(run)}) against {target} at {bootstrap};"
        f" log {log}",
        file=sys.stderr,
        flush=True,
    )
    started = time.monotonic()
    with open(log, "w") as out:
        code, _, stderr = run_group(
            [go, *args],
            RUN_TIMEOUT,
            cwd=package,
            env=env,
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
        )
    if code is None:
        counts.notes.append(f"go test killed after {RUN_TIMEOUT}s")
    counts.seconds = time.monotonic() - started
    lines = log.read_text().splitlines()
    top, sub, unfinished = parse_events(lines)
    if not top:
        raise RuntimeError(f"go test reported no tests (exit {code}):\n{tail(stderr)}")
    for test in skip:
        top[test] = SKIPPED
        counts.notes.append(f"{test} not run on kafkalite: {HANGS_ON_KAFKALITE[test]}")
    counts.outcomes = top
    if unfinished:
        counts.notes.append(f"did not finish (go test -timeout): {', '.join(unfinished)}")
    skipped_sub = sorted(t for t, o in sub.items() if o == SKIPPED)
    counts.notes.append(
        f"subtests: {sum(o == PASSED for o in sub.values())} passed,"
        f" {sum(o == FAILED for o in sub.values())} failed, {len(skipped_sub)} skipped"
        + (f" ({', '.join(skipped_sub)})" if skipped_sub else "")
    )
    for test, outcome in sorted(top.items()):
        if outcome == FAILED:
            print(f"--- {target}: {test} failed; its last output:\n{output_of(lines, test)}")
    return counts


if __name__ == "__main__":
    sys.exit(
        cli(
            sys.modules[__name__],
            "franz-go's kgo integration tests against kafkalite and/or Apache Kafka",
        )
    )
