"""What the share-group offsets APIs (keys 90-92) check, as Kafka's KafkaApis: an operation
on the group (its refusal is GROUP_AUTHORIZATION_FAILED for the whole group), then one on
each topic (a refused topic is answered TOPIC_AUTHORIZATION_FAILED and not acted on)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import RequestContext
from kafkalite.broker.share_group_offsets import GroupResult, PartitionResult, TopicResult
from kafkalite.security.acl import AclOperation, ResourceType

# Kafka's Errors messages, which its getErrorResponse(Errors) carries.
GROUP_DENIED_MESSAGE = "Group authorization failed."
TOPIC_DENIED_MESSAGE = "Topic authorization failed."


def group_denied(ctx: RequestContext, operation: AclOperation, group_id: str) -> GroupResult | None:
    if ctx.authorized(operation, ResourceType.GROUP, group_id):
        return None
    return GroupResult(ErrorCode.group_authorization_failed, GROUP_DENIED_MESSAGE)


def topic_allowed(ctx: RequestContext, operation: AclOperation, topic: str) -> bool:
    return ctx.authorized(operation, ResourceType.TOPIC, topic)


def topic_denied(topic: str, partitions: tuple[int, ...] = ()) -> TopicResult:
    """A refused topic: its partitions (or, without partitions, the topic) refused."""
    error, message = ErrorCode.topic_authorization_failed, TOPIC_DENIED_MESSAGE
    if not partitions:
        return TopicResult(topic, None, error=error, message=message)
    return TopicResult(topic, None, tuple(PartitionResult(p, error, message) for p in partitions))
