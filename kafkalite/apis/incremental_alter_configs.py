"""IncrementalAlterConfigs (key 44), versions 0-1.

TOPIC resources (type 2): SET, DELETE, APPEND and SUBTRACT (the last two on list configs only)
applied to the topic's overrides, the result validated as a whole and stored through the
admin manager (the replica manager then updates the partition logs); `validate_only` stops
before storing.
Checks and messages follow Kafka's ConfigAdminManager.preprocess and the controller's
ConfigurationControlManager. BROKER resources (type 4): this broker's id or "" (the cluster-wide
default) get the same operations on their dynamic configs (broker/dynamic_config.py), validated
here and stored by the controller (broker/controller_api.py), which has every broker they
concern apply them: this one at once. GROUP resources (type 32): the share group configs of
any group id, existing or not (broker/group_configs.py), validated as a whole within the
broker's `group.share.*` bounds and stored by the group config store (a single node's metadata
file, a cluster's ZooKeeper).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.apis.config_authorization import config_denied
from kafkalite.broker.admin_manager import OK, VIEW_IS_FIXED, Outcome, topic_name_error
from kafkalite.broker.dynamic_config import DEFAULT_ENTITY, DynamicConfigError
from kafkalite.broker.group_configs import (
    NOT_STORED,
    InvalidGroupConfig,
    validate_group_configs,
)
from kafkalite.broker.topic_config import (
    TOPIC_CONFIGS,
    InvalidConfig,
    check_remote_storage_kept,
    validate_topic_configs,
)
from kafkalite.config import TYPE_LIST
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_GROUP = 32
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {OP_SET: "SET", OP_DELETE: "DELETE", OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}


def _list_parts(value: str | None) -> list[str]:
    return [part for part in (value or "").split(",") if part]


def _apply_list_op(overrides: dict[str, str], config: Any) -> Outcome:
    definition = TOPIC_CONFIGS.get(config.name)
    if definition is None or definition.config_type != TYPE_LIST:
        return Outcome(
            ErrorCode.invalid_config,
            f"Can't {_OP_NAMES[config.config_operation]} to key {config.name} because its type "
            "is not LIST.",
        )
    # An absent override starts from the default, as in Kafka.
    parts = _list_parts(overrides.get(config.name, definition.default))
    for value in config.value.split(","):
        if config.config_operation == OP_APPEND and value not in parts:
            parts.append(value)
        elif config.config_operation == OP_SUBTRACT and value in parts:
            parts.remove(value)
    overrides[config.name] = ",".join(parts)
    return OK


def _apply(overrides: dict[str, str], configs: Any) -> tuple[Outcome, dict[str, str]]:
    """The topic's overrides after the operations, not yet validated."""
    result = dict(overrides)
    for config in configs:
        if config.config_operation == OP_SET:
            result[config.name] = config.value
        elif config.config_operation == OP_DELETE:
            result.pop(config.name, None)
        else:
            outcome = _apply_list_op(result, config)
            if not outcome.ok:
                return outcome, {}
    return OK, result


