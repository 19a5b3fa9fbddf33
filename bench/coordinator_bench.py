"""Group coordinator latency and a transactional copy on 3 brokers: kafkalite on ZooKeeper
against a 3-node KRaft Apache Kafka, both on this machine, one after the other (issue 22).

    python -m bench.coordinator_bench [--target both|kafkalite|kafka] [--join-cycles 100]
        [--commits 300] [--consumers 10] [--rebalance-rounds 3] [--copy-records 4000]
        [--copier java|python|both] [--out bench/results]

The clusters are bench/cluster_bench.py's (min.insync.replicas=2, replication factor 3, the
internal topics with Kafka's defaults: replication factor 3, min ISR 2). Per cluster:

* JoinGroup + SyncGroup round trip: one member of a classic group (raw requests over one
  connection to the coordinator, protocol_tests/raw_client.py) joins and syncs once to settle,
  then rejoins and syncs `--join-cycles` times; each cycle is a rebalance of one member (a new
  generation) and SyncGroup stores the group's record in `__consumer_offsets` (acks=all).
* OffsetCommit latency: `--commits` synchronous commits of one partition by that member, one
  request at a time (the coordinator appends with acks=all).
* Rebalance of `--consumers` consumers: confluent-kafka consumers in their own processes
  (tests/integration/group_member.py, eager range assignor, heartbeat.interval.ms=300,
  session.timeout.ms=10000) on a topic with as many partitions; n-1 are settled, then the
  n-th subscribes: the time from its subscribe() to every member holding its new assignment.
* Transactional copy: `--copy-records` records (100 B, 1 partition) copied by Kafka's
  TransactionalMessageCopier (200 records per transaction, read_committed; bench/txn_copy.py),
  and/or (`--copier python|both`) the same loop on librdkafka with a per-step breakdown.

Prints both figures and the ratio kafkalite/Kafka; writes coordinator-<target>.md and .json
under `--out`. This prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import statistics
import struct
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import txn_copy
from bench.cluster_bench import create_topic, kafka_cluster, kafkalite_cluster
from bench.compare import RESULTS_DIR, Row, get, ratio_table, write_results
from bench.workloads import Latencies
from protocol_tests.raw_client import RawClient, build

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))
from groups_helpers import Members  # noqa: E402

FIND_COORDINATOR, JOIN_GROUP, SYNC_GROUP, OFFSET_COMMIT = 10, 11, 14, 8
NONE, MEMBER_ID_REQUIRED = 0, 79
RETRIABLE = {14, 15, 16}  # coordinator loading / not available / not coordinator
SESSION_MS, REBALANCE_MS = 30_000, 60_000
MEMBER_CONF = {"session.timeout.ms": "10000", "heartbeat.interval.ms": "300"}
SETTLE_TIMEOUT_S = 120.0
COPIERS = {"java": "Kafka's TransactionalMessageCopier", "python": "the loop on librdkafka"}


def log(message: str) -> None:
    print(f"[coordinator-bench] {message}", file=sys.stderr, flush=True)


# -- a classic-group member on raw requests --------------------------------------------------


def _string(value: str) -> bytes:
    data = value.encode()
    return struct.pack(">h", len(data)) + data


def subscription(topic: str) -> bytes:
    """ConsumerProtocolSubscription v0: one topic, no user data."""
    return struct.pack(">h", 0) + struct.pack(">i", 1) + _string(topic) + struct.pack(">i", -1)


def assignment(topic: str) -> bytes:
    """ConsumerProtocolAssignment v0: partition 0 of `topic`, no user data."""
    partitions = struct.pack(">i", 1) + struct.pack(">i", 0)
    return struct.pack(">hi", 0, 1) + _string(topic) + partitions + struct.pack(">i", -1)


class CoordinatorMoved(RuntimeError):
    """COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR."""


def _check(what: str, response: Any) -> Any:
    if response.error_code in RETRIABLE:
        raise CoordinatorMoved(f"{what}: error {int(response.error_code)}")
    if response.error_code != NONE:
        raise RuntimeError(f"{what}: error {int(response.error_code)}")
    return response


def find_coordinator(bootstrap: str, group: str, timeout: float = 60.0) -> tuple[str, int]:
    """The group coordinator's address, asked until the offsets topic has leaders."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    deadline = time.monotonic() + timeout
    with RawClient(host, int(port)) as client:
        while True:
            request = build(FIND_COORDINATOR, 3, "FindCoordinatorRequest", key=group, key_type=0)
            response = client.request(request)
            if response.error_code == NONE:
                return response.host, response.port
            if response.error_code not in RETRIABLE or time.monotonic() > deadline:
                raise RuntimeError(f"FindCoordinator({group}): error {int(response.error_code)}")
            time.sleep(0.1)


