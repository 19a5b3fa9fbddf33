"""OffsetCommit, OffsetFetch and offset expiry, following Kafka 4's OffsetMetadataManager
and `ClassicGroup.validateOffsetCommit`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from kafkalite.coordinator import consumer_group_admin
from kafkalite.coordinator.consumer_group import ConsumerGroup
from kafkalite.coordinator.context import Context
from kafkalite.coordinator.group import CONSUMER_PROTOCOL_TYPE, ClassicGroup
from kafkalite.coordinator.messages import UNKNOWN_MEMBER_ID
from kafkalite.coordinator.offsets import (
    INVALID_OFFSET,
    NO_LEADER_EPOCH,
    NO_METADATA,
    OffsetAndMetadata,
    TopicPartition,
)
from kafkalite.coordinator.rebalance import reschedule_heartbeat
from kafkalite.coordinator.states import GroupState

DEFAULT_RETENTION_TIME = -1


@dataclass(frozen=True, slots=True)
class PartitionCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str | None = NO_METADATA


@dataclass(frozen=True, slots=True)
class OffsetCommitRequest:
    group_id: str
    partitions: tuple[PartitionCommit, ...]
    api_version: int
    # generation -1 with no member id: a simple consumer or the admin client.
    generation_id: int = -1
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None
    # v2-v4 only; -1 means the broker's offsets.retention.minutes.
    retention_time_ms: int = DEFAULT_RETENTION_TIME


@dataclass(frozen=True, slots=True)
class PartitionResult:
    topic: str
    partition: int
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class OffsetCommitResponse:
    partitions: tuple[PartitionResult, ...]


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int = INVALID_OFFSET
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = NO_METADATA
    error: ErrorCode = ErrorCode.none


@dataclass(frozen=True, slots=True)
class OffsetFetchResponse:
    error: ErrorCode
    partitions: tuple[FetchedOffset, ...] = ()


@dataclass(frozen=True, slots=True)
class ExpiredOffsets:
    partitions: dict[str, list[TopicPartition]] = field(default_factory=dict)
    deleted_groups: list[str] = field(default_factory=list)


def validate_offset_commit(
    group: ClassicGroup, member_id: str, group_instance_id: str | None, generation_id: int
) -> ErrorCode:
    if group.state is GroupState.DEAD:
        return ErrorCode.coordinator_not_available
    if generation_id < 0 and group.state is GroupState.EMPTY:
        # Admin client or a consumer without group management: fine while nobody is in.
        return ErrorCode.none
    if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
        error = group.validate_generation(member_id, group_instance_id, generation_id)
        if error is not ErrorCode.none:
            return error
    elif group.state is not GroupState.EMPTY:
        # Anonymous commits would overwrite offsets the members are managing.
        return ErrorCode.unknown_member_id
    if group.state is GroupState.COMPLETING_REBALANCE:
        # The member saw the new generation but not its assignment yet: let it finish.
        return ErrorCode.rebalance_in_progress
    return ErrorCode.none


def commit_offsets(ctx: Context, request: OffsetCommitRequest, now_ms: int) -> OffsetCommitResponse:
    def everywhere(error: ErrorCode) -> OffsetCommitResponse:
        return OffsetCommitResponse(
            tuple(PartitionResult(p.topic, p.partition, error) for p in request.partitions)
        )

    consumer_group = ctx.consumer_groups.get(request.group_id)
    if consumer_group is not None:
        error = _validate_consumer_group_commit(consumer_group, request)
        if error is not ErrorCode.none:
            return everywhere(error)
        return _store_commits(ctx, request, now_ms)
    group = ctx.groups.get(request.group_id)
    if group is None:
        if request.generation_id >= 0:
            # v9+ say plainly that the group is gone; older clients expect ILLEGAL_GENERATION.
            if request.api_version >= 9:
                return everywhere(ErrorCode.group_id_not_found)
            return everywhere(ErrorCode.illegal_generation)
        # A "simple" group: it exists only to hold offsets.
        group = ClassicGroup(request.group_id, GroupState.EMPTY, now_ms)
        ctx.groups[request.group_id] = group

    error = validate_offset_commit(
        group, request.member_id, request.group_instance_id, request.generation_id
    )
    if error is not ErrorCode.none:
        return everywhere(error)
    if group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
        # In the classic protocol a commit also proves the member alive.
        reschedule_heartbeat(ctx, group, group.members[request.member_id], now_ms)
    return _store_commits(ctx, request, now_ms)


def _validate_consumer_group_commit(
    group: ConsumerGroup, request: OffsetCommitRequest
) -> ErrorCode:
    """Kafka's ConsumerGroup.validateOffsetCommit: the member epoch must be current."""
    epoch = request.generation_id  # v9+: the member epoch
    if epoch < 0 and not group.members:
        return ErrorCode.none  # the admin client, or a consumer outside the group
    member = group.members.get(request.member_id)
    if member is None:
        return ErrorCode.unknown_member_id
    if request.api_version < 9:
        return ErrorCode.unsupported_version  # consumer-protocol members commit with v9+
    if epoch != member.member_epoch:
        return ErrorCode.stale_member_epoch
    return ErrorCode.none


