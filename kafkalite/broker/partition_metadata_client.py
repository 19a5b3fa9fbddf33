"""The latest offset of a partition, asked of its leader (Kafka's
DefaultPartitionMetadataClient.listLatestOffsets, which the group coordinator uses for a
share group's lag): this broker's high watermark where it leads the partition, else a
ListOffsets (LATEST, read_uncommitted: the leader's high watermark) sent to the leader over
the connections `send` keeps (the share persister's, broker/share_persister.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from kafkalite.protocol.entities import make

if TYPE_CHECKING:
    from kafkalite.broker.replica_manager import ReplicaManager

LIST_OFFSETS, LIST_OFFSETS_VERSION = 2, 8
LATEST_TIMESTAMP = -1
CONSUMER_REPLICA_ID = -1
READ_UNCOMMITTED = 0
# broker id, request -> (NONE and the response, or the error and None)
Send = Callable[[int, Any], Awaitable[tuple[ErrorCode, Any]]]


def latest_offset_request(topic: str, index: int) -> Any:
    m = load_payload_module(LIST_OFFSETS, LIST_OFFSETS_VERSION, EntityType.request)
    partition = make(
        m.ListOffsetsPartition,
        partition_index=index,
        current_leader_epoch=-1,
        timestamp=LATEST_TIMESTAMP,
    )
    return make(
        m.ListOffsetsRequest,
        replica_id=CONSUMER_REPLICA_ID,
        isolation_level=READ_UNCOMMITTED,
        topics=(make(m.ListOffsetsTopic, name=topic, partitions=(partition,)),),
    )


@dataclass(eq=False)
class PartitionMetadataClient:
    replica_manager: ReplicaManager
    send: Send

    async def latest_offset(self, topic: str, index: int) -> tuple[ErrorCode, int]:
        """The partition's end offset for a consumer (its high watermark), or why not."""
        partition = self.replica_manager.partition(topic, index)
        if partition is not None and partition.is_leader:
            return ErrorCode.none, partition.high_watermark
        state = self.replica_manager.metadata.partition_state(topic, index)
        if state is None:
            return ErrorCode.unknown_topic_or_partition, -1
        if state.leader < 0:
            return ErrorCode.leader_not_available, -1
        if state.leader == self.replica_manager.config.broker_id:  # not hosted as leader yet
            return ErrorCode.not_leader_or_follower, -1
        error, response = await self.send(state.leader, latest_offset_request(topic, index))
        if response is None:
            return error, -1
        answer = response.topics[0].partitions[0]
        return ErrorCode(answer.error_code), answer.offset
