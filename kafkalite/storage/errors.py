"""Exceptions the storage layer raises; each carries the Kafka error code handlers return."""

from __future__ import annotations

from typing import ClassVar

from kio.schema.errors import ErrorCode

from kafkalite.storage.batch import InvalidBatch


class StorageError(Exception):
    """Base of every storage error; `error_code` is what the request handler answers."""

    error_code: ClassVar[ErrorCode] = ErrorCode.kafka_storage_error


class KafkaStorageError(StorageError):
    """An I/O failure on the log directory (Kafka's KafkaStorageException)."""

    error_code = ErrorCode.kafka_storage_error


class OffsetOutOfRangeError(StorageError):
    error_code = ErrorCode.offset_out_of_range


class CorruptRecordError(StorageError):
    """Bad framing or CRC (Kafka's CorruptRecordException)."""

    error_code = ErrorCode.corrupt_message


class RecordTooLargeError(StorageError):
    """One batch exceeds max.message.bytes (Kafka's RecordTooLargeException)."""

    error_code = ErrorCode.message_too_large


class RecordListTooLargeError(StorageError):
    """The whole append exceeds segment.bytes (Kafka's RecordBatchTooLargeException)."""

    error_code = ErrorCode.record_list_too_large


class InvalidRecordError(StorageError):
    """A batch fails Kafka's LogValidator checks (Kafka's InvalidRecordException)."""

    error_code = ErrorCode.invalid_record


class InvalidTimestampError(StorageError):
    """A CreateTime outside message.timestamp.before/after.max.ms of the broker's clock."""

    error_code = ErrorCode.invalid_timestamp


class UnsupportedMessageFormatError(StorageError):
    """Magic v0/v1 batch: Kafka 4's ProduceRequest.validateRecords throws
    InvalidRecordException for it, which clients see as INVALID_RECORD."""

    error_code = ErrorCode.invalid_record


class OutOfOrderSequenceError(StorageError):
    error_code = ErrorCode.out_of_order_sequence_number


class InvalidProducerEpochError(StorageError):
    error_code = ErrorCode.invalid_producer_epoch


class UnsupportedCompressionError(StorageError):
    """Compression codec id 5-7: Kafka's UnsupportedCompressionTypeException."""

    error_code = ErrorCode.unsupported_compression_type


class CorruptIndexError(StorageError):
    """An index file failed its sanity check; the log rebuilds it, clients never see this."""

    error_code = ErrorCode.kafka_storage_error


_BY_KIND: dict[str, type[StorageError]] = {
    "corrupt": CorruptRecordError,
    "unsupported_magic": UnsupportedMessageFormatError,
    "too_large": RecordTooLargeError,
    "invalid_record": InvalidRecordError,
    "unsupported_compression": UnsupportedCompressionError,
}


def from_invalid_batch(exc: InvalidBatch) -> StorageError:
    """The storage error for a batch.py validation failure."""
    return _BY_KIND.get(exc.kind, CorruptRecordError)(str(exc))