def alter_topic(
    ctx: RequestContext,
    name: str,
    change: Callable[[dict[str, str]], tuple[Outcome, dict[str, str]]],
    validate_only: bool,
) -> Outcome:
    """Apply `change` to the topic's overrides, validate the result and store it.

    Shared with the legacy AlterConfigs, whose change replaces every override."""
    if not name:
        return Outcome(ErrorCode.invalid_request, "Default topic resources are not allowed.")
    reason = topic_name_error(name)
    if reason:
        return Outcome(ErrorCode.invalid_topic_exception, reason)
    if ctx.broker.replica_manager.view(name) is not None:
        return Outcome(ErrorCode.invalid_config, VIEW_IS_FIXED.format(name=name))
    topic = ctx.broker.replica_manager.topics.get(name)
    current = topic.metadata.configs if topic is not None else {}
    outcome, altered = change(current)
    if not outcome.ok:
        return outcome
    try:
        normalised = validate_topic_configs(altered, ctx.broker.config)
        check_remote_storage_kept(current, normalised)
    except InvalidConfig as exc:
        return Outcome(ErrorCode.invalid_config, str(exc))
    # Kafka validates the configs before it looks for the topic.
    if topic is None:
        return Outcome(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
    if validate_only:
        return OK
    return ctx.broker.admin_manager.set_topic_configs(name, normalised)


async def alter_broker(
    ctx: RequestContext,
    name: str,
    change: Callable[[dict[str, str]], tuple[Outcome, dict[str, str]]],
    validate_only: bool,
) -> Outcome:
    """Apply `change` to the dynamic configs of this broker (`name` its id) or of the cluster
    default (`name` ""), validate them and have the controller store and apply them."""
    if name:
        try:
            node_id = int(name)
        except ValueError:
            return Outcome(
                ErrorCode.invalid_request, f"Node id must be an integer, but it is: {name}"
            )
        if node_id != ctx.broker.node_id:
            return Outcome(
                ErrorCode.invalid_request,
                f"Unexpected broker id, expected {ctx.broker.node_id}, but received {name}",
            )
    dynamic = ctx.broker.dynamic
    if dynamic is None:
        return Outcome(ErrorCode.invalid_request, "dynamic broker configs are not available")
    entity = name or DEFAULT_ENTITY
    outcome, altered = change(dynamic.configs(entity))
    if not outcome.ok:
        return outcome
    try:
        dynamic.validate(entity, altered)
    except DynamicConfigError as exc:
        return Outcome(ErrorCode.invalid_request, str(exc))  # as Kafka 4's controller words it
    if validate_only:
        return OK
    stored = await ctx.broker.controller.alter_broker_configs(entity, altered)
    return Outcome(stored.error, stored.message)


async def alter_group(
    ctx: RequestContext,
    name: str,
    change: Callable[[dict[str, str]], tuple[Outcome, dict[str, str]]],
    validate_only: bool,
) -> Outcome:
    """Apply `change` to the group's configs, validate them and store them."""
    if not name:
        return Outcome(ErrorCode.invalid_request, "Group name must not be empty")
    manager = ctx.broker.group_configs
    if manager is None or manager.store is None:
        return Outcome(ErrorCode.invalid_request, NOT_STORED)
    outcome, altered = change(manager.overrides(name))
    if not outcome.ok:
        return outcome
    try:
        normalised = validate_group_configs(altered, ctx.broker.config)
        if not validate_only:
            await manager.set(name, normalised)
    except InvalidGroupConfig as exc:
        return Outcome(ErrorCode.invalid_config, str(exc))
    return OK


def _check_entries(resource: Any) -> Outcome:
    """ConfigAdminManager.preprocess checks common to every resource type."""
    names = [config.name for config in resource.configs]
    if len(set(names)) != len(names):
        return Outcome(ErrorCode.invalid_request, "Error due to duplicate config keys")
    for config in resource.configs:
        if config.config_operation not in _OP_NAMES:
            return Outcome(
                ErrorCode.invalid_request, f"Unknown operations type {config.config_operation}"
            )
    nulls = [
        c.name for c in resource.configs if c.config_operation != OP_DELETE and c.value is None
    ]
    if nulls:
        return Outcome(
            ErrorCode.invalid_request, f"Null value not supported for : {', '.join(nulls)}"
        )
    return OK


async def alter_resource(
    ctx: RequestContext,
    resource: Any,
    change: Callable[[dict[str, str]], tuple[Outcome, dict[str, str]]],
    validate_only: bool,
) -> Outcome:
    """A TOPIC, BROKER or GROUP resource altered by `change` (see alter_topic, alter_broker,
    alter_group)."""
    denied = config_denied(
        ctx, resource.resource_type, resource.resource_name, AclOperation.ALTER_CONFIGS
    )
    if denied is not None:
        return denied
    if resource.resource_type == RESOURCE_TOPIC:
        return alter_topic(ctx, resource.resource_name, change, validate_only)
    if resource.resource_type == RESOURCE_GROUP:
        return await alter_group(ctx, resource.resource_name, change, validate_only)
    if resource.resource_type == RESOURCE_BROKER:
        return await alter_broker(ctx, resource.resource_name, change, validate_only)
    return Outcome(ErrorCode.invalid_request, f"Unsupported resource type {resource.resource_type}")


async def _alter(ctx: RequestContext, resource: Any, validate_only: bool) -> Outcome:
    outcome = _check_entries(resource)
    if not outcome.ok:
        return outcome
    return await alter_resource(
        ctx, resource, lambda current: _apply(current, resource.configs), validate_only
    )


def _resource_response(ctx: RequestContext, resource: Any, outcome: Outcome) -> Any:
    return make(
        ctx.schema.AlterConfigsResourceResponse,
        error_code=outcome.error,
        error_message=outcome.message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
    )


async def answer_each_resource_once(
    ctx: RequestContext, resources: Any, alter: Callable[[Any], Awaitable[Outcome]]
) -> tuple[Any, ...]:
    """One response per resource; a resource named more than once is refused each time and
    left as it is. Shared with the legacy AlterConfigs."""
    counts = Counter((r.resource_type, r.resource_name) for r in resources)
    responses = []
    for resource in resources:
        if counts[resource.resource_type, resource.resource_name] > 1:
            outcome = Outcome(ErrorCode.invalid_request, "Each resource must appear at most once.")
        else:
            outcome = await alter(resource)
        responses.append(_resource_response(ctx, resource, outcome))
    return tuple(responses)


async def handle(ctx: RequestContext, request: Any) -> Any:
    responses = await answer_each_resource_once(
        ctx, request.resources, lambda resource: _alter(ctx, resource, request.validate_only)
    )
    return make(
        ctx.schema.IncrementalAlterConfigsResponse, throttle_time=NO_THROTTLE, responses=responses
    )


API = ApiHandler(api_key=44, min_version=0, max_version=1, handle=handle, is_async=True)
