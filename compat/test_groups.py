"""Consumer groups, the same on kafkalite and Apache Kafka: members that own partitions
exclusively and consume every message once across a hand-over, commit and resume with offset
metadata, the group admin APIs (list, describe, delete, list and alter offsets), static
membership (rejoin without a rebalance, fencing) and cooperative-sticky rebalancing.

Members are confluent-kafka consumers polled in turn from the test's thread (librdkafka runs
the group protocol in its own threads; rebalance callbacks run inside poll()). Sessions use
Kafka's minimum (group.min.session.timeout.ms=6000): members leave with close() (LeaveGroup),
never by session expiry, so no wait is a session timeout.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_INVALID,
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from compat.scenario_helpers import (
    CLIENT_TIMEOUT,
    admin,
    broker_config,
    create_topic,
    error_name,
    produce_all,
    producer,
    shared_clients_closed,  # noqa: F401 (autouse fixture)
    wait_group_coordinator,
)

TP = tuple[str, int]
SESSION = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}


class Member:
    """One group member: its assignment after every poll, its rebalance callbacks, the
    messages it consumed, and commits of what it consumed on revocation and on close."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topics: list[str],
        name: str,
        **conf: Any,
    ) -> None:
        self.name = name
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": name,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                **{k: v for k, v in {**SESSION, **conf}.items() if v is not None},
            }
        )
        self.assignment: frozenset[TP] = frozenset()
        self.events: list[tuple[str, list[TP]]] = []
        self.messages: list[tuple[str, int, int, bytes | None]] = []
        self.next_offsets: dict[TP, int] = {}
        self.errors: list[KafkaError] = []
        self.commit_errors: list[str] = []
        self.closed = False
        self.commit_on_revoke = True
        self.consumer.subscribe(
            topics,
            on_assign=self._callback("assign"),
            on_revoke=self._on_revoke,
            on_lost=self._callback("lost"),
        )

    def _callback(self, kind: str) -> Callable[[Consumer, list[TopicPartition]], None]:
        def record(_: Consumer, partitions: list[TopicPartition]) -> None:
            self.events.append((kind, sorted((tp.topic, tp.partition) for tp in partitions)))

        return record

    def _on_revoke(self, cons: Consumer, partitions: list[TopicPartition]) -> None:
        self._callback("revoke")(cons, partitions)
        if self.commit_on_revoke:
            self.commit([(tp.topic, tp.partition) for tp in partitions])

    def commit(self, partitions: Iterable[TP] | None = None, metadata: str | None = None) -> None:
        """Synchronously commit the next offset of every given partition it consumed from."""
        wanted = self.next_offsets if partitions is None else set(partitions)
        offsets = [
            TopicPartition(t, p, self.next_offsets[(t, p)], metadata)
            if metadata is not None
            else TopicPartition(t, p, self.next_offsets[(t, p)])
            for (t, p) in sorted(wanted)
            if (t, p) in self.next_offsets
        ]
        if not offsets:
            return
        try:
            result = self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            self.commit_errors.append(exc.args[0].name())
            return
        self.commit_errors += [tp.error.name() for tp in result or () if tp.error]

    def poll(self, timeout: float = 0.05) -> None:
        if self.closed:
            return
        message = self.consumer.poll(timeout)
        if message is not None:
            if message.error():
                self.errors.append(message.error())
            else:
                tp = (message.topic(), message.partition())
                self.messages.append((*tp, message.offset(), message.value()))
                self.next_offsets[tp] = message.offset() + 1
        self.assignment = frozenset((tp.topic, tp.partition) for tp in self.consumer.assignment())

    def close(self, commit: bool = True) -> None:
        """Close (LeaveGroup unless static); `commit`: commit what it consumed first (and on
        the revocation close() causes), else commit nothing more."""
        if self.closed:
            return
        self.closed = True
        self.commit_on_revoke = commit
        try:
            if commit:
                self.commit(self.assignment)
        finally:
            self.consumer.close()
            self.assignment = frozenset()

    def consumed(self) -> list[tuple[str, int, int]]:
        return [(t, p, o) for t, p, o, _ in self.messages]


