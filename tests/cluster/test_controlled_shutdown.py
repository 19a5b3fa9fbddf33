"""Controlled shutdown on real processes (a real ZooKeeper, three `kafkalite serve` brokers):
SIGTERM moves a leader's partitions to other ISR members before the process exits, also when
the controller is slow to move them, and a rolling restart of every broker under idempotent
acks=all load loses and duplicates nothing."""

from __future__ import annotations

import signal
import threading
import time
from collections import defaultdict
from typing import Any

import pytest
from cluster_helpers import CLUSTER_SESSION_TIMEOUT_MS, StartBrokers, poll, zk_read
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from chaos.proxy import TcpProxy
from kafkalite.testing import BrokerProcess, stop_all

pytestmark = pytest.mark.slow

PARTITIONS = 3
WAIT = 60.0


@pytest.fixture
def brokers(start_brokers: StartBrokers) -> dict[int, BrokerProcess]:
    return start_brokers({"min.insync.replicas": "2", "auto.leader.rebalance.enable": "false"})


def succeeded_at_once(output: str) -> bool:
    """The controller's answer or the broker's own metadata said nothing was left to move, at
    the first attempt."""
    succeeded = (
        "Controlled shutdown request returned successfully" in output
        or "Controlled shutdown succeeded" in output
    )
    return succeeded and "Retrying controlled shutdown" not in output


def full_isr(admin: AdminClient, topic: str, partitions: int) -> bool:
    meta = admin.list_topics(topic, timeout=10).topics[topic]
    found = meta.partitions.values()
    return len(found) == partitions and all(len(p.isrs) == 3 and p.leader >= 0 for p in found)


def test_sigterm_moves_leadership_before_the_process_exits(
    brokers: dict[int, BrokerProcess], zk_connect: str
) -> None:
    admin = AdminClient({"bootstrap.servers": ",".join(b.bootstrap for b in brokers.values())})
    poll(lambda: len(admin.list_topics(timeout=10).brokers) == 3, "3 live brokers")
    admin.create_topics([NewTopic("moving", 1, 3)])["moving"].result(30)
    poll(lambda: full_isr(admin, "moving", 1), "a full ISR")
    before = zk_read(zk_connect, lambda zk: zk.partition_state("moving", 0)).state

    assert brokers[before.leader].stop() == 0
    after = zk_read(zk_connect, lambda zk: zk.partition_state("moving", 0)).state
    others = [b for b in (1, 2, 3) if b != before.leader]
    assert after.leader in others
    assert after.leader_epoch == before.leader_epoch + 1  # one move, by the controlled shutdown
    assert sorted(after.isr) == others
    # The stopped broker saw the move (it applied the new state) before it exited.
    output = brokers[before.leader].output()
    assert (
        f"moving-0: leader {after.leader} at epoch {after.leader_epoch} "
        f"(was {before.leader} at epoch {before.leader_epoch})"
    ) in output
    assert succeeded_at_once(output)


def states(zk_connect: str, topic: str) -> dict[int, Any]:
    async def read(zk: Any) -> dict[int, Any]:
        return {p: (await zk.partition_state(topic, p)).state for p in range(PARTITIONS)}

    return zk_read(zk_connect, read)


# The controller's ZooKeeper requests each wait LATENCY_S in its proxy both ways, and it makes
# dozens of them in a row before its first move: about 2 s at the least. The stopping broker's
# attempts would all have timed out by then (2 x 300 ms), on any machine, however fast.
LATENCY_S = 0.05
SLOW_CONTROLLER = {
    "min.insync.replicas": "2",
    "auto.leader.rebalance.enable": "false",
    "controlled.shutdown.max.retries": "2",
    "controlled.shutdown.retry.backoff.ms": "300",
}


def test_a_slow_controller_is_waited_for(zk_connect: str, tmp_path: Any) -> None:
    servers, _, chroot = zk_connect.partition("/")
    proxy = TcpProxy("controller-zookeeper", int(servers.rpartition(":")[2])).start()
    brokers: dict[int, BrokerProcess] = {}
    try:
        for broker_id in (1, 2, 3):  # broker 1 first: the controller, behind the proxy
            connect = f"{proxy.address}/{chroot}" if broker_id == 1 else zk_connect
            config = {
                **SLOW_CONTROLLER,
                "broker.id": str(broker_id),
                "zookeeper.connect": connect,
                "zookeeper.session.timeout.ms": str(3 * CLUSTER_SESSION_TIMEOUT_MS),
            }
            brokers[broker_id] = BrokerProcess(tmp_path / f"broker-{broker_id}", config).start()
            poll(lambda: zk_read(zk_connect, lambda zk: zk.controller_id()) == 1, "controller 1")
        slow_controller_scenario(brokers, zk_connect, proxy)
    finally:
        try:
            stop_all(brokers.values())
        finally:
            proxy.stop()


