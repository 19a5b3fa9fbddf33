"""Views (issue 18) read by stock clients beyond confluent-kafka's classic consumer: Apache
Kafka's Java consumer in a group that commits and resumes, franz-go's kgo, and share groups
on a view (confluent-kafka's ShareConsumer and the Java KafkaShareConsumer). Each reads
exactly what a client-side filter of the source keeps, at the source's partitions and
offsets, from lz4 and zstd batches.

One in-process broker (EmbeddedBroker) for the module; the tests keep apart by topic names.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic
from e2e_helpers import CLIENT_TIMEOUT, consume_all, produce_all, producer, wait_until

from kafkalite.testing import EmbeddedBroker
from tests.conftest import make_topic_name

FRANZ_GO = Path(__file__).parents[2] / "compat" / "franz_go"
JAVA_SHARE_CONSUMER = "tests/integration/java/JavaShareConsumer.java"
JAVA_CONSUMER = "tests/integration/java/JavaViewConsumer.java"
BROKER = {"group.share.heartbeat.interval.ms": "500"}
REGIONS = ["eu", "us", "apac"]
FILTER = "region = 'eu' AND n >= 2"
Row = tuple[int, int, str]  # partition, offset, value


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path_factory.mktemp("views") / "data", BROKER) as running:
        yield running


def create_source_and_view(broker: EmbeddedBroker, prefix: str, partitions: int) -> tuple[str, str]:
    source = make_topic_name(prefix)
    view = f"{source}.eu"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    view_configs = {"kafkalite.view.source": source, "kafkalite.view.filter": FILTER}
    for name, count, config in [(source, partitions, {}), (view, -1, view_configs)]:
        futures = admin.create_topics([NewTopic(name, count, -1, config=config)])
        futures[name].result(timeout=CLIENT_TIMEOUT)
    return source, view


def fill(broker: EmbeddedBroker, source: str, count: int, partitions: int) -> None:
    """`count` records, the first half in lz4 batches, the rest in zstd ones."""
    messages = [
        {
            "value": f"v{i}",
            "partition": i % partitions,
            "headers": [("region", REGIONS[i % 3]), ("n", str(i % 5))],
        }
        for i in range(count)
    ]
    half = count // 2
    for codec, chunk in [("lz4", messages[:half]), ("zstd", messages[half:])]:
        produce_all(producer(broker.bootstrap, **{"compression.type": codec}), source, chunk)


def client_side_filter(broker: EmbeddedBroker, source: str, partitions: int) -> list[Row]:
    """The source read whole by confluent-kafka, filtered as FILTER says."""
    read = consume_all(broker.bootstrap, source, range(partitions))
    return sorted(
        (r.partition, r.offset, (r.value or b"").decode())
        for rows in read.values()
        for r in rows
        if (h := {k: (v or b"").decode() for k, v in r.headers})["region"] == "eu"
        and int(h["n"]) >= 2
    )


def test_java_consumer_group_reads_a_view_and_resumes_from_its_commit(
    broker: EmbeddedBroker,
) -> None:
    from compat.kafka_dist import kafka_lib

    source, view = create_source_and_view(broker, "java", partitions=2)
    fill(broker, source, 300, partitions=2)
    expected = client_side_filter(broker, source, partitions=2)
    assert len(expected) == 60  # region eu: i % 3 == 0; n >= 2: i % 5 in (2, 3, 4)
    first = 25
    cmd = ["java", "-cp", f"{kafka_lib()}/*", JAVA_CONSUMER, broker.bootstrap]
    cmd += [f"group-{source}", view, str(first), str(len(expected))]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=True)
    assert done.stdout.splitlines()[-1] == "done", done.stdout + done.stderr
    records = [line.split() for line in done.stdout.splitlines() if line.startswith("record ")]
    sessions = Counter(words[1] for words in records)
    assert sessions == {"1": first, "2": len(expected) - first}  # resumed, nothing read twice
    got = sorted((int(p), int(o), value) for _, _, p, o, value in records)
    assert got == expected


@pytest.fixture(scope="module")
def topicreader(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """compat/franz_go/topicreader built with franz-go's module (cached by the franz-go
    suite's setup: a cold build compiles kgo, about 40 s; cached, a link)."""
    from compat.franz_go.run import go_env

    if shutil.which("go") is None:
        pytest.skip("no Go toolchain")
    binary = tmp_path_factory.mktemp("go") / "topicreader"
    env = {**go_env(), "GOFLAGS": "-modcacherw -mod=mod"}
    build = ["go", "build", "-o", str(binary), "./topicreader"]
    subprocess.run(build, cwd=FRANZ_GO, env=env, check=True, timeout=300)
    return binary


def test_franz_go_reads_a_view_as_a_client_side_filter_of_its_source(
    broker: EmbeddedBroker, topicreader: Path
) -> None:
    source, view = create_source_and_view(broker, "franz", partitions=2)
    fill(broker, source, 300, partitions=2)
    expected = client_side_filter(broker, source, partitions=2)
    assert len(expected) == 60
    cmd = [str(topicreader), broker.bootstrap, view, str(len(expected))]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.splitlines()[-1] == "done", done.stdout + done.stderr
    records = [line.split() for line in done.stdout.splitlines() if line.startswith("record ")]
    assert sorted((int(p), int(o), value) for _, p, o, value in records) == expected