class Members:
    """Members polled in turn until a condition holds; every member is closed at exit."""

    def __init__(self, bootstrap: str, group: str, topics: list[str], **conf: Any) -> None:
        self.bootstrap, self.group, self.topics, self.conf = bootstrap, group, topics, conf
        self.members: list[Member] = []

    def __enter__(self) -> Members:
        return self

    def __exit__(self, *exc: object) -> None:
        for member in self.members:
            try:
                member.close(commit=False)
            except KafkaException:
                pass

    def add(self, name: str, **conf: Any) -> Member:
        member = Member(self.bootstrap, self.group, self.topics, name, **{**self.conf, **conf})
        self.members.append(member)
        return member

    @property
    def live(self) -> list[Member]:
        return [m for m in self.members if not m.closed]

    def run_until(
        self, condition: Callable[[], Any], timeout: float = 20.0, message: str = "condition"
    ) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            for member in self.live:
                member.poll()
            value = condition()
            if value:
                return value
            if time.monotonic() >= deadline:
                state = {m.name: (sorted(m.assignment), len(m.messages)) for m in self.members}
                raise AssertionError(f"timed out after {timeout}s waiting for {message}: {state}")

    def settled(self, members: list[Member], partitions: set[TP]) -> bool:
        """Every member owns partitions, none twice, all of them together."""
        owned = [m.assignment for m in members]
        return (
            all(owned)
            and sum(len(a) for a in owned) == len(partitions)
            and set().union(*owned) == partitions
        )

    def wait_settled(self, members: list[Member], partitions: set[TP], timeout: float = 20.0):
        self.run_until(
            lambda: self.settled(members, partitions),
            timeout,
            f"{[m.name for m in members]} to share {len(partitions)} partitions",
        )

    def consumed(self) -> list[tuple[str, int, int]]:
        return [record for m in self.members for record in m.consumed()]


@pytest.fixture(autouse=True)
def _coordinator_ready(target) -> None:
    wait_group_coordinator(target.bootstrap)


def _partitions(topic: str, count: int) -> set[TP]:
    return {(topic, p) for p in range(count)}


def _produce(bootstrap: str, topic: str, count: int, partitions: int, tag: str = "m") -> set:
    """`count` messages spread over the partitions: the set of (topic, partition, offset)."""
    deliveries = produce_all(
        producer(bootstrap),
        topic,
        (
            {"value": b"%s-%d" % (tag.encode(), i), "partition": i % partitions}
            for i in range(count)
        ),
    )
    return {(d.topic, d.partition, d.offset) for d in deliveries.succeeded}


def _committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, tuple]:
    """partition -> (committed offset, metadata) read by a consumer of the group."""
    cons = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = cons.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=CLIENT_TIMEOUT
        )
    finally:
        cons.close()
    return {tp.partition: (tp.offset, tp.metadata) for tp in found}


def _group_offsets(bootstrap: str, group: str) -> dict[TP, tuple[int, str | None]]:
    request = [ConsumerGroupTopicPartitions(group)]
    result = admin(bootstrap).list_consumer_group_offsets(request)[group].result(CLIENT_TIMEOUT)
    return {(tp.topic, tp.partition): (tp.offset, tp.metadata) for tp in result.topic_partitions}


def _listed(bootstrap: str, **filters: Any) -> dict[str, Any]:
    result = admin(bootstrap).list_consumer_groups(request_timeout=10, **filters)
    listing = result.result(CLIENT_TIMEOUT)
    assert not listing.errors, listing.errors
    return {g.group_id: g for g in listing.valid}


def _describe(bootstrap: str, group: str) -> Any:
    return admin(bootstrap).describe_consumer_groups([group])[group].result(CLIENT_TIMEOUT)


# -- ownership and hand-over -----------------------------------------------------------------


def test_members_own_partitions_exclusively_and_hand_over(
    target, topic_name: Callable[..., str]
) -> None:
    """Three members share six partitions (range: two each); every message is consumed
    once; a member that closes hands its partitions over before its session could expire,
    and the survivors continue from its commits."""
    topic, group = topic_name(), topic_name("group")
    create_topic(target.bootstrap, topic, 6)
    everything = _partitions(topic, 6)
    with Members(target.bootstrap, group, [topic]) as members:
        trio = [members.add(f"m{i}") for i in range(3)]
        members.wait_settled(trio, everything)
        assert sorted(len(m.assignment) for m in trio) == [2, 2, 2]

        produced = _produce(target.bootstrap, topic, 300, 6, "first")
        members.run_until(lambda: len(members.consumed()) >= 300, message="300 consumed")
        for member in trio:
            assert {(t, p) for t, p, _ in member.consumed()} <= member.assignment

        trio[2].close()
        started = time.monotonic()
        members.wait_settled(trio[:2], everything, timeout=15)
        assert time.monotonic() - started < 6.0, "hand-over waited for the session timeout"
        assert sorted(len(m.assignment) for m in trio[:2]) == [3, 3]

        produced |= _produce(target.bootstrap, topic, 60, 6, "second")
        members.run_until(lambda: len(members.consumed()) >= 360, message="360 consumed")
        consumed = members.consumed()
        assert [m.commit_errors for m in trio] == [[], [], []]
        assert len(consumed) == len(set(consumed)), "a message was consumed twice"
        assert set(consumed) == produced
        for member in trio:
            assert not member.errors, member.errors


