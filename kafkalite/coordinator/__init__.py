"""Sans-IO classic consumer-group coordinator (Kafka's classic group protocol).

`GroupCoordinator` is the entry point; see its module for how an I/O layer drives it.
"""

from kafkalite.coordinator.admin import DescribedGroup, DescribedMember, ListedGroup
from kafkalite.coordinator.config import GroupConfig
from kafkalite.coordinator.coordinator import GroupCoordinator
from kafkalite.coordinator.group import ClassicGroup
from kafkalite.coordinator.member import Member
from kafkalite.coordinator.messages import (
    Completion,
    HeartbeatRequest,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberIdentity,
    MemberLeaveResponse,
    Protocol,
    SyncGroupRequest,
    SyncGroupResponse,
    Ticket,
)
from kafkalite.coordinator.offset_commit import (
    ExpiredOffsets,
    FetchedOffset,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchResponse,
    PartitionCommit,
    PartitionResult,
)
from kafkalite.coordinator.offsets import OffsetAndMetadata, TopicPartition
from kafkalite.coordinator.partitioning import group_partition, java_string_hashcode, kafka_abs
from kafkalite.coordinator.states import VALID_PREVIOUS_STATES, GroupState, IllegalTransition
from kafkalite.coordinator.timers import Timer, TimerKind

__all__ = [
    "VALID_PREVIOUS_STATES",
    "ClassicGroup",
    "Completion",
    "DescribedGroup",
    "DescribedMember",
    "ExpiredOffsets",
    "FetchedOffset",
    "GroupConfig",
    "GroupCoordinator",
    "GroupState",
    "HeartbeatRequest",
    "IllegalTransition",
    "JoinGroupMember",
    "JoinGroupRequest",
    "JoinGroupResponse",
    "LeaveGroupRequest",
    "LeaveGroupResponse",
    "ListedGroup",
    "Member",
    "MemberIdentity",
    "MemberLeaveResponse",
    "OffsetAndMetadata",
    "OffsetCommitRequest",
    "OffsetCommitResponse",
    "OffsetFetchResponse",
    "PartitionCommit",
    "PartitionResult",
    "Protocol",
    "SyncGroupRequest",
    "SyncGroupResponse",
    "Ticket",
    "Timer",
    "TimerKind",
    "TopicPartition",
    "group_partition",
    "java_string_hashcode",
    "kafka_abs",
]
