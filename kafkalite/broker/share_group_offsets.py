"""A share group's offsets (KIP-932): DescribeShareGroupOffsets, AlterShareGroupOffsets and
DeleteShareGroupOffsets, as Kafka 4.4's GroupCoordinatorService and GroupMetadataManager
answer them, through the persister (broker/share_persister.py): the share-partitions' state is
kept by the share coordinator of each one's `__share_group_state` partition, on this broker
or, in a cluster, on another one (Kafka's readSummary, initializeState and deleteState).

* Describe reads each share-partition's persisted state: its start offset, the leader epoch
  of its last write and its lag, the partition leader's latest offset (its high watermark,
  broker/partition_metadata_client.py) less the start offset less
  the records already delivered for good above it (Kafka's deliveryCompleteCount). A topic
  that does not exist, a share-partition never initialized or one whose state cannot be read
  now has start offset -1 and lag -1; with no topics named (v1), every share-partition the
  group has state for is described. kafkalite does not keep Kafka's
  ShareGroupStatePartitionMetadata (which share-partitions a group initialized): the share
  coordinators are asked about every partition whose state is kept on another broker.
* Alter sets start offsets of an empty share group (created if it does not exist, as Kafka's
  getOrMaybeCreateShareGroup): each share-partition starts afresh there (a new ShareSnapshot,
  nothing in flight), what this broker held of it is dropped.
* Delete forgets the state of the named topics' share-partitions of an empty share group:
  the next member assigned them starts at the group's `share.auto.offset.reset` point.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from kafkalite.broker.partition_metadata_client import PartitionMetadataClient
from kafkalite.broker.share_persister import StateSummary, summary_of
from kafkalite.share.share_group import ShareGroup, ShareGroupCoordinator
from kafkalite.share.share_records import SharePartitionKey

if TYPE_CHECKING:
    from kafkalite.broker.group_coordinator_service import GroupCoordinatorService
    from kafkalite.broker.share_partition_manager import SharePartitionManager

UNINITIALIZED_START_OFFSET = -1
UNINITIALIZED_LAG = -1
DEFAULT_LEADER_EPOCH = 0
# Kafka's Errors messages, which these answers carry.
UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."
NON_EMPTY_GROUP_MESSAGE = "The group is not empty."
NO_OFFSETS_MESSAGE = "There is no offset information to delete."


@dataclass(frozen=True, slots=True)
class PartitionResult:
    partition: int
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    start_offset: int = UNINITIALIZED_START_OFFSET
    leader_epoch: int = DEFAULT_LEADER_EPOCH
    lag: int = UNINITIALIZED_LAG


@dataclass(frozen=True, slots=True)
class TopicResult:
    name: str
    topic_id: uuid.UUID | None
    partitions: tuple[PartitionResult, ...] = ()
    error: ErrorCode = ErrorCode.none
    message: str | None = None


@dataclass(frozen=True, slots=True)
class GroupResult:
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    topics: tuple[TopicResult, ...] = ()


def _refused(error: ErrorCode, message: str | None = None) -> GroupResult:
    return GroupResult(error, message)


@dataclass(eq=False)
class ShareGroupOffsets:
    groups: GroupCoordinatorService
    partitions: SharePartitionManager
    coordinator: ShareGroupCoordinator
    latest_offsets: PartitionMetadataClient = field(init=False)

    def __post_init__(self) -> None:
        self.latest_offsets = PartitionMetadataClient(
            self.groups.replica_manager, self.partitions.persister.request
        )

    # -- the persisted state ---------------------------------------------------------------

    async def initialized(
        self, group_id: str, topic_ids: set[uuid.UUID] | None = None
    ) -> tuple[ErrorCode, dict[SharePartitionKey, StateSummary]]:
        """The group's share-partitions that have state (of these topics, or of any), with
        their summaries: those this broker's share coordinator keeps, and each partition's
        whose state partition another broker leads, asked there. An error where one cannot
        be read (nothing is known then of whether it has state)."""
        persister = self.partitions.persister
        found = {
            key: summary_of(state)
            for key, state in self.partitions.coordinator.group_states(group_id).items()
            if topic_ids is None or key.topic_id in topic_ids
        }
        if persister.no_state_yet():
            return ErrorCode.none, found
        for key in self._keys(group_id, topic_ids):
            if persister.is_local(key):
                continue
            error, summary = await persister.read_summary(key)
            if error is not ErrorCode.none:
                return error, {}
            if summary is not None:
                found[key] = summary
        return ErrorCode.none, found

    def _keys(self, group_id: str, topic_ids: set[uuid.UUID] | None) -> list[SharePartitionKey]:
        """Every share-partition the group could have (of these topics)."""
        keys = []
        for topic in self.groups.replica_manager.metadata.topics.values():
            if topic_ids is None and topic.name.startswith("__"):
                continue  # internal topics have no share-partitions
            if topic_ids is None or topic.topic_id in topic_ids:
                keys += [
                    SharePartitionKey(group_id, topic.topic_id, p)
                    for p in range(topic.num_partitions)
                ]
        return keys

    # -- describe --------------------------------------------------------------------------

    async def describe(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]] | None
    ) -> GroupResult:
        """The named topics' share-partitions, or (None) every one the group has state for."""
        error = self.groups.check_group(group_id)
        if error is not ErrorCode.none:
            return _refused(error)
        if topics is None:
            error, states = await self.initialized(group_id)
            if error is not ErrorCode.none:
                return _refused(error)
            named = self._initialized_topics(states)
            return GroupResult(topics=tuple(await self._described(group_id, named, states)))
        metadata = self.groups.replica_manager.metadata
        found, missing = [], []
        for name, partitions in topics:
            info = metadata.topics.get(name)
            if info is None:
                results = tuple(PartitionResult(p) for p in partitions)
                missing.append(TopicResult(name, None, results))
                continue
            summaries = {}
            for index in partitions:
                key = SharePartitionKey(group_id, info.topic_id, index)
                error, summary = await self.partitions.persister.read_summary(key)
                if summary is not None:  # an error is an absence of data, as in Kafka
                    summaries[key] = summary
            found += await self._described(group_id, [(name, list(partitions))], summaries)
        return GroupResult(topics=(*found, *missing))

    async def _described(
        self,
        group_id: str,
        topics: Sequence[tuple[str, Sequence[int]]],
        summaries: dict[SharePartitionKey, StateSummary],
    ) -> list[TopicResult]:
        metadata, results = self.groups.replica_manager.metadata, []
        for name, partitions in topics:
            topic_id = metadata.topics[name].topic_id
            described = [
                await self._summary(
                    name, p, summaries.get(SharePartitionKey(group_id, topic_id, p))
                )
                for p in partitions
            ]
            results.append(TopicResult(name, topic_id, tuple(described)))
        return results

    def _initialized_topics(
        self, states: dict[SharePartitionKey, StateSummary]
    ) -> list[tuple[str, list[int]]]:
        by_topic: dict[str, list[int]] = defaultdict(list)
        metadata = self.groups.replica_manager.metadata
        for key in sorted(states, key=lambda k: (str(k.topic_id), k.partition)):
            topic = metadata.topic_by_id(key.topic_id)
            if topic is not None:
                by_topic[topic.name].append(key.partition)
        return sorted(by_topic.items())

    async def _summary(
        self, topic: str, index: int, summary: StateSummary | None
    ) -> PartitionResult:
        if summary is None:
            return PartitionResult(index)
        error, latest = await self.latest_offsets.latest_offset(topic, index)
        if error is not ErrorCode.none:  # as Kafka: the error, for this partition
            return PartitionResult(index, error, error.name)
        lag = latest - summary.start_offset - summary.delivery_complete_count
        return PartitionResult(
            index, start_offset=summary.start_offset, leader_epoch=summary.leader_epoch, lag=lag
        )

    # -- alter -----------------------------------------------------------------------------

    async def alter(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[tuple[int, int]]]]
    ) -> GroupResult:
        """Set the start offsets (partition, offset) of an empty share group's
        share-partitions."""
        refused = await self._check_empty(group_id, create=True)
        if refused is not None:
            return refused
        metadata = self.groups.replica_manager.metadata
        results = []
        for name, offsets in topics:
            info = metadata.topics.get(name)
            if info is None:
                unknown = tuple(
                    PartitionResult(p, ErrorCode.unknown_topic_or_partition, UNKNOWN_TOPIC_MESSAGE)
                    for p, _ in offsets
                )
                results.append(TopicResult(name, None, unknown))
                continue
            partitions = []
            for index, start_offset in offsets:
                if not 0 <= index < info.num_partitions:
                    partitions.append(
                        PartitionResult(
                            index, ErrorCode.unknown_topic_or_partition, UNKNOWN_TOPIC_MESSAGE
                        )
                    )
                    continue
                key = SharePartitionKey(group_id, info.topic_id, index)
                error = await self.partitions.reset(key, start_offset)
                message = None if error is ErrorCode.none else error.name
                partitions.append(PartitionResult(index, error, message))
            results.append(TopicResult(name, info.topic_id, tuple(partitions)))
        return GroupResult(topics=tuple(results))

    # -- delete ----------------------------------------------------------------------------

    async def delete(self, group_id: str, topic_names: Sequence[str]) -> GroupResult:
        """Forget the state of the named topics' share-partitions of an empty share group."""
        refused = await self._check_empty(group_id, create=False)
        if refused is not None:
            return refused
        metadata = self.groups.replica_manager.metadata
        deleted, failed = [], []
        for name in topic_names:
            info = metadata.topics.get(name)
            if info is None:
                failed.append(
                    TopicResult(
                        name,
                        None,
                        error=ErrorCode.unknown_topic_or_partition,
                        message=UNKNOWN_TOPIC_MESSAGE,
                    )
                )
                continue
            error, states = await self.initialized(group_id, {info.topic_id})
            if error is not ErrorCode.none:
                failed.append(TopicResult(name, info.topic_id, error=error, message=error.name))
                continue
            keys = sorted(states, key=lambda k: k.partition)
            if not keys:
                failed.append(
                    TopicResult(
                        name,
                        None,
                        error=ErrorCode.unknown_topic_or_partition,
                        message=NO_OFFSETS_MESSAGE,
                    )
                )
                continue
            error = await self.partitions.forget(keys)
            if error is ErrorCode.none:
                deleted.append(TopicResult(name, info.topic_id))
            else:
                failed.append(TopicResult(name, info.topic_id, error=error, message=error.name))
        return GroupResult(topics=(*deleted, *failed))

    # -- the group -------------------------------------------------------------------------

    async def _check_empty(self, group_id: str, *, create: bool) -> GroupResult | None:
        """Why the group's offsets cannot change (None: they can): not served here, not a
        share group, missing (unless `create`), or with members."""
        if not group_id:
            return _refused(ErrorCode.invalid_group_id)
        error = self.groups.check_group(group_id)
        if error is not ErrorCode.none:
            return _refused(error)
        if self.groups.coordinator.has_group(group_id):
            return _refused(ErrorCode.group_id_not_found, f"Group {group_id} is not a share group.")
        group = await self.share_group(group_id, create=create)
        if group is None:
            return _refused(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
        if group.members:
            return _refused(ErrorCode.non_empty_group, NON_EMPTY_GROUP_MESSAGE)
        return None

    async def share_group(self, group_id: str, *, create: bool) -> ShareGroup | None:
        """The share group, also when only its share-partitions' state survived a restart or
        a move of its group coordinator (membership is not persisted yet: it is then Empty);
        created empty if `create`."""
        group = self.coordinator.groups.get(group_id)
        if group is None and (create or await self._has_state(group_id)):
            group = self.coordinator.groups[group_id] = ShareGroup(group_id)
        return group

    async def _has_state(self, group_id: str) -> bool:
        if self.partitions.coordinator.group_states(group_id):
            return True
        _, states = await self.initialized(group_id)
        return bool(states)
