"""CreatePartitions (key 37), versions 0-3.

Grows topics as Kafka's controller does (ReplicationControlManager.createPartitions), with its
messages: the count must exceed the current one, and manual assignments must give one replica
list per added partition, each naming only this node. `validate_only` checks without growing;
a timeout of 0 or less answers REQUEST_TIMED_OUT, as Kafka's controller does. Partition caps:
broker/partition_limits.py (POLICY_VIOLATION).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.apis.quota_throttle import MutationQuota, mutation_quota
from kafkalite.apis.topic_admin import answer_each_name_once, validate_manual_assignment
from kafkalite.broker import partition_limits
from kafkalite.broker.admin_manager import OK, Outcome
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation, ResourceType


def _check_assignments(
    ctx: RequestContext, assignments: Any, additional: int, replication_factor: int
) -> Outcome:
    if len(assignments) != additional:
        return Outcome(
            ErrorCode.invalid_replica_assignment,
            f"Attempted to add {additional} additional partition(s), but only "
            f"{len(assignments)} assignment(s) were specified.",
        )
    for assignment in assignments:
        registered = {b.broker_id for b in ctx.broker.metadata.brokers()}
        outcome = validate_manual_assignment(assignment.broker_ids, registered, replication_factor)
        if not outcome.ok:
            return outcome
    return OK


def _check(ctx: RequestContext, request_topic: Any) -> Outcome:
    outcome = ctx.broker.admin_manager.check_new_partitions(request_topic.name, request_topic.count)
    if not outcome.ok or request_topic.assignments is None:
        return outcome
    meta = ctx.broker.metadata.topics[request_topic.name]
    first = ctx.broker.metadata.partition_state(request_topic.name, 0)
    added = request_topic.count - meta.num_partitions
    replication_factor = len(first.replicas) if first is not None else meta.replication_factor
    return _check_assignments(
        ctx, request_topic.assignments, added, replication_factor=replication_factor
    )


def _denied(ctx: RequestContext, name: str) -> bool:
    """ControllerApis: DESCRIBE on the topic, then (if it exists) ALTER."""
    if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
        return True
    exists = name in ctx.broker.metadata.topics
    return exists and not ctx.authorized(AclOperation.ALTER, ResourceType.TOPIC, name)


def _grow(
    ctx: RequestContext, request_topic: Any, validate_only: bool, quota: MutationQuota
) -> Outcome:
    if _denied(ctx, request_topic.name):
        return Outcome(ErrorCode.topic_authorization_failed)
    outcome = _check(ctx, request_topic)
    if not outcome.ok or validate_only:
        return outcome
    current = ctx.broker.metadata.topics[request_topic.name].num_partitions
    if (throttled := quota.record(request_topic.count - current)) is not None:
        return throttled
    return ctx.broker.admin_manager.create_partitions(request_topic.name, request_topic.count)


def _result(ctx: RequestContext, name: str, outcome: Outcome) -> Any:
    return make(
        ctx.schema.CreatePartitionsTopicResult,
        name=name,
        error_code=outcome.error,
        error_message=outcome.message,
    )


def _partitions_added(ctx: RequestContext, request: Any) -> int:
    topics = ctx.broker.replica_manager.metadata.topics
    return sum(
        max(topic.count - topics[topic.name].num_partitions, 0)
        for topic in request.topics
        if topic.name in topics
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    refusal = partition_limits.check_request(ctx.broker.config, _partitions_added(ctx, request))
    if refusal:  # the whole request, as CreateTopics
        outcome = Outcome(partition_limits.REFUSAL, refusal)
        results = tuple(_result(ctx, topic.name, outcome) for topic in request.topics)
        return make(ctx.schema.CreatePartitionsResponse, throttle_time=NO_THROTTLE, results=results)
    quota = mutation_quota(ctx, strict_since=3)
    results = answer_each_name_once(
        request.topics,
        request.timeout,
        lambda topic: _result(ctx, topic.name, _grow(ctx, topic, request.validate_only, quota)),
        lambda name, refusal: _result(ctx, name, refusal),
    )
    quota.throttle()
    return make(ctx.schema.CreatePartitionsResponse, throttle_time=NO_THROTTLE, results=results)


API = ApiHandler(api_key=37, min_version=0, max_version=3, handle=handle)
