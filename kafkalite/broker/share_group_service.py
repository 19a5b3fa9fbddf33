"""Share groups on the group coordinator's partitions: an adapter between the sans-IO
`ShareGroupCoordinator` (share/share_group.py) and the broker.

A share group is served by the broker leading its `__consumer_offsets` partition, like any
group (the group coordinator runtime answers NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS
otherwise). Membership is kept in memory. A member's assignment is answered only once its
share-partitions are initialized (their start offsets persisted), so records produced after
a member got its assignment are delivered. A fenced member (session expired) has its share
session closed and its acquired records released.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import trio
from kio.schema.errors import ErrorCode

from kafkalite.broker.group_coordinator_service import GroupCoordinatorService, TopicsView
from kafkalite.broker.share_group_offsets import ShareGroupOffsets
from kafkalite.broker.share_partition_manager import SharePartitionManager
from kafkalite.share.share_group import (
    DescribedShareGroup,
    ShareGroupConfig,
    ShareGroupCoordinator,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)

if TYPE_CHECKING:
    from kafkalite.config import BrokerConfig

log = logging.getLogger("kafkalite.share")

INITIALIZE_WAIT_S = 5.0
_LOADING = (ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available)


def share_group_config(config: BrokerConfig) -> ShareGroupConfig:
    return ShareGroupConfig(
        session_timeout_ms=config.int("group.share.session.timeout.ms"),
        heartbeat_interval_ms=config.int("group.share.heartbeat.interval.ms"),
        max_size=config.int("group.share.max.size"),
    )


@dataclass(eq=False)
class ShareGroupService:
    config: BrokerConfig
    groups: GroupCoordinatorService
    partitions: SharePartitionManager
    coordinator: ShareGroupCoordinator = field(init=False)
    offsets: ShareGroupOffsets = field(init=False)
    _wake_timer: trio.Event = field(default_factory=trio.Event)

    def __post_init__(self) -> None:
        self.coordinator = ShareGroupCoordinator(
            share_group_config(self.config), group_config=self._group_config
        )
        self.offsets = ShareGroupOffsets(self.groups, self.partitions, self.coordinator)

    def _group_config(self, group_id: str) -> ShareGroupConfig:
        """The group's session timeout and heartbeat interval (its group configs)."""
        settings = self.partitions.group_configs.settings(group_id)
        return ShareGroupConfig(
            session_timeout_ms=settings.session_timeout_ms,
            heartbeat_interval_ms=settings.heartbeat_interval_ms,
            max_size=self.config.int("group.share.max.size"),
        )

    def now_ms(self) -> int:
        return self.groups.now_ms()

    def _not_share_group(self, group_id: str) -> bool:
        return self.groups.coordinator.has_group(group_id)

    async def heartbeat(self, request: ShareGroupHeartbeatRequest) -> ShareGroupHeartbeatResponse:
        error = self.groups.check_group(request.group_id)
        if error is not ErrorCode.none:
            return ShareGroupHeartbeatResponse(error)
        if self._not_share_group(request.group_id):
            return ShareGroupHeartbeatResponse(
                ErrorCode.group_id_not_found, f"Group {request.group_id} is not a share group."
            )
        topics = TopicsView(self.groups.replica_manager)
        response = self.coordinator.heartbeat(request, topics, self.now_ms())
        self._wake_timer.set()
        await self._handle_fenced()
        if response.error is ErrorCode.none and response.assignment:
            await self._initialize(request.group_id, response.assignment)
        return response

    async def _initialize(self, group_id: str, assignment: Iterable[tuple]) -> None:
        """Kafka initializes a share-partition's state before assigning it; here the
        partition leader is this broker, so the assignment waits for it."""
        for topic_id, index in sorted(assignment):
            error = await self._initialize_one(group_id, (topic_id, index))
            if error is not ErrorCode.none:
                log.info(
                    "share-partition %s %s-%d not initialized: %s",
                    group_id,
                    topic_id,
                    index,
                    error.name,
                )

    async def _initialize_one(self, group_id: str, tp: tuple) -> ErrorCode:
        """Initialize, waiting (a bounded while) for `__share_group_state` to be created and
        loaded on first use: a start taken later than the assignment would skip records."""
        deadline = trio.current_time() + INITIALIZE_WAIT_S
        while True:
            error, _ = await self.partitions.share_partition(group_id, tp)
            if error not in _LOADING or trio.current_time() >= deadline:
                return error
            await trio.sleep(0.01)  # the runtime loads the partition meanwhile

    async def _handle_fenced(self) -> None:
        for group_id, member_id in self.coordinator.take_fenced():
            log.info("member %s of share group %s fenced: session expired", member_id, group_id)
            await self.partitions.member_left(group_id, member_id)

    def describe(self, group_id: str) -> DescribedShareGroup:
        error = self.groups.check_group(group_id)
        if error is not ErrorCode.none:
            return DescribedShareGroup(group_id, error)
        if self._not_share_group(group_id):
            return DescribedShareGroup(
                group_id, ErrorCode.group_id_not_found, f"Group {group_id} is not a share group."
            )
        return self.coordinator.describe(group_id)

    async def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups of a share group: an Empty one is removed with its share-partitions'
        state, wherever it is kept (NON_EMPTY_GROUP while it has members)."""
        error, states = await self.offsets.initialized(group_id)
        if error is not ErrorCode.none:
            return error
        error = self.coordinator.delete(group_id)
        if error is ErrorCode.none:
            error = await self.partitions.delete_group(group_id, list(states))
            log.info("deleted share group %s", group_id)
        return error

    def listed(self) -> list[tuple[str, str]]:
        """(group id, state) of the share groups served here."""
        return [
            (group_id, state)
            for group_id, state in self.coordinator.listed()
            if self.groups.check_group(group_id) is ErrorCode.none
        ]

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Fence members whose session expired, at the earliest deadline."""
        task_status.started()
        while True:
            deadline = self.coordinator.next_deadline()
            self._wake_timer = trio.Event()
            wait = math.inf if deadline is None else max(0.0, (deadline - self.now_ms()) / 1000)
            with trio.move_on_after(wait):
                await self._wake_timer.wait()
            self.coordinator.tick(self.now_ms())
            try:
                await self._handle_fenced()
            except Exception:
                log.exception("share group timers failed")
