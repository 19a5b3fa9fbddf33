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
KGO_TEST_RECORDS (records per ETL test: `RECORDS`, instead of 500,000), KGO_TEST_TLS and
KGO_TEST_SCRAM / KGO_TEST_SCRAM_SEEDS. Only `BROKER_TESTS` run: the kgo tests that talk to the
broker (the other ~115 are unit tests that pass without one). `HANGS_ON_KAFKALITE` are not run
on kafkalite, where they would block until the go test timeout.

    python -m compat.franz_go.run --secured [--update-allowlist]

runs them on kafkalite only, over TLS (an SSL listener, a trustme CA in KGO_TEST_TLS) with the
SCRAM tests too (`SCRAM_TESTS`, against a SASL_PLAINTEXT listener with SCRAM-SHA-256), against
`tests_secured.allow`: `kafkalite_secured()` and `main(..., secured)`; in CI an extended test.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
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
    write_allowlist,
)
from kafkalite.process import free_ports

HERE = Path(__file__).resolve().parent
ALLOWLIST = HERE / "tests.allow"
SECURED_ALLOWLIST = HERE / "tests_secured.allow"
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
# Run only in the secured run (kafkalite_secured), where KGO_TEST_SCRAM* are set.
SCRAM_TESTS = ("TestSCRAMAuth", "TestSCRAMAuthBadCredentials")
SCRAM_USER, SCRAM_PASSWORD = "franz", "franz-secret"
# Not run in the secured run: a test bug of franz-go, not a broker's.
BREAKS_UNDER_TLS = {
    "TestIssue769": "sets its own Dialer, which kgo refuses beside KGO_TEST_TLS's DialTLSConfig"
    ' ("cannot set both Dialer and DialTLSConfig"): the nil client panics the whole binary',
}
HANGS_ON_KAFKALITE: dict[str, str] = {}  # none since kafkalite serves transactions

# Both brokers get compat.targets.COMMON_DEFAULTS (no initial rebalance delay, ...); the
# tests create their topics with explicit partition counts and need nothing else.
OVERRIDES: dict[str, str] = {}

ALLOWLIST_HEADER = """
franz-go kgo integration tests (top-level Go test names) that MUST pass on kafkalite
(python -m compat.franz_go.run; regenerate with --target both --update-allowlist).
Tests not listed fail or skip on kafkalite: compat/FINDINGS.md, section "franz-go", says why.
"""


SECURED_ALLOWLIST_HEADER = """
franz-go kgo tests that MUST pass on kafkalite over TLS (KGO_TEST_TLS) with the SCRAM tests
(KGO_TEST_SCRAM*): python -m compat.franz_go.run --secured [--update-allowlist]; an extended
test (compat/test_third_party.py). compat/FINDINGS.md, section "franz-go", says more.
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


def main(bootstrap: str, target: str, secured: Secured | None = None) -> Counts:
    """Run the kgo tests against the broker at `bootstrap` ("host:port"); `target` is
    "kafkalite" or "kafka" (which broker that is). With `secured` (kafkalite_secured()), every
    test connects over TLS and the SCRAM tests run too, against `SECURED_ALLOWLIST`."""
    check_call(bootstrap, target)
    go, package, version = ensure_setup()
    LOGS.mkdir(parents=True, exist_ok=True)
    name = f"{target}-secured" if secured else target
    log = LOGS / f"franz-go-{name}.jsonl"
    allowlist = SECURED_ALLOWLIST if secured else ALLOWLIST
    counts = Counts(name, allowed=tuple(read_allowlist(allowlist)), log=log)
    not_run = {**(HANGS_ON_KAFKALITE if target == "kafkalite" else {})}
    if secured:
        not_run.update(BREAKS_UNDER_TLS)
    skip = sorted(not_run)
    run = [t for t in BROKER_TESTS + (SCRAM_TESTS if secured else ()) if t not in skip]
    args = ["test", "-count=1", "-json", f"-timeout={GO_TEST_TIMEOUT}"]
    args += [f"-run=^({'|'.join(run)})$", "."]
    env = go_env()
    env.update(KGO_SEEDS=bootstrap, KGO_TEST_RF="1", KGO_TEST_RECORDS=str(RECORDS))
    if secured:
        env.update(secured.env())
    print(
        f"compat: franz-go {version} kgo tests ({len(run)}) against {name} at"
        f" {env['KGO_SEEDS']}; log {log}",
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
        counts.notes.append(f"{test} not run on {name}: {not_run[test]}")
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


@dataclass(frozen=True)
class Secured:
    """A kafkalite broker's SSL and SASL_PLAINTEXT (SCRAM-SHA-256) listeners, for the kgo
    tests' KGO_TEST_TLS (every client dials TLS, trusting `ca_file`) and KGO_TEST_SCRAM*."""

    tls_seeds: str
    ca_file: Path
    scram_seeds: str

    def env(self) -> dict[str, str]:
        return {
            "KGO_SEEDS": self.tls_seeds,
            "KGO_TEST_TLS": f"ca:{self.ca_file}",
            "KGO_TEST_SCRAM": f"{SCRAM_USER}:{SCRAM_PASSWORD}",  # SCRAM-SHA-256
            "KGO_TEST_SCRAM_SEEDS": self.scram_seeds,
        }


