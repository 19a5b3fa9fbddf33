"""The transaction APIs on an in-process broker: the calls a transactional producer makes,
the errors for bad sequences, read_committed fetches with aborted transactions, and what
survives a restart (a transaction prepared but not completed is finished; transactional
offsets in `__consumer_offsets` follow their markers on replay)."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from kafkalite.apis import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    describe_producers,
    describe_transactions,
    end_txn,
    init_producer_id,
    list_transactions,
    offset_fetch,
    produce,
    txn_offset_commit,
    write_txn_markers,
)
from kafkalite.apis.base import RequestContext
from kafkalite.broker.broker import Broker
from kafkalite.broker.partition import READ_COMMITTED, PartitionState
from kafkalite.coordinator.offsets import TopicPartition
from kafkalite.protocol.entities import make
from kafkalite.storage.batch import TRANSACTIONAL_FLAG
from kafkalite.storage.records import encode_batch
from kafkalite.storage.txn_index import AbortedTxn
from kafkalite.txn.coordinator import TxnState

from .conftest import open_broker
from .harness import call, request_module

TID, TOPIC, GROUP = "txn-app", "events", "grp"


def init(broker: Broker, version: int = 4) -> tuple[int, int]:
    response = call(
        broker,
        init_producer_id.API,
        version,
        lambda m: make(
            m.InitProducerIdRequest,
            transactional_id=TID,
            transaction_timeout=datetime.timedelta(seconds=60),
            producer_id=-1,
            producer_epoch=-1,
        ),
    )
    assert response.error_code is ErrorCode.none
    return response.producer_id, response.producer_epoch


def add_partitions(broker: Broker, pid: int, epoch: int, version: int = 3) -> ErrorCode:
    def build(m: Any) -> Any:
        topic = make(m.AddPartitionsToTxnTopic, name=TOPIC, partitions=(0,))
        return make(
            m.AddPartitionsToTxnRequest,
            v3_and_below_transactional_id=TID,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=(topic,),
        )

    response = call(broker, add_partitions_to_txn.API, version, build)
    [topic] = response.results_by_topic_v3_and_below
    return topic.results_by_partition[0].partition_error_code


def end(broker: Broker, pid: int, epoch: int, commit: bool, version: int = 3) -> ErrorCode:
    response = call(
        broker,
        end_txn.API,
        version,
        lambda m: make(
            m.EndTxnRequest,
            transactional_id=TID,
            producer_id=pid,
            producer_epoch=epoch,
            committed=commit,
        ),
    )
    deliver_markers(broker)
    return response.error_code


def deliver_markers(broker: Broker) -> None:
    """One round of the marker sender, which the broker's task runs after EndTxn: the
    markers of the transactions whose PrepareCommit/PrepareAbort is committed are written
    (here, all led by this broker) and the transactions completed."""
    assert broker.txn is not None
    trio.run(broker.txn.markers.sender.send_round)


def produce_txn(broker: Broker, pid: int, epoch: int, seq: int, values: list[bytes]) -> None:
    batch = encode_batch(
        [(None, v) for v in values],
        timestamp=1_700_000_000_000,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        attributes=TRANSACTIONAL_FLAG,
    )
    results, _ = broker.replica_manager.append_records({(TOPIC, 0): batch}, 1)
    assert results[(TOPIC, 0)].error is ErrorCode.none


def send_offsets(broker: Broker, pid: int, epoch: int, offset: int) -> ErrorCode:
    added = call(
        broker,
        add_offsets_to_txn.API,
        3,
        lambda m: make(
            m.AddOffsetsToTxnRequest,
            transactional_id=TID,
            producer_id=pid,
            producer_epoch=epoch,
            group_id=GROUP,
        ),
    )
    assert added.error_code is ErrorCode.none

    def build(m: Any) -> Any:
        part = make(
            m.TxnOffsetCommitRequestPartition,
            partition_index=0,
            committed_offset=offset,
            committed_leader_epoch=-1,
            committed_metadata="",
        )
        return make(
            m.TxnOffsetCommitRequest,
            transactional_id=TID,
            group_id=GROUP,
            producer_id=pid,
            producer_epoch=epoch,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            topics=(make(m.TxnOffsetCommitRequestTopic, name=TOPIC, partitions=(part,)),),
        )

    response = call(broker, txn_offset_commit.API, 3, build)
    return response.topics[0].partitions[0].error_code


def committed(broker: Broker) -> int | None:
    found = broker.groups.coordinator.committed(GROUP, TopicPartition(TOPIC, 0))
    return None if found is None else found.offset


def new_broker(broker_factory: Callable[..., Broker]) -> Broker:
    broker = broker_factory()
    broker.admin_manager.create_topic(TOPIC, 1, 1, {})
    return broker


def test_commit_abort_and_read_committed_fetches(broker_factory: Callable[..., Broker]) -> None:
    broker = new_broker(broker_factory)
    pid, epoch = init(broker)
    assert add_partitions(broker, pid, epoch) is ErrorCode.none
    produce_txn(broker, pid, epoch, 0, [b"a", b"b"])  # offsets 0-1
    partition = broker.replica_manager.partition(TOPIC, 0)
    assert partition is not None
    assert (partition.high_watermark, partition.last_stable_offset) == (2, 0)
    assert end(broker, pid, epoch, False) is ErrorCode.none  # abort marker at 2
    assert partition.last_stable_offset == 3
    assert add_partitions(broker, pid, epoch) is ErrorCode.none
    produce_txn(broker, pid, epoch, 2, [b"c"])  # offset 3
    assert end(broker, pid, epoch, True) is ErrorCode.none  # commit marker at 4
    result = partition.fetch_records(0, 1 << 20, isolation_level=READ_COMMITTED)
    assert result.last_stable_offset == 5
    assert result.aborted_transactions == (AbortedTxn(pid, 0, 2, 3),)
    # Retried EndTxn is answered as before; the other outcome is INVALID_TXN_STATE.
    assert end(broker, pid, epoch, True) is ErrorCode.none
    assert end(broker, pid, epoch, False) is ErrorCode.invalid_txn_state


def test_fencing_errors_by_version(broker_factory: Callable[..., Broker]) -> None:
    broker = new_broker(broker_factory)
    pid, epoch = init(broker)
    init(broker)  # epoch + 1: the first instance is fenced
    assert add_partitions(broker, pid, epoch, version=3) is ErrorCode.producer_fenced
    assert add_partitions(broker, pid, epoch, version=1) is ErrorCode.invalid_producer_epoch
    assert end(broker, pid, epoch, True, version=1) is ErrorCode.invalid_producer_epoch
    assert end(broker, pid + 1, epoch + 1, True) is ErrorCode.invalid_producer_id_mapping
    assert end(broker, pid, epoch + 1, True) is ErrorCode.invalid_txn_state  # none open


def write_markers(
    broker: Broker, pid: int, epoch: int, commit: bool, coordinator_epoch: int, partitions: Any
) -> list[ErrorCode]:
    def build(m: Any) -> Any:
        topic = make(m.WritableTxnMarkerTopic, name=TOPIC, partition_indexes=partitions)
        marker = make(
            m.WritableTxnMarker,
            producer_id=pid,
            producer_epoch=epoch,
            transaction_result=commit,
            topics=(topic,),
            coordinator_epoch=coordinator_epoch,
        )
        return make(m.WriteTxnMarkersRequest, markers=(marker,))

    response = call(broker, write_txn_markers.API, 1, build)
    return [p.error_code for p in response.markers[0].topics[0].partitions]


def test_write_txn_markers_api(broker_factory: Callable[..., Broker]) -> None:
    broker = new_broker(broker_factory)
    pid, epoch = init(broker)
    add_partitions(broker, pid, epoch)
    produce_txn(broker, pid, epoch, 0, [b"a"])
    errors = write_markers(broker, pid, epoch, False, 3, (0, 7))
    assert errors == [ErrorCode.none, ErrorCode.unknown_topic_or_partition]
    partition = broker.replica_manager.partition(TOPIC, 0)
    assert partition is not None and partition.log.aborted_txns == [AbortedTxn(pid, 0, 1, 2)]
    # Kafka's checks on the partition leader: an older coordinator epoch than the producer's
    # last marker is fenced, and only the leader takes markers.
    fenced = write_markers(broker, pid, epoch, True, 2, (0,))
    assert fenced == [ErrorCode.transaction_coordinator_fenced]
    assert write_markers(broker, pid, epoch, True, 3, (0,)) == [ErrorCode.none]
    follower = PartitionState(TOPIC, 0, (broker.node_id, 9), 9, partition.leader_epoch + 1, (9,))
    assert partition.make_follower(follower) is ErrorCode.none
    assert write_markers(broker, pid, epoch, True, 3, (0,)) == [ErrorCode.not_leader_or_follower]
    assert partition.log_end_offset == 3  # a record and two markers


def test_prepared_commit_is_finished_after_a_restart(tmp_path: Path) -> None:
    broker = open_broker(tmp_path)
    broker.admin_manager.create_topic(TOPIC, 1, 1, {})
    pid, epoch = init(broker)
    add_partitions(broker, pid, epoch)
    produce_txn(broker, pid, epoch, 0, [b"a", b"b"])
    assert send_offsets(broker, pid, epoch, 2) is ErrorCode.none
    # The coordinator writes PrepareCommit, then "crashes" before any marker.
    service = broker.txn
    assert service is not None
    assert service.coordinator.end_txn(TID, pid, epoch, True, 0) is ErrorCode.none
    service._persist()
    service.coordinator.take_jobs()  # its markers were never sent
    broker.shutdown()

    restarted = open_broker(tmp_path)
    try:
        deliver_markers(restarted)  # the load queued the transaction's markers
        partition = restarted.replica_manager.partition(TOPIC, 0)
        assert partition is not None
        assert (partition.log_end_offset, partition.last_stable_offset) == (3, 3)
        assert restarted.txn is not None
        meta = restarted.txn.coordinator.describe(TID)
        assert meta is not None and meta.state is TxnState.COMPLETE_COMMIT
        assert committed(restarted) == 2
    finally:
        restarted.shutdown()


def test_transactional_offsets_replay_follows_markers(tmp_path: Path) -> None:
    broker = open_broker(tmp_path)
    broker.admin_manager.create_topic(TOPIC, 1, 1, {})
    pid, epoch = init(broker)
    assert send_offsets(broker, pid, epoch, 5) is ErrorCode.none
    assert end(broker, pid, epoch, False) is ErrorCode.none  # aborted: never visible
    assert committed(broker) is None
    assert send_offsets(broker, pid, epoch, 7) is ErrorCode.none
    assert end(broker, pid, epoch, True) is ErrorCode.none
    assert committed(broker) == 7
    assert send_offsets(broker, pid, epoch, 9) is ErrorCode.none  # open at the restart
    broker.shutdown()

    restarted = open_broker(tmp_path)
    try:
        assert committed(restarted) == 7
        assert end(restarted, pid, epoch, True) is ErrorCode.none
        assert committed(restarted) == 9
    finally:
        restarted.shutdown()


def produce_request(broker: Broker, pid: int, epoch: int, seq: int) -> ErrorCode:
    """A transactional Produce v9 naming its transactional id, as clients send it."""
    m = request_module(0, 9)
    batch = encode_batch(
        [(None, b"v")],
        timestamp=1_700_000_000_000,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        attributes=TRANSACTIONAL_FLAG,
    )
    data = make(m.PartitionProduceData, index=0, records=batch)
    request = make(
        m.ProduceRequest,
        transactional_id=TID,
        acks=1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(make(m.TopicProduceData, name=TOPIC, partition_data=(data,)),),
    )
    ctx = RequestContext(broker, 0, 9, correlation_id=11, client_id="tests")
    response = trio.run(produce.handle, ctx, request)
    return response.responses[0].partition_responses[0].error_code


def test_produce_to_a_partition_outside_the_transaction(
    broker_factory: Callable[..., Broker],
) -> None:
    broker = new_broker(broker_factory)
    pid, epoch = init(broker)
    assert produce_request(broker, pid, epoch, 0) is ErrorCode.invalid_txn_state
    assert add_partitions(broker, pid, epoch) is ErrorCode.none
    assert produce_request(broker, pid, epoch, 0) is ErrorCode.none
    assert produce_request(broker, pid, epoch - 1, 0) is ErrorCode.invalid_producer_epoch


def test_describe_and_list_transactions_and_producers(
    broker_factory: Callable[..., Broker],
) -> None:
    broker = new_broker(broker_factory)
    pid, epoch = init(broker)
    add_partitions(broker, pid, epoch)
    produce_txn(broker, pid, epoch, 0, [b"a", b"b"])

    described = call(
        broker,
        describe_transactions.API,
        0,
        lambda m: make(m.DescribeTransactionsRequest, transactional_ids=(TID, "nobody")),
    )
    ours, unknown = described.transaction_states
    assert (ours.error_code, ours.transaction_state, ours.producer_id) == (
        ErrorCode.none,
        "Ongoing",
        pid,
    )
    assert [(t.topic, t.partitions) for t in ours.topics] == [(TOPIC, (0,))]
    assert unknown.error_code is ErrorCode.transactional_id_not_found

    def listing(**filters: Any) -> Any:
        return call(
            broker,
            list_transactions.API,
            2,
            lambda m: make(
                m.ListTransactionsRequest,
                **{"state_filters": (), "producer_id_filters": (), **filters},
            ),
        )

    everything = listing()
    assert [(t.transactional_id, t.transaction_state) for t in everything.transaction_states] == [
        (TID, "Ongoing")
    ]
    filtered = listing(state_filters=("CompleteCommit", "Bogus"))
    assert filtered.transaction_states == () and filtered.unknown_state_filters == ("Bogus",)
    assert listing(transactional_id_pattern="txn-.*").transaction_states[0].producer_id == pid
    assert listing(transactional_id_pattern="txn").transaction_states == ()

    producers = call(
        broker,
        describe_producers.API,
        0,
        lambda m: make(
            m.DescribeProducersRequest,
            topics=(make(m.TopicRequest, name=TOPIC, partition_indexes=(0, 3)),),
        ),
    )
    found, missing = producers.topics[0].partitions
    [state] = found.active_producers
    assert (state.producer_id, state.last_sequence, state.current_txn_start_offset) == (pid, 1, 0)
    assert missing.error_code is ErrorCode.unknown_topic_or_partition


def test_require_stable_offset_fetch_waits_for_the_transaction(
    broker_factory: Callable[..., Broker],
) -> None:
    broker = new_broker(broker_factory)
    pid, epoch = init(broker)

    def fetch(require_stable: bool) -> tuple[ErrorCode, int]:
        def build(m: Any) -> Any:
            topic = make(m.OffsetFetchRequestTopics, name=TOPIC, partition_indexes=(0,))
            group = make(m.OffsetFetchRequestGroup, group_id=GROUP, topics=(topic,))
            return make(m.OffsetFetchRequest, groups=(group,), require_stable=require_stable)

        response = call(broker, offset_fetch.API, 8, build)
        [partition] = response.groups[0].topics[0].partitions
        return partition.error_code, partition.committed_offset

    assert send_offsets(broker, pid, epoch, 4) is ErrorCode.none
    assert fetch(True) == (ErrorCode.unstable_offset_commit, -1)
    assert fetch(False) == (ErrorCode.none, -1)
    assert end(broker, pid, epoch, True) is ErrorCode.none
    assert fetch(True) == (ErrorCode.none, 4)
