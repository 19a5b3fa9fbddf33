"""A cluster member's controlled shutdown (Kafka's KafkaServer.controlledShutdown), run on
SIGTERM before the server stops serving.

The broker first stops following (Kafka's controller sends it StopReplica for the partitions
it follows: a follower that kept fetching could be taken back into the ISR), then leaves its
request for the controller (cluster/controlled_shutdown.py) and waits for the controller's
answer: sent once the controller has moved its leaderships to other ISR members and taken it
out of the ISR of the others, however long that takes (Kafka's broker waits for the response
to its ControlledShutdown request). Then it waits, up to the backoff, for its own metadata to
show the moves. An attempt also ends well as soon as its own metadata shows nothing left to
move (kafkalite's addition: when every broker stops at once, the controller among them, the
others need no answer from a controller that is gone). An attempt fails when the controller
answers that partitions remain, when there is no controller to ask, or when this broker's
ZooKeeper connection is lost before the answer (a controller that changes meanwhile fails
nothing: its successor answers the request): up to `controlled.shutdown.max.retries`
attempts, `controlled.shutdown.retry.backoff.ms` apart; after the last one it shuts down
anyway, as Kafka does ("unclean shutdown").
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Set
from dataclasses import dataclass
from typing import Protocol

import trio
from kio.schema.errors import ErrorCode

from kafkalite.cluster import controlled_shutdown as cs
from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.zk_client import ConnectionLost, NodeExists, NoNode, ZkClient, ZkError
from kafkalite.cluster.zk_metadata import ZkMetadata, wait_any
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


async def request_controlled_shutdown(zk: ZkClient, broker_id: int, attempt: int = 1) -> None:
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
        await zk.create(path, cs.encode_request(stat.czxid, attempt), ephemeral=True)
    except NodeExists:
        pass  # a retried create that went through


async def ask_controller(zk: ZkClient, broker_id: int, attempt: int) -> cs.Answer | None:
    """Kafka's ControlledShutdown request: the controller's answer, however long its moves
    take; None when there is no controller to ask. A controller that goes before answering
    is not waited out for a backoff: its successor answers the pending requests it finds
    when elected (with moves of its own), so the request stays and its answer is awaited."""
    controller, controller_changed = await zk.exists_watch(zd.CONTROLLER)
    if controller is None:
        log.info("No controller to ask for a controlled shutdown")
        return None
    await request_controlled_shutdown(zk, broker_id, attempt)
    while True:
        data, _, request_changed = await zk.get_watch(cs.request_path(broker_id))
        request = cs.decode(data)
        if request is not None and request.attempt == attempt and request.answer is not None:
            return request.answer
        await wait_any([request_changed, controller_changed])
        if controller_changed.fired:
            await controller_changed.wait()  # ConnectionLost if the connection dropped
            log.info("The controller changed before answering: waiting for the new one's answer")
            _, controller_changed = await zk.exists_watch(zd.CONTROLLER)
        else:
            await request_changed.wait()


@dataclass(frozen=True, slots=True)
class Outcome:
    """How an attempt ended: the controller's answer (None: no answer, no controller or the
    connection lost), or `moved` first: this broker's own metadata shows nothing left to
    move (the moves seen, or nobody left to take over, as when every broker stops at once,
    the controller too)."""

    answer: cs.Answer | None = None
    moved: bool = False


async def attempt_once(zk: ZkClient, metadata: ZkMetadata, attempt: int) -> Outcome:
    outcome = Outcome()
    async with trio.open_nursery() as nursery:

        async def ask() -> None:
            nonlocal outcome
            try:
                outcome = Outcome(await ask_controller(zk, metadata.node_id, attempt))
            except ZkError as exc:  # the connection or the session lost
                log.warning("Error during controlled shutdown: %s", exc)
            nursery.cancel_scope.cancel()

        async def see_moved() -> None:
            nonlocal outcome
            with contextlib.suppress(ZkError):  # then the answer decides
                await wait_until_moved(zk, metadata, math.inf)
                outcome = Outcome(moved=True)
                nursery.cancel_scope.cancel()

        nursery.start_soon(ask)
        nursery.start_soon(see_moved)
    return outcome


async def controlled_shutdown(
    config: BrokerConfig, zk: ZkClient, metadata: ZkMetadata, follower: Follower
) -> bool:
    """True once nothing is left to move (the controller's answer, or this broker's metadata);
    False after the last attempt (or when disabled). An attempt ends with the controller's
    answer (or its successor's), or when there is no controller or this broker's ZooKeeper
    connection is lost; a slow controller is waited for."""
    if not config.bool("controlled.shutdown.enable"):
        return False
    attempts = config.int("controlled.shutdown.max.retries")
    backoff_s = config.int("controlled.shutdown.retry.backoff.ms") / 1000
    log.info("Starting controlled shutdown")
    follower.stop_following()
    for attempt in range(1, attempts + 1):
        started = trio.current_time()
        outcome = await attempt_once(zk, metadata, attempt)
        answer, took_ms = outcome.answer, (trio.current_time() - started) * 1000
        if outcome.moved:
            log.info("Controlled shutdown succeeded after %.0fms: nothing left to move", took_ms)
            return True
        if answer is not None and answer.error is not ErrorCode.none:
            log.info("Controlled shutdown request returned with error %s", answer.error.name)
        elif answer is not None and not answer.remaining:
            log.info("Controlled shutdown request returned successfully after %.0fms", took_ms)
            # Until this broker follows the moves too (it then answers NOT_LEADER_OR_FOLLOWER
            # rather than leaving requests to time out), briefly: the moves are made.
            if not await wait_until_moved(zk, metadata, backoff_s):
                log.info("Shutting down before this broker saw every move")
            return True
        elif answer is not None:
            left = ", ".join(f"{t}-{p}" for t, p in answer.remaining)
            log.info(
                "Controlled shutdown request returned after %.0fms with %d partitions"
                " remaining to move: %s",
                took_ms,
                len(answer.remaining),
                left,
            )
        if attempt < attempts:
            await trio.sleep(backoff_s)
            log.info("Retrying controlled shutdown (%d retries remaining)", attempts - attempt)
    log.warning(
        "Proceeding to do an unclean shutdown as all the controlled shutdown attempts failed"
    )
    return False
