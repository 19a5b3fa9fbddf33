"""Consumer-group rebalance timings with real librdkafka consumers in their own processes.

    python -m bench.group_rebalance [--rounds 5] [--partitions 6] [--session-timeout-ms 1500]
                                    [--heartbeat-interval-ms 300] [--bootstrap HOST:PORT]
                                    [--json out.json]

Each round uses a fresh topic and group and tests/integration/group_member.py processes
(eager protocol, default range assignor):

- join: two members are settled; a third subscribes (at a random point of the heartbeat
  cycle). Time from its subscribe() (and from its
  process start) until every member has its new assignment.
- SIGKILL: at a random point within a session timeout, one member is killed (no
  LeaveGroup). Time until the two survivors own every
  partition: the session timeout plus the rebalance.
- leave: one survivor closes cleanly (LeaveGroup). Time until the last member owns every
  partition.

Times come from the members' own event timestamps (CLOCK_MONOTONIC, shared by all processes).
Without --bootstrap a kafkalite broker is started in a temporary directory with
group.initial.rebalance.delay.ms=0 and group.min.session.timeout.ms=500; an external broker
(e.g. Apache Kafka) must allow the session timeout asked for. This prints figures; it is not
a test.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from groups_helpers import GROUP_BROKER, Members, measure_join_then_kill, measure_leave  # noqa: E402

from kafkalite.testing import BrokerProcess  # noqa: E402


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def target(bootstrap: str | None) -> Iterator[str]:
    if bootstrap:
        yield bootstrap
        return
    with tempfile.TemporaryDirectory(prefix="kafkalite-group-bench-") as data_dir:
        broker = BrokerProcess(Path(data_dir), GROUP_BROKER)
        broker.start()
        try:
            log(f"kafkalite broker pid {broker.process.pid} on {broker.bootstrap}")
            yield broker.bootstrap
        finally:
            broker.stop()


def create_topic(admin: AdminClient, name: str, partitions: int) -> None:
    futures = admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=10)
    futures[name].result(30)


def one_round(
    bootstrap: str, admin: AdminClient, partitions: int, conf: dict, rng: random.Random
) -> dict:
    run = uuid.uuid4().hex[:8]
    topic, group = f"group-bench-{run}", f"group-bench-{run}"
    create_topic(admin, topic, partitions)
    heartbeat_s = int(conf["heartbeat.interval.ms"]) / 1000
    session_s = int(conf["session.timeout.ms"]) / 1000

    # Members heartbeat in step after a rebalance; acting at a random point of that cycle
    # gives typical figures rather than the best or worst case. (Sleeping is fine here: it
    # only picks the moment, nothing waits on it.)
    def random_phase(span: float) -> Callable[[object], None]:
        return lambda _: time.sleep(rng.uniform(0, span))

    with Members() as members:
        times, survivors, _ = measure_join_then_kill(
            members,
            bootstrap,
            group,
            topic,
            partitions,
            conf=conf,
            before_join=random_phase(2 * heartbeat_s),
            on_join_settled=random_phase(session_s),
        )
        wanted = {(topic, p) for p in range(partitions)}
        times.leave_to_reassigned = measure_leave(members, survivors[0], survivors[1:], wanted)
    return {
        "join_from_subscribe_ms": times.join_from_ready * 1000,
        "join_from_process_start_ms": times.join_from_spawn * 1000,
        "sigkill_to_reassigned_ms": times.kill_to_reassigned * 1000,
        "leave_to_reassigned_ms": times.leave_to_reassigned * 1000,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--session-timeout-ms", type=int, default=1500)
    parser.add_argument("--heartbeat-interval-ms", type=int, default=300)
    parser.add_argument("--bootstrap", help="measure this broker instead of starting kafkalite")
    parser.add_argument("--seed", type=int, default=None, help="for the random phases")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    conf = {
        "session.timeout.ms": str(args.session_timeout_ms),
        "heartbeat.interval.ms": str(args.heartbeat_interval_ms),
    }
    rng = random.Random(args.seed)
    rounds = []
    with target(args.bootstrap) as bootstrap:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for index in range(args.rounds):
            figures = one_round(bootstrap, admin, args.partitions, conf, rng)
            log(f"round {index + 1}: " + ", ".join(f"{k} {v:.0f}" for k, v in figures.items()))
            rounds.append(figures)

    print(
        f"consumer-group rebalances: {args.rounds} rounds, {args.partitions} partitions, "
        f"session.timeout.ms={args.session_timeout_ms}, "
        f"heartbeat.interval.ms={args.heartbeat_interval_ms}, eager (range) protocol, "
        f"target {args.bootstrap or 'kafkalite'}"
    )
    labels = {
        "join_from_subscribe_ms": "third member joins (from its subscribe())",
        "join_from_process_start_ms": "third member joins (from its process start)",
        "sigkill_to_reassigned_ms": "member SIGKILLed -> survivors own all partitions",
        "leave_to_reassigned_ms": "member closes (LeaveGroup) -> last member owns all",
    }
    summary = {}
    for key, label in labels.items():
        values = [r[key] for r in rounds]
        summary[key] = {
            "median": statistics.median(values),
            "min": min(values),
            "max": max(values),
        }
        print(
            f"  {label:<52} median {summary[key]['median']:7.0f} ms  "
            f"(min {summary[key]['min']:.0f}, max {summary[key]['max']:.0f})"
        )
    if args.json:
        args.json.write_text(json.dumps({"rounds": rounds, "summary": summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
