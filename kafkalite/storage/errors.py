"""Exceptions the storage layer raises; each carries the Kafka error code handlers return."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from kio.schema.errors import ErrorCode

from kafkalite.storage.batch import InvalidBatch


@dataclass(frozen=True, slots=True)
class RecordError:
    """One rejected record of a batch (KIP-467): its index in the batch and why."""

    batch_index: int
    message: str

    def __str__(self) -> str:  # Kafka's ProduceResponse.RecordError.toString
        return f"RecordError(batchIndex={self.batch_index}, message='{self.message}')"


class StorageError(Exception):
    """Base of every storage error; `error_code` is what the request handler answers.

    `record_errors` names the records that failed validation, when the check is per record;
    a client fails those and retries none of the batch's others (Kafka's
    RecordValidationException)."""

    error_code: ClassVar[ErrorCode] = ErrorCode.kafka_storage_error

    def __init__(self, message: str = "", record_errors: Sequence[RecordError] = ()) -> None:
        super().__init__(message)
        self.record_errors = tuple(record_errors)


class KafkaStorageError(StorageError):
    """An I/O failure on the log directory (Kafka's KafkaStorageException)."""

    error_code = ErrorCode.kafka_storage_error


class OffsetOutOfRangeError(StorageError):
    error_code = ErrorCode.offset_out_of_range


class UnexpectedAppendOffsetError(StorageError):
    """A follower append that does not start at or after the log end (Kafka's
    UnexpectedAppendOffsetException): the follower must truncate or refetch."""

    error_code = ErrorCode.unknown_server_error


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

    @classmethod
    def rejecting(cls, record_errors: Sequence[RecordError]) -> InvalidRecordError:
        """Records that failed a per-record check, worded as Kafka's LogValidator does."""
        shown = ", ".join(str(error) for error in record_errors[:3])
        return cls(
            f"One or more records have been rejected due to {len(record_errors)} record errors "
            f"in total, and only showing the first three errors at most: [{shown}]",
            record_errors,
        )


class InvalidTimestampError(StorageError):
    """A CreateTime outside message.timestamp.before/after.max.ms of the broker's clock."""

    error_code = ErrorCode.invalid_timestamp

    @classmethod
    def rejecting(cls, record_errors: Sequence[RecordError]) -> InvalidTimestampError:
        return cls("One or more records have been rejected due to invalid timestamp", record_errors)


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


class TransactionCoordinatorFencedError(StorageError):
    """A marker from a coordinator older than the one that last wrote for the producer."""

    error_code = ErrorCode.transaction_coordinator_fenced
