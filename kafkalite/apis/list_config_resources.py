"""ListConfigResources (key 74), versions 0-1 (KIP-1142; v0 was ListClientMetricsResources).

As Kafka's KafkaApis.handleListConfigResources: v0 lists client-metrics resources only; v1
lists the requested resource types (all supported ones when none are named), and a type it
does not support fails the request with UNSUPPORTED_VERSION. kafkalite has no client-metrics
subscriptions, so it lists the groups that have group configs, this broker (BROKER and
BROKER_LOGGER, by node id) and every topic.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
_SUPPORTED = {0: (CLIENT_METRICS,), 1: (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)}


def _names(ctx: RequestContext, resource_type: int) -> list[str]:
    if resource_type in (BROKER, BROKER_LOGGER):
        return [str(ctx.broker.node_id)]
    if resource_type == TOPIC:
        return list(ctx.broker.metadata.topics)
    manager = ctx.broker.group_configs
    if resource_type == GROUP and manager is not None and manager.store is not None:
        return sorted(manager.store.group_configs())
    return []  # no client-metrics subscriptions


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    supported = _SUPPORTED[ctx.api_version]
    wanted = tuple(getattr(request, "resource_types", ())) or supported
    if not ctx.authorized_cluster(AclOperation.DESCRIBE_CONFIGS):
        return make(
            schema.ListConfigResourcesResponse,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.cluster_authorization_failed,
            config_resources=(),
        )
    if any(resource_type not in supported for resource_type in wanted):
        return make(
            schema.ListConfigResourcesResponse,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.unsupported_version,
            config_resources=(),
        )
    # Kafka's order: groups, client metrics, broker loggers, brokers, topics.
    order = (GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC)
    resources = tuple(
        make(schema.ConfigResource, resource_name=name, resource_type=resource_type)
        for resource_type in order
        if resource_type in wanted
        for name in _names(ctx, resource_type)
    )
    return make(
        schema.ListConfigResourcesResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        config_resources=resources,
    )


API = ApiHandler(api_key=74, min_version=0, max_version=1, handle=handle)
