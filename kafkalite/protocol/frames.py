"""Sans-IO splitting of a byte stream into size-prefixed Kafka frames."""

from __future__ import annotations

import struct

from kafkalite.protocol.errors import FrameError

_SIZE = struct.Struct(">i")


class FrameReader:
    """Feed received bytes; take whole frames (without their 4-byte size) out in order."""

    def __init__(self, max_frame_bytes: int) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        self._start = 0

    def feed(self, data: bytes) -> None:
        if self._start:
            del self._buffer[: self._start]
            self._start = 0
        self._buffer += data

    def next_frame(self) -> bytes | None:
        available = len(self._buffer) - self._start
        if available < 4:
            return None
        (size,) = _SIZE.unpack_from(self._buffer, self._start)
        if size < 0 or size > self.max_frame_bytes:
            raise FrameError(
                f"frame of {size} bytes is outside 0..{self.max_frame_bytes} "
                "(socket.request.max.bytes)"
            )
        if available < 4 + size:
            return None
        begin = self._start + 4
        self._start = begin + size
        with memoryview(self._buffer) as view:  # one copy, not a bytearray slice and a copy
            return bytes(view[begin : self._start])

    @property
    def bytes_wanted(self) -> int:
        """How many more bytes complete the current frame (at least a little)."""
        available = len(self._buffer) - self._start
        if available < 4:
            return 65536
        (size,) = _SIZE.unpack_from(self._buffer, self._start)
        return max(size + 4 - available, 65536)

    @property
    def frame_size(self) -> int | None:
        """Size of the frame being read, once its 4-byte header is buffered."""
        if len(self._buffer) - self._start < 4:
            return None
        return _SIZE.unpack_from(self._buffer, self._start)[0]

    @property
    def pending(self) -> bool:
        return len(self._buffer) > self._start
