"""Consumer-group members as OS processes (group_member.py) and waits on their events.

Each member process prints JSON lines; a reader thread per process puts them on one queue
shared by the `Members` hub. `Members.wait_for(condition)` takes events off that queue,
applies them to the members' state (in the calling thread only, so there is no locking) and
returns as soon as `condition()` holds: timeouts are failure bounds, never synchronisation.

Used by tests/integration/test_e2e_groups.py and bench/group_rebalance.py.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer

MEMBER_SCRIPT = Path(__file__).resolve().with_name("group_member.py")

# Broker overrides that make group tests fast: no initial rebalance delay, short sessions
# allowed, few __consumer_offsets partitions.
GROUP_BROKER: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "500",
    "offsets.topic.num.partitions": "3",
}

# Client settings to match: a dead member is noticed after 1.5 s.
FAST_MEMBER: dict[str, str] = {
    "session.timeout.ms": "1500",
    "heartbeat.interval.ms": "300",
    "reconnect.backoff.max.ms": "500",
}

TP = tuple[str, int]
REBALANCE_EVENTS = ("assigned", "revoked", "lost")


@dataclass
class MemberProcess:
    name: str
    process: subprocess.Popen[str]
    started_at: float
    events: list[dict[str, Any]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    assignment: frozenset[TP] = frozenset()
    exit_code: int | None = None
    killed_at: float | None = None
    stderr: list[str] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.exit_code is None and self.killed_at is None

    def apply(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        kind = event["event"]
        if kind in REBALANCE_EVENTS:
            self.assignment = frozenset((t, p) for t, p in event["assignment"])
        elif kind == "message":
            self.messages.append(event)
        elif kind == "exit":
            self.exit_code = event["code"]

    # -- queries --

    def of_kind(self, *kinds: str, since: float = float("-inf")) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event"] in kinds and e["t"] >= since]

    def last(self, *kinds: str) -> dict[str, Any] | None:
        found = self.of_kind(*kinds)
        return found[-1] if found else None

    def settled(self) -> bool:
        """Alive, and its latest rebalance callback was an assignment."""
        latest = self.last(*REBALANCE_EVENTS)
        return self.alive and latest is not None and latest["event"] == "assigned"

    def consumed(self) -> list[tuple[str, int, int]]:
        return [(m["topic"], m["partition"], m["offset"]) for m in self.messages]

    # -- control --

    def request_stop(self) -> None:
        """Ask for a clean close (consumer.close(), which sends LeaveGroup if dynamic)."""
        try:
            assert self.process.stdin is not None
            self.process.stdin.write("stop\n")
            self.process.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> float:
        """SIGKILL (no LeaveGroup, no close); returns the monotonic time of the kill."""
        self._signal(signal.SIGKILL)
        self.killed_at = time.monotonic()
        return self.killed_at

    def _signal(self, sig: int) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, sig)

    def describe(self) -> str:
        interesting = [e for e in self.events if e["event"] not in ("message", "stats")]
        lines = [
            f"  {self.name} pid={self.pid} alive={self.alive} exit={self.exit_code} "
            f"assignment={sorted(self.assignment)} messages={len(self.messages)}"
        ]
        lines += [f"    {json.dumps(e)}" for e in interesting[-12:]]
        lines += [f"    stderr: {line.rstrip()}" for line in self.stderr[-8:]]
        return "\n".join(lines)


class Members:
    """Start group members and wait on what they report. Use as a context manager (or call
    close()): every process it started is stopped, killed if it will not stop."""

    def __init__(self) -> None:
        self.queue: queue.Queue[tuple[MemberProcess, dict[str, Any]]] = queue.Queue()
        self.members: list[MemberProcess] = []

    def __enter__(self) -> Members:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def spawn(
        self,
        name: str,
        bootstrap: str,
        group: str,
        topics: Sequence[str],
        conf: Mapping[str, str | None] | None = None,
        commit: str = "none",
        max_messages: int = 0,
        commit_metadata: str | None = None,
        verbose: bool = False,
    ) -> MemberProcess:
        cmd = [sys.executable, str(MEMBER_SCRIPT), bootstrap, group, ",".join(topics)]
        for key, value in {**FAST_MEMBER, "client.id": name, **(conf or {})}.items():
            if value is not None:  # None drops a FAST_MEMBER setting
                cmd += ["-X", f"{key}={value}"]
        cmd += ["--commit", commit]
        if max_messages:
            cmd += ["--max-messages", str(max_messages)]
        if commit_metadata is not None:
            cmd += ["--commit-metadata", commit_metadata]
        if verbose:
            cmd.append("-v")
        return self.start(name, cmd)

    def start(self, name: str, cmd: Sequence[str]) -> MemberProcess:
        """Start a member from any command that prints group_member.py's JSON events (e.g. the
        Java client's twin, tests/integration/java/JavaGroupMember.java)."""
        process = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        member = MemberProcess(name, process, time.monotonic())
        member.threads = [
            threading.Thread(target=self._read_stdout, args=(member,), daemon=True),
            threading.Thread(target=self._read_stderr, args=(member,), daemon=True),
        ]
        for thread in member.threads:
            thread.start()
        self.members.append(member)
        return member

    def _read_stdout(self, member: MemberProcess) -> None:
        assert member.process.stdout is not None
        for line in member.process.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                member.stderr.append(f"(stdout) {line}")
                continue
            self.queue.put((member, event))
        code = member.process.wait()
        self.queue.put((member, {"event": "exit", "code": code, "t": time.monotonic()}))

    @staticmethod
    def _read_stderr(member: MemberProcess) -> None:
        assert member.process.stderr is not None
        for line in member.process.stderr:
            member.stderr.append(line)

    # -- waiting --

    def drain(self) -> None:
        """Apply every event already received, without blocking."""
        while True:
            try:
                member, event = self.queue.get_nowait()
            except queue.Empty:
                return
            member.apply(event)

    def wait_for(
        self, condition: Callable[[], Any], timeout: float = 30.0, what: str = "condition"
    ) -> Any:
        """Apply events as they arrive until `condition()` is truthy (and return it)."""
        deadline = time.monotonic() + timeout
        self.drain()
        while True:
            value = condition()
            if value:
                return value
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    f"timed out after {timeout}s waiting for {what}\n{self.describe()}"
                )
            try:
                member, event = self.queue.get(timeout=remaining)
            except queue.Empty:
                continue
            member.apply(event)
            self.drain()

    def wait_settled(
        self,
        members: Sequence[MemberProcess],
        partitions: Iterable[TP],
        timeout: float = 30.0,
        what: str | None = None,
    ) -> float:
        """Wait until `members` own `partitions` exclusively, each member holding some and
        each member's latest callback being an assignment. Returns the time (the members'
        clock) of the latest assignment, i.e. when the rebalance finished."""
        wanted = frozenset(partitions)

        def settled() -> bool:
            return all(m.settled() and m.assignment for m in members) and exclusive_and_complete(
                members, wanted
            )

        self.wait_for(
            settled, timeout, what or f"{[m.name for m in members]} to share {sorted(wanted)}"
        )
        # An event of the new generation may still be in a pipe: re-check once everything
        # received so far is applied.
        self.drain()
        assert settled(), f"assignment changed while settling\n{self.describe()}"
        return max(m.last("assigned")["t"] for m in members)  # type: ignore[index]

    def describe(self) -> str:
        self.drain()
        return "\n".join(m.describe() for m in self.members)

    # -- stopping --

    def stop(self, member: MemberProcess, timeout: float = 20.0) -> int:
        """Close cleanly (stdin "stop") and wait for the exit event."""
        member.request_stop()
        self.wait_for(lambda: member.exit_code is not None, timeout, f"{member.name} to exit")
        if member.exit_code:
            print(f"{member.name} exited {member.exit_code}:\n{member.describe()}")
        return member.exit_code  # type: ignore[return-value]

    def close(self, timeout: float = 20.0) -> None:
        for member in self.members:
            if member.process.poll() is None:
                member.request_stop()
        deadline = time.monotonic() + timeout
        for member in self.members:
            try:
                member.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                member.process.kill()
                member.process.wait()
        for member in self.members:
            for thread in member.threads:
                thread.join(5)
            for stream in (member.process.stdin, member.process.stdout, member.process.stderr):
                if stream is not None:
                    try:
                        stream.close()
                    except OSError:
                        pass
        self.drain()


