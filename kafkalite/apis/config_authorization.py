"""What DescribeConfigs, AlterConfigs and IncrementalAlterConfigs check per resource
(KafkaApis/ConfigHelper): DESCRIBE_CONFIGS or ALTER_CONFIGS on the topic for TOPIC
resources (TOPIC_AUTHORIZATION_FAILED), on the group for GROUP ones
(GROUP_AUTHORIZATION_FAILED), on the cluster for BROKER and BROKER_LOGGER ones
(CLUSTER_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import RequestContext
from kafkalite.broker.admin_manager import Outcome
from kafkalite.security.acl import AclOperation, ResourceType

CONFIG_TOPIC, CONFIG_BROKER, CONFIG_BROKER_LOGGER, CONFIG_GROUP = 2, 4, 8, 32  # ConfigResource.Type


def config_denied(
    ctx: RequestContext, resource_type: int, name: str, operation: AclOperation
) -> Outcome | None:
    if resource_type == CONFIG_TOPIC:
        if not ctx.authorized(operation, ResourceType.TOPIC, name):
            return Outcome(ErrorCode.topic_authorization_failed)
    elif resource_type == CONFIG_GROUP:
        if not ctx.authorized(operation, ResourceType.GROUP, name):
            return Outcome(ErrorCode.group_authorization_failed)
    elif resource_type in (CONFIG_BROKER, CONFIG_BROKER_LOGGER):
        if not ctx.authorized_cluster(operation):
            return Outcome(ErrorCode.cluster_authorization_failed)
    return None
