"""The controller's side of a controlled shutdown against a real ZooKeeper (znodes written by
hand, no broker processes): a request of the live registration's epoch gets its partitions
moved and then its answer (Kafka's ControlledShutdownResponse), a stale one is answered
STALE_BROKER_EPOCH and moves nothing, a partition nobody can take over is answered as
remaining, and the broker's `ask_controller` waits for the answer however long it takes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
from cluster_helpers import partition_state, run_on_layout
from kio.schema.errors import ErrorCode

from kafkalite.cluster import controlled_shutdown as cs
from kafkalite.cluster import election_zk
from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.controlled_shutdown_controller import do_controlled_shutdowns
from kafkalite.cluster.controlled_shutdown_zk import ask_controller, request_controlled_shutdown
from kafkalite.cluster.kafka_zk import ControllerEpoch, KafkaZkClient
from kafkalite.cluster.leader_election import PREFERRED
from kafkalite.cluster.zk_client import NoNode, ZkClient

pytestmark = pytest.mark.slow
WAIT = 30
# topic -> per partition (replicas, leader, isr); broker 3 is not registered.
LAYOUT = {
    "t": [((1, 2, 3), 2, (1, 2)), ((2, 1, 3), 2, (2, 1)), ((1, 2, 3), 1, (1, 2))],
    "u": [((1, 3), 1, (1,)), ((2, 3), 2, (2,))],
}


def run(zk_connect: str, scenario: Callable[[ZkClient, ControllerEpoch], Awaitable[Any]]) -> Any:
    return run_on_layout(zk_connect, LAYOUT, scenario)


state = partition_state


async def answer(zk: ZkClient, broker_id: int) -> cs.Answer | None:
    request = cs.decode((await zk.get(cs.request_path(broker_id)))[0])
    assert request is not None
    return request.answer


def test_moves_then_answers_the_live_registrations_request_only(zk_connect: str) -> None:
    async def scenario(zk: ZkClient, epoch: ControllerEpoch) -> None:
        await zk.ensure_path(cs.REQUESTS)
        await zk.create(cs.request_path(1), cs.encode_request(12345), ephemeral=True)  # stale
        await do_controlled_shutdowns(zk, epoch, {1, 2})
        assert await state(zk, "t", 2) == (1, 4, (1, 2))  # nothing moved
        assert await answer(zk, 1) == cs.Answer(epoch.epoch, ErrorCode.stale_broker_epoch, ())

        await request_controlled_shutdown(zk, 1, attempt=2)
        watches = await do_controlled_shutdowns(zk, epoch, {1, 2})
        assert await state(zk, "t", 0) == (2, 5, (2,))  # broker 1 left the ISR
        assert await state(zk, "t", 1) == (2, 5, (2,))
        assert await state(zk, "t", 2) == (2, 5, (2,))  # leadership moved to broker 2
        assert await state(zk, "u", 0) == (1, 4, (1,))  # no other live replica: stays
        assert await state(zk, "u", 1) == (2, 4, (2,))
        assert await answer(zk, 1) == cs.Answer(epoch.epoch, ErrorCode.none, ())
        assert [w.path for w in watches] == [cs.REQUESTS]
        # While broker 1 stops it is no candidate: the preferred election is refused.
        results = await election_zk.elect_leaders(zk, epoch, PREFERRED, [("t", 2)])
        assert results[("t", 2)].error is ErrorCode.preferred_leader_not_available

        # Answered: a later round neither writes nor answers again.
        answered = await zk.get(cs.request_path(1))
        await do_controlled_shutdowns(zk, epoch, {1, 2})
        assert await zk.get(cs.request_path(1)) == answered

    run(zk_connect, scenario)


def test_a_partition_nobody_can_take_over_yet_is_answered_as_remaining(zk_connect: str) -> None:
    async def scenario(zk: ZkClient, epoch: ControllerEpoch) -> None:
        # Broker 3 registers, but is not in u-0's ISR: broker 1 keeps leading it for now.
        endpoint = zd.Endpoint("PLAINTEXT", "127.0.0.1", 9003)
        await KafkaZkClient(zk).register_broker(zd.BrokerInfo(3, (endpoint,)))
        await request_controlled_shutdown(zk, 1)
        await do_controlled_shutdowns(zk, epoch, {1, 2, 3})
        assert await state(zk, "u", 0) == (1, 4, (1,))
        assert await answer(zk, 1) == cs.Answer(epoch.epoch, ErrorCode.none, (("u", 0),))

    run(zk_connect, scenario)


def test_the_broker_waits_for_the_answer_also_across_a_change_of_controller(
    zk_connect: str,
) -> None:
    async def scenario(zk: ZkClient, epoch: ControllerEpoch) -> None:
        answers: list[cs.Answer | None] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, zk, 1, answers)
            await until_asked(zk, 1)
            assert answers == []  # no answer yet: the broker waits
            await do_controlled_shutdowns(zk, epoch, {1, 2})
        assert answers == [cs.Answer(epoch.epoch, ErrorCode.none, ())]

        # The controller goes before it answers (it stops too, as when every broker of a
        # cluster gets SIGTERM at once): the attempt goes on, and its successor answers the
        # request it finds, with no backoff in between.
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, zk, 2, answers)
            await until_asked(zk, 2)
            await zk.delete(zd.CONTROLLER)
            successor = await KafkaZkClient(zk).try_become_controller(2)
            assert successor is not None and successor.epoch == epoch.epoch + 1
            assert answers[1:] == []
            await do_controlled_shutdowns(zk, successor, {1, 2})
        assert answers[1:] == [cs.Answer(successor.epoch, ErrorCode.none, ())]

    run(zk_connect, scenario)


async def ask(zk: ZkClient, attempt: int, answers: list[cs.Answer | None]) -> None:
    answers.append(await ask_controller(zk, 1, attempt))


async def until_asked(zk: ZkClient, attempt: int) -> None:
    """Until broker 1's request of `attempt` is in ZooKeeper."""
    with trio.fail_after(WAIT):
        while True:
            try:
                request = cs.decode((await zk.get(cs.request_path(1)))[0])
            except NoNode:  # not yet, or the broker replacing its previous request
                request = None
            if request is not None and request.attempt == attempt:
                return
            await trio.sleep(0.01)
