"""CreateTopics (key 19), versions 2-7.

Follows Kafka's controller (ControllerApis.createTopics, ReplicationControlManager.createTopic):
checks run in Kafka's order (duplicate names, topic name, existence, configs, manual assignment,
partition count and replication factor) with Kafka's messages. -1 partitions or replication
factor mean the broker defaults; a manual assignment may name registered brokers only (and is
then the placement). v5+ results carry the partition count, replication factor and every
effective topic config; v7 the topic id.
`validate_only` runs every check and answers as for a creation, but creates nothing. A timeout
of 0 or less answers REQUEST_TIMED_OUT, as Kafka's controller does. A request adding more than
kafkalite.max.partitions.per.request partitions is refused whole with POLICY_VIOLATION
(see broker/partition_limits.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.apis.quota_throttle import MutationQuota, mutation_quota
from kafkalite.apis.topic_admin import (
    TIMED_OUT,
    answer_each_name_once,
    validate_manual_assignment,
)
from kafkalite.broker import partition_limits, views
from kafkalite.broker.admin_manager import OK, Outcome, topic_name_error
from kafkalite.broker.topic_config import (
    SOURCE_TOPIC,
    TOPIC_CONFIGS,
    InvalidConfig,
    effective_value,
    validate_topic_configs,
)
from kafkalite.protocol.entities import NO_THROTTLE, has_field, make
from kafkalite.security.acl import AclOperation, ResourceType

log = logging.getLogger(__name__)
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
USE_DEFAULT = -1


@dataclass(frozen=True, slots=True)
class TopicPlan:
    """What a valid CreateTopics entry resolves to."""

    num_partitions: int
    replication_factor: int
    configs: dict[str, str]
    assignment: list[list[int]] | None = None  # manual: replicas per partition index


DENIED = Outcome(ErrorCode.topic_authorization_failed, "Authorization failed.")


def _check_assignments(ctx: RequestContext, topic: Any) -> tuple[Outcome, list[list[int]]]:
    """Validate a manual assignment; returns (outcome, replicas by partition index)."""
    if topic.replication_factor != USE_DEFAULT:
        return Outcome(
            ErrorCode.invalid_request,
            "A manual partition assignment was specified, but replication factor was not set "
            "to -1.",
        ), []
    if topic.num_partitions != USE_DEFAULT:
        return Outcome(
            ErrorCode.invalid_request,
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        ), []
    registered = {b.broker_id for b in ctx.broker.metadata.brokers()}
    seen: dict[int, list[int]] = {}
    replication_factor = None
    for assignment in topic.assignments:
        if assignment.partition_index in seen:
            return Outcome(
                ErrorCode.invalid_replica_assignment,
                "Found multiple manual partition assignments for partition "
                f"{assignment.partition_index}",
            ), []
        seen[assignment.partition_index] = list(assignment.broker_ids)
        outcome = validate_manual_assignment(assignment.broker_ids, registered, replication_factor)
        if not outcome.ok:
            return outcome, []
        replication_factor = len(assignment.broker_ids)
    if set(seen) != set(range(len(seen))):
        return Outcome(
            ErrorCode.invalid_replica_assignment,
            "partitions should be a consecutive 0-based integer sequence",
        ), []
    return OK, [seen[index] for index in range(len(seen))]


def _check_configs(ctx: RequestContext, topic: Any) -> tuple[Outcome, dict[str, str]]:
    nulls = [c.name for c in topic.configs if c.value is None]
    if nulls:
        return Outcome(
            ErrorCode.invalid_config,
            f"Null value not supported for topic configs: {','.join(nulls)}",
        ), {}
    try:
        return OK, validate_topic_configs(
            {c.name: c.value for c in topic.configs}, ctx.broker.config
        )
    except InvalidConfig as exc:
        return Outcome(ErrorCode.invalid_config, str(exc)), {}


def _resolve_counts(ctx: RequestContext, topic: Any) -> tuple[Outcome, int, int]:
    """(outcome, partitions, replication factor), defaults applied, for automatic placement."""
    if topic.assignments:
        outcome, assignment = _check_assignments(ctx, topic)
        return outcome, len(assignment), len(assignment[0]) if assignment else 0
    if topic.replication_factor < USE_DEFAULT or topic.replication_factor == 0:
        return (
            Outcome(
                ErrorCode.invalid_replication_factor,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            ),
            0,
            0,
        )
    if topic.num_partitions < USE_DEFAULT or topic.num_partitions == 0:
        return (
            Outcome(
                ErrorCode.invalid_partitions,
                "Number of partitions was set to an invalid non-positive value.",
            ),
            0,
            0,
        )
    config = ctx.broker.config
    partitions = topic.num_partitions
    if partitions == USE_DEFAULT:
        partitions = config.int("num.partitions")
    replication = topic.replication_factor
    if replication == USE_DEFAULT:
        replication = config.int("default.replication.factor")
    return OK, partitions, replication


def _plan_view(ctx: RequestContext, topic: Any) -> tuple[Outcome, TopicPlan | None]:
    """A view: no manual assignment; its source's partitions and replication factor."""
    if topic.assignments:
        return Outcome(
            ErrorCode.invalid_request,
            "A view has the partitions of its source: it takes no replica assignment.",
        ), None
    configs = {c.name: c.value for c in topic.configs}
    outcome, normalised = ctx.broker.admin_manager.check_new_topic(
        topic.name, topic.num_partitions, topic.replication_factor, configs
    )
    if not outcome.ok:
        return outcome, None
    source = ctx.broker.metadata.topics[normalised[views.VIEW_SOURCE]]
    return OK, TopicPlan(source.num_partitions, source.replication_factor, normalised)


