"""The controller's loop survives its ZooKeeper session expiring while it waits for another
controller to change or deposes a dead one (seen in a 3-broker chaos run: a broker paused
9 s against a 6 s session exited with SessionExpired from depose_dead_controller, raised
through the wait's nursery as an ExceptionGroup the loop did not catch)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import trio

from kafkalite.cluster import controller as controller_module
from kafkalite.cluster.controller import Controller
from kafkalite.cluster.zk_client import SessionExpired


def test_a_session_expiring_while_deposing_a_dead_controller_is_waited_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reconnects: list[int] = []

    async def depose(zk: object, broker_id: int, dead: frozenset[int]) -> bool:
        raise SessionExpired("SessionExpired /controller", "/controller")

    async def not_elected(broker_id: int) -> None:
        return None

    async def main() -> None:
        with trio.CancelScope() as scope:

            class Zk:
                session_id = 1

                async def exists_watch(self, path: str) -> tuple[object, object]:
                    return SimpleNamespace(ephemeral_owner=2), SimpleNamespace(
                        wait=trio.sleep_forever
                    )

                async def wait_connected(self) -> None:
                    reconnects.append(1)
                    scope.cancel()

            liveness = SimpleNamespace(snapshot=lambda: (frozenset({2}), trio.Event()))
            controller = Controller(Zk(), 1, liveness=liveness)  # type: ignore[arg-type]
            controller.kafka_zk = SimpleNamespace(try_become_controller=not_elected)  # type: ignore[assignment]
            await controller.run()

    monkeypatch.setattr(controller_module, "depose_dead_controller", depose)
    trio.run(main)
    assert reconnects == [1]
