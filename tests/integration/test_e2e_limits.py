"""Resource limits (issue 9, point 4): partition caps, thousands of partitions under a low
open-file limit, and the bound on bytes of unfinished requests (queued.max.request.bytes)."""

from __future__ import annotations

import select
import socket
import struct
import sys
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka.admin import NewPartitions, NewTopic
from e2e_helpers import CLIENT_TIMEOUT, admin, consume_all, consumer, producer, wait_until

from kafkalite.testing import BrokerProcess, error_records
from protocol_tests.raw_client import RawClient, api_versions_request


def _partition_dirs(data_dir: Path) -> list[str]:
    return sorted(p.name for p in data_dir.iterdir() if p.is_dir() and "-" in p.name)


def _create(
    bootstrap: str, *topics: tuple[str, int], timeout: float = CLIENT_TIMEOUT
) -> dict[str, KafkaError | None]:
    futures = admin(bootstrap).create_topics(
        [NewTopic(name, count, 1) for name, count in topics],
        operation_timeout=timeout,
        request_timeout=timeout,
    )
    return {name: _error(future, timeout) for name, future in futures.items()}


def _grow(bootstrap: str, name: str, total: int) -> KafkaError | None:
    futures = admin(bootstrap).create_partitions([NewPartitions(name, total)])
    return _error(futures[name])


def _error(future, timeout: float = CLIENT_TIMEOUT) -> KafkaError | None:
    exc = future.exception(timeout=timeout)
    return exc.args[0] if exc is not None else None


def test_partition_caps_refuse_with_policy_violation_before_creating(broker_factory) -> None:
    broker = broker_factory(
        {"kafkalite.max.partitions": "30", "kafkalite.max.partitions.per.request": "20"}
    )
    per_request = (
        "Excessively large number of partitions per request: 25 requested, limit 20 "
        "(kafkalite.max.partitions.per.request)."
    )

    refused = _create(broker.bootstrap, ("a", 15), ("b", 10))

    assert {name: (e.code(), e.str()) for name, e in refused.items()} == {
        "a": (KafkaError.POLICY_VIOLATION, per_request),
        "b": (KafkaError.POLICY_VIOLATION, per_request),
    }
    assert _partition_dirs(broker.data_dir) == []

    assert _create(broker.bootstrap, ("a", 15)) == {"a": None}
    assert _create(broker.bootstrap, ("b", 10)) == {"b": None}
    over = _create(broker.bootstrap, ("c", 10))["c"]
    assert (over.code(), over.str()) == (
        KafkaError.POLICY_VIOLATION,
        "Adding 10 partition(s) to the 25 of this broker would exceed kafkalite.max.partitions=30.",
    )
    grow = _grow(broker.bootstrap, "a", 21)
    assert (grow.code(), grow.str()) == (
        KafkaError.POLICY_VIOLATION,
        "Adding 6 partition(s) to the 25 of this broker would exceed kafkalite.max.partitions=30.",
    )
    assert _grow(broker.bootstrap, "a", 20) is None
    expected = [f"a-{i}" for i in range(20)] + [f"b-{i}" for i in range(10)]
    assert _partition_dirs(broker.data_dir) == sorted(expected)
    broker.restart()
    assert _partition_dirs(broker.data_dir) == sorted(expected)


class _LimitedBroker(BrokerProcess):
    """A broker started with RLIMIT_NOFILE soft = hard = `nofile` (it cannot raise it)."""

    nofile = 256

    def command(self) -> list[str]:
        command = super().command()
        shim = (
            "import resource, sys, runpy; "
            f"resource.setrlimit(resource.RLIMIT_NOFILE, ({self.nofile}, {self.nofile})); "
            "sys.argv = ['kafkalite', *sys.argv[1:]]; "
            "runpy.run_module('kafkalite', run_name='__main__')"
        )
        return [sys.executable, "-c", shim, *command[3:]]


def _open_files(broker: BrokerProcess) -> int:
    assert broker.process is not None
    return len(list(Path(f"/proc/{broker.process.pid}/fd").iterdir()))


