"""Mutants the fuzzer does not send because they hit an open, known defect: each one found,
filed, and counted in the report as skipped, so a long run keeps looking for new ones.

- Issue 9 point 4: no cap on partitions per request. A CreateTopics or CreatePartitions mutant
  with validate_only flipped and a mutated count makes the broker create thousands of partition
  directories until the open-file limit stops it (EMFILE, then every maintenance round fails).
  Remove this filter once the cap lands (then the broker refuses these mutants itself).
"""

from __future__ import annotations

import struct

from kafkalite.apis.registry import HANDLERS
from kafkalite.protocol.codec import DecodedRequest, decode_request
from kafkalite.protocol.errors import FrameError

CREATE_TOPICS, CREATE_PARTITIONS = 19, 37
PARTITION_CAP = 10  # partitions one request may create in a fuzz run


def known_issue(frame: bytes) -> str | None:
    """Why the mutant is not sent, or None."""
    if len(frame) < 2 or struct.unpack_from(">h", frame)[0] not in (
        CREATE_TOPICS,
        CREATE_PARTITIONS,
    ):
        return None
    try:
        decoded = decode_request(frame, HANDLERS)  # the guard first: safe in this process
    except FrameError:
        return None
    if not isinstance(decoded, DecodedRequest) or getattr(decoded.body, "validate_only", False):
        return None
    if _partitions(decoded.api_key, decoded.body) > PARTITION_CAP:
        return "issue 9 point 4: no cap on partitions per request"
    return None


def _partitions(api_key: int, body: object) -> int:
    topics = getattr(body, "topics", None) or ()
    if api_key == CREATE_PARTITIONS:
        return sum(max(topic.count, 0) for topic in topics)
    return sum(max(topic.num_partitions, len(topic.assignments or ()), 0) for topic in topics)