def _store_commits(ctx: Context, request: OffsetCommitRequest, now_ms: int) -> OffsetCommitResponse:
    expire_at = (
        None
        if request.retention_time_ms == DEFAULT_RETENTION_TIME
        else now_ms + request.retention_time_ms
    )
    results = []
    for commit in request.partitions:
        metadata = NO_METADATA if commit.metadata is None else commit.metadata
        if _java_length(metadata) > ctx.config.offset_metadata_max_bytes:
            results.append(
                PartitionResult(commit.topic, commit.partition, ErrorCode.offset_metadata_too_large)
            )
            continue
        ctx.offsets.commit(
            request.group_id,
            TopicPartition(commit.topic, commit.partition),
            OffsetAndMetadata(
                offset=commit.offset,
                leader_epoch=commit.leader_epoch,
                metadata=metadata,
                commit_timestamp_ms=now_ms,
                expire_timestamp_ms=expire_at,
            ),
        )
        results.append(PartitionResult(commit.topic, commit.partition, ErrorCode.none))
    return OffsetCommitResponse(tuple(results))


def _java_length(text: str) -> int:
    """Java's String.length(): UTF-16 code units (what Kafka compares to the limit)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def fetch_offsets(
    ctx: Context, group_id: str, partitions: Iterable[TopicPartition] | None = None
) -> OffsetFetchResponse:
    """Committed offsets of the group; all of them when `partitions` is None.

    Like Kafka 4, an unknown group is not an error: its partitions have no offset (-1).
    Offsets are readable in every state, since simple consumers never join.
    """
    group = ctx.groups.get(group_id)
    known = (
        group is not None and group.state is not GroupState.DEAD
    ) or group_id in ctx.consumer_groups
    stored = ctx.offsets.of_group(group_id) if known else {}
    wanted = list(stored) if partitions is None else [TopicPartition(*tp) for tp in partitions]
    fetched = []
    for tp in wanted:
        value = stored.get(tp)
        if value is None:
            fetched.append(FetchedOffset(tp.topic, tp.partition))
        else:
            fetched.append(
                FetchedOffset(
                    tp.topic, tp.partition, value.offset, value.leader_epoch, value.metadata
                )
            )
    return OffsetFetchResponse(ErrorCode.none, tuple(fetched))


def _expiration_base(group: ClassicGroup) -> Callable[[OffsetAndMetadata], int] | None:
    """Kafka's offsetExpirationCondition: what an offset's age is measured from."""
    if group.protocol_type is None:
        # Simple consumer group: each offset ages from its own commit.
        return lambda offset: offset.commit_timestamp_ms
    if group.state is GroupState.EMPTY:
        # Nobody is consuming: offsets age from when the group emptied.
        state_since = group.state_timestamp_ms
        return lambda offset: state_since
    if (
        group.protocol_type == CONSUMER_PROTOCOL_TYPE
        and group.subscribed_topics is not None
        and group.state is GroupState.STABLE
    ):
        # Active consumers: offsets of topics nobody subscribes to age from their commit.
        return lambda offset: offset.commit_timestamp_ms
    return None


def expire_offsets(ctx: Context, now_ms: int, retention_ms: int) -> ExpiredOffsets:
    """The periodic offset cleanup (offsets.retention.minutes).

    Removes expired offsets, then deletes Empty groups left with no offsets at all.
    """
    result = ExpiredOffsets()
    _expire_consumer_groups(ctx, now_ms, retention_ms, result)
    for group_id, group in list(ctx.groups.items()):
        all_expired = True
        if ctx.offsets.has_offsets(group_id):
            base = _expiration_base(group)
            if base is None:
                continue
            removed, all_expired = _expire_group(ctx, group, base, now_ms, retention_ms)
            if removed:
                result.partitions[group_id] = removed
        if all_expired and group.state is GroupState.EMPTY:
            ctx.remove_group(group, now_ms)
            result.deleted_groups.append(group_id)
    return result


def _expire_consumer_groups(
    ctx: Context, now_ms: int, retention_ms: int, result: ExpiredOffsets
) -> None:
    """Kafka's ConsumerGroup: offsets age from their commit unless their topic is
    subscribed; an Empty group left without offsets is deleted."""
    for group_id, group in list(ctx.consumer_groups.items()):
        removed = ctx.offsets.remove_if(group_id, _consumer_expiry(group, now_ms, retention_ms))
        if removed:
            result.partitions[group_id] = removed
        if not group.members and not ctx.offsets.has_offsets(group_id):
            consumer_group_admin.delete(ctx, group)
            result.deleted_groups.append(group_id)


def _consumer_expiry(
    group: ConsumerGroup, now_ms: int, retention_ms: int
) -> Callable[[TopicPartition, OffsetAndMetadata], bool]:
    def is_expired(tp: TopicPartition, offset: OffsetAndMetadata) -> bool:
        if group.is_subscribed_to_topic(tp.topic):
            return False
        if offset.expire_timestamp_ms is not None:
            return now_ms >= offset.expire_timestamp_ms
        return now_ms - offset.commit_timestamp_ms >= retention_ms

    return is_expired


def _expire_group(
    ctx: Context,
    group: ClassicGroup,
    base: Callable[[OffsetAndMetadata], int],
    now_ms: int,
    retention_ms: int,
) -> tuple[list[TopicPartition], bool]:
    """Drop the group's expired offsets; also say whether every offset expired."""
    kept = False

    def is_expired(tp: TopicPartition, offset: OffsetAndMetadata) -> bool:
        nonlocal kept
        if group.is_subscribed_to_topic(tp.topic):
            gone = False  # still consumed: never expires
        elif offset.expire_timestamp_ms is not None:
            # v2-v4 commits carried their own retention.
            gone = now_ms >= offset.expire_timestamp_ms
        else:
            gone = now_ms - base(offset) >= retention_ms
        kept = kept or not gone
        return gone

    removed = ctx.offsets.remove_if(group.group_id, is_expired)
    return removed, not kept


