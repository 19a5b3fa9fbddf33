"""Views (issue 18) on a 3-broker cluster with real processes and ZooKeeper: a view created
through CreateTopics is known to every broker (its configs in ZooKeeper's topic configs), is
served by the leader of its source's partition, and keeps serving exactly the matching
records, in order and once each, when that leader is killed under idempotent acks=all load
and another replica takes over. A view has no partition states of its own: a broker that
does not lead the source names the source's leader and epoch (KIP-951) for a view too, also
for a view created after the failover. Leader elections leave views out.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import pytest
from cluster_helpers import StartBrokers, poll
from confluent_kafka import Consumer, ElectionType, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from kafkalite.testing import BrokerProcess
from protocol_tests.raw_client import RawClient, fetch_request

pytestmark = pytest.mark.slow

SOURCE, VIEW, LATE_VIEW = "orders", "orders.eu", "orders.eu-late"
FILTER = "region = 'eu' AND tag <> 'bulk'"
RECORDS = 1200
KILL_AFTER = 400
WAIT = 60.0
CLUSTER = {
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "kafkalite.liveness.probe.timeout.ms": "2000",
    # Teardown only: the last broker's controlled shutdown would wait for the killed one.
    "controlled.shutdown.enable": "false",
}
REGIONS = ("eu", "us", "apac")
TAGS = ("urgent", "bulk", "vip", None)


def headers_of(number: int) -> list[tuple[str, bytes]]:
    headers = [("region", REGIONS[number % 3].encode())]
    tag = TAGS[number % 4]
    return headers if tag is None else [*headers, ("tag", tag.encode())]


def matches(headers: list[tuple[str, bytes]]) -> bool:
    """FILTER, on the client: `tag <> 'bulk'` is unknown (not true) when tag is absent."""
    found = dict(headers)
    return found["region"] == b"eu" and "tag" in found and found["tag"] != b"bulk"


def partitions_of(admin: AdminClient, topic: str) -> dict[int, Any]:
    found = admin.list_topics(topic, timeout=10).topics.get(topic)
    return found.partitions if found is not None and found.error is None else {}


def read_all(bootstrap: str, topic: str, expected: int) -> list[tuple[int, bytes, Any]]:
    """(offset, value, headers) of partition 0 from the start, until `expected` records and
    a further second without any (anything more would be a duplicate or a stray)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False}
    )
    read: list[tuple[int, bytes, Any]] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + WAIT
        while len(read) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                read.append((message.offset(), message.value(), message.headers() or []))
        extra = consumer.poll(1.0)
        if extra is not None and extra.error() is None:
            read.append((extra.offset(), extra.value(), extra.headers() or []))
    finally:
        consumer.close()
    return read


def leader_hint(broker: BrokerProcess, topic: str) -> tuple[ErrorCode, int, int]:
    """A Fetch of partition 0 at `broker`: (error, leader, leader epoch) of its answer."""
    with RawClient(broker.host, broker.port, timeout=WAIT) as client:
        (answer,) = client.request(fetch_request(topic, 0, 0)).responses[0].partitions
    leader = answer.current_leader
    return answer.error_code, leader.leader_id, leader.leader_epoch


def create_view(admin: AdminClient, name: str) -> None:
    view_configs = {"kafkalite.view.source": SOURCE, "kafkalite.view.filter": FILTER}
    admin.create_topics([NewTopic(name, config=view_configs)])[name].result(30)


def known_everywhere(brokers: Iterable[BrokerProcess], view: str) -> None:
    """Until every broker's Metadata lists `view` with its source's leader."""
    for broker in brokers:
        each = AdminClient({"bootstrap.servers": broker.bootstrap})
        poll(
            lambda each=each: (
                (found := partitions_of(each, view).get(0)) is not None
                and found.leader == partitions_of(each, SOURCE)[0].leader
            ),
            f"{view} at {broker.bootstrap}",
        )


def test_a_view_follows_its_source_leader_across_a_kill(start_brokers: StartBrokers) -> None:
    brokers = start_brokers(CLUSTER)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(SOURCE, 1, 3)])[SOURCE].result(30)
    poll(lambda: len(getattr(partitions_of(admin, SOURCE).get(0), "isrs", ())) == 3, "full ISR")
    create_view(admin, VIEW)
    known_everywhere(brokers.values(), VIEW)
    leader = partitions_of(admin, SOURCE)[0].leader

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 120_000,
        }
    )
    failed: list[Any] = []

    def delivered(error: Any, _: Any) -> None:
        if error is not None:
            failed.append(error)

    def produce(numbers: range) -> None:
        for number in numbers:
            producer.produce(
                SOURCE, str(number).encode(), headers=headers_of(number), on_delivery=delivered
            )
            producer.poll(0)
        assert producer.flush(WAIT * 2) == 0

    produce(range(KILL_AFTER))
    expected_before = [str(n).encode() for n in range(KILL_AFTER) if matches(headers_of(n))]
    assert [value for _, value, _ in read_all(bootstrap, VIEW, len(expected_before))] == (
        expected_before
    )

    brokers[leader].kill()  # and producing goes on: the producer retries at the new leader
    produce(range(KILL_AFTER, RECORDS))
    assert failed == []
    survivors = ",".join(b.bootstrap for i, b in brokers.items() if i != leader)
    survivors_admin = AdminClient({"bootstrap.servers": survivors})
    poll(
        lambda: (
            partitions_of(survivors_admin, VIEW).get(0) is not None
            and partitions_of(survivors_admin, VIEW)[0].leader not in (-1, leader)
        ),
        "the view's new leader",
    )
    create_view(survivors_admin, LATE_VIEW)
    known_everywhere([b for i, b in brokers.items() if i != leader], LATE_VIEW)
    new_leader = partitions_of(survivors_admin, SOURCE)[0].leader
    follower = next(b for i, b in brokers.items() if i not in (leader, new_leader))
    hint = leader_hint(follower, SOURCE)
    assert hint[:2] == (ErrorCode.not_leader_or_follower, new_leader)
    assert leader_hint(follower, VIEW) == hint
    assert leader_hint(follower, LATE_VIEW) == hint
    # Elections are the source's: an election of every partition leaves views out, and a
    # view's partition named is not elected.
    elected = survivors_admin.elect_leaders(ElectionType.PREFERRED, None).result(30)
    assert {tp.topic for tp in elected} & {VIEW, LATE_VIEW} == set()
    [(_, refusal)] = (
        survivors_admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition(VIEW, 0)])
        .result(30)
        .items()
    )
    assert refusal is not None and refusal.code() == KafkaError.ELECTION_NOT_NEEDED

    source = read_all(survivors, SOURCE, RECORDS)
    assert [value for _, value, _ in source] == [str(n).encode() for n in range(RECORDS)]
    expected = [(offset, value) for offset, value, headers in source if matches(headers)]
    view = read_all(survivors, VIEW, len(expected))
    assert len(expected) == RECORDS // 6  # eu: n % 3 == 0; urgent or vip: n even
    assert [(offset, value) for offset, value, _ in view] == expected
