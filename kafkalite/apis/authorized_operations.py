"""Authorized-operations bitfields (KIP-430) for Metadata, DescribeCluster, DescribeGroups.

kafkalite has no authorizer yet, so a client that asks is allowed every operation Kafka's
AclEntry.supportedOperations lists for the resource type. Bits are AclOperation codes.
"""

from __future__ import annotations

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
