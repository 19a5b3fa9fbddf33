"""Kafka's BrokerTopicMetrics from a Produce request and its answer, or a Fetch answer.

Work is per partition; messages in come from each batch header's record count (one batch per
partition since Produce v3), so no record is decoded. As in Kafka's ReplicaManager:
* bytes and messages in count successful appends; rejected bytes are batches refused as
  too large (UnifiedLog's bytesRejectedRate);
* total produce/fetch requests count partitions (per topic and in all);
* failed produce/fetch requests count only unexpected errors: the errors Kafka treats as a
  client's or the cluster's normal state (unknown topic, not leader, too large, corrupt,
  out of range, fenced epoch...) do not mark them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

PRODUCE, FETCH = 0, 1
_RECORDS_COUNT = struct.Struct(">i")
_BATCH_LENGTH = struct.Struct(">i")
_RECORDS_COUNT_OFFSET, _MAGIC_OFFSET, _HEADER_SIZE, _LOG_OVERHEAD = 57, 16, 61, 12

_REJECTED = frozenset({ErrorCode.message_too_large, ErrorCode.record_list_too_large})
_EXPECTED_PRODUCE_ERRORS = _REJECTED | {
    ErrorCode.none,
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.unknown_topic_id,
    ErrorCode.not_leader_or_follower,
    ErrorCode.corrupt_message,
    ErrorCode.kafka_storage_error,
}
_EXPECTED_FETCH_ERRORS = frozenset(
    {
        ErrorCode.none,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.unknown_topic_id,
        ErrorCode.not_leader_or_follower,
        ErrorCode.unknown_leader_epoch,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.replica_not_available,
        ErrorCode.kafka_storage_error,
        ErrorCode.inconsistent_topic_id,
        ErrorCode.offset_out_of_range,
    }
)


@dataclass(slots=True)
class TopicStats:
    """Kafka's BrokerTopicMetrics meters, as cumulative counts."""

    messages_in: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    bytes_rejected: int = 0
    failed_produce_requests: int = 0
    failed_fetch_requests: int = 0
    total_produce_requests: int = 0
    total_fetch_requests: int = 0


class TopicMeters(Protocol):
    """Where the meters go (counters.BrokerMetrics): all topics', and one topic's."""

    @property
    def all_topics(self) -> TopicStats: ...
    def topic(self, name: str) -> TopicStats: ...


def record_count(records: bytes | memoryview) -> int:
    """Records in the v2 batches of `records`, from their headers."""
    count, pos, size = 0, 0, len(records)
    while pos + _HEADER_SIZE <= size:
        length = _BATCH_LENGTH.unpack_from(records, pos + 8)[0]
        if length < _HEADER_SIZE - _LOG_OVERHEAD:  # not a batch (a client's garbage): stop
            break
        if records[pos + _MAGIC_OFFSET] == 2:
            count += _RECORDS_COUNT.unpack_from(records, pos + _RECORDS_COUNT_OFFSET)[0]
        pos += _LOG_OVERHEAD + length
    return count


def _topic_name(broker: Any, topic: Any) -> str | None:
    name = getattr(topic, "name", None)
    if name is None:
        topic_id = getattr(topic, "topic_id", None)
        found = broker.replica_manager.topic_by_id(topic_id) if topic_id is not None else None
        name = found.name if found is not None else None
    return name


def _produce_errors(broker: Any, response: Any) -> dict[tuple[str | None, int], ErrorCode]:
    if response is None:  # acks=0: no answer, the appends are counted as done
        return {}
    return {
        (_topic_name(broker, topic), partition.index): partition.error_code
        for topic in response.responses
        for partition in topic.partition_responses
    }


def count_produce(metrics: TopicMeters, broker: Any, request: Any, response: Any) -> None:
    errors = _produce_errors(broker, response)
    total = metrics.all_topics
    for topic in request.topic_data:
        name = _topic_name(broker, topic)
        stats = metrics.topic(name) if name is not None else None
        for partition in topic.partition_data:
            records = partition.records or b""
            error = errors.get((name, partition.index), ErrorCode.none)
            for target in (stats, total) if stats is not None else (total,):
                target.total_produce_requests += 1
                if error == ErrorCode.none:
                    target.bytes_in += len(records)
                    target.messages_in += record_count(records)
                elif error in _REJECTED:
                    target.bytes_rejected += len(records)
                if error not in _EXPECTED_PRODUCE_ERRORS:
                    target.failed_produce_requests += 1


def count_fetch(metrics: TopicMeters, broker: Any, request: Any, response: Any) -> None:
    del request  # the answer names every partition read
    total = metrics.all_topics
    for topic in response.responses:
        name = getattr(topic, "topic", None) or _topic_name(broker, topic)
        stats = metrics.topic(name) if name is not None else None
        for partition in topic.partitions:
            size = len(partition.records or b"")
            failed = partition.error_code not in _EXPECTED_FETCH_ERRORS
            for target in (stats, total) if stats is not None else (total,):
                target.total_fetch_requests += 1
                target.bytes_out += size
                target.failed_fetch_requests += failed