@pytest.mark.slow  # about 40 s: 5,000 partitions created, restarted, killed and recovered
def test_five_thousand_partitions_fit_in_256_open_files_and_restart(tmp_path: Path) -> None:
    broker = _LimitedBroker(tmp_path / "data", {"num.partitions": "1"})
    topics = [(f"many-{i}", 1000) for i in range(5)]
    try:
        broker.start()
        # Thousands of files are created in one request: a generous deadline on a busy machine.
        created = _create(broker.bootstrap, *topics, timeout=300)
        assert created == {name: None for name, _ in topics}
        prod = producer(broker.bootstrap)
        for name, count in topics:
            for partition in range(0, count, 10):
                prod.produce(name, value=b"%s/%d" % (name.encode(), partition), partition=partition)
        assert prod.flush(60) == 0
        assert _open_files(broker) <= 256
        # Loading 5,000 partitions: the same generous deadline (a CI run at load 11 took over
        # the default 60 s to restart).
        broker.restart(timeout=300)
        assert _open_files(broker) <= 256
        assert broker.kill() == -9
        broker.start(timeout=300)  # recovers every partition from its segments

        assert len(_partition_dirs(broker.data_dir)) == 5000
        metadata = admin(broker.bootstrap).list_topics(timeout=CLIENT_TIMEOUT)
        assert {name: len(metadata.topics[name].partitions) for name, _ in topics} == dict(topics)
        cons = consumer(broker.bootstrap)
        try:
            for name, count in topics:
                for partition in (0, 500, count - 10):
                    low, high = cons.get_watermark_offsets(
                        TopicPartition(name, partition), timeout=CLIENT_TIMEOUT, cached=False
                    )
                    assert (low, high) == (0, 1), (name, partition)
        finally:
            cons.close()
        assert "Too many open files" not in broker.output()
    finally:
        broker.stop()


def _rss_kib(broker: BrokerProcess) -> int:
    assert broker.process is not None
    status = Path(f"/proc/{broker.process.pid}/status").read_text()
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS"))


def _push_until_blocked(sock: socket.socket, data: memoryview) -> int:
    """Send what the peer accepts until it stops reading (1 s without progress)."""
    sent = 0
    sock.setblocking(False)
    while sent < len(data):
        _, writable, _ = select.select([], [sock], [], 1.0)
        if not writable:
            break
        try:
            sent += sock.send(data[sent : sent + (1 << 20)])
        except BlockingIOError:
            continue
    return sent


def test_unfinished_requests_are_bounded_by_queued_max_request_bytes(broker_factory) -> None:
    frame = 40 << 20
    broker = broker_factory(
        {
            "socket.request.max.bytes": str(frame),
            "queued.max.request.bytes": str(frame),
        }
    )
    body = memoryview(struct.pack(">i", frame) + bytes(36 << 20))  # 4 MiB short of whole
    before = _rss_kib(broker)
    clients = [socket.create_connection((broker.host, broker.port)) for _ in range(8)]
    try:
        sent = [_push_until_blocked(sock, body) for sock in clients]
        growth_mib = (_rss_kib(broker) - before) / 1024

        # The first connection reserved a whole frame, which uses up the pool: the others'
        # bytes wait in socket buffers. Unbounded, the broker held 8 x 36 MiB = 288 MiB.
        assert sent[0] == len(body)
        assert sum(1 for n in sent if n == len(body)) == 1, sent
        assert growth_mib < 100, growth_mib
        with RawClient(broker.host, broker.port) as probe:  # small requests still flow
            assert probe.request(api_versions_request()).error_code == 0
    finally:
        for sock in clients:
            sock.close()
    with RawClient(broker.host, broker.port) as probe:  # closing returned the reservations
        assert probe.request(api_versions_request()).error_code == 0


def test_cleaning_while_producing_keeps_the_latest_value_of_every_key(
    broker_factory, topic_name
) -> None:
    """Point 9: the cleaner works in a process of its own while produce requests append to
    the same log; whatever the interleaving, the consumer's table is exact."""
    broker = broker_factory({"log.cleaner.backoff.ms": "100"})
    topic = topic_name()
    config = {
        "cleanup.policy": "compact",
        "segment.bytes": "20000",
        "min.cleanable.dirty.ratio": "0.01",
    }
    futures = admin(broker.bootstrap).create_topics([NewTopic(topic, 1, 1, config=config)])
    futures[topic].result(timeout=CLIENT_TIMEOUT)
    prod = producer(broker.bootstrap, acks="all")
    latest = {}
    for i in range(3000):
        key, value = b"k%d" % (i % 100), b"v%d" % i
        prod.produce(topic, key=key, value=value, partition=0)
        latest[key] = value
        if i % 100 == 99:
            assert prod.flush(CLIENT_TIMEOUT) == 0
    wait_until(
        lambda: any("log cleaner reclaimed" in line for line in broker.lines),
        message="a cleaning",
    )

    records = consume_all(broker.bootstrap, topic, [0])[0]

    assert {r.key: r.value for r in records} == latest
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets)) and offsets[-1] == 2999
    assert len(records) < 3000
    assert error_records(broker.lines) == []
    cleaners = {
        int(line.split(" in process ")[1].split(",")[0])
        for line in broker.lines
        if " in process " in line
    }
    assert len(cleaners) == 1 and broker.process is not None
    assert broker.process.pid not in cleaners
