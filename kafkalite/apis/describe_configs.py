"""DescribeConfigs (key 32), versions 1-4.

TOPIC resources (type 2) list every topic config with its effective value and source (topic
override, broker setting, default); BROKER resources (type 4) named after this node list the
broker properties that have a value, from the highest level that sets it: DYNAMIC_BROKER_CONFIG,
DYNAMIC_DEFAULT_BROKER_CONFIG (broker/dynamic_config.py), STATIC_BROKER_CONFIG, DEFAULT_CONFIG;
the levels below are its synonyms. Properties Kafka cannot update dynamically are read-only.
As in Kafka's ConfigHelper, the cluster-default broker resource ("") lists the dynamic cluster
defaults; synonyms come only with `include_synonyms`, documentation only with
`include_documentation`, and `configuration_keys` filters by name. GROUP resources (type 32)
list the share group configs of any group id (broker/group_configs.py): a group's own value
(GROUP_CONFIG), else its broker synonym's, else Kafka's default.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.apis.config_authorization import config_denied
from kafkalite.broker import views
from kafkalite.broker.admin_manager import Outcome, topic_name_error
from kafkalite.broker.dynamic_config import (
    SOURCE_DYNAMIC_DEFAULT,
    base_property,
    is_dynamic,
)
from kafkalite.broker.group_configs import GROUP_CONFIGS
from kafkalite.broker.group_configs import effective_value as group_value
from kafkalite.broker.topic_config import (
    SOURCE_DEFAULT,
    SOURCE_STATIC_BROKER,
    SOURCE_TOPIC,
    TOPIC_CONFIGS,
    TopicConfigDef,
    broker_synonyms,
    effective_value,
)
from kafkalite.config import PROPERTIES, TYPE_STRING, is_password
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_GROUP = 32
SOURCE_GROUP = 8  # Kafka's ConfigSource.GROUP_CONFIG


@dataclass(frozen=True, slots=True)
class _Flags:
    """What the request asks to include."""

    synonyms: bool
    documentation: bool


def _synonym(ctx: RequestContext, name: str, value: str | None, source: int) -> Any:
    return make(ctx.schema.DescribeConfigsSynonym, name=name, value=value, source=source)


def _entry(
    ctx: RequestContext,
    name: str,
    value: str | None,
    source: int,
    *,
    read_only: bool,
    sensitive: bool = False,
    synonyms: tuple[Any, ...],
    config_type: int,
    documentation: str | None,
) -> Any:
    return make(
        ctx.schema.DescribeConfigsResourceResult,
        name=name,
        value=value,
        read_only=read_only,
        config_source=source,
        is_sensitive=sensitive,
        synonyms=synonyms,
        config_type=config_type,
        documentation=documentation,
    )


def _default_synonym(ctx: RequestContext, definition: TopicConfigDef, chain: Iterable[str]) -> Any:
    for name in chain:
        prop = PROPERTIES.get(name)
        if prop is not None and prop.default is not None:
            return _synonym(ctx, name, prop.default, SOURCE_DEFAULT)
    name = definition.broker_synonym or definition.name
    return _synonym(ctx, name, definition.default, SOURCE_DEFAULT)


def _topic_synonyms(
    ctx: RequestContext, definition: TopicConfigDef, overrides: dict[str, str]
) -> tuple[Any, ...]:
    """Topic override, then each broker property that is set, then the default."""
    synonyms = []
    if definition.name in overrides:
        synonyms.append(_synonym(ctx, definition.name, overrides[definition.name], SOURCE_TOPIC))
    chain = broker_synonyms(definition)
    for name in chain:
        for value, source in _layers(ctx, name):
            if source != SOURCE_DEFAULT:
                synonyms.append(_synonym(ctx, name, value, source))
    synonyms.append(_default_synonym(ctx, definition, chain))
    return tuple(synonyms)


def _broker_source(ctx: RequestContext, definition: TopicConfigDef) -> int:
    for name in broker_synonyms(definition):
        for _, source in _layers(ctx, name):
            if source != SOURCE_DEFAULT:
                return source
    return SOURCE_STATIC_BROKER


def _topic_entries(ctx: RequestContext, overrides: dict[str, str], flags: _Flags) -> list[Any]:
    entries = []
    for name in sorted(TOPIC_CONFIGS):
        definition = TOPIC_CONFIGS[name]
        value, source = effective_value(ctx.broker.config, overrides, name)
        if source == SOURCE_STATIC_BROKER:  # or a dynamic broker config: the highest level
            source = _broker_source(ctx, definition)
        synonyms = _topic_synonyms(ctx, definition, overrides) if flags.synonyms else ()
        entries.append(
            _entry(
                ctx,
                name,
                value,
                source,
                read_only=False,
                synonyms=synonyms,
                config_type=definition.config_type,
                documentation=None,  # no topic docs kept
            )
        )
    return entries


def _describe_topic(ctx: RequestContext, name: str, flags: _Flags) -> tuple[Outcome, list[Any]]:
    reason = topic_name_error(name)
    if reason:
        return Outcome(ErrorCode.invalid_topic_exception, reason), []
    topic = ctx.broker.metadata.topics.get(name)  # any topic of the cluster, hosted here or not
    if topic is None:
        return Outcome(ErrorCode.unknown_topic_or_partition), []  # Kafka sends no message
    if views.is_view(topic):
        return Outcome(), _view_entries(ctx, topic.configs, flags)
    return Outcome(), _topic_entries(ctx, topic.configs, flags)


def _view_entries(ctx: RequestContext, configs: dict[str, str], flags: _Flags) -> list[Any]:
    """A view's definition, read-only (fixed at creation); it has no log configs."""
    return [
        _entry(
            ctx,
            name,
            configs[name],
            SOURCE_TOPIC,
            read_only=True,
            synonyms=(_synonym(ctx, name, configs[name], SOURCE_TOPIC),) if flags.synonyms else (),
            config_type=TYPE_STRING,
            documentation=None,
        )
        for name in views.VIEW_CONFIGS
    ]


