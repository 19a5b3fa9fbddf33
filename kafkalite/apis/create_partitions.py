"""CreatePartitions (key 37), versions 0-3.

Grows topics as Kafka's controller does (ReplicationControlManager.createPartitions), with its
messages: the count must exceed the current one, and manual assignments must give one replica
list per added partition, each naming only this node. `validate_only` checks without growing;
a timeout of 0 or less answers REQUEST_TIMED_OUT, as Kafka's controller does.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import NO_THROTTLE, ApiHandler, RequestContext, make
from kafkalite.apis.create_topics import (
    deadline_passed,
    duplicate_names,
    validate_manual_assignment,
)
from kafkalite.broker.replica_manager import OK, Outcome


def _check_assignments(ctx: RequestContext, assignments: Any, additional: int, rf: int) -> Outcome:
    if len(assignments) != additional:
        return Outcome(
            ErrorCode.invalid_replica_assignment,
            f"Attempted to add {additional} additional partition(s), but only "
            f"{len(assignments)} assignment(s) were specified.",
        )
    for assignment in assignments:
        outcome = validate_manual_assignment(assignment.broker_ids, ctx.broker.node_id, rf)
        if not outcome.ok:
            return outcome
    return OK


def _check(ctx: RequestContext, request_topic: Any) -> Outcome:
    topic = ctx.broker.replica_manager.topics.get(request_topic.name)
    if topic is None:
        return Outcome(ErrorCode.unknown_topic_or_partition)  # Kafka sends no message here
    current = len(topic.partitions)
    count = request_topic.count
    if count == current:
        return Outcome(ErrorCode.invalid_partitions, f"Topic already has {current} partition(s).")
    if count < current:
        return Outcome(
            ErrorCode.invalid_partitions,
            f"The topic {topic.name} currently has {current} partition(s); {count} would not be "
            "an increase.",
        )
    if request_topic.assignments is None:
        return OK
    replication_factor = len(topic.partitions[0].replicas)
    return _check_assignments(
        ctx, request_topic.assignments, count - current, replication_factor
    )


def _grow(ctx: RequestContext, request_topic: Any, validate_only: bool) -> Outcome:
    outcome = _check(ctx, request_topic)
    if not outcome.ok or validate_only:
        return outcome
    return ctx.broker.replica_manager.create_partitions(request_topic.name, request_topic.count)


def _result(ctx: RequestContext, name: str, outcome: Outcome) -> Any:
    return make(
        ctx.schema.CreatePartitionsTopicResult,
        name=name,
        error_code=outcome.error,
        error_message=outcome.message,
    )


def _grow_all(ctx: RequestContext, request: Any) -> tuple[Any, ...]:
    duplicates = duplicate_names(t.name for t in request.topics)
    results = []
    answered: set[str] = set()
    for topic in request.topics:
        if topic.name not in duplicates:
            results.append(_result(ctx, topic.name, _grow(ctx, topic, request.validate_only)))
        elif topic.name not in answered:  # one answer per repeated name, nothing grown
            answered.add(topic.name)
            duplicate = Outcome(ErrorCode.invalid_request, "Duplicate topic name.")
            results.append(_result(ctx, topic.name, duplicate))
    return tuple(results)


def handle(ctx: RequestContext, request: Any) -> Any:
    if deadline_passed(request.timeout):
        timed_out = Outcome(ErrorCode.request_timed_out)
        results = tuple(_result(ctx, topic.name, timed_out) for topic in request.topics)
    else:
        results = _grow_all(ctx, request)
    return make(ctx.schema.CreatePartitionsResponse, throttle_time=NO_THROTTLE, results=results)


API = ApiHandler(api_key=37, min_version=0, max_version=3, handle=handle)
