"""Broker settings the group coordinator obeys, with Apache Kafka's defaults."""

from __future__ import annotations

from dataclasses import dataclass, field

INT_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class GroupConfig:
    # group.min.session.timeout.ms / group.max.session.timeout.ms: JoinGroup outside the
    # range gets INVALID_SESSION_TIMEOUT.
    min_session_timeout_ms: int = 6_000
    max_session_timeout_ms: int = 1_800_000
    # group.max.size
    max_size: int = INT_MAX
    # group.initial.rebalance.delay.ms: how long an Empty group's first rebalance waits
    # for more members (extended while members keep arriving).
    initial_rebalance_delay_ms: int = 3_000
    # Kafka's classicGroupNewMemberJoinTimeoutMs (not configurable there): a new member
    # cannot heartbeat while its JoinGroup is parked, so its session is this long instead.
    new_member_join_timeout_ms: int = 300_000
    # offset.metadata.max.bytes (Kafka compares the Java string length, in UTF-16 units).
    offset_metadata_max_bytes: int = 4_096
    # KIP-848 consumer groups (group.consumer.*), Kafka 4's defaults.
    consumer_session_timeout_ms: int = 45_000
    consumer_heartbeat_interval_ms: int = 5_000
    consumer_max_size: int = INT_MAX
    # group.consumer.assignors: the first one is the default.
    consumer_assignors: tuple[str, ...] = field(default=("uniform", "range"))
