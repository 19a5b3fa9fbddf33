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

import logging
from typing import Protocol

import trio

from kafkalite.cluster import controlled_shutdown as cs
from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.zk_client import NodeExists, NoNode, ZkClient, ZkError
from kafkalite.cluster.zk_metadata import ZkMetadata
from kafkalite.config import BrokerConfig

log = logging.getLogger(__name__)


class Follower(Protocol):
    def stop_following(self) -> None: ...


def still_to_move(metadata: ZkMetadata) -> list[tuple[str, int]]:
    node = metadata.node_id
    live = {b.broker_id for b in metadata.brokers()}
    states = [
        state
        for name in list(metadata.topics)
        for state in metadata.partition_states(name)
        if node in state.replicas
    ]
    return cs.remaining(node, states, live)


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
        except ZkError as exc:
            log.warning("controlled shutdown request failed: %s", exc)
            await trio.sleep(backoff_s)
        else:
            if await metadata.wait_until(lambda: not still_to_move(metadata), backoff_s):
                log.info("Controlled shutdown request returned successfully")
                return True
        left = ", ".join(f"{t}-{p}" for t, p in still_to_move(metadata))
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
