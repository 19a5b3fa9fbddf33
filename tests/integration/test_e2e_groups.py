"""Consumer groups end to end: real confluent-kafka consumers that subscribe(), most of them in
their own OS processes (group_member.py) so they can be SIGKILLed.

The membership scenarios check exclusive ownership (each partition owned by exactly one member
once a rebalance settles) and that nothing is skipped (every acknowledged message is consumed
by some member of every group). Rebalance timings are printed (pytest -s) and measured more
thoroughly by bench/group_rebalance.py. Waits block on the members' event streams
(groups_helpers.Members); timeouts are failure bounds only.

Broker settings: group.initial.rebalance.delay.ms=0, group.min.session.timeout.ms=500;
members use session.timeout.ms=1500 and heartbeat.interval.ms=300 unless a test says otherwise.
"""

from __future__ import annotations

import re
import socket
import struct
import time
from collections.abc import Callable, Iterator
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
from confluent_kafka.admin import AclOperation
from e2e_helpers import CLIENT_TIMEOUT, admin, create_topic, produce_all, producer, wait_until
from groups_helpers import (
    GROUP_BROKER,
    BackgroundProducer,
    MemberProcess,
    Members,
    assert_exclusive_and_complete,
    consumed_counter,
    exclusive_and_complete,
    group_consumer,
    measure_join_then_kill,
    measure_leave,
    poll_messages,
    total_consumed,
)

from kafkalite.testing import BrokerProcess, error_records


@pytest.fixture(scope="module")
def group_broker(module_broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return module_broker_factory(GROUP_BROKER)


# How kafkalite.server logs the end of a connection it did not close itself.
_CONNECTION_END = re.compile(r"connection from \S+ (dropped|closed mid-request|after an internal)")


@pytest.fixture(autouse=True)
def broker_log_has_no_errors(module_broker_factory: Any, broker_factory: Any) -> Iterator[None]:
    """Whatever the clients do, the broker logs no error (and no traceback) meanwhile."""
    marks = {id(b): len(b.lines) for b in module_broker_factory.started}
    yield
    for broker in [*module_broker_factory.started, *broker_factory.started]:
        errors = error_records(broker.lines[marks.get(id(broker), 0) :])
        assert not errors, "broker logged errors:\n" + "\n".join(errors[:3])


@pytest.fixture
def members() -> Iterator[Members]:
    with Members() as hub:
        yield hub


def _partitions(topic: str, count: int) -> set[tuple[str, int]]:
    return {(topic, p) for p in range(count)}


def _scenario(
    broker: BrokerProcess, topic_name: Callable[..., str], partitions: int
) -> tuple[str, str, str, set[tuple[str, int]]]:
    """A test's start: (bootstrap, a new topic of `partitions`, a group name, its partitions)."""
    topic, group = topic_name(), topic_name("group")
    create_topic(broker.bootstrap, topic, partitions)
    return broker.bootstrap, topic, group, _partitions(topic, partitions)


def _produce_keyed(bootstrap: str, topic: str, count: int, prefix: str = "") -> dict:
    """`count` keyed messages (the default partitioner spreads them): {(t, p, offset): value}."""
    prod = producer(bootstrap)
    try:
        deliveries = produce_all(
            prod,
            topic,
            ({"key": b"key-%d" % i, "value": f"{prefix}{i}".encode()} for i in range(count)),
        )
    finally:
        prod.close()
    return {(d.topic, d.partition, d.offset): d.value for d in deliveries.succeeded}


def _committed(
    bootstrap: str, group: str, topic: str, partitions: int
) -> dict[int, tuple[int, str | None]]:
    """The group's committed offsets (and metadata), read with a consumer that never joins."""
    cons = group_consumer(bootstrap, group)
    try:
        got = cons.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=CLIENT_TIMEOUT
        )
    finally:
        cons.close()
    for tp in got:
        assert tp.error is None, tp
    return {tp.partition: (tp.offset, tp.metadata) for tp in got}


def _end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    cons = group_consumer(bootstrap, "kafkalite-e2e-watermarks")
    try:
        return {
            p: cons.get_watermark_offsets(
                TopicPartition(topic, p), timeout=CLIENT_TIMEOUT, cached=False
            )[1]
            for p in range(partitions)
        }
    finally:
        cons.close()


def _rebalances_since(member: MemberProcess, since: float) -> list[dict]:
    return member.of_kind("assigned", "revoked", "lost", since=since)


# -- 1, 2: exclusive ownership, exactly once, publish-subscribe ------------------------------------


def test_three_members_own_partitions_exclusively_and_consume_each_message_once(
    group_broker: BrokerProcess, members: Members, topic_name: Callable[..., str]
) -> None:
    bootstrap, topic, group, wanted = _scenario(group_broker, topic_name, 6)
    trio = [members.spawn(f"m{i}", bootstrap, group, [topic], commit="each") for i in range(3)]
    settled_at = members.wait_settled(trio, wanted)
    assert_exclusive_and_complete(trio, wanted)
    # The default assignor (range) gives 6 partitions / 3 members = 2 each.
    assert sorted(len(m.assignment) for m in trio) == [2, 2, 2]

    produced = _produce_keyed(bootstrap, topic, 600)
    assert {p for _, p, _ in produced} == set(range(6)), "keys should reach every partition"
    members.wait_for(lambda: total_consumed(trio) >= 600, 60, "600 messages consumed")

    # No rebalance while consuming, so each message was consumed exactly once, by the owner
    # of its partition, with the value it was produced with.
    for member in trio:
        assert not _rebalances_since(member, settled_at + 1e-6), member.describe()
        for m in member.messages:
            assert (m["topic"], m["partition"]) in member.assignment
            assert m["value"].encode() == produced[(m["topic"], m["partition"], m["offset"])]
    counts = consumed_counter(trio)
    assert set(counts) == set(produced)
    assert [key for key, n in counts.items() if n > 1] == []

    # Commits (one per message) reach the log end; nothing more is delivered afterwards.
    ends = _end_offsets(bootstrap, topic, 6)
    wait_until(
        lambda: {p: o for p, (o, _) in _committed(bootstrap, group, topic, 6).items()} == ends,
        message="committed offsets at the log end",
    )
    members.drain()
    assert total_consumed(trio) == 600