@dataclass
class GroupMember:
    client: RawClient
    group: str
    topic: str
    member_id: str = ""
    generation: int = -1

    def join(self) -> Any:
        protocol = build(
            JOIN_GROUP,
            9,
            "JoinGroupRequestProtocol",
            name="range",
            metadata=subscription(self.topic),
        )
        request = build(
            JOIN_GROUP,
            9,
            "JoinGroupRequest",
            group_id=self.group,
            session_timeout=_ms(SESSION_MS),
            rebalance_timeout=_ms(REBALANCE_MS),
            member_id=self.member_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocols=(protocol,),
            reason=None,
        )
        response = self.client.request(request, timeout=REBALANCE_MS / 1000)
        if response.error_code == MEMBER_ID_REQUIRED:  # KIP-394: join again with the id
            self.member_id = response.member_id
            return self.join()
        _check("JoinGroup", response)
        self.member_id, self.generation = response.member_id, response.generation_id
        return response

    def sync(self) -> Any:
        given = build(
            SYNC_GROUP,
            5,
            "SyncGroupRequestAssignment",
            member_id=self.member_id,
            assignment=assignment(self.topic),
        )
        request = build(
            SYNC_GROUP,
            5,
            "SyncGroupRequest",
            group_id=self.group,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocol_name="range",
            assignments=(given,),
        )
        return _check("SyncGroup", self.client.request(request))

    def commit(self, offset: int) -> Any:
        partition = build(
            OFFSET_COMMIT,
            9,
            "OffsetCommitRequestPartition",
            partition_index=0,
            committed_offset=offset,
            committed_leader_epoch=-1,
            committed_metadata="",
        )
        topic = build(
            OFFSET_COMMIT, 9, "OffsetCommitRequestTopic", name=self.topic, partitions=(partition,)
        )
        request = build(
            OFFSET_COMMIT,
            9,
            "OffsetCommitRequest",
            group_id=self.group,
            generation_id_or_member_epoch=self.generation,
            member_id=self.member_id,
            group_instance_id=None,
            topics=(topic,),
        )
        response = self.client.request(request)
        errors = {p.error_code for t in response.topics for p in t.partitions}
        if errors != {NONE}:
            raise RuntimeError(f"OffsetCommit: errors {sorted(int(e) for e in errors)}")
        return response


def _ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


