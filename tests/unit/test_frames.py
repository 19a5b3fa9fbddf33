import struct

import pytest

from kafkalite.protocol.errors import FrameError
from kafkalite.protocol.frames import FrameReader


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_frames_split_across_and_within_reads() -> None:
    reader = FrameReader(1024)
    stream = frame(b"one") + frame(b"") + frame(b"three")
    for i in range(len(stream)):
        reader.feed(stream[i : i + 1])
    assert [reader.next_frame(), reader.next_frame(), reader.next_frame()] == [
        b"one",
        b"",
        b"three",
    ]
    assert reader.next_frame() is None
    assert not reader.pending


def test_partial_frame_waits_for_more() -> None:
    reader = FrameReader(1024)
    reader.feed(frame(b"abcdef")[:7])
    assert reader.next_frame() is None
    assert reader.pending
    reader.feed(b"def")
    assert reader.next_frame() == b"abcdef"


@pytest.mark.parametrize("size", [-1, 1025])
def test_size_outside_limit_is_a_frame_error(size: int) -> None:
    reader = FrameReader(1024)
    reader.feed(struct.pack(">i", size))
    with pytest.raises(FrameError):
        reader.next_frame()
