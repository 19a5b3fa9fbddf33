"""The share-group workload (`--workload share`, KIP-932): the producers as in every run, and
`--consumers` processes each running confluent-kafka's `ShareConsumer` in one share group in
explicit acknowledgement mode. Each record polled is ACCEPTed and the acknowledgements of a poll
are committed synchronously (`commit_sync`), so every answer belongs to known records.

Lines a share consumer writes (logs/share-c<i>.jsonl):
  {"ev": "deliver", "partition", "offset", "key", "value", "count"}   count: delivery count
  {"ev": "accepted", "records": [[p, o], ...]}       the broker answered the ACCEPT: success
  {"ev": "accept_err", "records": [[p, o], ...], "error"}   it did not (or no answer came)
  {"ev": "share_err", "error"}                       a poll's error

After the producers stop, the harness waits until the broker reports every record acknowledged
(DescribeShareGroupOffsets: each share-partition's start offset at the log end, lag 0), then
stops the consumers; the read-back adds {"ev": "share_offsets", "offsets": {p: {"start", "lag"}}}
to final.jsonl. `judge_share` is the checker's part.
"""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter, defaultdict
from typing import Any, TextIO

from confluent_kafka import IllegalStateException, KafkaException, ShareConsumer
from kio.schema.describe_share_group_offsets.v1.request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
)
from kio.schema.errors import ErrorCode
from kio.schema.types import GroupId

from chaos.workload import _emit, connection

SHARE_GROUP = "chaos-share"
SHARE_MUST_BE_ZERO = (
    "share_acked_never_delivered", "share_redelivered_after_ack", "share_accepted_twice",
    "share_delivered_not_in_log", "share_unaccepted",
)  # fmt: skip

# The broker settings of a share run: a member's session shorter than a long pause (the
# schedule pauses 0.5x and 1.5x the 6 s session), and locks that expire within a short run.
SHARE_OVERRIDES = {
    "group.share.session.timeout.ms": "6000",
    "group.share.min.session.timeout.ms": "6000",
    "group.share.heartbeat.interval.ms": "1000",
    "group.share.min.heartbeat.interval.ms": "1000",
    "group.share.record.lock.duration.ms": "10000",
    "group.share.min.record.lock.duration.ms": "1000",
}


def share_overrides(brokers: int) -> dict[str, str]:
    """SHARE_OVERRIDES, and `__share_group_state` replicated as the cluster allows (Kafka's
    default of 3 replicas leaves a smaller Kafka without share groups: nothing is delivered)."""
    return {
        **SHARE_OVERRIDES,
        "share.coordinator.state.topic.replication.factor": str(min(3, brokers)),
        "share.coordinator.state.topic.min.isr": str(min(2, brokers)),
    }


def run_share_consumer(args: argparse.Namespace, out: TextIO) -> int:
    consumer = ShareConsumer(
        {
            **connection(args),
            "group.id": args.group,
            "share.acknowledgement.mode": "explicit",
            "socket.connection.setup.timeout.ms": 5000,
            "reconnect.backoff.max.ms": 1000,
            "log_level": 4,
        }
    )
    consumer.subscribe([args.topic])
    try:
        while not os.path.exists(args.stop_file):
            try:
                messages = consumer.poll(0.5)
            except KafkaException as exc:
                _emit(out, ev="share_err", error=exc.args[0].name())
                continue
            except IllegalStateException as exc:  # the client's own state: written down
                _emit(out, ev="share_err", error=f"IllegalState: {exc}")
                time.sleep(0.5)
                continue
            batch = []
            for m in messages:
                if m.error() is not None:
                    _emit(out, ev="share_err", error=m.error().name())
                    continue
                _emit(out, ev="deliver", partition=m.partition(), offset=m.offset(),
                      key=(m.key() or b"").decode(), value=(m.value() or b"").decode(),
                      count=m.delivery_count())  # fmt: skip
                try:
                    consumer.acknowledge(m)  # ACCEPT
                except IllegalStateException as exc:  # no longer in flight: not acknowledged
                    _emit(out, ev="accept_err", records=[[m.partition(), m.offset()]],
                          error=f"IllegalState: {exc}")  # fmt: skip
                    continue
                batch.append((m.partition(), m.offset()))
            if batch:
                _commit(consumer, batch, out)
    finally:
        try:
            consumer.close()
        except KafkaException:
            pass
    return 0


def _commit(consumer: ShareConsumer, batch: list[tuple[int, int]], out: TextIO) -> None:
    by_partition: dict[int, list[list[int]]] = defaultdict(list)
    for p, o in batch:
        by_partition[p].append([p, o])
    try:
        answers = consumer.commit_sync(30.0)
    except KafkaException as exc:
        _emit(out, ev="accept_err", records=[[p, o] for p, o in batch], error=exc.args[0].name())
        return
    answered = {tp.partition: error for tp, error in answers.items()}
    for p, records in by_partition.items():
        if p in answered and answered[p] is None:
            _emit(out, ev="accepted", records=records)
        else:
            error = answered[p].args[0].name() if answered.get(p) is not None else "unanswered"
            _emit(out, ev="accept_err", records=records, error=error)