def slow_controller_scenario(
    brokers: dict[int, BrokerProcess], zk_connect: str, proxy: TcpProxy
) -> None:
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    poll(lambda: len(admin.list_topics(timeout=10).brokers) == 3, "3 live brokers")
    admin.create_topics([NewTopic("slow", PARTITIONS, 3)])["slow"].result(30)
    poll(lambda: full_isr(admin, "slow", PARTITIONS), "full ISRs")
    before = states(zk_connect, "slow")
    led = sorted(p for p, state in before.items() if state.leader == 2)
    assert led  # broker 2 leads a partition (replicas are spread)
    producer = NumberedProducer(bootstrap, "slow").start()
    producer.wait_for_acks(300)

    proxy.faults.latency_s = LATENCY_S
    assert brokers[2].stop() == 0
    output = brokers[2].output()
    assert succeeded_at_once(output)
    after = states(zk_connect, "slow")
    assert [p for p, state in after.items() if state.leader == 2] == []
    assert [p for p, state in after.items() if 2 in state.isr] == []
    for partition in led:
        assert after[partition].leader_epoch == before[partition].leader_epoch + 1  # one move
    proxy.faults.latency_s = 0

    producer.wait_for_acks(600)
    producer.stop()
    assert producer.failed == []
    assert producer.remaining == 0
    read = read_all(bootstrap, "slow")
    for partition in range(PARTITIONS):
        assert read[partition] == sorted(producer.acked[partition])


class NumberedProducer:
    """An idempotent acks=all producer writing numbered records to every partition, in a
    thread, with a bounded backlog, until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.acked: dict[int, list[int]] = defaultdict(list)
        self.failed: list[Any] = []
        self.error: Exception | None = None
        self._stop = threading.Event()
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 120_000,
            }
        )
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, error: Any, message: Any) -> None:
        if error is not None:
            self.failed.append(error)
        else:
            self.acked[message.partition()].append(int(message.value()))

    def _run(self) -> None:
        try:
            self._produce()
        except Exception as exc:  # the test's wait fails with it, not 60 s later
            self.error = exc
            raise

    def _produce(self) -> None:
        number = 0
        while not self._stop.is_set():
            partition = number % PARTITIONS
            self._producer.produce(
                self.topic, str(number).encode(), partition=partition, on_delivery=self._delivered
            )
            number += 1
            while len(self._producer) > 300 and not self._stop.is_set():
                self._producer.poll(0.05)
            self._producer.poll(0)
        self.remaining = self._producer.flush(WAIT)

    def start(self) -> NumberedProducer:
        self._thread.start()
        return self

    def wait_for_acks(self, count: int) -> None:
        poll(
            lambda: self.error is not None or sum(map(len, self.acked.values())) >= count,
            f"{count} acks",
        )
        assert self.error is None

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(WAIT + 10)


def read_all(bootstrap: str, topic: str) -> dict[int, list[int]]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "rolling-check", "enable.auto.commit": False}
    )
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(PARTITIONS)
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        read: dict[int, list[int]] = defaultdict(list)
        deadline = time.monotonic() + WAIT
        positions = dict.fromkeys(range(PARTITIONS), 0)
        while any(positions[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                read[message.partition()].append(int(message.value()))
                positions[message.partition()] = message.offset() + 1
        return read
    finally:
        consumer.close()


def test_rolling_restart_under_acks_all_load_loses_nothing(
    brokers: dict[int, BrokerProcess],
) -> None:
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    poll(lambda: len(admin.list_topics(timeout=10).brokers) == 3, "3 live brokers")
    admin.create_topics([NewTopic("rolling", PARTITIONS, 3)])["rolling"].result(30)
    poll(lambda: full_isr(admin, "rolling", PARTITIONS), "full ISRs")

    producer = NumberedProducer(bootstrap, "rolling").start()
    acks = 500
    producer.wait_for_acks(acks)
    for broker_id in (1, 2, 3):
        poll(lambda: full_isr(admin, "rolling", PARTITIONS), "full ISRs before a restart")
        brokers[broker_id].restart()
        acks += 500
        producer.wait_for_acks(acks)  # writes go on while the broker rejoins
    poll(lambda: full_isr(admin, "rolling", PARTITIONS), "full ISRs after the restarts")
    producer.stop()

    assert producer.failed == []
    assert producer.remaining == 0
    read = read_all(bootstrap, "rolling")
    for partition in range(PARTITIONS):
        # Every acknowledged record exactly once, in the order produced.
        assert read[partition] == sorted(producer.acked[partition])
    assert sum(map(len, read.values())) == sum(map(len, producer.acked.values()))

    # Every broker stopped at once (Ctrl-C on `kafkalite cluster`): none waits for the others.
    processes = [b.process for b in brokers.values() if b.process is not None]
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process, broker in zip(processes, brokers.values(), strict=True):
        assert process.wait(WAIT) == 0  # a second signal would cut the shutdown short
        broker.stop()  # reaps it and its output
        last_run = broker.output().rpartition("Starting controlled shutdown")[2]
        assert succeeded_at_once(last_run), last_run[-4000:]