def test_second_group_reads_everything_again(
    group_broker: BrokerProcess, members: Members, topic_name: Callable[..., str]
) -> None:
    """Publish-subscribe: each group gets every message; groups do not share partitions."""
    bootstrap = group_broker.bootstrap
    topic = topic_name()
    create_topic(bootstrap, topic, 6)
    produced = _produce_keyed(bootstrap, topic, 300)
    group_a, group_b = topic_name("a"), topic_name("b")
    pair = [members.spawn(f"a{i}", bootstrap, group_a, [topic], commit="each") for i in range(2)]
    single = members.spawn("b0", bootstrap, group_b, [topic], commit="each")

    wanted = _partitions(topic, 6)
    members.wait_settled(pair, wanted)
    members.wait_settled([single], wanted)
    members.wait_for(
        lambda: (
            set(consumed_counter(pair)) >= set(produced)
            and set(consumed_counter([single])) >= set(produced)
        ),
        60,
        "both groups to consume all 300 messages",
    )
    assert_exclusive_and_complete(pair, wanted)
    assert single.assignment == frozenset(wanted)
    assert set(consumed_counter(pair)) == set(produced)
    # The single member never rebalanced: it read each message exactly once.
    assert set(consumed_counter([single]).values()) == {1}
    assert len(single.messages) == 300


# -- 3, 4: commit, close, resume; commits survive broker restarts ----------------------------------


def _commit_then_stop(
    members: Members,
    bootstrap: str,
    group: str,
    topic: str,
    after: int,
    metadata: str,
    stop: bool = True,
    commit: str = "end",
) -> tuple[MemberProcess, dict[int, int]]:
    """A member reads `after` messages and commits what it read (with `metadata`): once at
    the end, or after every message. Returns {partition: committed offset}."""
    member = members.spawn(
        "committer",
        bootstrap,
        group,
        [topic],
        commit=commit,
        max_messages=after,
        commit_metadata=metadata,
    )
    event = members.wait_for(lambda: member.last("committed", "commit_failed"), 30, "the commit")
    assert event["event"] == "committed", event
    assert member.of_kind("commit_failed") == [], member.describe()
    committed = {}
    for t, p, offset, error in event["offsets"]:
        assert (t, error) == (topic, None), event
        committed[p] = offset
    # It read exactly the prefix it committed, partition by partition.
    for p, offset in committed.items():
        assert sorted(o for t, q, o in member.consumed() if q == p) == list(range(offset))
    assert sum(committed.values()) == after
    if stop:
        assert members.stop(member) == 0
        assert member.last("closed") is not None
    return member, committed


def _resume_reads_exactly_the_rest(
    bootstrap: str,
    group: str,
    topic: str,
    partitions: int,
    produced: dict,
    committed: dict[int, int],
    metadata: str,
) -> None:
    # committed() sees the offsets and their metadata.
    seen = _committed(bootstrap, group, topic, partitions)
    for p in range(partitions):
        if p in committed:
            assert seen[p] == (committed[p], metadata), (p, seen)
        else:
            assert seen[p][0] == OFFSET_INVALID, (p, seen)
    rest = {key for key in produced if key[2] >= committed.get(key[1], 0)}
    cons = group_consumer(bootstrap, group)
    try:
        cons.subscribe([topic])
        got = poll_messages(cons, len(rest))
        assert {(t, p, o) for t, p, o, _ in got} == rest
        assert len(got) == len(rest)
        for t, p, o, value in got:
            assert value == produced[(t, p, o)]
        # Nothing more is waiting (the first poll after the rest returns no message).
        message = cons.poll(0.5)
        assert message is None or message.error() is not None, message.offset()
    finally:
        cons.close()


def test_commit_close_and_resume_from_committed_offsets(
    group_broker: BrokerProcess, members: Members, topic_name: Callable[..., str]
) -> None:
    bootstrap, topic, group, _ = _scenario(group_broker, topic_name, 3)
    produced = _produce_keyed(bootstrap, topic, 300)
    metadata = "resume-here: ünïcode ✓"
    _, committed = _commit_then_stop(members, bootstrap, group, topic, 120, metadata)
    _resume_reads_exactly_the_rest(bootstrap, group, topic, 3, produced, committed, metadata)


