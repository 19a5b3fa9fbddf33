"""The liveness detector's verdicts (sans-IO), its probes against a real broker process, and
deposing a dead controller on a real ZooKeeper (only the controller judged dead, never one
elected meanwhile)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import trio

from kafkalite.broker.cluster_metadata import Endpoint
from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.broker_liveness import (
    BrokerLiveness,
    LivenessSettings,
    ProbeState,
    depose_dead_controller,
)
from kafkalite.cluster.kafka_zk import KafkaZkClient
from kafkalite.cluster.zk_client import ZkClient
from kafkalite.testing import BrokerProcess

WAIT = 30


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


async def _until_verdict(liveness: BrokerLiveness, broker_id: int, dead: bool) -> None:
    with trio.fail_after(WAIT):
        while True:
            verdicts, changed = liveness.snapshot()
            if (broker_id in verdicts) == dead:
                return
            await changed.wait()


def _probing(broker: BrokerProcess) -> BrokerLiveness:
    endpoint = Endpoint("PLAINTEXT", broker.host, broker.port)
    settings = LivenessSettings(probe_interval_ms=50, probe_timeout_ms=1000)
    return BrokerLiveness(1, settings, lambda: [7], lambda _: endpoint)


@pytest.mark.slow
def test_probes_tell_a_paused_broker_and_a_killed_one(tmp_path: Path) -> None:
    """Against a real broker process: SIGSTOP -> dead (unanswered), SIGCONT -> alive again,
    SIGKILL -> dead (connection reset, then refused)."""
    with BrokerProcess(tmp_path / "broker") as broker:
        assert broker.process is not None
        pid = broker.process.pid
        liveness = _probing(broker)

        async def main() -> None:
            async with trio.open_nursery() as nursery:
                await nursery.start(liveness.run)
                with trio.fail_after(WAIT):
                    while not liveness.states.get(7, ProbeState()).answered_once:
                        await trio.sleep(0.05)
                os.kill(pid, signal.SIGSTOP)
                try:
                    await _until_verdict(liveness, 7, dead=True)
                finally:
                    os.kill(pid, signal.SIGCONT)
                await _until_verdict(liveness, 7, dead=False)
                await trio.to_thread.run_sync(broker.kill)
                await _until_verdict(liveness, 7, dead=True)
                assert liveness.states[7].refusals >= 2  # refused, not merely unanswered
                nursery.cancel_scope.cancel()

        trio.run(main)
