"""Where an offset sits in the log (Kafka's LogOffsetMetadata).

A parked fetch counts the bytes that arrived since it parked by comparing the position of
its fetch offset with the position of the offset it may read up to (log end, high
watermark or last stable offset), without reading any records.
"""

from __future__ import annotations

from dataclasses import dataclass

UNKNOWN_POSITION = -1


@dataclass(frozen=True, slots=True)
class LogOffsetMetadata:
    """An offset, the base offset of the segment holding its batch and that batch's
    position in the segment (the segment's size for the log end)."""

    message_offset: int
    segment_base_offset: int = UNKNOWN_POSITION
    relative_position: int = UNKNOWN_POSITION

    @property
    def message_offset_only(self) -> bool:
        return self.segment_base_offset == UNKNOWN_POSITION

    def on_older_segment(self, other: LogOffsetMetadata) -> bool:
        return self.segment_base_offset < other.segment_base_offset

    def on_same_segment(self, other: LogOffsetMetadata) -> bool:
        return self.segment_base_offset == other.segment_base_offset

    def position_diff(self, other: LogOffsetMetadata) -> int:
        """Bytes from `other` to this offset; both must be in the same segment."""
        return self.relative_position - other.relative_position