def test_commit_and_resume_with_metadata(target, topic_name: Callable[..., str]) -> None:
    """A member commits what it consumed (with metadata) and closes; the next member of the
    group starts right there; the offsets and metadata read back the same through
    Consumer.committed and AdminClient.list_consumer_group_offsets."""
    topic, group = topic_name(), topic_name("group")
    create_topic(target.bootstrap, topic, 2)
    produced = _produce(target.bootstrap, topic, 20, 2)
    with Members(target.bootstrap, group, [topic]) as members:
        first = members.add("first")
        members.run_until(lambda: len(first.messages) >= 8, message="8 consumed")
        first.commit(metadata="checkpoint-1")
        committed = dict(first.next_offsets)
        first.close(commit=False)

        assert _committed(target.bootstrap, group, topic, 2) == {
            p: (committed.get((topic, p), OFFSET_INVALID), "checkpoint-1")
            if (topic, p) in committed
            else (OFFSET_INVALID, None)
            for p in range(2)
        }
        assert _group_offsets(target.bootstrap, group) == {
            tp: (offset, "checkpoint-1") for tp, offset in committed.items()
        }

        second = members.add("second")
        members.run_until(
            lambda: len(first.messages) + len(second.messages) >= 20, message="the rest"
        )
        for (t, p), offset in committed.items():
            firsts = [o for tt, pp, o in second.consumed() if (tt, pp) == (t, p)]
            assert not firsts or firsts[0] == offset
        both = first.consumed() + second.consumed()
        assert len(both) == len(set(both)) and set(both) == produced


# -- admin -----------------------------------------------------------------------------------


def test_admin_list_describe_delete(target, topic_name: Callable[..., str]) -> None:
    topic, group = topic_name(), topic_name("group")
    create_topic(target.bootstrap, topic, 4)
    everything = _partitions(topic, 4)
    adm = admin(target.bootstrap)
    with Members(
        target.bootstrap, group, [topic], **{"partition.assignment.strategy": "roundrobin"}
    ) as members:
        pair = [members.add(f"admin-m{i}") for i in range(2)]
        members.wait_settled(pair, everything)
        members.run_until(
            lambda: group in _listed(target.bootstrap, states={ConsumerGroupState.STABLE}),
            message="the group listed as Stable",
        )
        listed = _listed(target.bootstrap)[group]
        assert (listed.state, listed.is_simple_consumer_group) == (
            ConsumerGroupState.STABLE,
            False,
        )
        assert group not in _listed(target.bootstrap, states={ConsumerGroupState.EMPTY})

        described = _describe(target.bootstrap, group)
        assert (described.group_id, described.state, described.partition_assignor) == (
            group,
            ConsumerGroupState.STABLE,
            "roundrobin",
        )
        assert described.is_simple_consumer_group is False
        by_client = {m.client_id: m for m in described.members}
        assert sorted(by_client) == ["admin-m0", "admin-m1"]
        for member in pair:
            entry = by_client[member.name]
            assigned = {(tp.topic, tp.partition) for tp in entry.assignment.topic_partitions}
            assert assigned == member.assignment
            assert entry.member_id and entry.host and entry.group_instance_id is None

        assert error_name(adm.delete_consumer_groups([group])[group]) == "NON_EMPTY_GROUP"

        produced = _produce(target.bootstrap, topic, 40, 4)
        members.run_until(lambda: len(members.consumed()) >= 40, message="40 consumed")
        for member in pair:
            member.close()  # commits what it consumed, then LeaveGroup
    described = _describe(target.bootstrap, group)
    assert (described.state, described.members) == (ConsumerGroupState.EMPTY, [])
    assert group in _listed(target.bootstrap, states={ConsumerGroupState.EMPTY})
    ends = {(t, p): o + 1 for t, p, o in produced if (t, p, o + 1) not in produced}
    assert _group_offsets(target.bootstrap, group) == {tp: (o, None) for tp, o in ends.items()}

    adm.delete_consumer_groups([group])[group].result(CLIENT_TIMEOUT)
    assert group not in _listed(target.bootstrap)
    assert _group_offsets(target.bootstrap, group) == {}
    gone = _describe(target.bootstrap, group)
    assert (gone.state, gone.members, gone.type) == (
        ConsumerGroupState.DEAD,
        [],
        ConsumerGroupType.CLASSIC,
    )
    assert error_name(adm.delete_consumer_groups([group])[group]) == "GROUP_ID_NOT_FOUND"