def share_offsets(bootstrap: str, group: str, timeout: float = 10.0) -> dict[int, dict]:
    """Per partition of the group's topic: the share-partition start offset and lag, asked of
    the group's coordinator (DescribeShareGroupOffsets; confluent-kafka has no such call)."""
    from kafkalite.tools.common import Connection
    from kafkalite.tools.raw_requests import ask, group_coordinator

    conn = Connection(bootstrap.split(",")[0], timeout)
    coordinator = group_coordinator(conn, conn.bootstrap, group)
    request = DescribeShareGroupOffsetsRequest(
        groups=(DescribeShareGroupOffsetsRequestGroup(group_id=GroupId(group), topics=None),)
    )
    (answer,) = ask(conn, coordinator, request).groups
    if answer.error_code != ErrorCode.none:
        raise RuntimeError(f"DescribeShareGroupOffsets: {answer.error_code.name}")
    return {
        p.partition_index: {"start": p.start_offset, "lag": p.lag}
        for topic in answer.topics
        for p in topic.partitions
    }


def all_acknowledged(offsets: dict[int, dict], ends: dict[int, int]) -> bool:
    """Every record below each partition's end acknowledged (or archived) in the share group:
    lag 0. (Kafka's start offset is the persisted one, which may stay behind acknowledged
    records; its lag counts only those not acknowledged.)"""
    return all(
        offsets.get(p, {}).get("start", -1) >= 0 and offsets[p]["lag"] == 0
        for p, end in ends.items()
        if end > 0
    )


def judge_share(
    acks: dict[str, dict], records: list[dict], share: dict[str, list[dict]], final: list[dict]
) -> dict[str, Any]:
    """Exact counts for the share group: see SHARE_MUST_BE_ZERO and chaos/README.md."""
    log = {(r["partition"], r["offset"]): r["value"] for r in records}
    deliveries = [(name, ev) for name, evs in share.items() for ev in evs if ev["ev"] == "deliver"]
    accepted_at: dict[tuple[int, int], list[float]] = defaultdict(list)
    failed: Counter[str] = Counter()
    for evs in share.values():
        for ev in evs:
            if ev["ev"] == "accepted":
                for p, o in ev["records"]:
                    accepted_at[(p, o)].append(ev["t"])
            elif ev["ev"] == "accept_err":
                failed[ev["error"]] += len(ev["records"])
    delivered_values = {ev["value"] for _, ev in deliveries}
    never_delivered = sorted(v for v in acks if v not in delivered_values)
    # A delivery after the first successful answer to an ACCEPT of that record.
    after_ack = [
        {"consumer": name, "partition": ev["partition"], "offset": ev["offset"], "t": ev["t"],
         "accepted_at": min(accepted_at[(ev["partition"], ev["offset"])])}
        for name, ev in deliveries
        if accepted_at.get((ev["partition"], ev["offset"]))
        and ev["t"] > min(accepted_at[(ev["partition"], ev["offset"])])
    ]  # fmt: skip
    twice = {f"{p}:{o}": len(ts) for (p, o), ts in accepted_at.items() if len(ts) > 1}
    not_in_log = [
        {"consumer": name, "partition": ev["partition"], "offset": ev["offset"],
         "value": ev["value"], "log_has": log.get((ev["partition"], ev["offset"]))}
        for name, ev in deliveries if log.get((ev["partition"], ev["offset"])) != ev["value"]
    ]  # fmt: skip
    offsets_ev = next((ev for ev in final if ev["ev"] == "share_offsets"), None)
    offsets = {int(p): o for p, o in (offsets_ev or {}).get("offsets", {}).items()}
    # Records the share group has not acknowledged at the end, by the broker: each partition's
    # lag (every record of a partition it has no state for).
    partitions = {p for p, _ in log}
    unaccepted_count = sum(
        offsets[p]["lag"] if p in offsets and offsets[p]["start"] >= 0 else
        sum(1 for q, _ in log if q == p)
        for p in partitions
    )  # fmt: skip
    # Examples: records at or past their start offset without a successful ACCEPT answer.
    unaccepted = sorted(
        place for place in log
        if place[1] >= offsets.get(place[0], {}).get("start", 0) and place not in accepted_at
    )  # fmt: skip
    counts = Counter(ev.get("count") for _, ev in deliveries)
    distinct = {(ev["partition"], ev["offset"]) for _, ev in deliveries}
    return {
        "counts": {
            "share_acked_never_delivered": len(never_delivered),
            "share_redelivered_after_ack": len(after_ack),
            "share_accepted_twice": sum(n - 1 for n in twice.values()),
            "share_delivered_not_in_log": len(not_in_log),
            "share_unaccepted": unaccepted_count,
        },
        "figures": {
            "deliveries": len(deliveries),
            "distinct_delivered": len(distinct),
            "redeliveries": len(deliveries) - len(distinct),
            "delivery_counts": {str(k): n for k, n in sorted(counts.items(), key=str)},
            "accepted": len(accepted_at),
            "accept_failed": dict(sorted(failed.items())),
            # in the log and acknowledged at the end, but no ACCEPT answered as successful:
            # the answer was lost (e.g. the broker killed after writing the state)
            "accepted_unanswered": sum(1 for place in log if place not in accepted_at),
            "poll_errors": dict(
                Counter(
                    ev["error"] for evs in share.values() for ev in evs if ev["ev"] == "share_err"
                )
            ),  # fmt: skip
            "offsets_known": offsets_ev is not None,
        },
        "examples": {
            "share_acked_never_delivered": never_delivered[:20],
            "share_redelivered_after_ack": after_ack[:20],
            "share_accepted_twice": dict(list(twice.items())[:20]),
            "share_delivered_not_in_log": not_in_log[:20],
            "share_unaccepted": [f"{p}:{o}" for p, o in unaccepted[:20]],
        },
    }
