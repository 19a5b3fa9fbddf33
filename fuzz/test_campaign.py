"""The seeded short fuzz run CI makes (the long runs are `make fuzz FRAMES=1000000`)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from fuzz.campaign import Settings, batch_mutants, run
from fuzz.seeds import seeds

SHORT_RUN = Settings(frames=50_000, seed=20261124, batch=5000)
RSS_GROWTH_BOUND_KIB = 32 * 1024  # RSS after the last batch against after the first


def test_batches_are_the_same_for_the_same_seed() -> None:
    corpus = seeds(uuid.UUID(int=7))
    settings = Settings(frames=300, seed=3, batch=100)
    assert batch_mutants(settings, corpus, 2) == batch_mutants(settings, corpus, 2)
    assert batch_mutants(settings, corpus, 1) != batch_mutants(settings, corpus, 2)


@pytest.mark.slow
def test_short_seeded_run_finds_nothing(tmp_path: Path) -> None:
    report = run(SHORT_RUN, tmp_path)
    print(report.summary())
    assert report.frames == SHORT_RUN.frames
    assert (report.crashes, report.hangs, report.tracebacks, report.error_records) == (0, 0, 0, 0)
    assert report.first_problem == ""
    assert sum(report.outcomes.values()) == SHORT_RUN.frames
    assert report.outcomes["answered"] > SHORT_RUN.frames // 10  # mutants reach the handlers
    assert report.rss_end_kib - report.rss_start_kib <= RSS_GROWTH_BOUND_KIB
