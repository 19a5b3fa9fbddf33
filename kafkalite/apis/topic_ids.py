"""Topics named by id (KIP-516): newer versions of Produce, OffsetCommit and OffsetFetch carry
a `topic_id` where older ones carry a `name`. Resolved by the cluster metadata: a broker
need not hold a replica of a topic to know its id."""

from __future__ import annotations

import uuid
from typing import Any

from kafkalite.apis.base import RequestContext

ZERO_UUID = uuid.UUID(int=0)


def topic_name(ctx: RequestContext, entry: Any) -> str | None:
    """The topic a request entry names; None for an id no topic has (UNKNOWN_TOPIC_ID)."""
    if hasattr(entry, "name"):
        return entry.name
    topic = ctx.broker.metadata.topic_by_id(entry.topic_id)
    return topic.name if topic is not None else None


def topic_id(ctx: RequestContext, name: str) -> uuid.UUID:
    """The id of a topic by name (zero when it no longer exists)."""
    topic = ctx.broker.metadata.topics.get(name)
    return topic.topic_id if topic is not None else ZERO_UUID
