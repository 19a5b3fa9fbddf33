"""`python -m compat` (`make compat`): every compatibility suite against kafkalite and Apache Kafka,
then a table of pass/fail/xfail counts per suite and target. Exit code 0 when nothing failed.

    python -m compat                          # everything
    python -m compat --suite differential     # only compat/test_*.py
    python -m compat --target kafkalite       # one broker only
    python -m compat -- -k admin -x           # extra pytest arguments for the differential suite

Suites (`SUITES`, in order):

- `differential`: pytest over compat/test_*.py. Each test runs on both brokers through the
  `target` fixture (compat/conftest.py); the counts are split by the test's target.
- third-party suites, `THIRD_PARTY_SUITES`: a package compat/<name>/ with a module `run.py`:

      def main(bootstrap: str, target: str) -> Mapping[str, int]
      def overrides_for(target: str) -> Mapping[str, str]

  `main` runs the suite against the broker at `bootstrap` ("kafkalite" or "kafka" as
  `target`, for suites with per-target expectations) and returns counts under the keys of
  `COUNT_KEYS` (missing keys count 0); `overrides_for` gives the broker properties (on top of
  compat.targets.COMMON_DEFAULTS). Each suite gets a fresh broker per target, started and
  stopped here. `CompatSetupError` (missing tooling) or any other exception counts as one
  error.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from compat.targets import TARGETS, running_target

COMPAT_DIR = Path(__file__).resolve().parent
COUNT_KEYS = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
FAILING = ("failed", "error")

# Third-party client test suites (packages under compat/), run after the differential suite.
THIRD_PARTY_SUITES: list[str] = ["kafka_python", "franz_go"]

Counts = Counter  # COUNT_KEYS -> number


@dataclass
class SuiteResult:
    name: str
    counts: dict[str, Counts] = field(default_factory=dict)  # target -> counts
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def failed(self) -> bool:
        return any(c[key] for c in self.counts.values() for key in FAILING)


# -- the differential suite (pytest, in process) ---------------------------------------------


class _ByTarget:
    """pytest plugin: outcome counts per target, from pytest's own classification."""

    def __init__(self) -> None:
        self.target_of: dict[str, str] = {}
        self.counts: dict[str, Counts] = {}

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            callspec = getattr(item, "callspec", None)
            params = callspec.params if callspec is not None else {}
            self.target_of[item.nodeid] = params.get("target_name", "-")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        seen: set[tuple[str, str]] = set()
        for key in COUNT_KEYS:
            for report in terminalreporter.stats.get(key, []):
                nodeid = getattr(report, "nodeid", None)
                if nodeid is None or (nodeid, key) in seen:
                    continue
                seen.add((nodeid, key))
                target = self.target_of.get(nodeid, "-")
                self.counts.setdefault(target, Counts())[key] += 1


def run_differential(targets: list[str], pytest_args: list[str]) -> SuiteResult:
    result = SuiteResult("differential")
    plugin = _ByTarget()
    paths = [a for a in pytest_args if not a.startswith("-") and Path(a.split("::")[0]).exists()]
    args = ([] if paths else [str(COMPAT_DIR)]) + ["-q", "-p", "no:cacheprovider"]
    for suite in THIRD_PARTY_SUITES:
        args.append(f"--ignore={COMPAT_DIR / suite}")
    # The third-party suites run below, once; their pytest entry point is for `make test`.
    args.append(f"--ignore={COMPAT_DIR / 'test_third_party.py'}")
    if set(targets) != set(TARGETS):
        args += ["-m", " or ".join(_marker_expr(t) for t in targets)]
    started = time.monotonic()
    code = pytest.main(args + pytest_args, plugins=[plugin])
    result.seconds = time.monotonic() - started
    result.counts = plugin.counts
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        result.notes.append(f"pytest exited with {code!r}")
        result.counts.setdefault("-", Counts())["error"] += 1
    return result


def _marker_expr(target: str) -> str:
    return "kafka" if target == "kafka" else "not kafka"


# -- third-party suites -----------------------------------------------------------------------


def run_third_party(name: str, targets: list[str]) -> SuiteResult:
    result = SuiteResult(name)
    started = time.monotonic()
    try:
        module = importlib.import_module(f"compat.{name}.run")
    except Exception as exc:
        result.notes.append(f"cannot import compat.{name}.run: {exc!r}")
        result.counts["-"] = Counts(error=1)
        return result
    main: Callable[[str, str], Mapping[str, int]] = module.main
    for target_name in targets:
        counts = Counts()
        try:
            with (
                tempfile.TemporaryDirectory(prefix=f"compat-{name}-{target_name}-") as tmp,
                running_target(target_name, Path(tmp), module.overrides_for(target_name)) as target,
            ):
                print(f"\n== compat: {name} against {target_name} ({target.bootstrap})", flush=True)
                returned = main(target.bootstrap, target_name)
            unknown = set(returned) - set(COUNT_KEYS)
            if unknown:
                result.notes.append(f"{target_name}: ignored count keys {sorted(unknown)}")
            counts.update({k: int(v) for k, v in returned.items() if k in COUNT_KEYS})
        except Exception as exc:
            traceback.print_exc()
            result.notes.append(f"{target_name}: {type(exc).__name__}: {exc}".splitlines()[0])
            counts["error"] += 1
        result.counts[target_name] = counts
    result.seconds = time.monotonic() - started
    return result


# -- report -----------------------------------------------------------------------------------


def format_table(results: list[SuiteResult]) -> str:
    header = ["suite", "target", *COUNT_KEYS, "seconds"]
    rows = [header]
    for result in results:
        if not result.counts:
            rows.append([result.name, "-", *[""] * len(COUNT_KEYS), f"{result.seconds:.0f}"])
        for i, (target, counts) in enumerate(sorted(result.counts.items(), key=_target_order)):
            seconds = f"{result.seconds:.0f}" if i == 0 else ""
            rows.append([result.name if i == 0 else "", target, *map(str, _row(counts)), seconds])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for result in results:
        lines += [f"{result.name}: {note}" for note in result.notes]
    return "\n".join(line.rstrip() for line in lines)


def _row(counts: Counts) -> list[int]:
    return [counts[key] for key in COUNT_KEYS]


def _target_order(item: tuple[str, Counts]) -> int:
    return TARGETS.index(item[0]) if item[0] in TARGETS else len(TARGETS)


def main(argv: list[str] | None = None) -> int:
    suites = ["differential", *THIRD_PARTY_SUITES]
    parser = argparse.ArgumentParser(prog="python -m compat", description=__doc__.split("\n")[0])
    parser.add_argument("--suite", action="append", choices=suites, help="default: all")
    parser.add_argument("--target", action="append", choices=TARGETS, help="default: both")
    parser.add_argument("pytest_args", nargs="*", help="after --: extra pytest arguments")
    args = parser.parse_args(argv)
    targets = args.target or list(TARGETS)
    results = []
    for suite in args.suite or suites:
        if suite == "differential":
            results.append(run_differential(targets, args.pytest_args))
        else:
            results.append(run_third_party(suite, targets))
    print("\n== compat summary (compat/FINDINGS.md explains every xfail)")
    print(format_table(results))
    return 1 if any(result.failed() for result in results) else 0


if __name__ == "__main__":
    sys.exit(main())
