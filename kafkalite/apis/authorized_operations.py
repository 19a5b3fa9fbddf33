"""Authorized-operations bitfields (KIP-430) for Metadata, DescribeCluster, DescribeGroups,
ConsumerGroupDescribe, ShareGroupDescribe and DescribeTopicPartitions.

Of the operations Kafka's AclEntry.supportedOperations lists for the resource type, those
the principal may do (`allowed`): all of them without an authorizer. Bits are AclOperation
codes.
"""

from __future__ import annotations

from kafkalite.apis.base import RequestContext
from kafkalite.security.acl import CLUSTER_NAME, AclOperation, ResourceType

OMITTED = -(2**31)  # not requested (Kafka's Integer.MIN_VALUE)

READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12


def _bits(*operations: int) -> int:
    return sum(1 << operation for operation in operations)


CLUSTER = _bits(
    CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE
)
TOPIC = _bits(READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS)
GROUP = _bits(READ, DELETE, DESCRIBE)


def when(requested: bool, operations: int) -> int:
    return operations if requested else OMITTED


def allowed(ctx: RequestContext, operations: int, resource_type: ResourceType, name: str) -> int:
    """`operations` (a `when` result) less those the principal may not do on the resource;
    asking the authorizer logs nothing (Kafka's logIfDenied=false)."""
    authorizer = ctx.authorizer
    if authorizer is None or operations == OMITTED:
        return operations
    host = ctx.client_host.removeprefix("/")
    return sum(
        1 << op
        for op in AclOperation
        if operations & (1 << op)
        and authorizer.decide(ctx.principal, host, op, resource_type, name).allowed
    )


def cluster(ctx: RequestContext, requested: bool) -> int:
    return allowed(ctx, when(requested, CLUSTER), ResourceType.CLUSTER, CLUSTER_NAME)


def group(ctx: RequestContext, requested: bool, group_id: str) -> int:
    return allowed(ctx, when(requested, GROUP), ResourceType.GROUP, group_id)