@contextlib.contextmanager
def settled_member(bootstrap: str, group: str, topic: str) -> Iterator[GroupMember]:
    """The group's only member, joined and synced, connected to its coordinator. The first
    join of a new group may wait group.initial.rebalance.delay.ms, and a coordinator that
    has just been elected may still be loading (Kafka answers NOT_COORDINATOR meanwhile)."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while True:
        host, port = find_coordinator(bootstrap, group)
        with RawClient(host, port, timeout=REBALANCE_MS / 1000) as client:
            member = GroupMember(client, group, topic)
            try:
                member.join()
                member.sync()
            except CoordinatorMoved:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
                continue
            yield member
            return


def measure_group(bootstrap: str, cycles: int, commits: int) -> dict[str, Any]:
    """JoinGroup+SyncGroup cycles of a one-member group, then its synchronous commits."""
    run = uuid.uuid4().hex[:8]
    topic, group = f"coord-bench-{run}", f"coord-bench-{run}"
    create_topic(bootstrap, topic, 1)
    join, sync, cycle, commit = Latencies(), Latencies(), Latencies(), Latencies()
    with settled_member(bootstrap, group, topic) as member:
        for _ in range(cycles):
            started = time.perf_counter()
            member.join()
            joined = time.perf_counter()
            member.sync()
            synced = time.perf_counter()
            join.values.append(joined - started)
            sync.values.append(synced - joined)
            cycle.values.append(synced - started)
        for offset in range(commits):
            started = time.perf_counter()
            member.commit(offset)
            commit.values.append(time.perf_counter() - started)
    return {
        "join_sync": cycle.summary_ms(),
        "join": join.summary_ms(),
        "sync": sync.summary_ms(),
        "offset_commit": commit.summary_ms(),
    }


# -- the rebalance of n consumers ----------------------------------------------------------------


def measure_rebalance(bootstrap: str, consumers: int, rounds: int) -> dict[str, Any]:
    times = [rebalance_round(bootstrap, consumers) for _ in range(rounds)]
    log(f"  rebalance of {consumers}: " + ", ".join(f"{t:.0f}" for t in times) + " ms")
    return {
        "rounds_ms": times,
        "median_ms": statistics.median(times),
        "min_ms": min(times),
        "max_ms": max(times),
    }


def rebalance_round(bootstrap: str, consumers: int) -> float:
    """ms from the last consumer's subscribe() to all `consumers` holding new assignments."""
    run = uuid.uuid4().hex[:8]
    topic, group = f"rebalance-{run}", f"rebalance-{run}"
    create_topic(bootstrap, topic, consumers)
    partitions = [(topic, p) for p in range(consumers)]
    with Members() as members:
        first = [
            members.spawn(f"m{i}", bootstrap, group, [topic], MEMBER_CONF)
            for i in range(consumers - 1)
        ]
        members.wait_settled(first, partitions, SETTLE_TIMEOUT_S)
        last = members.spawn(f"m{consumers - 1}", bootstrap, group, [topic], MEMBER_CONF)
        ready = members.wait_for(lambda: last.last("ready"), SETTLE_TIMEOUT_S, "its subscribe")
        subscribed = ready["t"]
        everyone = [*first, last]
        members.wait_for(
            lambda: all(m.of_kind("assigned", since=subscribed) for m in everyone),
            SETTLE_TIMEOUT_S,
            "every member's assignment after the last subscribe",
        )
        settled = members.wait_settled(everyone, partitions, SETTLE_TIMEOUT_S)
    return (settled - subscribed) * 1000


# -- the transactional copy -----------------------------------------------------------------


def measure_copy(bootstrap: str, records: int, copier: str) -> dict[str, Any]:
    run = uuid.uuid4().hex[:8]
    source, target = f"copy-in-{run}", f"copy-out-{run}"
    create_topic(bootstrap, source, 1)
    create_topic(bootstrap, target, 1)
    txn_copy.fill(bootstrap, source, records)
    copy = txn_copy.java_copier if copier == "java" else txn_copy.python_copier
    result = copy(bootstrap, source, target, records)
    log(f"  copy ({copier}): {result.records_per_s:.0f} records/s over {result.seconds:.1f} s")
    return result.summary()


# -- the run and its table ------------------------------------------------------------------


