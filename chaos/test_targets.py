"""The targets' own behaviour: a kafkalite broker restarted after SIGKILL on ZooKeeper."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from chaos.targets import KAFKALITE_CHAOS_OVERRIDES, KafkaliteNode
from kafkalite.cluster.zookeeper_server import ZooKeeperServer
from kafkalite.maven_dist import ProvisionError
from kafkalite.testing import free_ports

pytestmark = pytest.mark.slow  # waits out a 6 s ZooKeeper session


def test_a_killed_broker_restarted_at_once_starts_once_its_old_session_expired(tmp_path: Path):
    zookeeper = ZooKeeperServer(tmp_path / "zookeeper")
    try:
        zookeeper.start()
    except ProvisionError as exc:
        pytest.fail(f"ZooKeeper is unavailable: {exc}", pytrace=False)
    (port,) = free_ports(1)
    node = KafkaliteNode(
        1, tmp_path / "data", tmp_path / "broker-1.log",
        {
            **KAFKALITE_CHAOS_OVERRIDES,
            "broker.id": "1",
            "zookeeper.connect": zookeeper.connect_string,
            "listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "log.dirs": str(tmp_path / "data"),
        },
    )  # fmt: skip
    try:
        node.start()
        node.stop(signal.SIGKILL)
        killed_at = node.log_file.stat().st_size
        node.start()  # at once: the killed broker's session (6 s) still holds broker id 1,
        # which the new process waits out instead of exiting
        assert node.process is not None and node.process.poll() is None
        after_kill = node.log_file.read_text()[killed_at:]
        assert after_kill.count("taken for its previous run: waiting up to") == 1
        assert "is registered by another session" not in after_kill  # no exit, no second start
        assert after_kill.count("kafkalite started: ") == 1
    finally:
        node.stop()
        zookeeper.stop()
