"""The liveness detector's verdicts (sans-IO) and deposing a dead controller on a real
ZooKeeper (only the controller judged dead, never one elected meanwhile)."""

from __future__ import annotations

import pytest
import trio

from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.broker_liveness import ProbeState, depose_dead_controller
from kafkalite.cluster.kafka_zk import KafkaZkClient
from kafkalite.cluster.zk_client import ZkClient


def test_a_broker_that_answered_and_then_refuses_twice_is_dead() -> None:
    state = ProbeState()
    assert state.on_answer() is False
    assert state.on_refused() is False  # one refusal: a full backlog, perhaps
    assert state.on_refused() is True
    assert state.dead
    assert state.on_refused() is False  # no news


def test_an_unanswered_probe_declares_a_broker_dead_and_an_answer_revives_it() -> None:
    state = ProbeState()
    state.on_answer()
    assert state.on_unanswered() is True and state.dead
    assert state.on_answer() is True and not state.dead
    assert state.refusals == 0


def test_a_broker_never_heard_from_is_left_to_zookeeper() -> None:
    state = ProbeState()  # registered, maybe not listening yet
    assert not state.on_refused() and not state.on_refused() and not state.on_unanswered()
    assert not state.dead


def test_an_answer_between_refusals_starts_the_count_again() -> None:
    state = ProbeState()
    state.on_answer()
    state.on_refused()
    state.on_answer()
    assert state.on_refused() is False and not state.dead


@pytest.mark.slow
def test_only_a_dead_controller_is_deposed(zk_connect: str) -> None:
    async def main() -> None:
        async with (
            ZkClient.open(zk_connect, 4000) as one,
            ZkClient.open(zk_connect, 4000) as two,
        ):
            await KafkaZkClient(one).create_top_level_paths()
            first = await KafkaZkClient(one).try_become_controller(1)
            assert first is not None
            assert not await depose_dead_controller(two, 2, frozenset({3}))  # 1 is alive
            assert not await depose_dead_controller(one, 1, frozenset({1}))  # never oneself
            assert await depose_dead_controller(two, 2, frozenset({1}))
            assert await one.exists(zd.CONTROLLER) is None
            second = await KafkaZkClient(two).try_become_controller(2)
            assert second is not None and second.epoch == first.epoch + 1
            # A stale verdict on 1 does not remove the controller elected since.
            assert not await depose_dead_controller(one, 3, frozenset({1}))
            assert await KafkaZkClient(one).controller_id() == 2

    trio.run(main)
