"""Page-view event generator: realistic keyed events into Kafka with confluent-kafka.

    python -m spark_jobs.generator --bootstrap HOST:PORT [--topic events] [--count 1000]
        [--rate 0] [--seed 1] [--pages 25] [--users 500] [--start-ts MILLIS|ISO-8601]
        [--spacing-ms 100] [--max-lateness-ms 2000] [--partitions 3]
        [--replication-factor -1] [--print-events]

Records: key = user_id, value = {"user_id", "page", "ts"} JSON with ts in epoch millis
(spark_jobs/events.py). What is realistic about them: page popularity is Zipf-like (the
home page and search are hit far more often than the fortieth product page), a few users
are much more active than most (Zipf-like too), and events arrive slightly out of order
(each ts is up to --max-lateness-ms before its place in the stream).

Event time: with --start-ts the clock is simulated, event i is at start + i * spacing
(--spacing-ms, default 1000/rate with a rate, else 100 ms) minus its lateness; the whole
output (users, pages, ts) is then a function of the seed and the options. Without
--start-ts events carry the wall-clock time of their production (minus lateness), for a
live stream with --rate.

--rate paces production in real time (events per second; 0 = as fast as possible).
The topic is created with --partitions and --replication-factor (-1: the broker's
default.replication.factor) if it does not exist. Delivery is idempotent
(acks=all), so every event is stored exactly once; the produced events, with the
partition and offset the broker gave each, are returned by `generate()`, and printed as
JSON lines with --print-events (the summary goes to stderr).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import KafkaException, Producer

from spark_jobs.events import Event, iso_utc, parse_iso_utc
from spark_jobs.kafka_util import BROKER_DEFAULT, broker_answers, ensure_topic

_SECTIONS = ["/", "/search", "/cart", "/checkout", "/login", "/account", "/help", "/about"]


def page_names(count: int) -> list[str]:
    """`count` page paths, most popular first: site sections, then products and posts."""
    if count < 1:
        raise ValueError("at least one page")
    names = list(_SECTIONS)
    for k in itertools.count(1):
        if len(names) >= count:
            break
        names.append(f"/products/p{k:03d}")
        if k % 3 == 0:
            names.append(f"/blog/post-{k // 3:02d}")
    return names[:count]


def _zipf_weights(count: int, exponent: float) -> list[float]:
    return [1.0 / (rank**exponent) for rank in range(1, count + 1)]


def make_events(
    count: int,
    *,
    seed: int = 1,
    pages: int = 25,
    users: int = 500,
    start_ts: int | None = None,
    spacing_ms: float = 100.0,
    max_lateness_ms: int = 2000,
) -> list[Event]:
    """The events (without partition/offset) for a simulated clock starting at start_ts."""
    if start_ts is None:
        raise ValueError("make_events needs start_ts (generate() handles live time)")
    rng = random.Random(seed)
    return [
        _event(rng, i, pages, users, start_ts + round(i * spacing_ms), max_lateness_ms, start_ts)
        for i in range(count)
    ]


class _Universe:
    def __init__(self, pages: int, users: int) -> None:
        self.pages = page_names(pages)
        self.page_weights = list(itertools.accumulate(_zipf_weights(pages, 1.1)))
        self.users = [f"u{n:04d}" for n in range(1, users + 1)]
        self.user_weights = list(itertools.accumulate(_zipf_weights(users, 0.8)))


_UNIVERSES: dict[tuple[int, int], _Universe] = {}


def _event(
    rng: random.Random,
    i: int,
    pages: int,
    users: int,
    nominal_ts: int,
    max_lateness_ms: int,
    floor_ts: int,
) -> Event:
    universe = _UNIVERSES.get((pages, users))
    if universe is None:
        universe = _UNIVERSES[(pages, users)] = _Universe(pages, users)
    (user,) = rng.choices(universe.users, cum_weights=universe.user_weights)
    (page,) = rng.choices(universe.pages, cum_weights=universe.page_weights)
    lateness = rng.randint(0, max_lateness_ms) if max_lateness_ms > 0 else 0
    return Event(user, page, max(floor_ts, nominal_ts - lateness))


def generate(
    bootstrap: str,
    topic: str = "events",
    count: int = 1000,
    *,
    rate: float = 0.0,
    seed: int = 1,
    pages: int = 25,
    users: int = 500,
    start_ts: int | None = None,
    spacing_ms: float | None = None,
    max_lateness_ms: int = 2000,
    partitions: int = 3,
    replication_factor: int = BROKER_DEFAULT,
    producer_config: dict[str, object] | None = None,
) -> list[Event]:
    """Produce `count` events; return them with their partitions and offsets."""
    if spacing_ms is None:
        spacing_ms = 1000.0 / rate if rate > 0 else 100.0
    ensure_topic(bootstrap, topic, partitions, replication_factor=replication_factor)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 500_000,
            "log_level": 0,
            **(producer_config or {}),
        }
    )
    rng = random.Random(seed)
    produced: list[Event | None] = [None] * count
    errors: list[str] = []
    began = time.monotonic()

    def delivered(index: int, event: Event) -> Callable[[Any, Any], None]:
        def callback(err: Any, msg: Any) -> None:  # librdkafka's delivery report
            if err is not None:
                errors.append(f"event {index}: {err}")
            else:
                produced[index] = Event(
                    event.user_id, event.page, event.ts, msg.partition(), msg.offset()
                )

        return callback

    floor = start_ts if start_ts is not None else 0
    for i in range(count):
        if rate > 0:
            delay = began + i / rate - time.monotonic()
            if delay > 0:
                producer.poll(delay)
        nominal = (
            start_ts + round(i * spacing_ms) if start_ts is not None else int(time.time() * 1000)
        )
        event = _event(rng, i, pages, users, nominal, max_lateness_ms, floor)
        while True:
            try:
                producer.produce(
                    topic, key=event.key(), value=event.value(), on_delivery=delivered(i, event)
                )
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    remaining = producer.flush(120)
    if remaining or errors:
        raise KafkaException(
            f"{len(errors)} failed, {remaining} undelivered of {count}: {errors[:3]}"
        )
    return [event for event in produced if event is not None]


def _parse_ts(text: str) -> int:
    return int(text) if text.lstrip("-").isdigit() else parse_iso_utc(text)


def summary(events: Sequence[Event]) -> str:
    if not events:
        return "no events"
    pages = Counter(e.page for e in events)
    top = ", ".join(f"{page} {n}" for page, n in pages.most_common(5))
    parts = Counter(e.partition for e in events)
    return (
        f"{len(events)} events, {len({e.user_id for e in events})} users, {len(pages)} pages, "
        f"ts {iso_utc(min(e.ts for e in events))} .. {iso_utc(max(e.ts for e in events))}, "
        f"partitions {dict(sorted(parts.items()))}; top pages: {top}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m spark_jobs.generator", description="Produce page-view events."
    )
    parser.add_argument("--bootstrap", default="127.0.0.1:9092", help="HOST:PORT")
    parser.add_argument("--topic", default="events")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=0.0, help="events/s, 0 = unthrottled")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pages", type=int, default=25)
    parser.add_argument("--users", type=int, default=500)
    parser.add_argument(
        "--start-ts", type=_parse_ts, help="simulated event time of the first event (ms or ISO)"
    )
    parser.add_argument("--spacing-ms", type=float, help="simulated time between events")
    parser.add_argument("--max-lateness-ms", type=int, default=2000)
    parser.add_argument("--partitions", type=int, default=3, help="if the topic is created")
    parser.add_argument(
        "--replication-factor",
        type=int,
        default=BROKER_DEFAULT,
        help="if the topic is created (default -1: the broker's default.replication.factor)",
    )
    parser.add_argument("--print-events", action="store_true", help="JSON lines on stdout")
    args = parser.parse_args(argv)
    if not broker_answers(args.bootstrap):
        return 2
    began = time.monotonic()
    events = generate(
        args.bootstrap,
        args.topic,
        args.count,
        rate=args.rate,
        seed=args.seed,
        pages=args.pages,
        users=args.users,
        start_ts=args.start_ts,
        spacing_ms=args.spacing_ms,
        max_lateness_ms=args.max_lateness_ms,
        partitions=args.partitions,
        replication_factor=args.replication_factor,
    )
    elapsed = time.monotonic() - began
    if args.print_events:
        for event in events:
            print(json.dumps(event.as_dict()))
    print(f"produced to {args.topic} in {elapsed:.2f}s: {summary(events)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