@dataclass(frozen=True, slots=True)
class OffsetDeleteResponse:
    error: ErrorCode
    partitions: tuple[PartitionResult, ...] = ()


def delete_offsets(
    ctx: Context, group_id: str, partitions: Iterable[TopicPartition]
) -> OffsetDeleteResponse:
    """OffsetDelete, as Kafka's OffsetMetadataManager.deleteOffsets with a classic group.

    Only offsets nobody consumes may go: a live group's subscribed topics answer
    GROUP_SUBSCRIBED_TO_TOPIC, and a live non-consumer group refuses as a whole. Unlike
    OffsetCommit and OffsetFetch, the group id "" is INVALID_GROUP_ID.
    """
    if not group_id:
        return OffsetDeleteResponse(ErrorCode.invalid_group_id)
    consumer_group = ctx.consumer_groups.get(group_id)
    if consumer_group is not None:
        return _delete_offsets(ctx, group_id, partitions, consumer_group.is_subscribed_to_topic)
    group = ctx.groups.get(group_id)
    if group is None or group.state is GroupState.DEAD:
        return OffsetDeleteResponse(ErrorCode.group_id_not_found)
    live = group.state is not GroupState.EMPTY
    if live and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return OffsetDeleteResponse(ErrorCode.non_empty_group)
    return _delete_offsets(
        ctx, group_id, partitions, lambda topic: live and group.is_subscribed_to_topic(topic)
    )


def _delete_offsets(
    ctx: Context,
    group_id: str,
    partitions: Iterable[TopicPartition],
    subscribed: Callable[[str], bool],
) -> OffsetDeleteResponse:
    results = []
    for topic, partition in partitions:
        if subscribed(topic):
            results.append(PartitionResult(topic, partition, ErrorCode.group_subscribed_to_topic))
            continue
        ctx.offsets.delete(group_id, [TopicPartition(topic, partition)])
        results.append(PartitionResult(topic, partition, ErrorCode.none))
    return OffsetDeleteResponse(ErrorCode.none, tuple(results))


def load_offset(
    ctx: Context, group_id: str, tp: TopicPartition, value: OffsetAndMetadata | None, now_ms: int
) -> None:
    """Replay one `__consumer_offsets` record (None: a tombstone) at startup.

    A group known only through its offsets comes back Empty, like a simple group.
    """
    if value is None:
        ctx.offsets.unload(group_id, [tp])
        return
    if group_id not in ctx.groups and group_id not in ctx.consumer_groups:
        ctx.groups[group_id] = ClassicGroup(group_id, GroupState.EMPTY, now_ms)
    ctx.offsets.load(group_id, tp, value)
