"""What the topic admin APIs (CreateTopics, CreatePartitions, DeleteTopics) share."""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.broker.admin_manager import OK, Outcome

DUPLICATE_NAME = Outcome(ErrorCode.invalid_request, "Duplicate topic name.")
TIMED_OUT = Outcome(ErrorCode.request_timed_out)


def deadline_passed(timeout: datetime.timedelta) -> bool:
    """Kafka's controller turns the request timeout into a deadline for its event; with 0 or
    less the event expires before it runs: REQUEST_TIMED_OUT for every entry, nothing done."""
    return timeout <= datetime.timedelta(0)


def answer_each_name_once(
    topics: Sequence[Any],
    timeout: datetime.timedelta,
    answer: Callable[[Any], Any],
    refuse: Callable[[str, Outcome], Any],
) -> tuple[Any, ...]:
    """Answer every topic entry, except that a name repeated in the request is refused once
    with INVALID_REQUEST and nothing is done for it, as Kafka's controller does; past the
    deadline every entry is refused with REQUEST_TIMED_OUT (see deadline_passed)."""
    if deadline_passed(timeout):
        return tuple(refuse(topic.name, TIMED_OUT) for topic in topics)
    counts = Counter(topic.name for topic in topics)
    results, refused = [], set()
    for topic in topics:
        if counts[topic.name] == 1:
            results.append(answer(topic))
        elif topic.name not in refused:
            refused.add(topic.name)
            results.append(refuse(topic.name, DUPLICATE_NAME))
    return tuple(results)


def validate_manual_assignment(
    replicas: Sequence[int], registered: Collection[int], replication_factor: int | None
) -> Outcome:
    """Kafka's validateManualPartitionAssignment against the registered (live) brokers."""
    if not replicas:
        return Outcome(
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes an empty replica list.",
        )
    previous = None
    for broker_id in sorted(replicas):  # sorted, so the message names the lowest offender
        if broker_id not in registered:
            return Outcome(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes broker {broker_id}, but no such "
                "broker is registered.",
            )
        if broker_id == previous:
            return Outcome(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes the broker {broker_id} more than once.",
            )
        previous = broker_id
    if replication_factor is not None and len(replicas) != replication_factor:
        return Outcome(
            ErrorCode.invalid_replica_assignment,
            f"The manual partition assignment includes a partition with {len(replicas)} "
            "replica(s), but this is not consistent with previous partitions, which have "
            f"{replication_factor} replica(s).",
        )
    return OK
