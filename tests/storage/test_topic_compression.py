"""A topic's compression.type: batches in another codec are rewritten, all else is kept."""

from __future__ import annotations

from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from kafkalite.storage.batch import parse_header
from kafkalite.storage.errors import StorageError
from kafkalite.storage.log import LogConfig, UnifiedLog
from kafkalite.storage.records import compress, decode_records, decompress
from tests.storage.batches import GZIP, LZ4, NONE, SNAPPY, ZSTD, Record, make_batch

NOW = 10_000
RECORDS = [Record(b"k%d" % i, b"value-%d" % i * 20, (("h", b"x"),), 5_000 + i) for i in range(5)]


def open_log(path: Path, compression_type: str) -> UnifiedLog:
    return UnifiedLog.open(path, LogConfig(compression_type=compression_type), now_ms=NOW)


@pytest.mark.parametrize(
    ("topic", "codec"),
    [("gzip", GZIP), ("snappy", SNAPPY), ("lz4", LZ4), ("zstd", ZSTD), ("uncompressed", NONE)],
)
def test_a_topic_codec_rewrites_other_codecs(tmp_path: Path, topic: str, codec: int) -> None:
    log = open_log(tmp_path, topic)
    sent = make_batch(
        RECORDS,
        compression=ZSTD if codec != ZSTD else GZIP,
        producer_id=7,
        producer_epoch=1,
        base_sequence=0,
    )
    log.append_as_leader(sent, leader_epoch=0, now_ms=NOW)
    stored = log.read(0, 1 << 20, log.log_end_offset)
    header = parse_header(stored)
    assert header.compression == codec
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 1, 0)
    assert [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in decode_records(stored)] == [
        (i, rec.key, rec.value, rec.headers, rec.timestamp) for i, rec in enumerate(RECORDS)
    ]
    log.close()


def test_producer_keeps_the_batch_as_sent(tmp_path: Path) -> None:
    log = open_log(tmp_path, "producer")
    sent = make_batch(RECORDS, compression=LZ4)
    log.append_as_leader(sent, leader_epoch=0, now_ms=NOW)
    stored = log.read(0, 1 << 20, log.log_end_offset)
    # Only the partition leader epoch (bytes 12-15, outside the CRC) is patched.
    assert stored[16:] == sent[16:]
    log.close()


def test_a_batch_too_large_once_recompressed_is_refused(tmp_path: Path) -> None:
    """Decompressing for an "uncompressed" topic may outgrow max.message.bytes (Kafka:
    MESSAGE_TOO_LARGE), and nothing is appended."""
    records = [Record(b"k", b"z" * 2_000)]
    sent = make_batch(records, compression=GZIP)
    config = LogConfig(compression_type="uncompressed", max_message_bytes=len(sent) + 100)
    log = UnifiedLog.open(tmp_path, config, now_ms=NOW)
    with pytest.raises(StorageError) as failure:
        log.append_as_leader(sent, leader_epoch=0, now_ms=NOW)
    assert failure.value.error_code == ErrorCode.message_too_large
    assert log.log_end_offset == 0
    log.close()


def test_lz4_frames_have_independent_blocks_as_the_java_client_requires() -> None:
    """Kafka's Java client (Lz4BlockInputStream) refuses a frame of linked blocks ("Dependent
    block stream is unsupported"): the batches the broker re-encodes in lz4 (a topic's
    compression.type, a view's filtered batches) must have the block-independence flag, as
    Kafka's Lz4BlockOutputStream writes them."""
    data = b"".join(b"record-%d " % i for i in range(40_000))  # several 64 KiB blocks
    frame = compress(LZ4, data)
    assert frame[:4] == b"\x04\x22\x4d\x18"  # the LZ4 frame magic
    flg, bd = frame[4], frame[5]
    assert flg >> 6 == 0b01  # version 1
    assert flg & 0b0010_0000  # block independence
    assert flg & 0b0000_0011 == 0 and bd & 0b1000_1111 == 0  # reserved bits
    assert 4 <= bd >> 4 <= 7  # a block size the Java client reads (64 KiB .. 4 MiB)
    assert decompress(LZ4, frame) == data
