"""A cluster member's log dir remembers its cluster (kafkalite/cluster/meta_properties.py): a
`kafkalite serve` whose meta.properties names another cluster than ZooKeeper's `/cluster/id`
refuses to start (exit 2, one line, Kafka's InconsistentClusterIdException message)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kafkalite.testing import BrokerProcess

pytest.importorskip("kafkalite.cluster.member")
pytestmark = pytest.mark.slow


def test_a_log_dir_of_another_cluster_stops_the_broker(zk_connect: str, tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "b1", {"broker.id": "1", "zookeeper.connect": zk_connect})
    broker.start()
    broker.stop()
    props = tmp_path / "b1" / "meta.properties"
    stored = dict(line.split("=", 1) for line in props.read_text().splitlines())
    assert (stored["version"], stored["broker.id"]) == ("0", "1")
    cluster = stored["cluster.id"]
    props.write_text("version=0\nbroker.id=1\ncluster.id=AnotherClusterIdAAAAAA\n")

    result = subprocess.run(broker.command(), capture_output=True, text=True, timeout=60)

    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        f"kafkalite: cannot join the cluster at {zk_connect}: The Cluster ID {cluster} doesn't "
        "match stored clusterId Some(AnotherClusterIdAAAAAA) in meta.properties. The broker is "
        "trying to join the wrong cluster. Configured zookeeper.connect may be wrong."
    ]
    assert props.read_text() == "version=0\nbroker.id=1\ncluster.id=AnotherClusterIdAAAAAA\n"