def run(target: str, base: Path, args: argparse.Namespace) -> dict[str, Any]:
    start = kafkalite_cluster if target == "kafkalite" else kafka_cluster
    log(f"{target}: starting a 3-broker cluster")
    with start(base) as cluster:
        results: dict[str, Any] = {}
        log(f"{target}: {args.join_cycles} JoinGroup+SyncGroup cycles, {args.commits} commits")
        results["group"] = measure_group(cluster.bootstrap, args.join_cycles, args.commits)
        if args.rebalance_rounds:
            results["rebalance"] = measure_rebalance(
                cluster.bootstrap, args.consumers, args.rebalance_rounds
            )
        copiers = ("java", "python") if args.copier == "both" else (args.copier,)
        for copier in copiers if args.copy_records else ():
            results[f"copy_{copier}"] = measure_copy(cluster.bootstrap, args.copy_records, copier)
    return results


def rows(ours: dict[str, Any], theirs: dict[str, Any], consumers: int) -> list[Row]:
    table = []
    path: tuple[str, ...]
    for key, name in (
        ("join_sync", "JoinGroup+SyncGroup round trip"),
        ("join", "  of which JoinGroup"),
        ("sync", "  of which SyncGroup"),
        ("offset_commit", "OffsetCommit"),
    ):
        for pct in ("p50", "p99"):
            path = ("group", key, f"{pct}_ms")
            table.append(Row(f"{name} {pct}", "ms", get(ours, *path), get(theirs, *path), False))
    for stat in ("median", "max"):
        path = ("rebalance", f"{stat}_ms")
        name = f"rebalance of {consumers} consumers, {stat}"
        table.append(Row(name, "ms", get(ours, *path), get(theirs, *path), False))
    for copier in ("java", "python"):
        key = f"copy_{copier}"
        if get(ours, key) is None and get(theirs, key) is None:
            continue
        name = f"transactional copy, {COPIERS[copier]}"
        rate = (key, "records_per_s")
        table.append(Row(name, "records/s", get(ours, *rate), get(theirs, *rate), True))
        for pct in ("p50", "p99"):
            path = (key, "per_transaction", f"{pct}_ms")
            name = f"  one transaction of 200 records, {pct}"
            table.append(Row(name, "ms", get(ours, *path), get(theirs, *path), False))
    return table


def markdown(table: list[Row], args: argparse.Namespace, results: dict[str, Any]) -> str:
    with open("/proc/loadavg") as loadavg:
        load = " ".join(loadavg.read().split()[:3])
    copiers = "both copiers" if args.copier == "both" else f"the {args.copier} copier"
    lines = [
        f"3 brokers, replication factor 3, min.insync.replicas=2, same machine, one run each "
        f"({args.join_cycles} join cycles, {args.commits} commits, {args.rebalance_rounds} "
        f"rebalance rounds, {args.copy_records} records copied by {copiers}); "
        f"load average at the end {load}",
        "",
        *ratio_table(table),
    ]
    for target, figures in results.items():
        steps = get(figures, "copy_python", "steps") or {}
        if steps:
            parts = [f"{name} p50 {s['p50_ms']:.1f} ms" for name, s in steps.items()]
            lines.append(f"\n{target}, one transaction step by step: " + ", ".join(parts))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.coordinator_bench", description=__doc__)
    parser.add_argument("--target", choices=("both", "kafkalite", "kafka"), default="both")
    parser.add_argument("--join-cycles", type=int, default=100)
    parser.add_argument("--commits", type=int, default=300)
    parser.add_argument("--consumers", type=int, default=10)
    parser.add_argument("--rebalance-rounds", type=int, default=3)
    parser.add_argument("--copy-records", type=int, default=4000)
    parser.add_argument("--copier", choices=("java", "python", "both"), default="java")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    targets = ["kafkalite", "kafka"] if args.target == "both" else [args.target]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="kafkalite-coordinator-bench-") as tmp:
        for target in targets:
            results[target] = run(target, Path(tmp), args)
    table = rows(results.get("kafkalite", {}), results.get("kafka", {}), args.consumers)
    text = markdown(table, args, results)
    print(text)
    stem = write_results(args.out, f"coordinator-{args.target}", text, results)
    log(f"written {stem}.md and .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