def _layers(ctx: RequestContext, name: str) -> list[tuple[str, int]]:
    """(value, source) of each level that sets a broker property, highest precedence first:
    dynamic per broker, dynamic cluster default, static, default."""
    dynamic = ctx.broker.dynamic
    if dynamic is not None:
        return dynamic.layers(name)
    config = ctx.broker.config
    found = [(config.raw[name].strip(), SOURCE_STATIC_BROKER)] if name in config.raw else []
    default = PROPERTIES[name].default if name in PROPERTIES else None
    return found + ([(default, SOURCE_DEFAULT)] if default is not None else [])


def _listed_layers(ctx: RequestContext, name: str) -> list[tuple[str | None, int]]:
    """As Kafka lists a broker's configs: every property, one without a value at any level
    (log.retention.ms, whose default comes from log.retention.hours) as a null default."""
    return list(_layers(ctx, name)) or [(None, SOURCE_DEFAULT)]


def _broker_entry(
    ctx: RequestContext, name: str, layers: Sequence[tuple[str | None, int]], flags: _Flags
) -> Any:
    prop = PROPERTIES[base_property(name)]
    secret = is_password(name)  # Kafka never sends a password's value
    value, source = layers[0]
    return _entry(
        ctx,
        name,
        None if secret else value,
        source,
        read_only=not is_dynamic(name),  # Kafka: what cannot be updated dynamically
        sensitive=secret,
        synonyms=(
            tuple(_synonym(ctx, name, None if secret else v, s) for v, s in layers if v is not None)
            if flags.synonyms
            else ()
        ),
        config_type=prop.config_type,
        documentation=prop.doc if flags.documentation else None,
    )


def _broker_names(ctx: RequestContext) -> list[str]:
    """Every property, then the per-listener dynamic ones set at some level
    (`listener.name.<l>.max.connections`, ...), as Kafka lists a broker's configs."""
    scoped = (n for n in ctx.broker.config.raw if n not in PROPERTIES and is_dynamic(n))
    return sorted(PROPERTIES) + sorted(scoped)


def _broker_entries(ctx: RequestContext, flags: _Flags) -> list[Any]:
    return [
        _broker_entry(ctx, name, _listed_layers(ctx, name), flags) for name in _broker_names(ctx)
    ]