def test_admin_alter_and_list_offsets(target, topic_name: Callable[..., str]) -> None:
    """AlterConsumerGroupOffsets creates a "simple" group (offsets, no members); a
    subscriber starts at the altered offsets; altering the offsets of a group with members
    is refused."""
    topic, group = topic_name(), topic_name("simple")
    create_topic(target.bootstrap, topic, 2)
    produced = _produce(target.bootstrap, topic, 20, 2)
    adm = admin(target.bootstrap)
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, 0, 4, "from-admin"), TopicPartition(topic, 1, 7)]
    )
    assert _alter_errors(target.bootstrap, request) == [None, None]
    assert _group_offsets(target.bootstrap, group) == {
        (topic, 0): (4, "from-admin"),
        (topic, 1): (7, None),
    }
    only_one = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 1)])
    listed = adm.list_consumer_group_offsets([only_one])[group].result(CLIENT_TIMEOUT)
    assert [(tp.partition, tp.offset) for tp in listed.topic_partitions] == [(1, 7)]
    simple = _listed(target.bootstrap)[group]
    assert (simple.state, simple.is_simple_consumer_group) == (ConsumerGroupState.EMPTY, True)

    with Members(target.bootstrap, group, [topic]) as members:
        member = members.add("after-alter")
        expected = {(t, p, o) for t, p, o in produced if o >= (4 if p == 0 else 7)}
        members.run_until(lambda: len(member.messages) >= len(expected), message="the rest")
        assert set(member.consumed()) == expected

        again = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 1)])
        assert _alter_errors(target.bootstrap, again) == ["UNKNOWN_MEMBER_ID"]


def _alter_errors(bootstrap: str, request: ConsumerGroupTopicPartitions) -> list[str | None]:
    """Per-partition error names of an AlterConsumerGroupOffsets (one for all if the call
    fails as a whole)."""
    future = admin(bootstrap).alter_consumer_group_offsets([request])[request.group_id]
    try:
        result = future.result(CLIENT_TIMEOUT)
    except KafkaException as exc:
        return [exc.args[0].name()]
    return [tp.error.name() if tp.error else None for tp in result.topic_partitions]


# -- static membership -----------------------------------------------------------------------


def test_static_member_rejoins_without_a_rebalance(target, topic_name: Callable[..., str]) -> None:
    """A static member (group.instance.id) that closes does not leave the group; restarted
    within its session it gets its partitions back and the other member sees no
    rebalance."""
    topic, group = topic_name(), topic_name("group")
    create_topic(target.bootstrap, topic, 4)
    everything = _partitions(topic, 4)
    with Members(target.bootstrap, group, [topic]) as members:
        a = members.add("static-a", **{"group.instance.id": "instance-a"})
        b = members.add("static-b", **{"group.instance.id": "instance-b"})
        members.wait_settled([a, b], everything)
        members.run_until(
            lambda: (
                len(_describe(target.bootstrap, group).members) == 2
                and _describe(target.bootstrap, group).state == ConsumerGroupState.STABLE
            ),
            message="a stable group of two",
        )
        instances = {
            m.client_id: m.group_instance_id for m in _describe(target.bootstrap, group).members
        }
        assert instances == {"static-a": "instance-a", "static-b": "instance-b"}
        a_owned, b_events = a.assignment, len(b.events)

        a.close()
        assert len(_describe(target.bootstrap, group).members) == 2, "the static member left"
        again = members.add("static-a2", **{"group.instance.id": "instance-a"})
        members.run_until(lambda: again.assignment, message="the restarted member's partitions")
        assert again.assignment == a_owned
        assert b.events[b_events:] == [], "the other member went through a rebalance"
        assert b.assignment == everything - a_owned


