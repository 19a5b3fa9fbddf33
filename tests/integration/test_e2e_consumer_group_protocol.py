"""KIP-848 consumer groups (group.protocol=consumer) end to end, with librdkafka members
(group_member.py) and Apache Kafka's Java consumer (java/JavaGroupMember.java, run on the
clients jar that compat/ provisions) in their own processes.

Each scenario: a member consumes alone, a second one joins (the partitions are split, none
owned twice), then leaves cleanly (the first gets everything back); every message is consumed
exactly once across the members, which commit after each message. The broker's heartbeat
interval is 500 ms (Kafka's default 5 s would only make the tests slower).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupState, ConsumerGroupType
from e2e_helpers import CLIENT_TIMEOUT, admin, create_topic, produce_all, producer
from groups_helpers import (
    GROUP_BROKER,
    MemberProcess,
    Members,
    assert_exclusive_and_complete,
    consumed_counter,
)

from kafkalite.testing import BrokerProcess, error_records

JAVA_MEMBER = "tests/integration/java/JavaGroupMember.java"
KIP848_BROKER = {
    **GROUP_BROKER,
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "6000",
}
# The consumer protocol takes session and heartbeat settings from the broker.
LIBRDKAFKA = {
    "group.protocol": "consumer",
    "session.timeout.ms": None,
    "heartbeat.interval.ms": None,
}
PARTITIONS = 4
BATCH = 60


@pytest.fixture(scope="module")
def broker(module_broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return module_broker_factory(KIP848_BROKER)


@pytest.fixture(autouse=True)
def broker_log_has_no_errors(broker: BrokerProcess) -> Iterator[None]:
    mark = len(broker.lines)
    yield
    errors = error_records(broker.lines[mark:])
    assert not errors, "broker logged errors:\n" + "\n".join(errors[:3])


@pytest.fixture
def members() -> Iterator[Members]:
    with Members() as hub:
        yield hub


def _produce(bootstrap: str, topic: str, count: int, prefix: str) -> set[tuple[str, int, int]]:
    prod = producer(bootstrap)
    try:
        deliveries = produce_all(
            prod,
            topic,
            ({"key": f"{prefix}{i}".encode(), "value": b"v"} for i in range(count)),
        )
    finally:
        prod.close()
    assert len(deliveries.succeeded) == count
    return {(d.topic, d.partition, d.offset) for d in deliveries.succeeded}


def _describe(bootstrap: str, group: str) -> Any:
    return admin(bootstrap).describe_consumer_groups([group])[group].result(CLIENT_TIMEOUT)


def _join_leave_scenario(
    members: Members,
    bootstrap: str,
    topic: str,
    group: str,
    start: Callable[[str], MemberProcess],
) -> None:
    everything = {(topic, p) for p in range(PARTITIONS)}
    produced = _produce(bootstrap, topic, BATCH, "a")
    first = start("first")
    members.wait_settled([first], everything, what="first member owns every partition")
    members.wait_for(lambda: len(first.messages) >= BATCH, what="first batch consumed")

    second = start("second")
    members.wait_settled([first, second], everything, what="partitions split between two")
    assert_exclusive_and_complete([first, second], everything)
    described = _describe(bootstrap, group)
    assert (described.type, described.state) == (
        ConsumerGroupType.CONSUMER,
        ConsumerGroupState.STABLE,
    )
    owned = {
        (tp.topic, tp.partition) for m in described.members for tp in m.assignment.topic_partitions
    }
    assert len(described.members) == 2 and owned == everything

    produced |= _produce(bootstrap, topic, BATCH, "b")
    both = [first, second]
    members.wait_for(lambda: sum(len(m.messages) for m in both) >= 2 * BATCH, what="2nd batch")

    assert members.stop(second) == 0
    members.wait_settled([first], everything, what="first member owns everything again")
    produced |= _produce(bootstrap, topic, BATCH, "c")
    members.wait_for(lambda: sum(len(m.messages) for m in both) >= 3 * BATCH, what="3rd batch")
    members.drain()

    consumed = consumed_counter(both)
    assert set(consumed) == produced
    assert sum(consumed.values()) == 3 * BATCH, "some message was consumed twice"
    assert second.messages, "the second member consumed nothing"


def test_librdkafka_members_join_and_leave(
    broker: BrokerProcess, members: Members, topic_name: Callable[..., str]
) -> None:
    topic, group = topic_name(), topic_name("group")
    create_topic(broker.bootstrap, topic, PARTITIONS)

    def start(name: str) -> MemberProcess:
        return members.spawn(name, broker.bootstrap, group, [topic], LIBRDKAFKA, commit="each")

    _join_leave_scenario(members, broker.bootstrap, topic, group, start)


def test_java_members_join_and_leave(
    broker: BrokerProcess, members: Members, topic_name: Callable[..., str], java_lib: str
) -> None:
    topic, group = topic_name(), topic_name("group")
    create_topic(broker.bootstrap, topic, PARTITIONS)

    def start(name: str) -> MemberProcess:
        cmd = ["java", "-cp", f"{java_lib}/*", JAVA_MEMBER, broker.bootstrap, group, topic]
        return members.start(name, [*cmd, "group.protocol=consumer", f"client.id={name}"])

    _join_leave_scenario(members, broker.bootstrap, topic, group, start)


@pytest.fixture(scope="module")
def java_lib() -> str:
    from compat.kafka_dist import kafka_lib

    return str(kafka_lib())


def test_group_survives_a_broker_restart_without_a_rebalance(
    broker_factory: Callable[..., BrokerProcess], members: Members, topic_name: Callable[..., str]
) -> None:
    """The group lives in __consumer_offsets: after a restart the member is still known and
    keeps its partitions (no new assignment) and reads exactly what is produced next."""
    restarting = broker_factory(KIP848_BROKER)
    bootstrap = restarting.bootstrap
    topic, group = topic_name(), topic_name("group")
    create_topic(bootstrap, topic, 2)
    everything = {(topic, 0), (topic, 1)}
    member = members.spawn("survivor", bootstrap, group, [topic], LIBRDKAFKA, commit="each")
    members.wait_settled([member], everything)
    produced = _produce(bootstrap, topic, BATCH, "before")
    members.wait_for(lambda: len(member.messages) >= BATCH, what="first batch")
    member_ids = [m.member_id for m in _describe(bootstrap, group).members]
    restarting.restart()
    assert f"{restarting.host}:{restarting.port}" == bootstrap
    produced |= _produce(bootstrap, topic, BATCH, "after")
    members.wait_for(lambda: len(member.messages) >= 2 * BATCH, what="second batch")
    members.drain()
    described = _describe(bootstrap, group)
    assert [m.member_id for m in described.members] == member_ids
    assert [e["event"] for e in member.of_kind("assigned", "revoked", "lost")] == ["assigned"]
    consumed = consumed_counter([member])
    assert set(consumed) == produced and sum(consumed.values()) == 2 * BATCH


def test_killed_member_is_fenced_after_the_session_timeout(
    broker: BrokerProcess, members: Members, topic_name: Callable[..., str]
) -> None:
    """A SIGKILLed member stops heartbeating: after group.consumer.session.timeout.ms (6 s here)
    its partitions go to the survivor, which skips nothing (it re-reads at most the one
    message per partition the dead member printed but had not committed)."""
    topic, group = topic_name(), topic_name("group")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    everything = {(topic, p) for p in range(PARTITIONS)}

    def start(name: str) -> MemberProcess:
        return members.spawn(name, broker.bootstrap, group, [topic], LIBRDKAFKA, commit="each")

    survivor, victim = start("survivor"), start("victim")
    members.wait_settled([survivor, victim], everything)
    produced = _produce(broker.bootstrap, topic, BATCH, "a")
    both = [survivor, victim]
    members.wait_for(lambda: sum(len(m.messages) for m in both) >= BATCH, what="first batch")
    lost = victim.assignment
    killed_at = victim.kill()
    members.wait_settled([survivor], everything, what="survivor owns everything")
    fenced_after = survivor.last("assigned")["t"] - killed_at  # type: ignore[index]
    # The session runs from the victim's last heartbeat, at most one interval before the kill.
    assert fenced_after >= 6.0 - 0.5, f"partitions moved {fenced_after:.1f}s after the kill"
    produced |= _produce(broker.bootstrap, topic, BATCH, "b")
    members.wait_for(lambda: set(consumed_counter(both)) >= produced, what="nothing skipped")
    members.drain()
    consumed = consumed_counter(both)
    assert set(consumed) == produced
    twice = [tp for tp, n in consumed.items() if n > 1]
    assert all(n == 2 for n in consumed.values() if n > 1)
    assert {(t, p) for t, p, _ in twice} <= lost and len(twice) <= len(lost)