def plan_topic(ctx: RequestContext, topic: Any) -> tuple[Outcome, TopicPlan | None]:
    """Every check of one entry, in Kafka's order."""
    if topic.name == CLUSTER_METADATA_TOPIC:
        return Outcome(
            ErrorCode.invalid_request,
            f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited.",
        ), None
    reason = topic_name_error(topic.name)
    if reason:
        return Outcome(ErrorCode.invalid_topic_exception, reason), None
    if topic.name in ctx.broker.replica_manager.topics:
        return Outcome(
            ErrorCode.topic_already_exists, f"Topic '{topic.name}' already exists."
        ), None
    if views.is_view_request({c.name: c.value for c in topic.configs}):
        return _plan_view(ctx, topic)
    outcome, configs = _check_configs(ctx, topic)
    if not outcome.ok:
        return outcome, None
    outcome, partitions, replication = _resolve_counts(ctx, topic)
    if not outcome.ok:
        return outcome, None
    # The admin manager has the last word (replication beyond the registered brokers).
    outcome, configs = ctx.broker.admin_manager.check_new_topic(
        topic.name, partitions, replication, configs
    )
    if not outcome.ok:
        return outcome, None
    assignment = _check_assignments(ctx, topic)[1] if topic.assignments else None
    return OK, TopicPlan(partitions, replication, configs, assignment)


def _config_entries(ctx: RequestContext, overrides: dict[str, str]) -> tuple[Any, ...]:
    if not has_field(ctx.schema.CreatableTopicResult, "configs"):
        return ()  # before v5
    if views.is_view_request(overrides):  # a view's configs are its definition only
        return tuple(
            make(
                ctx.schema.CreatableTopicConfigs,
                name=name,
                value=overrides[name],
                read_only=True,
                config_source=SOURCE_TOPIC,
                is_sensitive=False,
            )
            for name in views.VIEW_CONFIGS
        )
    entries = []
    for name in sorted(TOPIC_CONFIGS):
        value, source = effective_value(ctx.broker.config, overrides, name)
        entries.append(
            make(
                ctx.schema.CreatableTopicConfigs,
                name=name,
                value=value,
                read_only=False,
                config_source=source,
                is_sensitive=False,
            )
        )
    return tuple(entries)


def _success(ctx: RequestContext, name: str, topic_id: Any, plan: TopicPlan) -> Any:
    # The configs only for a principal that may DESCRIBE_CONFIGS the topic (KafkaApis).
    shown = ctx.authorized(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, name, False)
    return make(
        ctx.schema.CreatableTopicResult,
        name=name,
        topic_id=topic_id,
        error_code=ErrorCode.none,
        error_message=None,
        topic_config_error_code=ErrorCode.none if shown else ErrorCode.topic_authorization_failed,
        num_partitions=plan.num_partitions,
        replication_factor=plan.replication_factor,
        configs=_config_entries(ctx, plan.configs) if shown else (),
    )


