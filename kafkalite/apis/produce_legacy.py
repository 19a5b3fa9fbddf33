"""Produce v0-v2: advertised (librdkafka <= 2.11 turns compression off unless Produce's min
version is 0) but refused with UNSUPPORTED_VERSION per partition, as Kafka 4 does.

kio has no schema for these versions, so this module reads and writes their small,
non-flexible layout by hand.
"""

from __future__ import annotations

import struct

from kio.schema.errors import ErrorCode

from kafkalite.protocol.errors import FrameError

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class _Reader:
    def __init__(self, frame: bytes) -> None:
        self.frame, self.pos = frame, 0

    def take(self, fmt: struct.Struct) -> int:
        if self.pos + fmt.size > len(self.frame):
            raise FrameError("truncated produce request")
        (value,) = fmt.unpack_from(self.frame, self.pos)
        self.pos += fmt.size
        return value

    def skip(self, length: int) -> None:
        if length > 0:
            if self.pos + length > len(self.frame):
                raise FrameError("truncated produce request")
            self.pos += length

    def string(self) -> bytes:
        length = self.take(_I16)
        start = self.pos
        self.skip(length)
        return self.frame[start : self.pos]


def _topics(frame: bytes) -> list[tuple[bytes, list[int]]]:
    reader = _Reader(frame)
    reader.skip(8)  # api key, version, correlation id
    reader.string()  # client id
    reader.skip(2 + 4)  # acks, timeout
    topics = []
    for _ in range(max(reader.take(_I32), 0)):
        name = reader.string()
        partitions = []
        for _ in range(max(reader.take(_I32), 0)):
            partitions.append(reader.take(_I32))
            reader.skip(reader.take(_I32))  # records
        topics.append((name, partitions))
    return topics


def answer(version: int, correlation_id: int, frame: bytes) -> bytes:
    body = bytearray(_I32.pack(correlation_id))
    topics = _topics(frame)
    body += _I32.pack(len(topics))
    for name, partitions in topics:
        body += _I16.pack(len(name)) + name + _I32.pack(len(partitions))
        for partition in partitions:
            body += struct.pack(">ihq", partition, ErrorCode.unsupported_version, -1)
            if version >= 2:
                body += struct.pack(">q", -1)  # log append time
    if version >= 1:
        body += _I32.pack(0)  # throttle time
    return _I32.pack(len(body)) + bytes(body)
