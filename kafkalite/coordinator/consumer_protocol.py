"""The topics a "consumer" member subscribes to, read from its JoinGroup metadata.

Kafka parses every member's ConsumerProtocolSubscription with the version 0 layout, which
prefixes all later versions: int16 version, then an array (int32 count) of int16-length
UTF-8 topic names. The coordinator needs the topics only to decide which committed
offsets of a Stable group may expire.
"""

from __future__ import annotations

import struct


def subscribed_topics(metadata: bytes) -> frozenset[str] | None:
    """The subscription's topics, or None when the metadata is not a consumer subscription."""
    try:
        (count,) = struct.unpack_from(">i", metadata, 2)  # skip the int16 version
        position = 6
        topics = set()
        if count < 0:
            return None
        for _ in range(count):
            (length,) = struct.unpack_from(">h", metadata, position)
            position += 2
            if length < 0 or position + length > len(metadata):
                return None
            topics.add(metadata[position : position + length].decode("utf-8"))
            position += length
        return frozenset(topics)
    except (struct.error, UnicodeDecodeError):
        return None
