"""Background loads of a coordinator's internal-topic partitions (Kafka's
CoordinatorLoaderImpl): when this broker is elected leader of a `__consumer_offsets` /
`__transaction_state` partition, its log is read to the end a chunk at a time, one partition
at a time, and handed to the coordinator only if the election still holds.

Shared by the group and the transaction coordinator services; which partitions are wanted
in which epoch is `CoordinatorPartitions`' (sans-IO) business.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import trio

from kafkalite.broker.coordinator_partitions import CoordinatorPartitions
from kafkalite.storage.batch import BatchHeader, iter_batches
from kafkalite.storage.errors import StorageError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from kafkalite.broker.partition import Partition
    from kafkalite.storage.log import UnifiedLog

log = logging.getLogger("kafkalite.broker.partition_loader")

LOAD_CHUNK_BYTES = 1024 * 1024

Batch = tuple[BatchHeader, memoryview]
# (index, epoch, batches, announce): replay a loaded partition if its election still holds.
Install = Callable[[int, int, list[Batch], bool], object]


def log_chunks(log_: UnifiedLog) -> Iterator[list[Batch]]:
    """The log's batches from its start to its end, LOAD_CHUNK_BYTES read at a time."""
    offset, end = log_.log_start_offset, log_.log_end_offset
    while offset < end:
        data = log_.read(offset, LOAD_CHUNK_BYTES, end)
        if not data:
            return
        chunk = []
        for position, header in iter_batches(data):
            offset = header.next_offset
            chunk.append((header, memoryview(data)[position : position + header.size]))
        yield chunk


@dataclass(eq=False)
class PartitionLoader:
    topic: str
    partitions: CoordinatorPartitions
    partition_of: Callable[[str, int], Partition | None]
    install: Install
    _loads: list[tuple[int, int]] = field(default_factory=list)
    _wake: trio.Event = field(default_factory=trio.Event)

    def start(self, index: int, epoch: int) -> None:
        """This broker was elected leader of `index` in `epoch`: load it (an empty partition,
        e.g. of a new topic, is installed at once)."""
        partition = self.partition_of(self.topic, index)
        if partition is not None and partition.log_end_offset == partition.log_start_offset:
            self.install(index, epoch, [], False)
            return
        log.info("loading %s-%d in epoch %d", self.topic, index, epoch)
        self._loads.append((index, epoch))
        self._wake.set()

    @property
    def pending(self) -> int:
        return len(self._loads)

    async def run(self) -> None:
        """Run the loads elections asked for, one at a time."""
        while True:
            while self._loads:
                index, epoch = self._loads.pop(0)
                try:
                    await self._load(index, epoch)
                except (StorageError, OSError) as exc:
                    log.error("cannot load %s-%d: %s", self.topic, index, exc)
            self._wake = trio.Event()
            await self._wake.wait()

    async def _load(self, index: int, epoch: int) -> None:
        """Read the partition to its log end (requests for its keys get
        COORDINATOR_LOAD_IN_PROGRESS meanwhile), then install it if still wanted."""
        partition = self.partition_of(self.topic, index)
        if partition is None or not self.partitions.is_loading(index, epoch):
            return
        batches: list[Batch] = []
        for chunk in log_chunks(partition.log):
            batches.extend(chunk)
            await trio.lowlevel.checkpoint()
            if not self.partitions.is_loading(index, epoch):
                log.info("dropped the load of %s-%d in epoch %d", self.topic, index, epoch)
                return
        self.install(index, epoch, batches, True)
