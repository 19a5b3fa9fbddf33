"""What the third-party client suites share (compat/kafka_python/run.py, compat/franz_go/run.py).

Each suite runs a client library's own integration tests against one broker and classifies
every test as passed, failed, skipped or error. Its `tests.allow` lists the tests that MUST
pass on kafkalite (one id per line, `#` comments); a test outside the list may fail (known
kafkalite gaps, each with a line in compat/FINDINGS.md). The same allowlist is checked on real
Kafka too: an allowlisted test failing there means the allowlist (or the harness) is wrong.

`Counts` is what `run.main(bootstrap, target)` returns. Its attributes are the raw numbers
(passed, failed, skipped, errors) plus the per-test outcomes; as a Mapping (for
`python -m compat`, which counts "failed"/"error" as a failed suite) it splits failures by
the allowlist: `failed` = allowlisted tests that did not pass, `xfailed` = other failures
and errors (expected ones), `xpassed` = passes outside the allowlist (candidates to add).
"""

from __future__ import annotations

import argparse
import collections.abc
import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache"

PASSED, FAILED, SKIPPED, ERROR = "passed", "failed", "skipped", "error"
OUTCOMES = (PASSED, FAILED, SKIPPED, ERROR)


def read_allowlist(path: Path) -> list[str]:
    """Test ids in `path`, one per line; blank lines and `#` comments ignored."""
    if not path.is_file():
        return []
    ids = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            ids.append(line)
    return ids


def write_allowlist(path: Path, header: str, ids: list[str]) -> None:
    lines = [f"# {line}".rstrip() for line in header.strip().splitlines()]
    path.write_text("\n".join(lines + sorted(set(ids))) + "\n")


def report_allowlist(
    counts: Counts,
    allowlist: Path,
    header: str,
    update: bool,
    where: str,
    unstable: Collection[str] = (),
) -> int:
    """Print each test's outcome; with `update`, write the passing ones (but `unstable`) as
    the allowlist. The exit status: 1 if an allowlisted test did not pass `where`."""
    for test, outcome in sorted(counts.outcomes.items()):
        print(f"  {outcome:8} {test}")
    if update:
        passing = sorted(t for t, o in counts.outcomes.items() if o == PASSED and t not in unstable)
        write_allowlist(allowlist, header, passing)
        print(f"wrote {allowlist} ({len(passing)} tests)")
        return 0
    status = 0
    for test in counts.allowlist_failures:
        print(f"ALLOWLIST: {test} did not pass {where}: {counts.outcomes.get(test)}")
        status = 1
    for test in counts.unlisted_passes:
        print(f"  new pass (add to {allowlist.name}?): {test}")
    return status


@dataclass
class Counts(collections.abc.Mapping):
    """One suite run against one broker (see the module docstring for the Mapping view)."""

    target: str
    outcomes: dict[str, str] = field(default_factory=dict)  # test id -> one of OUTCOMES
    allowed: tuple[str, ...] = ()
    seconds: float = 0.0
    log: Path | None = None
    notes: list[str] = field(default_factory=list)  # e.g. tests not run, and why

    def _count(self, outcome: str) -> int:
        return sum(1 for value in self.outcomes.values() if value == outcome)

    @property
    def passed(self) -> int:
        return self._count(PASSED)

    @property
    def failed(self) -> int:
        return self._count(FAILED)

    @property
    def skipped(self) -> int:
        return self._count(SKIPPED)

    @property
    def errors(self) -> int:
        return self._count(ERROR)

    @property
    def allowlist_failures(self) -> list[str]:
        """Allowlisted tests that did not pass here (missing from the run counts too)."""
        return [test for test in self.allowed if self.outcomes.get(test) != PASSED]

    @property
    def unlisted_passes(self) -> list[str]:
        allowed = set(self.allowed)
        return sorted(t for t, o in self.outcomes.items() if o == PASSED and t not in allowed)

    def _view(self) -> dict[str, int]:
        allowed = set(self.allowed)
        bad = sum(1 for t, o in self.outcomes.items() if o in (FAILED, ERROR) and t not in allowed)
        return {
            "passed": self.passed - len(self.unlisted_passes),
            "failed": len(self.allowlist_failures),
            "skipped": self.skipped,
            "xfailed": bad,
            "xpassed": len(self.unlisted_passes),
        }

    def __getitem__(self, key: str) -> int:
        return self._view()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._view())

    def __len__(self) -> int:
        return len(self._view())

    def summary(self) -> str:
        text = (
            f"{self.target}: {self.passed} passed, {self.failed} failed, {self.skipped} skipped,"
            f" {self.errors} errors in {self.seconds:.0f}s; allowlist {len(self.allowed)}:"
            f" {len(self.allowlist_failures)} not passing"
        )
        if self.log:
            text += f" (log: {self.log})"
        return text


