"""Sends forwarded releases (broker/release_forwarding.py) to the leaders of their target
partitions led by other brokers: a Produce (acks=all) of the release's idempotent batch on
the inter-broker listener, with its security (as the transaction markers' sender). Each
answer goes back to DelayedDelivery.forward_answered; a failure (no leader, not the
leader, connection lost, timeout) answers an error, and the release is sent again, with the
same producer and sequence, in a later release round.
"""

from __future__ import annotations

import datetime
import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio
from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from kafkalite.broker.broker_connection import BrokerConnections, ConnectionLost
from kafkalite.broker.cluster_metadata import ClusterMetadata, Endpoint
from kafkalite.broker.delayed_delivery_manager import DelayedDelivery, TopicPartition
from kafkalite.broker.release_forwarding import PendingForward
from kafkalite.protocol.entities import make
from kafkalite.security.inter_broker import InterBrokerSecurity

log = logging.getLogger("kafkalite.delayed_delivery")

PRODUCE_API_KEY, PRODUCE_VERSION = 0, 9
NO_LEADER = -1


def produce_request(pending: PendingForward, timeout_ms: int) -> Any:
    module: Any = load_payload_module(PRODUCE_API_KEY, PRODUCE_VERSION, EntityType.request)
    topic, index = pending.intent.target
    return make(
        module.ProduceRequest,
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(milliseconds=timeout_ms),
        topic_data=(
            make(
                module.TopicProduceData,
                name=topic,
                partition_data=(
                    make(module.PartitionProduceData, index=index, records=pending.batch),
                ),
            ),
        ),
    )


@dataclass(eq=False)
class ReleaseForwardSender:
    broker_id: int
    delayed: DelayedDelivery
    metadata: ClusterMetadata
    endpoint_of: Callable[[int], Endpoint | None]
    clock_ms: Callable[[], int]
    request_timeout_ms: int = 30_000
    security: InterBrokerSecurity | None = None
    _connections: BrokerConnections = field(init=False)
    _wakeup: trio.Event = field(default_factory=trio.Event)

    def __post_init__(self) -> None:
        self._connections = BrokerConnections(
            self.endpoint_of, f"broker-{self.broker_id}-delayed-releases", self.security
        )
        self.delayed.wake_sender = self.wake

    def wake(self) -> None:
        self._wakeup.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        try:
            while True:
                await self._wakeup.wait()
                self._wakeup = trio.Event()
                await self.send_round()
        finally:
            await self._connections.close_all()

    async def send_round(self) -> None:
        """Every release in the outbox once, a connection per leader, in parallel."""
        taken, self.delayed.outbox = self.delayed.outbox, []
        by_leader: dict[int, list[tuple[TopicPartition, PendingForward]]] = defaultdict(list)
        for source, pending in taken:
            state = self.metadata.partition_state(*pending.intent.target)
            leader = NO_LEADER if state is None else state.leader
            if leader in (NO_LEADER, self.broker_id):  # (led here: appended in-process)
                self._answer(source, pending, ErrorCode.not_leader_or_follower)
            else:
                by_leader[leader].append((source, pending))
        async with trio.open_nursery() as nursery:
            for leader, entries in by_leader.items():
                nursery.start_soon(self._send, leader, entries)

    async def _send(
        self, leader: int, entries: list[tuple[TopicPartition, PendingForward]]
    ) -> None:
        for source, pending in entries:
            error = ErrorCode.request_timed_out
            try:
                with trio.fail_after(self.request_timeout_ms / 1000 + 5):  # (connect too)
                    connection = await self._connections.get(leader)
                    response = await connection.request(
                        produce_request(pending, self.request_timeout_ms)
                    )
                error = ErrorCode(response.responses[0].partition_responses[0].error_code)
            except (ConnectionLost, trio.TooSlowError) as exc:
                log.debug("release to %s via broker %d: %s", pending.intent.target, leader, exc)
                await self._connections.drop(leader)
            self._answer(source, pending, error)

    def _answer(self, source: TopicPartition, pending: PendingForward, error: ErrorCode) -> None:
        if error is not ErrorCode.none:
            log.debug("release to %s: %s (sent again later)", pending.intent.target, error.name)
        self.delayed.forward_answered(source, pending.intent.offset, error, self.clock_ms())