def test_auto_commit_commits_on_close(
    group_broker: BrokerProcess, members: Members, topic_name: Callable[..., str]
) -> None:
    """enable.auto.commit (the client default): commits on its interval and on close(), so
    the next member of the group starts where the last one stopped."""
    bootstrap, topic, group, _ = _scenario(group_broker, topic_name, 3)
    produced = _produce_keyed(bootstrap, topic, 90)
    conf = {"enable.auto.commit": "true", "auto.commit.interval.ms": "200"}
    first = members.spawn("auto", bootstrap, group, [topic], conf=conf)
    members.wait_for(lambda: set(consumed_counter([first])) >= set(produced), 30, "90 consumed")
    assert members.stop(first) == 0
    ends = _end_offsets(bootstrap, topic, 3)
    assert {p: o for p, (o, _) in _committed(bootstrap, group, topic, 3).items()} == ends
    more = _produce_keyed(bootstrap, topic, 30, "more-")
    second = members.spawn("auto-2", bootstrap, group, [topic], conf=conf)
    members.wait_for(lambda: set(consumed_counter([second])) >= set(more), 30, "30 more")
    assert set(consumed_counter([second])) == set(more)


def test_commit_metadata_round_trips(
    group_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    bootstrap, topic, group, _ = _scenario(group_broker, topic_name, 2)
    cons = group_consumer(bootstrap, group)
    try:
        result = cons.commit(
            offsets=[
                TopicPartition(topic, 0, 7, "seven"),
                TopicPartition(topic, 1, 0, ""),
            ],
            asynchronous=False,
        )
        assert [tp.error for tp in result] == [None, None]
        got = cons.committed(
            [TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=CLIENT_TIMEOUT
        )
        assert [(tp.offset, tp.metadata) for tp in got] == [(7, "seven"), (0, "")]
        # A later commit without metadata replaces the metadata too.
        cons.commit(offsets=[TopicPartition(topic, 0, 9)], asynchronous=False)
        (tp,) = cons.committed([TopicPartition(topic, 0)], timeout=CLIENT_TIMEOUT)
        assert (tp.offset, tp.metadata or "") == (9, "")
    finally:
        cons.close()


@pytest.mark.parametrize("commit", ["end", "each"])
@pytest.mark.parametrize("stop", ["sigterm", "sigkill"])
def test_commits_survive_broker_restart(
    broker_factory: Callable[..., BrokerProcess],
    members: Members,
    topic_name: Callable[..., str],
    stop: str,
    commit: str,
) -> None:
    """A commit the broker acknowledged is there after a restart, clean or SIGKILL: an
    OffsetCommit response is an acknowledgement like a Produce response. With a commit per
    message, the replay of `__consumer_offsets` must end at the latest one."""
    broker = broker_factory(GROUP_BROKER)
    bootstrap, topic, group, _ = _scenario(broker, topic_name, 3)
    produced = _produce_keyed(bootstrap, topic, 300)
    metadata = f"before-{stop}"
    if stop == "sigterm":
        _, committed = _commit_then_stop(
            members, bootstrap, group, topic, 100, metadata, commit=commit
        )
        broker.restart()
    else:
        # Kill the broker as soon as the synchronous commit has returned, then the member.
        member, committed = _commit_then_stop(
            members, bootstrap, group, topic, 100, metadata, stop=False, commit=commit
        )
        broker.kill()
        member.kill()
        broker.restart()
    _resume_reads_exactly_the_rest(bootstrap, group, topic, 3, produced, committed, metadata)


def test_member_keeps_consuming_across_broker_restart(
    broker_factory: Callable[..., BrokerProcess], members: Members, topic_name: Callable[..., str]
) -> None:
    """The coordinator's memory goes with the broker; the member rejoins and resumes from its
    commits, so nothing produced before, during or after the restart is skipped."""
    broker = broker_factory(GROUP_BROKER)
    bootstrap, topic, group, wanted = _scenario(broker, topic_name, 2)
    member = members.spawn("survivor", bootstrap, group, [topic], commit="each")
    members.wait_settled([member], wanted)
    before = _produce_keyed(bootstrap, topic, 50, "before-")
    members.wait_for(lambda: set(consumed_counter([member])) >= set(before), 30, "first 50")
    restarted_at = time.monotonic()
    broker.restart()
    after = _produce_keyed(bootstrap, topic, 50, "after-")
    members.wait_for(
        lambda: set(consumed_counter([member])) >= set(after), 60, "50 more after the restart"
    )
    # The group itself survives too (Kafka persists it in __consumer_offsets): a restart
    # shorter than the session timeout needs no rejoin, a longer one a rejoin. Either way
    # the member owns everything again and skipped nothing.
    assert member.settled()
    assert member.assignment == frozenset(wanted)
    assert set(consumed_counter([member])) == set(before) | set(after)
    rejoined = bool(member.of_kind("assigned", since=restarted_at))
    print(f"\n[groups] member rejoined after the broker restart: {rejoined}")


# -- 5: a SIGKILLed member's partitions move on; rebalance timings ---------------------------------


def test_killed_member_loses_partitions_and_nothing_is_skipped(
    group_broker: BrokerProcess, members: Members, topic_name: Callable[..., str]
) -> None:
    bootstrap, topic, group, wanted = _scenario(group_broker, topic_name, 6)
    background = BackgroundProducer(bootstrap, topic)
    background.start()
    try:

        def before_kill(everyone: list[MemberProcess]) -> None:
            # The victim (m0) is busy consuming and committing when it dies.
            victim = everyone[0]
            seen = len(victim.messages)
            members.wait_for(lambda: len(victim.messages) >= seen + 20, 30, "m0 consuming")

        times, survivors, victim = measure_join_then_kill(
            members, bootstrap, group, topic, 6, commit="each", on_join_settled=before_kill
        )
        assert_exclusive_and_complete(survivors, wanted)
        assert victim.process.wait(10) == -9
        # The survivors keep consuming what is produced after the takeover.
        mark = background.count
        members.wait_for(
            lambda: any(
                int(m["value"].split("-")[1]) > mark + 50 for s in survivors for m in s.messages
            ),
            30,
            "survivors consuming new messages",
        )
    finally:
        produced = background.finish()
    members.wait_for(
        lambda: set(consumed_counter(members.members)) >= set(produced),
        60,
        f"all {len(produced)} produced messages consumed by someone",
    )
    counts = consumed_counter(members.members)
    assert set(counts) == set(produced)
    duplicates = sum(n - 1 for n in counts.values())
    # At-least-once: only messages the victim (or a member mid-rebalance) read without its
    # commit landing may come twice; that is a handful, not a replay.
    assert duplicates < 100, duplicates
    print(
        f"\n[groups] join-triggered rebalance: {times.join_from_ready * 1000:.0f} ms from the "
        f"new member's subscribe() ({times.join_from_spawn * 1000:.0f} ms from process start)"
        f"\n[groups] SIGKILLed member -> survivors own all partitions: "
        f"{times.kill_to_reassigned * 1000:.0f} ms (session.timeout.ms=1500)"
        f"\n[groups] produced {len(produced)}, consumed {sum(counts.values())}, "
        f"duplicates {duplicates}"
    )
    # Loose sanity bounds only (the session timeout is 1.5 s; figures go to the bench).
    assert times.kill_to_reassigned < 15
    assert times.join_from_ready < 15


def test_clean_close_hands_partitions_over_without_waiting_for_the_session(
    group_broker: BrokerProcess, members: Members, topic_name: Callable[..., str]
) -> None:
    """close() sends LeaveGroup: with a 30 s session timeout, only that explains a prompt
    takeover."""
    bootstrap, topic, group, wanted = _scenario(group_broker, topic_name, 4)
    conf = {"session.timeout.ms": "30000"}
    pair = [
        members.spawn(f"m{i}", bootstrap, group, [topic], conf=conf, commit="each")
        for i in range(2)
    ]
    members.wait_settled(pair, wanted)
    produced = _produce_keyed(bootstrap, topic, 100)
    members.wait_for(lambda: total_consumed(pair) >= 100, 30, "100 consumed")
    seconds = measure_leave(members, pair[0], [pair[1]], wanted, timeout=15)
    members.wait_for(lambda: pair[0].exit_code is not None, 15, "m0 to exit")
    assert pair[0].exit_code == 0 and pair[0].last("closed") is not None
    assert pair[1].assignment == frozenset(wanted)
    more = _produce_keyed(bootstrap, topic, 100, "more-")
    members.wait_for(lambda: set(consumed_counter([pair[1]])) >= set(more), 30, "100 more")
    # Commits were synchronous and the leaver's last one landed before its LeaveGroup.
    assert set(consumed_counter(pair)) == set(produced) | set(more)
    assert sum(consumed_counter(pair).values()) == 200
    print(f"\n[groups] LeaveGroup -> the other member owns all partitions: {seconds * 1000:.0f} ms")


# -- 6: cooperative-sticky -------------------------------------------------------------------------


def test_cooperative_sticky_rebalances_incrementally(
    group_broker: BrokerProcess, members: Members, topic_name: Callable[..., str]
) -> None:
    bootstrap, topic, group, wanted = _scenario(group_broker, topic_name, 6)
    conf = {"partition.assignment.strategy": "cooperative-sticky"}
    background = BackgroundProducer(bootstrap, topic)
    background.start()
    try:
        pair = [
            members.spawn(f"c{i}", bootstrap, group, [topic], conf=conf, commit="each")
            for i in range(2)
        ]
        members.wait_settled(pair, wanted)
        assert sorted(len(m.assignment) for m in pair) == [3, 3]
        before = {m.name: m.assignment for m in pair}
        third = members.spawn("c2", bootstrap, group, [topic], conf=conf, commit="each")
        members.wait_for(lambda: third.last("ready"), 30, "c2 ready")
        joined_at = third.last("ready")["t"]
        everyone = [*pair, third]
        members.wait_settled(everyone, wanted)
        assert_exclusive_and_complete(everyone, wanted)
        assert sorted(len(m.assignment) for m in everyone) == [2, 2, 2]
        for member in pair:
            # Sticky: a member keeps a subset of what it had and gains nothing.
            assert member.assignment <= before[member.name], member.describe()
            given_up = before[member.name] - member.assignment
            revoked = set()
            for event in _rebalances_since(member, joined_at):
                got = {(t, p) for t, p in event["partitions"]}
                # Incremental: callbacks name only what changes, never the kept partitions.
                assert event["event"] != "lost", event
                assert not got & member.assignment, (member.name, event)
                if event["event"] == "revoked":
                    revoked |= got
            assert revoked == given_up, (member.name, revoked, given_up)
        # The newcomer's partitions arrive by incremental assignment only.
        assert {e["event"] for e in third.of_kind("assigned", "revoked", "lost")} == {"assigned"}
        mark = background.count
        members.wait_for(
            lambda: any(int(m["value"].split("-")[1]) > mark + 30 for m in third.messages),
            30,
            "c2 consuming",
        )
    finally:
        produced = background.finish()
    members.wait_for(
        lambda: set(consumed_counter(members.members)) >= set(produced),
        60,
        f"all {len(produced)} produced messages consumed",
    )


def test_cooperative_survivors_keep_their_partitions_when_a_member_dies(
    group_broker: BrokerProcess, members: Members, topic_name: Callable[..., str]
) -> None:
    bootstrap, topic, group, wanted = _scenario(group_broker, topic_name, 6)
    conf = {"partition.assignment.strategy": "cooperative-sticky"}
    trio = [
        members.spawn(f"c{i}", bootstrap, group, [topic], conf=conf, commit="each")
        for i in range(3)
    ]
    members.wait_settled(trio, wanted)
    victim, survivors = trio[0], trio[1:]
    before = {m.name: m.assignment for m in survivors}
    killed_at = victim.kill()
    members.wait_settled(survivors, wanted, 30, "survivors to take over")
    assert_exclusive_and_complete(survivors, wanted)
    for member in survivors:
        assert member.assignment >= before[member.name]
        changes = _rebalances_since(member, killed_at)
        assert {e["event"] for e in changes} == {"assigned"}, member.describe()
    produced = _produce_keyed(bootstrap, topic, 60)
    members.wait_for(lambda: set(consumed_counter(survivors)) >= set(produced), 30, "60 consumed")


# -- 7: static membership --------------------------------------------------------------------------

STATIC = {
    # Long enough to restart a Python process inside it.
    "session.timeout.ms": "8000",
    "statistics.interval.ms": "200",
}


def _static_pair(
    members: Members, bootstrap: str, group: str, topic: str
) -> tuple[MemberProcess, MemberProcess, int]:
    """Static members a and b, settled; also b's rebalance count (librdkafka statistics)."""
    a = members.spawn("a", bootstrap, group, [topic], conf={**STATIC, "group.instance.id": "a"})
    b = members.spawn("b", bootstrap, group, [topic], conf={**STATIC, "group.instance.id": "b"})
    settled_at = members.wait_settled([a, b], _partitions(topic, 4))
    return a, b, _stats_after(members, b, settled_at)["cgrp"]["rebalance_cnt"]


def _stats_after(members: Members, member: MemberProcess, since: float) -> dict:
    """The first statistics event `member` emitted after `since`."""
    return members.wait_for(
        lambda: next((e for e in member.of_kind("stats", since=since)), None),
        10,
        f"{member.name} statistics after {since}",
    )


def _quiet_window(members: Members, member: MemberProcess, since: float, seconds: float) -> int:
    """Observe `member` for `seconds` after `since` (its statistics events mark the time): a
    rebalance would reach it within one heartbeat (300 ms). Returns its rebalance count."""
    return _stats_after(members, member, since + seconds)["cgrp"]["rebalance_cnt"]


def test_static_member_restart_gets_its_partitions_back_without_rebalance(
    group_broker: BrokerProcess, members: Members, topic_name: Callable[..., str]
) -> None:
    bootstrap, topic, group, wanted = _scenario(group_broker, topic_name, 4)
    a, b, rebalances_before = _static_pair(members, bootstrap, group, topic)
    owned_by_a = a.assignment
    stopped_at = time.monotonic()
    # librdkafka sends no LeaveGroup when a static member closes (KIP-345).
    assert members.stop(a) == 0
    a2 = members.spawn("a2", bootstrap, group, [topic], conf={**STATIC, "group.instance.id": "a"})
    members.wait_for(a2.settled, 30, "a2 assigned")
    assert a2.assignment == owned_by_a
    assert a2.last("assigned")["t"] - stopped_at < 8, "restart slower than the session timeout"
    rebalances_after = _quiet_window(members, b, a2.last("assigned")["t"], 1.5)
    assert _rebalances_since(b, stopped_at) == [], b.describe()
    assert rebalances_after == rebalances_before
    assert_exclusive_and_complete([a2, b], wanted)
    # Both still consume.
    produced = _produce_keyed(bootstrap, topic, 40)
    members.wait_for(
        lambda: set(consumed_counter([a2, b])) >= set(produced), 30, "a2 and b consuming"
    )
    description = admin(bootstrap).describe_consumer_groups([group])[group].result(CLIENT_TIMEOUT)
    assert sorted(m.group_instance_id for m in description.members) == ["a", "b"]


def test_duplicate_static_member_fences_the_old_one(
    group_broker: BrokerProcess, members: Members, topic_name: Callable[..., str]
) -> None:
    """A second process with the same group.instance.id takes over; the first one's next
    heartbeat gets FENCED_INSTANCE_ID, which librdkafka raises as a fatal consumer error."""
    bootstrap, topic, group, wanted = _scenario(group_broker, topic_name, 4)
    a, b, rebalances_before = _static_pair(members, bootstrap, group, topic)
    owned_by_a = a.assignment
    started_at = time.monotonic()
    twin = members.spawn(
        "a-twin", bootstrap, group, [topic], conf={**STATIC, "group.instance.id": "a"}
    )
    members.wait_for(lambda: a.exit_code is not None, 30, "the old instance to be fenced")
    error = a.last("error")
    assert error is not None and error["fatal"], a.describe()
    assert error["code"] == KafkaError._FATAL
    assert "fenced" in error["str"].lower(), error
    assert a.exit_code == 3
    members.wait_for(twin.settled, 30, "the twin assigned")
    assert twin.assignment == owned_by_a
    rebalances_after = _quiet_window(members, b, twin.last("assigned")["t"], 1.5)
    assert _rebalances_since(b, started_at) == [], b.describe()
    assert rebalances_after == rebalances_before
    assert_exclusive_and_complete([twin, b], wanted)


def test_static_member_away_longer_than_its_session_is_replaced(
    group_broker: BrokerProcess, members: Members, topic_name: Callable[..., str]
) -> None:
    """No LeaveGroup from a closing static member, but its session still expires."""
    bootstrap, topic, group, wanted = _scenario(group_broker, topic_name, 4)
    conf = {"session.timeout.ms": "2000"}
    a = members.spawn("a", bootstrap, group, [topic], conf={**conf, "group.instance.id": "a"})
    b = members.spawn("b", bootstrap, group, [topic], conf={**conf, "group.instance.id": "b"})
    members.wait_settled([a, b], wanted)
    closed_at = time.monotonic()
    assert members.stop(a) == 0
    taken_over_at = members.wait_settled([b], wanted, 15, "b to own everything")
    # Not before the session timeout: nothing told the coordinator a had gone.
    assert taken_over_at - closed_at >= 1.5, taken_over_at - closed_at
    description = admin(bootstrap).describe_consumer_groups([group])[group].result(CLIENT_TIMEOUT)
    assert [m.group_instance_id for m in description.members] == ["b"]


# -- 8: admin: ListGroups, DescribeGroups, DeleteGroups, offsets -----------------------------------


def _listed(bootstrap: str, **filters: object) -> dict[str, object]:
    result = admin(bootstrap).list_consumer_groups(**filters).result(CLIENT_TIMEOUT)
    assert not result.errors, result.errors
    return {g.group_id: g for g in result.valid}


def _group_offsets(
    bootstrap: str, group: str, require_stable: bool = False
) -> dict[tuple[str, int], int]:
    request = [ConsumerGroupTopicPartitions(group)]
    futures = admin(bootstrap).list_consumer_group_offsets(request, require_stable=require_stable)
    result = futures[group].result(CLIENT_TIMEOUT)
    for tp in result.topic_partitions:
        assert tp.error is None, tp
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions}


def test_admin_lists_describes_and_deletes_groups(
    group_broker: BrokerProcess, members: Members, topic_name: Callable[..., str]
) -> None:
    bootstrap, topic, group, wanted = _scenario(group_broker, topic_name, 4)
    conf = {"partition.assignment.strategy": "roundrobin"}
    pair = [
        members.spawn(f"admin-m{i}", bootstrap, group, [topic], conf=conf, commit="each")
        for i in range(2)
    ]
    members.wait_settled(pair, wanted)
    produced = _produce_keyed(bootstrap, topic, 40)
    members.wait_for(lambda: set(consumed_counter(pair)) >= set(produced), 30, "40 consumed")
    ends = _end_offsets(bootstrap, topic, 4)
    wait_until(
        lambda: _group_offsets(bootstrap, group) == {(topic, p): o for p, o in ends.items()},
        message="committed offsets at the log end",
    )

    # OffsetFetch with require_stable (v7+): nothing transactional is pending.
    assert _group_offsets(bootstrap, group, require_stable=True) == _group_offsets(bootstrap, group)

    # ListGroups, with state filters.
    stable = _listed(bootstrap, states={ConsumerGroupState.STABLE})
    assert group in stable
    assert stable[group].state == ConsumerGroupState.STABLE
    assert stable[group].is_simple_consumer_group is False
    assert group not in _listed(bootstrap, states={ConsumerGroupState.EMPTY})
    assert group in _listed(bootstrap)

    # DescribeGroups: members, their assignments, state, assignor.
    adm = admin(bootstrap)
    description = adm.describe_consumer_groups([group], include_authorized_operations=True)[
        group
    ].result(CLIENT_TIMEOUT)
    assert description.group_id == group
    # No ACLs: every group operation is allowed.
    assert {AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE} <= set(
        description.authorized_operations or ()
    )
    assert description.state == ConsumerGroupState.STABLE
    assert description.partition_assignor == "roundrobin"
    assert description.is_simple_consumer_group is False
    assert description.coordinator.id == 0
    assert sorted(m.client_id for m in description.members) == ["admin-m0", "admin-m1"]
    by_client = {m.client_id: m for m in description.members}
    for member in pair:
        described = by_client[member.name]
        assigned = {(tp.topic, tp.partition) for tp in described.assignment.topic_partitions}
        assert assigned == member.assignment
        assert described.member_id and described.host
        assert described.group_instance_id is None

    # A group with members cannot be deleted.
    future = adm.delete_consumer_groups([group])[group]
    with pytest.raises(KafkaException) as refused:
        future.result(CLIENT_TIMEOUT)
    assert refused.value.args[0].code() == KafkaError.NON_EMPTY_GROUP

    # Members leave (LeaveGroup on close): Empty, offsets kept.
    for member in pair:
        assert members.stop(member) == 0
    wait_until(
        lambda: group in _listed(bootstrap, states={ConsumerGroupState.EMPTY}),
        message="the group to be listed as Empty",
    )
    description = adm.describe_consumer_groups([group])[group].result(CLIENT_TIMEOUT)
    assert description.state == ConsumerGroupState.EMPTY
    assert description.members == []
    assert _group_offsets(bootstrap, group) == {(topic, p): o for p, o in ends.items()}

    # AlterConsumerGroupOffsets (an OffsetCommit with no generation) works on an Empty group.
    altered = adm.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p, 3) for p in range(4)])]
    )[group].result(CLIENT_TIMEOUT)
    assert all(tp.error is None for tp in altered.topic_partitions)
    assert _group_offsets(bootstrap, group) == {(topic, p): 3 for p in range(4)}

    # DeleteGroups on the Empty group: gone from the lists, its offsets too.
    adm.delete_consumer_groups([group])[group].result(CLIENT_TIMEOUT)
    assert group not in _listed(bootstrap)
    assert set(_group_offsets(bootstrap, group).values()) <= {OFFSET_INVALID}
    try:
        gone = adm.describe_consumer_groups([group])[group].result(CLIENT_TIMEOUT)
    except KafkaException as exc:  # DescribeGroups v6 (KIP-1043)
        assert exc.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND
    else:
        assert gone.state == ConsumerGroupState.DEAD
    # Deleting it again: GROUP_ID_NOT_FOUND.
    with pytest.raises(KafkaException) as missing:
        adm.delete_consumer_groups([group])[group].result(CLIENT_TIMEOUT)
    assert missing.value.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND


def test_admin_offsets_of_a_simple_group_and_type_filter(
    group_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    """A group that only ever had offsets written (no member joined) is a "simple" group."""
    bootstrap = group_broker.bootstrap
    topic, group = topic_name(), topic_name("simple")
    create_topic(bootstrap, topic, 2)
    produced = _produce_keyed(bootstrap, topic, 20)
    adm = admin(bootstrap)
    adm.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 2, "m0")])]
    )[group].result(CLIENT_TIMEOUT)
    listed = _listed(bootstrap, states={ConsumerGroupState.EMPTY})
    assert group in listed
    assert listed[group].is_simple_consumer_group is True
    assert group in _listed(bootstrap, types={ConsumerGroupType.CLASSIC})
    assert group not in _listed(bootstrap, types={ConsumerGroupType.CONSUMER})
    assert _group_offsets(bootstrap, group) == {(topic, 0): 2}
    committed = _committed(bootstrap, group, topic, 2)
    assert committed[0] == (2, "m0")
    assert committed[1][0] == OFFSET_INVALID
    # A subscriber in that group starts at the altered offset (partition 0) and at the
    # beginning (partition 1, no offset).
    cons = group_consumer(bootstrap, group)
    try:
        cons.subscribe([topic])
        expected = {k for k in produced if k[1] == 1 or k[2] >= 2}
        got = poll_messages(cons, len(expected))
        assert {(t, p, o) for t, p, o, _ in got} == expected
    finally:
        cons.close()


