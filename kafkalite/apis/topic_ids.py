"""Topics named by id (KIP-516): newer versions of Produce, OffsetCommit and OffsetFetch carry
a `topic_id` where older ones carry a `name`."""

from __future__ import annotations

import uuid
from typing import Any

from kafkalite.apis.base import RequestContext

ZERO_UUID = uuid.UUID(int=0)


def topic_name(ctx: RequestContext, entry: Any) -> str | None:
    """The topic a request entry names; None for an id no topic has (UNKNOWN_TOPIC_ID)."""
    if hasattr(entry, "name"):
        return entry.name
    topic = ctx.broker.replica_manager.topic_by_id(entry.topic_id)
    return topic.name if topic is not None else None


def topic_id(ctx: RequestContext, name: str) -> uuid.UUID:
    """The id of a topic by name (zero when it no longer exists)."""
    topic = ctx.broker.replica_manager.topics.get(name)
    return topic.topic_id if topic is not None else ZERO_UUID
