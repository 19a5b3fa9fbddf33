"""Transaction verification on partition leaders (KIP-890 part 1, Kafka's
AddPartitionsToTxnManager), for a transactional id coordinated by another broker.

Before the first transactional batch of a producer's transaction is appended to a
partition, the leader asks the id's coordinator (AddPartitionsToTxn v4, `verify_only`)
whether the partition is in the producer's ongoing transaction, so a hanging transaction
(a late or stray batch after the transaction ended) cannot open one here. A partition
where the producer already has an open transaction at the same epoch needs no question.
The coordinator's answers map to produce errors as Kafka's ReplicaManager does: a fenced
producer is INVALID_PRODUCER_EPOCH; a partition outside the transaction INVALID_TXN_STATE;
an unreachable, moving or busy coordinator NOT_ENOUGH_REPLICAS, which producers retry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio
from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from kafkalite.broker.broker_connection import BrokerConnections, ConnectionLost
from kafkalite.broker.cluster_metadata import Endpoint
from kafkalite.broker.delayed import TopicPartition
from kafkalite.protocol.entities import make
from kafkalite.security.inter_broker import InterBrokerSecurity

log = logging.getLogger("kafkalite.txn.verification")

ADD_PARTITIONS_TO_TXN_API_KEY = 24
ADD_PARTITIONS_TO_TXN_VERSION = 4  # the brokers' batched form
RETRIABLE = frozenset(
    {
        ErrorCode.network_exception,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
        ErrorCode.concurrent_transactions,
        ErrorCode.request_timed_out,
    }
)


def produce_error(error: ErrorCode) -> ErrorCode:
    """Kafka's mapping of a verification answer to the produce answer."""
    if error is ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch
    if error in (ErrorCode.invalid_producer_id_mapping, ErrorCode.invalid_txn_state):
        return ErrorCode.invalid_txn_state
    if error in RETRIABLE:
        return ErrorCode.not_enough_replicas
    return error


def verify_request(
    transactional_id: str, producer_id: int, epoch: int, partitions: list[TopicPartition]
) -> Any:
    module: Any = load_payload_module(
        ADD_PARTITIONS_TO_TXN_API_KEY, ADD_PARTITIONS_TO_TXN_VERSION, EntityType.request
    )
    by_topic: dict[str, list[int]] = {}
    for topic, index in partitions:
        by_topic.setdefault(topic, []).append(index)
    transaction = make(
        module.AddPartitionsToTxnTransaction,
        transactional_id=transactional_id,
        producer_id=producer_id,
        producer_epoch=epoch,
        verify_only=True,
        topics=tuple(
            make(module.AddPartitionsToTxnTopic, name=name, partitions=tuple(indexes))
            for name, indexes in by_topic.items()
        ),
    )
    return make(
        module.AddPartitionsToTxnRequest,
        transactions=(transaction,),
        v3_and_below_transactional_id="",
        v3_and_below_producer_id=0,
        v3_and_below_producer_epoch=0,
        v3_and_below_topics=(),
    )


def verify_answers(
    response: Any, transactional_id: str, partitions: list[TopicPartition]
) -> dict[TopicPartition, ErrorCode]:
    """Per partition: NONE or the coordinator's error (a top-level error for them all)."""
    if response.error_code != ErrorCode.none:
        return dict.fromkeys(partitions, ErrorCode(response.error_code))
    answers = dict.fromkeys(partitions, ErrorCode.unknown_server_error)
    for result in response.results_by_transaction:
        if result.transactional_id != transactional_id:
            continue
        for topic in result.topic_results:
            for partition in topic.results_by_partition:
                tp = (topic.name, partition.partition_index)
                if tp in answers:
                    answers[tp] = ErrorCode(partition.partition_error_code)
    return answers


@dataclass(eq=False)
class TxnVerifier:
    broker_id: int
    coordinator_of: Callable[[str], tuple[ErrorCode, int]]  # transactional id -> broker id
    endpoint_of: Callable[[int], Endpoint | None]
    request_timeout_ms: int = 30_000
    security: InterBrokerSecurity | None = None  # TLS, SASL login to the other brokers
    _connections: BrokerConnections = field(init=False)
    _locks: dict[int, trio.Lock] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._connections = BrokerConnections(
            self.endpoint_of, f"broker-{self.broker_id}-txn-verification", self.security
        )

    async def verify(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """The produce error per partition (NONE: append)."""
        error, coordinator = self.coordinator_of(transactional_id)
        if error is not ErrorCode.none:
            return dict.fromkeys(partitions, produce_error(error))
        request = verify_request(transactional_id, producer_id, epoch, partitions)
        lock = self._locks.setdefault(coordinator, trio.Lock())  # one request in flight
        try:
            async with lock:
                connection = await self._connections.get(coordinator)
                with trio.fail_after(self.request_timeout_ms / 1000):
                    response = await connection.request(request)
        except (ConnectionLost, trio.TooSlowError) as exc:
            log.info("verifying %s with broker %d: %s", transactional_id, coordinator, exc)
            await self._connections.drop(coordinator)
            return dict.fromkeys(partitions, ErrorCode.not_enough_replicas)
        answers = verify_answers(response, transactional_id, partitions)
        return {tp: produce_error(answer) for tp, answer in answers.items()}