def check_call(bootstrap: str, target: str) -> None:
    """What `main(bootstrap, target)` takes: "host:port" and one of compat.targets.TARGETS."""
    from compat.targets import TARGETS

    if target not in TARGETS:
        raise ValueError(f"target must be one of {TARGETS}, not {target!r}")
    if ":" not in bootstrap:
        raise ValueError(f"bootstrap must be host:port, not {bootstrap!r}")


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock file: one setup at a time (CI may start several runs together)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def run_group(cmd: list[str], timeout: float, **popen: Any) -> tuple[int | None, Any, Any]:
    """subprocess.run in a process group of its own: (exit code, stdout, stderr), the code
    None after `timeout`. On a timeout or any exception the whole group is killed, not only
    `cmd`: `go test` runs the test binary as its child, which would outlive a killed `go`."""
    with subprocess.Popen(cmd, start_new_session=True, **popen) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            stdout, stderr = process.communicate()
            return None, stdout, stderr
        except BaseException:
            _kill_group(process)
            raise
        return process.returncode, stdout, stderr


def _kill_group(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def run_setup(cmd: list[str], what: str, hint: str, timeout: float, **popen: Any) -> str:
    """Run a setup step (download, install, build); its stdout, else CompatSetupError with
    the end of its output (`hint`: the likely cause of a failure)."""
    from compat.kafka_dist import CompatSetupError

    code, stdout, stderr = run_group(
        cmd, timeout, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen
    )
    if code is None:
        raise CompatSetupError(f"{what} timed out after {timeout:.0f}s")
    if code != 0:
        raise CompatSetupError(
            f"{what} failed (exit {code}; {hint}):\n" + tail(stdout + stderr, 15)
        )
    return stdout


def cli(run: ModuleType, description: str, argv: list[str] | None = None) -> int:
    """The command line both run.py share (`run`: the module, with its `main`,
    `overrides_for`, `ensure_setup`, `ALLOWLIST` and `ALLOWLIST_HEADER`): set up (before any
    broker starts, so missing tools fail fast), start the broker(s), run, enforce the
    allowlist."""
    from compat.kafka_dist import CompatSetupError
    from compat.targets import TARGETS, running_target

    suite = Path(run.__file__).parent.name
    prog = f"compat.{suite}.run"
    allowlist: Path = run.ALLOWLIST
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--target", choices=[*TARGETS, "both"], default="both")
    parser.add_argument(
        "--update-allowlist",
        action="store_true",
        help=f"rewrite {allowlist.name} with the tests that pass on kafkalite"
        " (and on kafka too, when both run)",
    )
    args = parser.parse_args(argv)
    targets = list(TARGETS) if args.target == "both" else [args.target]
    try:
        run.ensure_setup()
    except CompatSetupError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    results: dict[str, Counts] = {}
    for name in targets:
        started = time.monotonic()
        try:
            with (
                tempfile.TemporaryDirectory(prefix=f"{suite}-{name}-") as tmp,
                running_target(name, Path(tmp), run.overrides_for(name)) as target,
            ):
                print(f"== {prog}: {name} at {target.bootstrap}", flush=True)
                results[name] = run.main(target.bootstrap, name)
        except CompatSetupError as exc:
            print(f"{prog}: {name}: {exc}", file=sys.stderr)
            return 2
        print(f"{results[name].summary()} (with broker: {time.monotonic() - started:.0f}s)")
        for note in results[name].notes:
            print(f"  note: {note}")
    status = 0
    if args.update_allowlist:
        if "kafkalite" not in results:
            parser.error("--update-allowlist needs the kafkalite target")
        passing = {t for t, o in results["kafkalite"].outcomes.items() if o == PASSED}
        if "kafka" in results:
            kafka_fails = sorted(t for t in passing if results["kafka"].outcomes.get(t) != PASSED)
            for test in kafka_fails:
                print(f"  not allowlisted: passes on kafkalite, not on kafka: {test}")
            passing -= set(kafka_fails)
        write_allowlist(allowlist, run.ALLOWLIST_HEADER, sorted(passing))
        print(f"wrote {allowlist} ({len(passing)} tests)")
        return 0
    for name, counts in results.items():
        for test in counts.allowlist_failures:
            print(f"ALLOWLIST: {test} did not pass on {name}: {counts.outcomes.get(test)}")
            status = 1
        for test in counts.unlisted_passes if name == "kafkalite" else ():
            print(f"  new pass on kafkalite (add to {allowlist.name}?): {test}")
    return status
