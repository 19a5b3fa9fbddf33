"""Frames whose lengths lie or whose nulls the schema forbids, against a real broker process: the
connection is closed with one log line, the broker keeps serving everyone else, no traceback.

Before the guard, kio's native reader allocated 32 GiB for the 21-byte Metadata frame below and
the broker died with SIGABRT; nulls in non-nullable arrays reached handlers as None.
"""

from __future__ import annotations

import re
import struct
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from fuzz.seeds import Seed, seeds
from kafkalite.apis.registry import HANDLERS
from kafkalite.protocol.errors import FrameError
from kafkalite.protocol.guard import check_request
from kafkalite.testing import BrokerProcess, error_records
from protocol_tests.raw_client import RawClient, api_versions_request

METADATA_BOMB = struct.pack(">hhih", 3, 12, 1, 1) + b"x\x00" + b"\xff\xff\xff\xff\x0f"
COMPACT_MAX = b"\xff\xff\xff\xff\x0f"  # compact length 2^32 - 2
COMPACT_NULL = b"\x00"


def _max_version_seeds() -> Iterator[Seed]:
    latest: dict[int, Seed] = {}
    for seed in seeds(uuid.UUID(int=1)):
        latest[seed.api_key] = seed
    return iter(latest.values())


def _first_lie(seed: Seed, lie: bytes, reason: str) -> tuple[str, bytes] | None:
    """The seed with its first length field (in body order) replaced by `lie`, when the guard
    refuses it for `reason`: (the field the guard names, frame)."""
    for pos in range(seed.body_start, len(seed.frame)):
        frame = seed.frame[:pos] + lie + seed.frame[pos + 1 :]
        try:
            check_request(frame, seed.api_key, seed.api_version)
        except FrameError as error:
            if reason in str(error):
                return str(error).split(":")[0], frame
    return None


def _crafted(lie: bytes, reason: str) -> dict[str, bytes]:
    frames = {}
    for seed in _max_version_seeds():
        found = _first_lie(seed, lie, reason)
        if found is not None:
            field, frame = found
            frames[f"key{seed.api_key}-v{seed.api_version}-{field}"] = frame
    return frames


COMPACT_ARRAY_BOMBS = _crafted(COMPACT_MAX, "elements cannot fit")
FORBIDDEN_NULLS = _crafted(COMPACT_NULL, "null where the schema does not allow it")
OTHER_LIES = {
    "metadata-v12-21-bytes": METADATA_BOMB,
    # Metadata v4 (legacy): topics array of int32 max.
    "legacy-array-int32-max": struct.pack(">hhih", 3, 4, 1, 1) + b"x" + b"\x7f\xff\xff\xff\x01",
    # Metadata v1: a topic name of 32767 bytes in a 2-byte body.
    "legacy-string-too-long": struct.pack(">hhih", 3, 1, 1, 1) + b"x" + b"\x00\x00\x00\x01\x7f\xff",
    # CreateTopics v2: topics null (-1), not nullable.
    "legacy-null-array": (
        struct.pack(">hhih", 19, 2, 1, 1) + b"x" + b"\xff\xff\xff\xff\x00\x00\x10\x00\x00"
    ),
    # Metadata v12: a 5-byte varint beyond 32 bits (kio read it as 2^38).
    "varint-beyond-32-bits": METADATA_BOMB[:-5] + b"\xff\xff\xff\xff\x7f\x01\x00\x00",
    # Metadata v12: a tagged field longer than the frame.
    "tag-size-lies": METADATA_BOMB[:-5] + b"\x01\x01\x00\x01\x05\x7f",
}


def test_at_least_15_request_types_carry_a_compact_array() -> None:
    assert len({name.split("-")[0] for name in COMPACT_ARRAY_BOMBS}) >= 15
    assert len(FORBIDDEN_NULLS) >= 10
    assert all(HANDLERS[int(name[3:].split("-")[0])] for name in COMPACT_ARRAY_BOMBS)


def _wait_for_lines(broker: BrokerProcess, since: int, pattern: re.Pattern[str]) -> list[str]:
    deadline = time.monotonic() + 20
    while True:
        matching = [line for line in broker.lines[since:] if pattern.search(line)]
        if matching or time.monotonic() > deadline:
            return matching
        time.sleep(0.02)


def _closes_with_one_line(
    broker: BrokerProcess, connect: Callable[..., RawClient], frame: bytes
) -> None:
    since = len(broker.lines)
    other = connect()
    assert other.request(api_versions_request(3)).error_code == 0
    bad = connect()
    port = bad.sock.getsockname()[1]
    bad.send_frame(frame)
    assert bad.is_closed_by_peer(), "the broker kept the connection open"
    peer = re.compile(rf"127\.0\.0\.1:{port}\b")
    lines = _wait_for_lines(broker, since, peer)
    assert len(lines) == 1, lines
    assert re.search(rf"WARNING .*closing connection from 127\.0\.0\.1:{port}: malformed", lines[0])
    assert other.request(api_versions_request(3)).error_code == 0
    assert connect().request(api_versions_request(3)).error_code == 0
    assert broker.process is not None and broker.process.poll() is None
    assert error_records(broker.lines[since:]) == []


@pytest.mark.parametrize("name", list(COMPACT_ARRAY_BOMBS))
def test_compact_array_length_beyond_the_frame(
    broker: BrokerProcess, connect: Callable[..., RawClient], name: str
) -> None:
    _closes_with_one_line(broker, connect, COMPACT_ARRAY_BOMBS[name])


@pytest.mark.parametrize("name", list(FORBIDDEN_NULLS))
def test_null_where_the_schema_forbids_it(
    broker: BrokerProcess, connect: Callable[..., RawClient], name: str
) -> None:
    _closes_with_one_line(broker, connect, FORBIDDEN_NULLS[name])


@pytest.mark.parametrize("name", list(OTHER_LIES))
def test_other_lying_lengths(
    broker: BrokerProcess, connect: Callable[..., RawClient], name: str
) -> None:
    _closes_with_one_line(broker, connect, OTHER_LIES[name])
