"""Drive the sans-IO KIP-848 coordinator like a broker and its clients would.

`Topics` is the broker's topic table (the coordinator's TopicsView); `Client` is a member as
the protocol expects a client to behave: it owns what its last assignment said, sends the
owned partitions with every heartbeat and keeps the epoch it was given.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from kafkalite.coordinator import GroupConfig, GroupCoordinator
from kafkalite.coordinator.consumer_group import Partitions, TopicInfo
from kafkalite.coordinator.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)

GROUP = "cg"
REBALANCE_MS = 30_000
CONFIG = GroupConfig(consumer_session_timeout_ms=45_000, consumer_heartbeat_interval_ms=5_000)


class Topics:
    def __init__(self, **partitions: int) -> None:
        self.infos: dict[str, TopicInfo] = {}
        for name, count in partitions.items():
            self.set(name, count)

    def set(self, name: str, partitions: int) -> None:
        topic_id = self.infos[name].topic_id if name in self.infos else uuid.uuid4()
        self.infos[name] = TopicInfo(topic_id, name, partitions)

    def by_name(self, name: str) -> TopicInfo | None:
        return self.infos.get(name)

    def names(self) -> list[str]:
        return list(self.infos)

    def tp(self, name: str, partition: int) -> tuple[uuid.UUID, int]:
        return (self.infos[name].topic_id, partition)

    def all(self, name: str) -> Partitions:
        return frozenset(self.tp(name, p) for p in range(self.infos[name].partitions))


@dataclass
class Client:
    member_id: str
    topics: tuple[str, ...]
    instance_id: str | None = None
    epoch: int = 0
    owned: Partitions = frozenset()
    last: ConsumerGroupHeartbeatResponse | None = field(default=None, repr=False)


class Cluster:
    def __init__(self, topics: Topics, config: GroupConfig = CONFIG) -> None:
        self.topics = topics
        self.coordinator = GroupCoordinator(config)
        self.now = 1_000_000

    def send(self, request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
        return self.coordinator.consumer_group_heartbeat(request, self.topics, self.now)

    def join(self, client: Client, **extra: object) -> ConsumerGroupHeartbeatResponse:
        request = ConsumerGroupHeartbeatRequest(
            group_id=GROUP,
            member_id=client.member_id,
            member_epoch=0,
            instance_id=client.instance_id,
            rebalance_timeout_ms=REBALANCE_MS,
            subscribed_topic_names=client.topics,
            owned=frozenset(),
            **extra,  # type: ignore[arg-type]
        )
        return self._apply(client, self.send(request))

    def heartbeat(self, client: Client) -> ConsumerGroupHeartbeatResponse:
        request = ConsumerGroupHeartbeatRequest(
            group_id=GROUP,
            member_id=client.member_id,
            member_epoch=client.epoch,
            instance_id=client.instance_id,
            owned=client.owned,
        )
        return self._apply(client, self.send(request))

    def leave(self, client: Client, epoch: int = -1) -> ConsumerGroupHeartbeatResponse:
        request = ConsumerGroupHeartbeatRequest(
            group_id=GROUP,
            member_id=client.member_id,
            member_epoch=epoch,
            instance_id=client.instance_id,
        )
        response = self.send(request)
        if response.error is ErrorCode.none:
            client.owned, client.epoch = frozenset(), 0
        return response

    def _apply(
        self, client: Client, response: ConsumerGroupHeartbeatResponse
    ) -> ConsumerGroupHeartbeatResponse:
        client.last = response
        if response.error is ErrorCode.none:
            client.epoch = response.member_epoch
            if response.assignment is not None:
                client.owned = response.assignment
        return response

    def advance(self, ms: int) -> None:
        self.now += ms
        self.coordinator.tick(self.now)

    def settle(self, clients: list[Client], rounds: int = 10) -> None:
        for _ in range(rounds):
            for client in clients:
                assert self.heartbeat(client).error is ErrorCode.none
        group = self.coordinator._ctx.consumer_groups[GROUP]
        assert str(group.state) == "Stable", group