# -- assignment checks -----------------------------------------------------------------------------


def exclusive_and_complete(members: Iterable[MemberProcess], partitions: Iterable[TP]) -> bool:
    assignments = [m.assignment for m in members]
    union = frozenset().union(*assignments)
    return union == frozenset(partitions) and sum(len(a) for a in assignments) == len(union)


def assert_exclusive_and_complete(
    members: Sequence[MemberProcess], partitions: Iterable[TP]
) -> None:
    wanted = frozenset(partitions)
    for i, a in enumerate(members):
        for b in members[i + 1 :]:
            both = a.assignment & b.assignment
            assert not both, f"{a.name} and {b.name} both own {sorted(both)}"
    owned = frozenset().union(*(m.assignment for m in members))
    assert owned == wanted, f"owned {sorted(owned)}, expected {sorted(wanted)}"


def consumed_counter(members: Iterable[MemberProcess]) -> Counter[tuple[str, int, int]]:
    counter: Counter[tuple[str, int, int]] = Counter()
    for member in members:
        counter.update(member.consumed())
    return counter


def total_consumed(members: Iterable[MemberProcess]) -> int:
    return sum(len(m.messages) for m in members)


# -- producing in the background -------------------------------------------------------------------


class BackgroundProducer(threading.Thread):
    """Produce keyed messages (a few hundred per second) until finish()."""

    def __init__(self, bootstrap: str, topic: str, interval: float = 0.003) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        self.interval = interval
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "linger.ms": 2,
                "message.timeout.ms": 60_000,
                "reconnect.backoff.max.ms": 500,
            }
        )
        self.stop_event = threading.Event()
        self.delivered: list[tuple[str, int, int]] = []
        self.failed: list[str] = []
        self.count = 0
        self.error: BaseException | None = None

    def _on_delivery(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self.delivered.append((message.topic(), message.partition(), message.offset()))
        else:
            self.failed.append(str(error))

    def run(self) -> None:
        try:
            while not self.stop_event.is_set():
                key, value = b"key-%d" % self.count, b"v-%d" % self.count
                try:
                    self.producer.produce(
                        self.topic, key=key, value=value, on_delivery=self._on_delivery
                    )
                    self.count += 1
                except BufferError:
                    pass
                self.producer.poll(0)
                self.stop_event.wait(self.interval)  # pacing, not synchronisation
            self.producer.flush(60)
        except BaseException as exc:  # reported by finish()
            self.error = exc
        finally:
            self.producer.close()

    def finish(self, timeout: float = 90.0) -> list[tuple[str, int, int]]:
        """Stop, flush, and return every (topic, partition, offset) acknowledged."""
        self.stop_event.set()
        self.join(timeout)
        assert not self.is_alive(), "background producer did not finish"
        if self.error is not None:
            raise self.error
        assert not self.failed, f"{len(self.failed)} deliveries failed: {self.failed[:3]}"
        assert len(self.delivered) == self.count, f"{self.count - len(self.delivered)} unacked"
        return list(self.delivered)


# -- in-process group consumers --------------------------------------------------------------------


def group_consumer(bootstrap: str, group: str, **conf: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **FAST_MEMBER,
            **conf,
        }
    )


