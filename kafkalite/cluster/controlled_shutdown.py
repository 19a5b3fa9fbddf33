"""Controlled shutdown, sans-IO: the request a stopping broker leaves for the controller, the
controller's answer, and what is left to move.

Kafka's ZooKeeper-era broker sends ControlledShutdown (api key 7) to the controller and waits
for its response; kio (Kafka 4's schemas) has no such message, and kafkalite's brokers reach
the controller through ZooKeeper anyway, so the request is an ephemeral znode
`/admin/controlled_shutdown/<id>` holding the broker epoch (the czxid of its
`/brokers/ids/<id>`) and the attempt number, and the response is the controller's rewrite of
that znode with its answer (Kafka's ControlledShutdownResponse: an error code and the
partitions remaining). The controller honours a request only while that epoch is the live
registration's, and the ephemeral node goes with the session, so a restarted broker is never
taken for a stopping one. The controller's moves are leader_election.controlled_shutdown_writes;
`remaining` is Kafka's partitionLeadersOnBroker, which the controller answers once its moves
are written and the broker checks against its own metadata.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Set
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from kafkalite.broker.partition import NO_LEADER, PartitionState

REQUESTS = "/admin/controlled_shutdown"
TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Answer:
    """Kafka's ControlledShutdownResponse, from the controller of `controller_epoch`."""

    controller_epoch: int
    error: ErrorCode
    remaining: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class ShutdownRequest:
    broker_epoch: int
    attempt: int  # the broker's attempt: an answer counts for the attempt it names
    answer: Answer | None = None

    def encode(self) -> bytes:
        value: dict[str, object] = {
            "version": 1,
            "broker_epoch": self.broker_epoch,
            "attempt": self.attempt,
        }
        if self.answer is not None:
            value["answer"] = {
                "controller_epoch": self.answer.controller_epoch,
                "error_code": int(self.answer.error),
                "remaining_partitions": [list(tp) for tp in self.answer.remaining],
            }
        return json.dumps(value, separators=(",", ":")).encode()

    def answered(self, answer: Answer) -> ShutdownRequest:
        return ShutdownRequest(self.broker_epoch, self.attempt, answer)


def request_path(broker_id: int) -> str:
    return f"{REQUESTS}/{broker_id}"


def encode_request(broker_epoch: int, attempt: int = 1) -> bytes:
    return ShutdownRequest(broker_epoch, attempt).encode()


def decode(data: bytes) -> ShutdownRequest | None:
    """A request with its answer, if any; None when the znode is not one."""
    try:
        value = json.loads(data)
        answer = value.get("answer")
        return ShutdownRequest(
            int(value["broker_epoch"]),
            int(value.get("attempt", 1)),
            None
            if answer is None
            else Answer(
                int(answer["controller_epoch"]),
                ErrorCode(int(answer["error_code"])),
                tuple((str(t), int(p)) for t, p in answer["remaining_partitions"]),
            ),
        )
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def remaining(
    broker_id: int, states: Iterable[PartitionState], available: Set[int]
) -> list[TopicPartition]:
    """The partitions the controller could still move off `broker_id`, given the brokers
    `available` to take over (live, not shutting down themselves): led by it with another
    available replica (Kafka retries while RF > 1; with nobody to take over there is nothing
    to wait for, as when every broker of a cluster stops at once), or followed by it while it
    is still in the ISR of an available leader."""
    left = []
    for state in states:
        if state.leader == broker_id:
            if any(r != broker_id and r in available for r in state.replicas):
                left.append((state.topic, state.partition))
        elif state.leader != NO_LEADER and state.leader in available and broker_id in state.isr:
            left.append((state.topic, state.partition))
    return left