def test_kcat_reads_a_view_and_is_refused_producing_to_it(broker: EmbeddedBroker) -> None:
    """kcat (Debian's, installed by scripts/install_kcat.sh for `make test`)."""
    if shutil.which("kcat") is None:
        pytest.skip("no kcat (scripts/install_kcat.sh installs it)")
    source, view = create_source_and_view(broker, "kcat", partitions=2)
    fill(broker, source, 300, partitions=2)
    expected = client_side_filter(broker, source, partitions=2)
    assert len(expected) == 60
    read = ["kcat", "-C", "-b", broker.bootstrap, "-t", view, "-o", "beginning", "-e", "-q"]
    done = subprocess.run(
        [*read, "-f", "%p %o %s\\n"], capture_output=True, text=True, timeout=60, check=True
    )
    rows = [line.split() for line in done.stdout.splitlines()]
    assert sorted((int(p), int(o), value) for p, o, value in rows) == expected

    write = ["kcat", "-P", "-b", broker.bootstrap, "-t", view, "-p", "0"]
    refused = subprocess.run(write, input="x\n", capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0
    # INVALID_TOPIC_EXCEPTION, not retriable (kcat prints the code's name, not the message)
    assert "Broker: Invalid topic" in refused.stderr, refused.stderr
    assert client_side_filter(broker, source, partitions=2) == expected  # nothing written


def start_offset(broker: EmbeddedBroker, group: str) -> int:
    """The share-partition start offset: every record before it is acknowledged."""
    states = broker.call(lambda: broker.broker.share_groups.partitions.coordinator.states)
    offsets = [state.start_offset for key, state in states.items() if key.group_id == group]
    return offsets[0] if offsets else -1


def assigned(broker: EmbeddedBroker, group: str) -> bool:
    described = broker.call(lambda: broker.broker.share_groups.coordinator.describe(group))
    return len(described.members) == 1 and all(m.assigned for m in described.members)


def test_share_consumer_on_a_view_gets_each_matching_record_once(broker: EmbeddedBroker) -> None:
    source, view = create_source_and_view(broker, "share", partitions=1)
    group = f"share-{source}"
    consumer = ShareConsumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
        }
    )
    consumer.subscribe([view])
    delivered: Counter[tuple[int, str]] = Counter()

    def poll() -> None:
        for message in consumer.poll(0.1):
            assert message.error() is None, message.error()
            delivered[(message.offset(), message.value().decode())] += 1
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
        consumer.commit_sync()

    try:
        # Share groups start at the end (share.auto.offset.reset=latest): join, then produce.
        wait_until(lambda: (poll(), assigned(broker, group))[1], timeout=20, interval=0)
        assert not delivered
        fill(broker, source, 300, partitions=1)
        expected = [(offset, value) for _, offset, value in client_side_filter(broker, source, 1)]
        assert len(expected) == 60
        last = expected[-1][0]
        deadline = time.monotonic() + 20
        while len(delivered) < len(expected) or start_offset(broker, group) <= last:
            assert time.monotonic() < deadline, (sorted(delivered), start_offset(broker, group))
            poll()
        assert sorted(delivered) == expected
        assert set(delivered.values()) == {1}
    finally:
        consumer.close()


def test_java_share_consumer_on_a_view_gets_each_matching_record_once(
    broker: EmbeddedBroker,
) -> None:
    """Apache Kafka's KafkaShareConsumer (tests/integration/java/JavaShareConsumer.java) in
    implicit mode: its commits accept what each poll delivered (explicit mode is in
    tests/integration/test_e2e_share_groups.py)."""
    from compat.kafka_dist import kafka_lib

    source, view = create_source_and_view(broker, "jshare", partitions=1)
    group = f"share-{source}"
    expected_count = 60
    command = ["java", "-cp", f"{kafka_lib()}/*", JAVA_SHARE_CONSUMER, broker.bootstrap]
    java = subprocess.Popen(
        [*command, group, view, str(expected_count), "--implicit"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        # Share groups start at the end: the records are produced once it has joined.
        wait_until(lambda: java.poll() is not None or assigned(broker, group), timeout=60)
        assert java.poll() is None, "the Java share consumer exited before joining"
        fill(broker, source, 300, partitions=1)
        out, _ = java.communicate(timeout=60)
    finally:
        if java.poll() is None:
            java.kill()
            java.wait()
    expected = [(offset, value) for _, offset, value in client_side_filter(broker, source, 1)]
    assert len(expected) == expected_count
    records = [line.split()[1:] for line in out.splitlines() if line.startswith("record ")]
    assert sorted((int(o), value) for o, _, value in records) == expected
    assert {count for _, count, _ in records} == {"1"}  # each delivered once
    assert out.splitlines()[-1] == "closed"
    assert start_offset(broker, group) > expected[-1][0]  # all acknowledged
