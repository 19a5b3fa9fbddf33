"""Caps on partitions, checked before anything is created.

Apache Kafka leaves such limits to a `create.topic.policy.class.name` plugin (and since 4.0
refuses more than 10,000 partitions in one CreateTopics request); kafkalite enforces two
properties and answers POLICY_VIOLATION, as Kafka's policies do:

- `kafkalite.max.partitions.per.request`: partitions one CreateTopics or CreatePartitions
  request may add (default 10000, Kafka's MAX_PARTITIONS_PER_BATCH);
- `kafkalite.max.partitions`: partitions this broker holds in all (default 10000); every
  partition costs memory, start-up recovery time and, while in use, open files.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from kafkalite.config import BrokerConfig

REFUSAL = ErrorCode.policy_violation

PER_REQUEST = "kafkalite.max.partitions.per.request"
PER_BROKER = "kafkalite.max.partitions"


def check_request(config: BrokerConfig, requested: int) -> str | None:
    """Why a request adding `requested` partitions is refused (with REFUSAL), or None."""
    limit = config.int(PER_REQUEST)
    if requested <= limit:
        return None
    return (
        f"Excessively large number of partitions per request: {requested} requested, "
        f"limit {limit} ({PER_REQUEST})."
    )


def check_broker(config: BrokerConfig, existing: int, added: int) -> str | None:
    """Why adding `added` partitions to the `existing` ones is refused, or None."""
    limit = config.int(PER_BROKER)
    if existing + added <= limit:
        return None
    return (
        f"Adding {added} partition(s) to the {existing} of this broker would exceed "
        f"{PER_BROKER}={limit}."
    )