def _failure(ctx: RequestContext, name: str, outcome: Outcome) -> Any:
    return make(
        ctx.schema.CreatableTopicResult,
        name=name,
        topic_id=None,  # the zero UUID on the wire
        error_code=outcome.error,
        error_message=outcome.message,
        num_partitions=-1,
        replication_factor=-1,
        configs=(),
    )


def _may_create(ctx: RequestContext, name: str) -> bool:
    """KafkaApis: CREATE on the cluster, or else on the topic."""
    return ctx.authorized_cluster(AclOperation.CREATE, log_denied=False) or ctx.authorized(
        AclOperation.CREATE, ResourceType.TOPIC, name
    )


def _create(ctx: RequestContext, topic: Any, validate_only: bool, quota: MutationQuota) -> Any:
    if not _may_create(ctx, topic.name):
        return _failure(ctx, topic.name, DENIED)
    outcome, plan = plan_topic(ctx, topic)
    if plan is None:
        return _failure(ctx, topic.name, outcome)
    if validate_only:
        # Kafka answers with a fresh random id it then discards; the zero id is more honest.
        return _success(ctx, topic.name, None, plan)
    if (throttled := quota.record(plan.num_partitions)) is not None:
        return _failure(ctx, topic.name, throttled)
    outcome, created = ctx.broker.admin_manager.create_topic(
        topic.name, plan.num_partitions, plan.replication_factor, plan.configs, plan.assignment
    )
    if created is None:
        return _failure(ctx, topic.name, outcome)
    log.info(
        "created topic %s: %d partition(s), replication factor %d, configs %s",
        topic.name,
        plan.num_partitions,
        plan.replication_factor,
        plan.configs,
    )
    return _success(ctx, topic.name, created.topic_id, plan)


def _has_leaders(ctx: RequestContext, name: str) -> bool:
    metadata = ctx.broker.metadata
    topic = metadata.topics.get(name)
    states = metadata.partition_states(name)
    return (
        topic is not None
        and len(states) == topic.num_partitions
        and all(s.leader >= 0 for s in states)
    )


def _partitions_requested(ctx: RequestContext, request: Any) -> int:
    """Kafka's validateTotalNumberOfPartitions: an upper bound, before any other check."""
    total = 0
    for topic in request.topics:
        if topic.assignments:
            total += len(topic.assignments)
        elif topic.num_partitions == USE_DEFAULT:
            total += ctx.broker.config.int("num.partitions")
        elif topic.num_partitions > 0:
            total += topic.num_partitions
    return total


async def handle(ctx: RequestContext, request: Any) -> Any:
    refusal = partition_limits.check_request(ctx.broker.config, _partitions_requested(ctx, request))
    if refusal:  # the whole request, as Kafka's controller
        outcome = Outcome(partition_limits.REFUSAL, refusal)
        results = tuple(_failure(ctx, topic.name, outcome) for topic in request.topics)
        return make(ctx.schema.CreateTopicsResponse, throttle_time=NO_THROTTLE, topics=results)
    quota = mutation_quota(ctx, strict_since=6)
    results = answer_each_name_once(
        request.topics,
        request.timeout,
        lambda topic: _create(ctx, topic, request.validate_only, quota),
        lambda name, refusal: _failure(ctx, name, refusal),
    )
    quota.throttle()
    created = [r.name for r in results if r.error_code == ErrorCode.none]
    if created and not request.validate_only:
        # In a cluster the controller assigns the states: wait for them, bounded (Kafka's
        # DelayedCreatePartitions); the single node has them already.
        # Past the timeout a topic still missing leaders answers REQUEST_TIMED_OUT, as Kafka.
        timeout_s = max(request.timeout.total_seconds(), 0.0)
        if not await ctx.broker.metadata.wait_for_partitions(created, timeout_s):
            results = tuple(
                _failure(ctx, r.name, TIMED_OUT) if not _has_leaders(ctx, r.name) else r
                for r in results
            )
    return make(ctx.schema.CreateTopicsResponse, throttle_time=NO_THROTTLE, topics=results)


API = ApiHandler(api_key=19, min_version=2, max_version=7, handle=handle, is_async=True)
