"""The coordinator-kill fault: SIGKILL the group or transaction coordinator of the workload right
after it answered one of the workload's clients, then start it again after `hold` s.

The coordinator is found as the clients find it: the group's by FindCoordinator (the admin
client's DescribeConsumerGroups asks it), a transactional id's as the leader of its
`__transaction_state` partition (Kafka's partitionFor: abs(hashCode) % partitions). The answer
is the next line a client writes after its call returned: a consumer's `commit` (OffsetCommit
answered), a transform's `txn_commit` (TxnOffsetCommit and EndTxn answered). The harness reads
the clients' output files every few milliseconds and kills at the first such line, so the
coordinator dies within milliseconds of its answer; the record says how many.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from chaos.schedule import COORDINATOR_ROLES

GROUP, TXN = COORDINATOR_ROLES
TRANSACTION_STATE = "__transaction_state"
WATCH_EVERY_S = 0.005
ANSWER_TIMEOUT_S = 15.0  # no answer by then (clients stuck by another fault): kill anyway


@dataclass(frozen=True)
class WorkloadClients:
    """What the fault needs to know of the run's clients: where they write, their group and the
    transform processes' transactional ids (by output file name)."""

    logs: Path
    workload: str
    group: str | None
    transactional_ids: dict[str, str] = field(default_factory=dict)


def java_string_hash(text: str) -> int:
    """Java's String.hashCode, as a signed 32-bit int."""
    value = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        value = (31 * value + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def partition_for(key: str, partitions: int) -> int:
    """Kafka's coordinator partition for a group id or transactional id (Utils.abs of
    MIN_VALUE is 0)."""
    value = java_string_hash(key)
    return (0 if value == -(1 << 31) else abs(value)) % partitions


@dataclass(frozen=True)
class Plan:
    """Whose coordinator to kill, and the output lines that are its answers."""

    role: str
    key: str  # the group id or transactional id
    files: tuple[str, ...]  # glob patterns under the logs dir
    events: frozenset[str]
    note: str = ""


def plan(role: str, clients: WorkloadClients, rng: random.Random) -> Plan | None:
    """None when the workload has no coordinator to kill (producers only)."""
    if role == TXN and clients.transactional_ids:
        name = rng.choice(sorted(clients.transactional_ids))
        return Plan(TXN, clients.transactional_ids[name], (name,), frozenset({"txn_commit"}))
    note = "no transactional workload: the group coordinator" if role == TXN else ""
    if clients.group is None:
        return None
    if clients.workload == "txn":
        return Plan(GROUP, clients.group, ("transform-*.jsonl",), frozenset({"txn_commit"}), note)
    return Plan(GROUP, clients.group, ("consumer-*.jsonl",), frozenset({"commit"}), note)


def find_coordinator(admin, plan: Plan) -> int:
    """The broker coordinating `plan.key` now."""
    if plan.role == GROUP:
        description = admin.describe_consumer_groups([plan.key])[plan.key].result(10)
        return description.coordinator.id
    topic = admin.list_topics(TRANSACTION_STATE, timeout=10).topics[TRANSACTION_STATE]
    return topic.partitions[partition_for(plan.key, len(topic.partitions))].leader


class AnswerWatch:
    """New lines of the clients' output files (those written from now on)."""

    def __init__(self, logs: Path, patterns: tuple[str, ...]) -> None:
        self.logs, self.patterns = logs, patterns
        self.offsets: dict[Path, int] = {path: path.stat().st_size for path in self._files()}

    def _files(self) -> list[Path]:
        return sorted(path for pattern in self.patterns for path in self.logs.glob(pattern))

    def next_answer(self, events: frozenset[str], timeout: float) -> dict | None:
        """The first new line whose `ev` is one of `events`, with the file it came from."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:  # the harness watches files, not a test: polling
            for path in self._files():
                found = self._scan(path, events)
                if found is not None:
                    return found
            time.sleep(WATCH_EVERY_S)
        return None

    def _scan(self, path: Path, events: frozenset[str]) -> dict | None:
        start = self.offsets.get(path, 0)
        with open(path, "rb") as out:
            out.seek(start)
            data = out.read()
        position = start
        for line in data[: data.rfind(b"\n") + 1].splitlines(keepends=True):
            position += len(line)
            self.offsets[path] = position  # a later call goes on after this line
            event = json.loads(line)
            if event.get("ev") in events:
                return {"file": path.name, **event}
        return None
