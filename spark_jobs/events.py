"""Page-view events: the record format and the counts the jobs must produce.

An event is a Kafka record with key = user_id (UTF-8) and a JSON value

    {"user_id": "u0042", "page": "/products/p17", "ts": 1735725600123}

where `ts` is the event time in epoch milliseconds (UTC), an integer. Epoch millis were
chosen over ISO-8601 strings: no time-zone or format ambiguity, exact to the millisecond,
and both Spark (`timestamp_millis`) and plain Python read them without a format string.

`expected_window_counts()` and `expected_top_pages()` compute in plain Python what the Spark
jobs compute, so tests (and anyone) can check their output exactly.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

HOUR_MS = 3_600_000


@dataclass(frozen=True)
class Event:
    user_id: str
    page: str
    ts: int  # epoch milliseconds, UTC
    # Where the broker stored it (from the producer's delivery report); -1 if unknown.
    partition: int = field(default=-1, compare=False)
    offset: int = field(default=-1, compare=False)

    def key(self) -> bytes:
        return self.user_id.encode()

    def value(self) -> bytes:
        return json.dumps(
            {"user_id": self.user_id, "page": self.page, "ts": self.ts}, separators=(",", ":")
        ).encode()

    def as_dict(self) -> dict[str, object]:
        return {
            "user_id": self.user_id,
            "page": self.page,
            "ts": self.ts,
            "partition": self.partition,
            "offset": self.offset,
        }


def iso_utc(ms: int) -> str:
    """Epoch millis -> `2025-01-01T10:00:00Z` (millis appended only when not zero)."""
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if ms % 1000:
        text += f".{ms % 1000:03d}"
    return text + "Z"


def parse_iso_utc(text: str) -> int:
    """The inverse of iso_utc (also accepts `+00:00`)."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return round(moment.timestamp() * 1000)


def window_start(ts: int, window_ms: int) -> int:
    return ts - ts % window_ms


def expected_window_counts(
    events: Iterable[Event], window_ms: int = 60_000
) -> dict[tuple[int, str], int]:
    """{(window start in epoch millis, page): views} for tumbling windows of window_ms."""
    return dict(Counter((window_start(e.ts, window_ms), e.page) for e in events))


def expected_top_pages(events: Iterable[Event], top: int) -> list[tuple[int, int, str, int, int]]:
    """[(hour start millis, rank, page, views, distinct users)], hours ascending; within an
    hour by views descending, then page ascending (the report job's order)."""
    views: dict[int, Counter[str]] = defaultdict(Counter)
    users: dict[tuple[int, str], set[str]] = defaultdict(set)
    for event in events:
        hour = window_start(event.ts, HOUR_MS)
        views[hour][event.page] += 1
        users[(hour, event.page)].add(event.user_id)
    rows = []
    for hour in sorted(views):
        ranked = sorted(views[hour].items(), key=lambda item: (-item[1], item[0]))[:top]
        for rank, (page, count) in enumerate(ranked, start=1):
            rows.append((hour, rank, page, count, len(users[(hour, page)])))
    return rows
