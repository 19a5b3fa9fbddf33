"""Partitions on real logs in temp dirs, for the sans-IO replication tests."""

from __future__ import annotations

import uuid
from pathlib import Path

from kafkalite.broker.partition import Partition, PartitionState
from kafkalite.storage.log import LogConfig, UnifiedLog
from kafkalite.storage.records import encode_batch

LOCAL = 1
TOPIC = "t"


def batch(count: int = 1, producer_id: int = -1, base_sequence: int = -1) -> bytes:
    return encode_batch(
        [(None, b"v%d" % i) for i in range(count)],
        timestamp=1_000,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=base_sequence,
    )


def state(
    leader: int = LOCAL,
    epoch: int = 0,
    replicas: tuple[int, ...] = (LOCAL,),
    isr: tuple[int, ...] | None = None,
    partition_epoch: int = 0,
) -> PartitionState:
    return PartitionState(
        TOPIC, 0, replicas, leader, epoch, replicas if isr is None else isr, partition_epoch
    )


def open_partition(
    tmp_path: Path, config: LogConfig | None = None, broker_id: int = LOCAL
) -> Partition:
    log = UnifiedLog.open(tmp_path / f"{broker_id}" / f"{TOPIC}-0", config or LogConfig(), now_ms=0)
    return Partition(TOPIC, uuid.uuid4(), 0, log, broker_id)
