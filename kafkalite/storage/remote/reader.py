"""Reading a remote segment: whole batches from a fetch offset, as they were stored.

Kafka's RemoteLogManager.read: the segment's offset index (fetched once, then cached) gives
the position of the batch at or before the offset; one ranged GET of the `.log` object from
there covers `max_bytes` (a first batch larger than that is fetched whole: KIP-74). Objects
and ranges read are kept in a small LRU cache bounded in bytes. Blocking: worker threads.
"""

from __future__ import annotations

import struct
import threading
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from kafkalite.storage.batch import HEADER_SIZE, iter_batches, parse_header, peek_offset_and_size
from kafkalite.storage.records import record_timestamps
from kafkalite.storage.remote import keys
from kafkalite.storage.remote.metadata import RemoteLogSegmentMetadata

READ_SLACK = 64 << 10  # read a little past max_bytes so the last batch is usually whole
DEFAULT_CACHE_BYTES = 32 << 20
_INDEX_ENTRY = struct.Struct(">ii")

# (suffix, start, end inclusive or None) -> bytes of one remote segment's object
Fetcher = Callable[[str, int, int | None], bytes]


@dataclass(eq=False)
class RemoteReadCache:
    """LRU of remote bytes (indexes and log ranges), bounded in total size; thread-safe."""

    max_bytes: int = DEFAULT_CACHE_BYTES
    _entries: OrderedDict[tuple[object, ...], bytes] = field(default_factory=OrderedDict)
    _size: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    hits: int = 0
    misses: int = 0

    def get(self, key: tuple[object, ...], load: Callable[[], bytes]) -> bytes:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return found
            self.misses += 1
        data = load()
        with self._lock:
            if len(data) <= self.max_bytes // 4 and key not in self._entries:
                self._entries[key] = data
                self._size += len(data)
                while self._size > self.max_bytes:
                    _, old = self._entries.popitem(last=False)
                    self._size -= len(old)
        return data


def index_position(index: bytes, base_offset: int, offset: int) -> int:
    """Position of the greatest offset index entry <= offset (0 before the first)."""
    count = len(index) // _INDEX_ENTRY.size
    relatives = [_INDEX_ENTRY.unpack_from(index, i * _INDEX_ENTRY.size)[0] for i in range(count)]
    slot = bisect_right(relatives, offset - base_offset) - 1
    return 0 if slot < 0 else _INDEX_ENTRY.unpack_from(index, slot * _INDEX_ENTRY.size)[1]


def read_batches(
    metadata: RemoteLogSegmentMetadata,
    fetch: Fetcher,
    cache: RemoteReadCache,
    offset: int,
    max_bytes: int,
    max_offset: int,
    min_one_batch: bool,
) -> bytes:
    """Whole batches of the segment from the one holding `offset`, below `max_offset`,
    within `max_bytes` (the first one whole regardless when `min_one_batch`)."""
    segment_id, size = metadata.segment_id, metadata.segment_size_in_bytes
    index = cache.get((segment_id, keys.OFFSET_INDEX), lambda: fetch(keys.OFFSET_INDEX, 0, None))
    position = index_position(index, metadata.start_offset, offset)
    end = min(position + max_bytes + READ_SLACK, size) - 1
    chunk = cache.get((segment_id, position, end), lambda: fetch(keys.LOG, position, end))
    out: list[bytes] = []
    total = 0
    for pos, header in iter_batches(chunk):
        if header.last_offset < offset:
            continue
        if header.base_offset >= max_offset:
            break
        if total + header.size > max_bytes and (out or not min_one_batch):
            break
        out.append(chunk[pos : pos + header.size])
        total += header.size
    if out or not min_one_batch:
        return b"".join(out)
    return _first_whole_batch(chunk, fetch, position, offset, max_offset, size)


def _first_whole_batch(
    chunk: bytes, fetch: Fetcher, position: int, offset: int, max_offset: int, size: int
) -> bytes:
    """The batch holding `offset` when it is larger than the range read (KIP-74)."""
    pos = 0
    while pos + HEADER_SIZE <= len(chunk):
        base, batch_size = peek_offset_and_size(chunk, pos)
        if base >= max_offset:
            return b""
        if pos + batch_size > len(chunk):
            start = position + pos
            whole = fetch(keys.LOG, start, min(start + batch_size, size) - 1)
            batches = list(iter_batches(whole))
            if batches and batches[0][1].last_offset >= offset:
                return whole[: batches[0][1].size]
            return b""
        pos += batch_size
    return b""


_TIME_ENTRY = struct.Struct(">qi")
SCAN_CHUNK = 1 << 20


def find_offset_by_timestamp(
    metadata: RemoteLogSegmentMetadata,
    fetch: Fetcher,
    cache: RemoteReadCache,
    timestamp: int,
    starting_offset: int,
) -> tuple[int, int, int] | None:
    """(offset, timestamp, leader epoch) of the segment's first record at or after
    `timestamp` (and `starting_offset`), as LogSegment.find_offset_by_timestamp: the time
    index gives where to start, the batches' max timestamps what to decode."""
    segment_id, base = metadata.segment_id, metadata.start_offset
    times = cache.get((segment_id, keys.TIME_INDEX), lambda: fetch(keys.TIME_INDEX, 0, None))
    indexed = base
    for pos in range(0, len(times) - len(times) % _TIME_ENTRY.size, _TIME_ENTRY.size):
        entry_time, relative = _TIME_ENTRY.unpack_from(times, pos)
        if entry_time > timestamp:
            break
        indexed = base + relative
    index = cache.get((segment_id, keys.OFFSET_INDEX), lambda: fetch(keys.OFFSET_INDEX, 0, None))
    position = index_position(index, base, max(indexed, starting_offset))
    size = metadata.segment_size_in_bytes
    while position < size:
        chunk = fetch(keys.LOG, position, min(position + SCAN_CHUNK, size) - 1)
        consumed = 0
        for pos, header in iter_batches(chunk):
            consumed = pos + header.size
            if header.max_timestamp < timestamp or header.last_offset < starting_offset:
                continue
            for offset, ts in record_timestamps(chunk[pos : pos + header.size]):
                if ts >= timestamp and offset >= starting_offset:
                    return offset, ts, max(header.partition_leader_epoch, -1)
        if consumed == 0:  # one batch larger than the chunk
            consumed = peek_offset_and_size(chunk, 0)[1] if len(chunk) >= 12 else size
            chunk = fetch(keys.LOG, position, min(position + consumed, size) - 1)
            for offset, ts in record_timestamps(chunk):
                if ts >= timestamp and offset >= starting_offset:
                    return offset, ts, max(parse_header(chunk).partition_leader_epoch, -1)
        position += consumed
    return None