def _default_entries(ctx: RequestContext, flags: _Flags) -> list[Any]:
    """The cluster-wide default resource (""): its dynamic configs only, each its own only
    synonym, as Kafka lists them."""
    entries = []
    for name in _broker_names(ctx):
        layers = [(v, s) for v, s in _layers(ctx, name) if s == SOURCE_DYNAMIC_DEFAULT]
        if layers:
            entries.append(_broker_entry(ctx, name, layers, flags))
    return entries


def _describe_broker(ctx: RequestContext, name: str, flags: _Flags) -> tuple[Outcome, list[Any]]:
    if name == "":
        return Outcome(), _default_entries(ctx, flags)
    try:
        broker_id = int(name)
    except ValueError:
        return Outcome(
            ErrorCode.invalid_request, f"Broker id must be an integer, but it is: {name}"
        ), []
    if broker_id != ctx.broker.node_id:
        return Outcome(
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {ctx.broker.node_id} or empty string, but received "
            f"{name}",
        ), []
    return Outcome(), _broker_entries(ctx, flags)


def _group_entry(ctx: RequestContext, name: str, overrides: dict[str, str], flags: _Flags) -> Any:
    """As Kafka's ConfigHelper.createGroupConfigEntry."""
    definition = GROUP_CONFIGS[name]
    synonym = definition.broker_synonym
    if synonym is not None:
        synonyms = [_synonym(ctx, synonym, v, s) for v, s in _layers(ctx, synonym)]
    else:
        synonyms = [_synonym(ctx, name, definition.default, SOURCE_DEFAULT)]
    if name in overrides:
        synonyms.insert(0, _synonym(ctx, name, overrides[name], SOURCE_GROUP))
    return _entry(
        ctx,
        name,
        group_value(ctx.broker.config, overrides, name),
        synonyms[0].source if synonyms else SOURCE_DEFAULT,
        read_only=False,
        synonyms=tuple(synonyms) if flags.synonyms else (),
        config_type=definition.config_type,
        documentation=definition.doc if flags.documentation else None,
    )


def _describe_group(ctx: RequestContext, name: str, flags: _Flags) -> tuple[Outcome, list[Any]]:
    if not name:
        return Outcome(ErrorCode.invalid_request, "Group name must not be empty"), []
    manager = ctx.broker.group_configs
    overrides = manager.overrides(name) if manager is not None else {}
    return Outcome(), [_group_entry(ctx, n, overrides, flags) for n in sorted(GROUP_CONFIGS)]


def _describe(ctx: RequestContext, resource: Any, flags: _Flags) -> Any:
    name = resource.resource_name
    denied = config_denied(ctx, resource.resource_type, name, AclOperation.DESCRIBE_CONFIGS)
    entries: list[Any]
    if denied is not None:
        outcome, entries = denied, []
    elif resource.resource_type == RESOURCE_TOPIC:
        outcome, entries = _describe_topic(ctx, name, flags)
    elif resource.resource_type == RESOURCE_BROKER:
        outcome, entries = _describe_broker(ctx, name, flags)
    elif resource.resource_type == RESOURCE_GROUP:
        outcome, entries = _describe_group(ctx, name, flags)
    else:
        outcome = Outcome(
            ErrorCode.invalid_request, f"Unsupported resource type: {resource.resource_type}"
        )
        entries = []
    keys = resource.configuration_keys
    if keys:  # null or empty: every config
        entries = [e for e in entries if e.name in keys]
    return make(
        ctx.schema.DescribeConfigsResult,
        error_code=outcome.error,
        error_message=outcome.message,
        resource_type=resource.resource_type,
        resource_name=name,
        configs=tuple(entries),
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    flags = _Flags(request.include_synonyms, getattr(request, "include_documentation", False))
    results = tuple(_describe(ctx, resource, flags) for resource in request.resources)
    return make(ctx.schema.DescribeConfigsResponse, throttle_time=NO_THROTTLE, results=results)


API = ApiHandler(api_key=32, min_version=1, max_version=4, handle=handle)
