"""A broker killed with SIGKILL and restarted at once (a supervisor's restart) while ZooKeeper
still holds its previous session's registration: it waits for that registration to go, then
registers and serves, without the operator's help. A second broker with the same id and other
endpoints, while the first is alive, still exits 2 with one line (Kafka's refusal)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cluster_helpers import StartBrokers, poll, zk_read
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.kafka_zk import KafkaZkClient
from kafkalite.testing import BrokerProcess

pytestmark = pytest.mark.slow

# The default is 18000 (the same wait, only longer). Long enough that the restarted process
# (an interpreter importing for seconds on a loaded machine) comes up before ZooKeeper
# expires the killed one's session, which the test checks: it logged that it waited.
SESSION_TIMEOUT_MS = "10000"
WAITING = "taken for its previous run: waiting up to"


def registration_czxid(zk_connect: str, broker_id: int) -> int | None:
    async def read(kafka_zk: KafkaZkClient) -> int | None:
        stat = await kafka_zk.zk.exists(zd.broker_path(broker_id))
        return None if stat is None else stat.czxid

    return zk_read(zk_connect, read)


def full_isr(admin: AdminClient, topic: str) -> bool:
    found = admin.list_topics(topic, timeout=10).topics[topic].partitions.values()
    return len(found) == 3 and all(sorted(p.isrs) == [1, 2, 3] for p in found)


def test_a_broker_restarted_right_after_kill_9_comes_back(
    start_brokers: StartBrokers, zk_connect: str, tmp_path: Path
) -> None:
    brokers = start_brokers({"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS})
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    poll(lambda: len(admin.list_topics(timeout=10).brokers) == 3, "3 live brokers")
    admin.create_topics([NewTopic("back", 3, 3)])["back"].result(30)
    poll(lambda: full_isr(admin, "back"), "full ISRs")

    killed = brokers[1]
    before = registration_czxid(zk_connect, 1)
    assert killed.process is not None
    killed.process.kill()  # not killed.kill(): it would wait for the output's end first
    killed.process.wait()
    assert registration_czxid(zk_connect, 1) == before  # its session outlives the process
    listeners = f"PLAINTEXT://127.0.0.1:{killed.port}"
    restarted = BrokerProcess(killed.data_dir, {**killed.overrides, "listeners": listeners})
    brokers[1] = restarted.start()  # the fixture stops it

    assert restarted.output().count(WAITING) == 1
    assert registration_czxid(zk_connect, 1) not in (None, before)  # registered anew
    poll(lambda: 1 in admin.list_topics(timeout=10).brokers, "broker 1 a member again")
    poll(lambda: full_isr(admin, "back"), "broker 1 back in every ISR")

    # Broker 2 is alive: another process with its id and other endpoints is refused at once.
    overrides = {**killed.overrides, "broker.id": "2", "log.dirs": str(tmp_path / "impostor")}
    impostor = BrokerProcess(tmp_path / "impostor", overrides).command()
    result = subprocess.run(impostor, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    refusals = [line for line in result.stderr.splitlines() if line.startswith("kafkalite: ")]
    assert len(refusals) == 1
    assert "broker id 2 is registered by another session" in refusals[0]
    assert WAITING not in result.stderr + result.stdout