def test_duplicate_static_member_fences_the_old_one(target, topic_name: Callable[..., str]) -> None:
    topic, group = topic_name(), topic_name("group")
    create_topic(target.bootstrap, topic, 2)
    with Members(target.bootstrap, group, [topic]) as members:
        old = members.add("old", **{"group.instance.id": "the-instance"})
        members.wait_settled([old], _partitions(topic, 2))
        new = members.add("new", **{"group.instance.id": "the-instance"})
        members.run_until(
            lambda: new.assignment == _partitions(topic, 2) and old.errors,
            message="the new member owning everything and the old one fenced",
        )
        # A fatal consumer error; librdkafka words FENCED_INSTANCE_ID in the text.
        fatal = old.errors[0]
        assert fatal.code() == KafkaError._FATAL
        assert "Static consumer fenced by other consumer" in fatal.str()


# -- cooperative-sticky ----------------------------------------------------------------------


def test_cooperative_sticky_moves_only_what_it_must(target, topic_name: Callable[..., str]) -> None:
    topic, group = topic_name(), topic_name("group")
    create_topic(target.bootstrap, topic, 4)
    everything = _partitions(topic, 4)
    conf = {"partition.assignment.strategy": "cooperative-sticky"}
    with Members(target.bootstrap, group, [topic], **conf) as members:
        first = members.add("coop-1")
        members.wait_settled([first], everything)
        assert first.events == [("assign", sorted(everything))]

        second = members.add("coop-2")
        members.wait_settled([first, second], everything)
        assert sorted(len(m.assignment) for m in (first, second)) == [2, 2]
        # Only the two partitions that moved were revoked, never the whole assignment.
        assert _changes(first, "revoke") == [sorted(second.assignment)]
        assert _changes(second, "revoke") == []
        assert _changes(second, "assign") == [sorted(second.assignment)]

        kept = first.assignment
        second.close()
        members.wait_settled([first], everything)
        assert _changes(first, "revoke") == [sorted(everything - kept)], "revoked again"
        assert _changes(first, "assign")[-1] == sorted(everything - kept)


def _changes(member: Member, kind: str) -> list[list[TP]]:
    """The non-empty partition lists of a member's `kind` callbacks (cooperative rebalances
    also call them with nothing to add or take)."""
    return [parts for k, parts in member.events if k == kind and parts]


# -- the consumer group protocol (KIP-848) ---------------------------------------------------


def test_consumer_group_protocol(target, topic_name: Callable[..., str]) -> None:
    """group.protocol=consumer (KIP-848, Kafka 4's new rebalance protocol; librdkafka uses
    ConsumerGroupHeartbeat): the member gets every partition and consumes, and the group is
    described as a "consumer" group."""
    topic, group = topic_name(), topic_name("group")
    create_topic(target.bootstrap, topic, 2)
    produced = _produce(target.bootstrap, topic, 10, 2)
    with Members(target.bootstrap, group, [topic], **{"group.protocol": "consumer"}) as members:
        # session.timeout.ms and heartbeat.interval.ms are the broker's under KIP-848.
        member = members.add(
            "kip848", **{"session.timeout.ms": None, "heartbeat.interval.ms": None}
        )
        members.run_until(lambda: len(member.messages) >= 10, timeout=10, message="10 consumed")
        assert set(member.consumed()) == produced
        assert member.assignment == _partitions(topic, 2)
        described = _describe(target.bootstrap, group)
        assert (described.type, described.state) == (
            ConsumerGroupType.CONSUMER,
            ConsumerGroupState.STABLE,
        )


# -- bad session timeouts --------------------------------------------------------------------


@pytest.mark.parametrize("bound", ["below the minimum", "above the maximum"])
def test_session_timeout_outside_the_broker_bounds(
    target, topic_name: Callable[..., str], bound: str
) -> None:
    if bound == "below the minimum":
        session = int(broker_config(target.bootstrap, "group.min.session.timeout.ms")) - 1
    else:
        session = int(broker_config(target.bootstrap, "group.max.session.timeout.ms")) + 1
    topic, group = topic_name(), topic_name("group")
    create_topic(target.bootstrap, topic, 1)
    cons = Consumer(
        {
            "bootstrap.servers": target.bootstrap,
            "group.id": group,
            "session.timeout.ms": session,
            "heartbeat.interval.ms": min(500, session - 1),
            "max.poll.interval.ms": max(300_000, session),
        }
    )
    try:
        cons.subscribe([topic])
        deadline = time.monotonic() + 20
        error = None
        while error is None and time.monotonic() < deadline:
            message = cons.poll(0.2)
            if message is not None:
                assert message.error() is not None, "consumed without joining"
                error = message.error()
        assert error is not None and error.name() == "INVALID_SESSION_TIMEOUT"
        assert cons.assignment() == []
    finally:
        cons.close()