def poll_messages(
    consumer: Consumer, count: int, timeout: float = 30.0
) -> list[tuple[str, int, int, bytes | None]]:
    """Poll until `count` messages arrived: [(topic, partition, offset, value)]."""
    out: list[tuple[str, int, int, bytes | None]] = []
    deadline = time.monotonic() + timeout
    while len(out) < count:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"got {len(out)} of {count} messages in {timeout}s"
        message = consumer.poll(min(remaining, 0.5))
        if message is None:
            continue
        if message.error():
            raise KafkaException(message.error())
        out.append((message.topic(), message.partition(), message.offset(), message.value()))
    return out


# -- rebalance timings (the test and bench/group_rebalance.py) -------------------------------------


@dataclass
class RebalanceTimes:
    join_from_ready: float  # the new member's subscribe() until every member has its assignment
    join_from_spawn: float  # the same from process start (includes interpreter start-up)
    kill_to_reassigned: float  # SIGKILL of a member until the survivors own every partition
    leave_to_reassigned: float | None = None  # clean close (LeaveGroup) of a member, the same


def measure_leave(
    members: Members,
    leaving: MemberProcess,
    staying: Sequence[MemberProcess],
    partitions: Iterable[TP],
    timeout: float = 30.0,
) -> float:
    """Close `leaving` cleanly (LeaveGroup); seconds until `staying` own every partition."""
    asked_at = time.monotonic()
    leaving.request_stop()
    reassigned_at = members.wait_settled(
        staying, partitions, timeout, f"{[m.name for m in staying]} to take over from a leaver"
    )
    return reassigned_at - asked_at


def measure_join_then_kill(
    members: Members,
    bootstrap: str,
    group: str,
    topic: str,
    partitions: int,
    conf: Mapping[str, str] | None = None,
    commit: str = "none",
    before_join: Callable[[list[MemberProcess]], None] | None = None,
    on_join_settled: Callable[[list[MemberProcess]], None] | None = None,
    timeout: float = 30.0,
) -> tuple[RebalanceTimes, list[MemberProcess], MemberProcess]:
    """Two members settle; a third joins (timed); then the first is SIGKILLed (timed).

    `before_join` runs once the first two are settled, `on_join_settled` once all three
    are. Returns the times, the survivors and the victim."""
    wanted = {(topic, p) for p in range(partitions)}
    first = [
        members.spawn(f"m{i}", bootstrap, group, [topic], conf=conf, commit=commit)
        for i in range(2)
    ]
    members.wait_settled(first, wanted, timeout)
    if before_join is not None:
        before_join(first)
    newcomer = members.spawn("m2", bootstrap, group, [topic], conf=conf, commit=commit)
    everyone = [*first, newcomer]
    settled_at = members.wait_settled(everyone, wanted, timeout)
    ready_at = newcomer.last("ready")["t"]  # type: ignore[index]
    join_from_ready = settled_at - ready_at
    join_from_spawn = settled_at - newcomer.started_at
    if on_join_settled is not None:
        on_join_settled(everyone)
    victim = first[0]
    survivors = [m for m in everyone if m is not victim]
    killed_at = victim.kill()
    reassigned_at = members.wait_settled(
        survivors, wanted, timeout, f"survivors to take over {victim.name}'s partitions"
    )
    times = RebalanceTimes(join_from_ready, join_from_spawn, reassigned_at - killed_at)
    return times, survivors, victim