# -- 9: bad input at the client level --------------------------------------------------------------


def _commit_error(cons: Consumer, offsets: list[TopicPartition]) -> int | None:
    """The error code of a synchronous commit (None: committed). librdkafka raises the first
    failed partition's error for the whole call, even when other partitions were committed."""
    try:
        result = cons.commit(offsets=offsets, asynchronous=False)
    except KafkaException as exc:
        return exc.args[0].code()
    errors = [tp.error.code() for tp in result if tp.error]
    return errors[0] if errors else None


def test_bad_commits_fail_per_partition_and_the_group_keeps_working(
    group_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    bootstrap, topic, group, wanted = _scenario(group_broker, topic_name, 2)
    first = _produce_keyed(bootstrap, topic, 20)
    cons = group_consumer(bootstrap, group)
    try:
        cons.subscribe([topic])
        poll_messages(cons, len(first))
        missing_topic = topic_name("missing")
        unknown = KafkaError.UNKNOWN_TOPIC_OR_PART
        assert _commit_error(cons, [TopicPartition(missing_topic, 0, 5)]) == unknown
        assert _commit_error(cons, [TopicPartition(topic, 9, 5)]) == unknown
        assert _commit_error(cons, [TopicPartition(topic, 0, 1, "x" * 5000)]) == (
            KafkaError.OFFSET_METADATA_TOO_LARGE
        )
        assert _committed(bootstrap, group, topic, 2)[0][0] == OFFSET_INVALID
        # One bad partition does not sink the good one in the same request (the broker
        # answers per partition; librdkafka raises the bad one's error for the call).
        mixed = _commit_error(
            cons, [TopicPartition(topic, 0, 2, "ok"), TopicPartition(missing_topic, 0, 1)]
        )
        assert mixed == unknown
        assert _committed(bootstrap, group, topic, 2)[0] == (2, "ok")

        # The member is still in the group: it consumes and commits new messages.
        second = _produce_keyed(bootstrap, topic, 20, "second-")
        got = poll_messages(cons, len(second))
        assert {(t, p, o) for t, p, o, _ in got} == set(second)
        committed = cons.commit(asynchronous=False)
        assert all(tp.error is None for tp in committed)
        ends = _end_offsets(bootstrap, topic, 2)
        assert {p: o for p, (o, _) in _committed(bootstrap, group, topic, 2).items()} == ends
        assert {(tp.topic, tp.partition) for tp in cons.assignment()} == wanted
    finally:
        cons.close()


def test_session_timeout_below_the_broker_minimum_is_refused(
    group_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    bootstrap, topic, group, _ = _scenario(group_broker, topic_name, 1)
    cons = group_consumer(bootstrap, group, **{"session.timeout.ms": "100"})
    try:
        cons.subscribe([topic])
        deadline = time.monotonic() + 20
        error = None
        while error is None and time.monotonic() < deadline:
            message = cons.poll(0.2)
            if message is not None:
                assert message.error() is not None, "consumed without joining"
                error = message.error()
        assert error is not None, "no JoinGroup error reported"
        assert error.code() == KafkaError.INVALID_SESSION_TIMEOUT, error
        assert cons.assignment() == []
    finally:
        cons.close()


def test_group_max_size_refuses_extra_members(
    broker_factory: Callable[..., BrokerProcess], members: Members, topic_name: Callable[..., str]
) -> None:
    broker = broker_factory({**GROUP_BROKER, "group.max.size": "2"})
    bootstrap, topic, group, wanted = _scenario(broker, topic_name, 4)
    pair = [members.spawn(f"m{i}", bootstrap, group, [topic]) for i in range(2)]
    members.wait_settled(pair, wanted)
    extra = members.spawn("extra", bootstrap, group, [topic])
    error = members.wait_for(lambda: extra.last("error"), 30, "the extra member's error")
    assert error["code"] == KafkaError.GROUP_MAX_SIZE_REACHED, error
    assert extra.of_kind("assigned") == []
    assert_exclusive_and_complete(pair, wanted)
    assert all(m.settled() for m in pair)


# -- assignment shapes: more members than partitions, mixed subscriptions, patterns -----------


def test_more_members_than_partitions_leaves_some_idle(
    group_broker: BrokerProcess, members: Members, topic_name: Callable[..., str]
) -> None:
    bootstrap, topic, group, wanted = _scenario(group_broker, topic_name, 2)
    trio = [members.spawn(f"m{i}", bootstrap, group, [topic], commit="each") for i in range(3)]
    members.wait_for(
        lambda: all(m.last("assigned") for m in trio) and exclusive_and_complete(trio, wanted),
        30,
        "2 partitions shared by 3 members",
    )
    members.drain()
    assert sorted(len(m.assignment) for m in trio) == [0, 1, 1]
    produced = _produce_keyed(bootstrap, topic, 50)
    members.wait_for(lambda: set(consumed_counter(trio)) >= set(produced), 30, "50 consumed")
    assert set(consumed_counter(trio).values()) == {1}
    assert [m for m in trio if not m.assignment][0].messages == []


def test_members_with_different_subscriptions(
    group_broker: BrokerProcess, members: Members, topic_name: Callable[..., str]
) -> None:
    """The leader assigns from every member's own subscription, as the coordinator hands it
    all members' metadata: a topic only one member subscribes to goes to that member."""
    bootstrap = group_broker.bootstrap
    shared, own = topic_name("shared"), topic_name("own")
    group = topic_name("group")
    create_topic(bootstrap, shared, 4)
    create_topic(bootstrap, own, 2)
    narrow = members.spawn("narrow", bootstrap, group, [shared])
    wide = members.spawn("wide", bootstrap, group, [shared, own])
    wanted = _partitions(shared, 4) | _partitions(own, 2)
    members.wait_settled([narrow, wide], wanted)
    assert_exclusive_and_complete([narrow, wide], wanted)
    assert not narrow.assignment & _partitions(own, 2)
    assert wide.assignment >= _partitions(own, 2)
    assert len(narrow.assignment) == len(wide.assignment & _partitions(shared, 4)) == 2


def test_pattern_subscription_picks_up_a_new_topic(
    group_broker: BrokerProcess, members: Members, topic_name: Callable[..., str]
) -> None:
    """A new matching topic makes the members rejoin (librdkafka sees it in metadata) and
    the group rebalances to cover it."""
    bootstrap = group_broker.bootstrap
    prefix = topic_name("pattern").replace("-", "_")
    first, second = f"{prefix}.one", f"{prefix}.two"
    group = topic_name("group")
    create_topic(bootstrap, first, 2)
    conf = {"topic.metadata.refresh.interval.ms": "500"}
    pattern = "^" + prefix.replace(".", "\\.") + "\\..*"
    pair = [
        members.spawn(f"m{i}", bootstrap, group, [pattern], conf=conf, commit="each")
        for i in range(2)
    ]
    members.wait_settled(pair, _partitions(first, 2))
    create_topic(bootstrap, second, 2)
    wanted = _partitions(first, 2) | _partitions(second, 2)
    members.wait_settled(pair, wanted, 30, "the new topic to be assigned")
    assert_exclusive_and_complete(pair, wanted)
    produced = _produce_keyed(bootstrap, second, 40)
    members.wait_for(lambda: set(consumed_counter(pair)) >= set(produced), 30, "40 consumed")


# -- the broker's log ----------------------------------------------------------------------------


def test_client_disconnect_is_not_an_internal_error(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    """A client that sends a request and resets the connection (as a SIGKILLed or closing
    consumer does) is a dropped connection, not an internal error."""
    broker = broker_factory(log_level="DEBUG")  # a dropped connection is a DEBUG line
    for _ in range(3):
        sock = socket.create_connection((broker.host, broker.port))
        body = struct.pack(">hhih", 18, 0, 7, 4) + b"test"  # ApiVersions v0, client "test"
        sock.sendall(struct.pack(">i", len(body)) + body)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # RST
    wait_until(
        lambda: sum(bool(_CONNECTION_END.search(line)) for line in broker.lines) >= 3,
        message="the broker to log the end of the three connections",
    )
    broker.stop()
    errors = error_records(broker.lines)
    assert errors == [], errors[0]