def _secured_overrides(folder: Path) -> tuple[dict[str, str], Secured]:
    """A trustme CA signing the broker's certificate (SANs localhost, 127.0.0.1), and the
    listeners: PLAINTEXT first (the bootstrap BrokerProcess reports, for creating the SCRAM
    user), then SSL and SASL_PLAINTEXT on free ports."""
    import trustme

    folder.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    ca_file, keystore = folder / "ca.pem", folder / "broker.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    ca.issue_cert("localhost", "127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
        str(keystore)
    )
    ssl_port, sasl_port = free_ports(2)
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{ssl_port},"
        f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
    }
    return overrides, Secured(f"127.0.0.1:{ssl_port}", ca_file, f"127.0.0.1:{sasl_port}")


def _create_scram_user(bootstrap: str) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    upsert = UserScramCredentialUpsertion(SCRAM_USER, info, SCRAM_PASSWORD.encode())
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=30)


@contextlib.contextmanager
def kafkalite_secured(data_dir: Path) -> Iterator[tuple[str, Secured]]:
    """A kafkalite broker with the listeners of `_secured_overrides` and the SCRAM user;
    yields (its PLAINTEXT bootstrap, the Secured to pass to main)."""
    from compat.targets import start_target

    overrides, secured = _secured_overrides(data_dir / "pki")
    target, process = start_target("kafkalite", data_dir / "broker", overrides)
    try:
        _create_scram_user(target.bootstrap)
        yield target.bootstrap, secured
    finally:
        process.stop()


def secured_cli(update_allowlist: bool) -> int:
    """python -m compat.franz_go.run --secured [--update-allowlist]: kafkalite only."""
    ensure_setup()
    with tempfile.TemporaryDirectory(prefix="franz_go-secured-") as tmp:
        with kafkalite_secured(Path(tmp)) as (bootstrap, secured):
            counts = main(bootstrap, "kafkalite", secured)
    print(counts.summary())
    for note in counts.notes:
        print(f"  note: {note}")
    if update_allowlist:
        passing = sorted(t for t, o in counts.outcomes.items() if o == PASSED)
        write_allowlist(SECURED_ALLOWLIST, SECURED_ALLOWLIST_HEADER, passing)
        print(f"wrote {SECURED_ALLOWLIST} ({len(passing)} tests)")
        return 0
    for test in counts.allowlist_failures:
        print(f"ALLOWLIST: {test} did not pass: {counts.outcomes.get(test)}")
    return 1 if counts.allowlist_failures else 0


if __name__ == "__main__":
    if "--secured" in sys.argv[1:]:
        sys.exit(secured_cli("--update-allowlist" in sys.argv[1:]))
    sys.exit(
        cli(
            sys.modules[__name__],
            "franz-go's kgo integration tests against kafkalite and/or Apache Kafka"
            " (--secured: kafkalite over TLS, with the SCRAM tests)",
        )
    )
