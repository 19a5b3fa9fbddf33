"""A cluster member's controlled shutdown (Kafka's KafkaServer.controlledShutdown), run on
SIGTERM before the server stops serving.

The broker first stops following (Kafka's controller sends it StopReplica for the partitions
it follows: a follower that kept fetching could be taken back into the ISR), then leaves its
request for the controller (cluster/controlled_shutdown.py) and waits until its own metadata
shows nothing more the controller could move: leadership gone to other ISR members, itself out
of the ISR of the others. Up to `controlled.shutdown.max.retries` attempts, each waiting up to
`controlled.shutdown.retry.backoff.ms` (then the request is made again); after the last one it
shuts down anyway, as Kafka does ("unclean shutdown").
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Set
from typing import Protocol

import trio

from kafkalite.cluster import controlled_shutdown as cs
from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.zk_client import ConnectionLost, NodeExists, NoNode, ZkClient, ZkError
from kafkalite.cluster.zk_metadata import ZkMetadata
from kafkalite.config import BrokerConfig

log = logging.getLogger(__name__)


class Follower(Protocol):
    def stop_following(self) -> None: ...


def still_to_move(metadata: ZkMetadata, stopping: Set[int]) -> list[tuple[str, int]]:
    """What the controller could still move off this broker, from its own metadata; other
    brokers in controlled shutdown (`stopping`) take nothing over."""
    node = metadata.node_id
    available = {b.broker_id for b in metadata.brokers()} - set(stopping)
    states = [
        state
        for name in list(metadata.topics)
        for state in metadata.partition_states(name)
        if node in state.replicas
    ]
    return cs.remaining(node, states, available)


async def wait_until_moved(zk: ZkClient, metadata: ZkMetadata, timeout_s: float) -> bool:
    """Until nothing is left to move (re-checked on every metadata change and every change of
    the shutdown requests); False at the timeout."""
    with trio.move_on_after(timeout_s):
        while not await _moved_before_requests_change(zk, metadata):
            pass
        return True
    return False


async def _moved_before_requests_change(zk: ZkClient, metadata: ZkMetadata) -> bool:
    names, requests_changed = await zk.children_watch(cs.REQUESTS)
    stopping = {int(name) for name in names if name.isdigit()} - {metadata.node_id}
    moved = False
    async with trio.open_nursery() as nursery:

        async def until_requests_change() -> None:
            with contextlib.suppress(ConnectionLost):
                await requests_changed.wait()
            nursery.cancel_scope.cancel()

        nursery.start_soon(until_requests_change)
        moved = await metadata.wait_until(lambda: not still_to_move(metadata, stopping), math.inf)
        nursery.cancel_scope.cancel()
    return moved


async def request_controlled_shutdown(zk: ZkClient, broker_id: int) -> None:
    """(Re)create this broker's request: a new child, so the controller's watch fires."""
    stat = await zk.exists(zd.broker_path(broker_id))
    if stat is None:
        raise NoNode("not registered", zd.broker_path(broker_id))
    path = cs.request_path(broker_id)
    await zk.ensure_path(cs.REQUESTS)
    try:
        await zk.delete(path)
    except NoNode:
        pass
    try:
        await zk.create(path, cs.encode_request(stat.czxid), ephemeral=True)
    except NodeExists:
        pass  # a retried create that went through


async def controlled_shutdown(
    config: BrokerConfig, zk: ZkClient, metadata: ZkMetadata, follower: Follower
) -> bool:
    """True when nothing was left to move; False after the last attempt (or when disabled)."""
    if not config.bool("controlled.shutdown.enable"):
        return False
    attempts = config.int("controlled.shutdown.max.retries")
    backoff_s = config.int("controlled.shutdown.retry.backoff.ms") / 1000
    log.info("Starting controlled shutdown")
    follower.stop_following()
    for attempt in range(1, attempts + 1):
        try:
            await request_controlled_shutdown(zk, metadata.node_id)
            if await wait_until_moved(zk, metadata, backoff_s):
                log.info("Controlled shutdown request returned successfully")
                return True
        except ZkError as exc:
            log.warning("controlled shutdown request failed: %s", exc)
            await trio.sleep(backoff_s)
        left = ", ".join(f"{t}-{p}" for t, p in still_to_move(metadata, set()))
        log.info(
            "Controlled shutdown attempt %d of %d left partitions to move: %s",
            attempt,
            attempts,
            left or "none",
        )
    log.warning(
        "Proceeding to do an unclean shutdown as all the controlled shutdown attempts failed"
    )
    return False
