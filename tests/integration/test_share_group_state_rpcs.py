"""Kafka's inter-broker share-state RPCs (83-87, apis/share_group_state.py) on the wire
against an embedded broker, which leads every `__share_group_state` partition: the requests
a partition leader on another broker sends (broker/share_persister.py builds them), their
answers, the share coordinator's fencing of older leader and state epochs, and the
persister of a leader whose state partition is on another broker.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import trio
from kio.schema.errors import ErrorCode

from kafkalite.broker.cluster_metadata import Endpoint
from kafkalite.broker.share_persister import SharePersister, read_request, write_request
from kafkalite.share.share_partition import StateBatch
from kafkalite.share.share_records import SharePartitionKey
from kafkalite.testing import EmbeddedBroker
from protocol_tests.raw_client import RawClient, request_class

ACKNOWLEDGED, ARCHIVED = 2, 4


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    path: Path = tmp_path_factory.mktemp("share-state")
    with EmbeddedBroker(path, {"share.coordinator.state.topic.num.partitions": "1"}) as running:
        yield running


@pytest.fixture
def client(broker: EmbeddedBroker) -> Iterator[RawClient]:
    with RawClient(broker.host, broker.port) as raw:
        yield raw


def schema(api_key: int, version: int) -> Any:
    return __import__(request_class(api_key, version).__module__, fromlist=["_"])


def answer(response: Any) -> Any:
    [topic] = response.results
    [partition] = topic.partitions
    return partition


def new_key() -> SharePartitionKey:
    return SharePartitionKey(f"g-{uuid.uuid4().hex[:8]}", uuid.uuid4(), 0)


def read(client: RawClient, key: SharePartitionKey, leader_epoch: int) -> Any:
    """The read, once the state partition is loaded (the first request creates its topic)."""
    deadline = time.monotonic() + 20
    while True:
        result = answer(client.request(read_request(key, leader_epoch)))
        loading = (ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available)
        if result.error_code not in loading:
            return result
        assert time.monotonic() < deadline, result
        time.sleep(0.05)


def write(
    client: RawClient,
    key: SharePartitionKey,
    leader_epoch: int,
    start_offset: int,
    batches: list[StateBatch],
    state_epoch: int = 0,
) -> ErrorCode:
    request = write_request(key, state_epoch, leader_epoch, start_offset, batches)
    return answer(client.request(request)).error_code


def summary(client: RawClient, key: SharePartitionKey, leader_epoch: int) -> Any:
    m = schema(87, 1)
    partition = m.PartitionData(partition=key.partition, leader_epoch=leader_epoch)
    topic = m.ReadStateSummaryData(topic_id=key.topic_id, partitions=(partition,))
    request = m.ReadShareGroupStateSummaryRequest(group_id=key.group_id, topics=(topic,))
    return answer(client.request(request))


def initialize(client: RawClient, key: SharePartitionKey, state_epoch: int, start: int) -> Any:
    m = schema(83, 0)
    partition = m.PartitionData(
        partition=key.partition, state_epoch=state_epoch, start_offset=start
    )
    topic = m.InitializeStateData(topic_id=key.topic_id, partitions=(partition,))
    request = m.InitializeShareGroupStateRequest(group_id=key.group_id, topics=(topic,))
    return answer(client.request(request)).error_code


def delete(client: RawClient, key: SharePartitionKey) -> Any:
    m = schema(86, 0)
    topic = m.DeleteStateData(
        topic_id=key.topic_id, partitions=(m.PartitionData(partition=key.partition),)
    )
    request = m.DeleteShareGroupStateRequest(group_id=key.group_id, topics=(topic,))
    return answer(client.request(request)).error_code


def test_write_then_read_and_summary(client: RawClient) -> None:
    key = new_key()
    unknown = read(client, key, 0)
    assert (unknown.error_code, unknown.start_offset, unknown.state_batches) == (
        ErrorCode.none,
        -1,
        (),
    )
    assert write(client, key, 0, 10, [StateBatch(10, 14, ACKNOWLEDGED, 1)]) is ErrorCode.none
    assert write(client, key, 0, 12, [StateBatch(15, 15, ARCHIVED, 5)]) is ErrorCode.none
    state = read(client, key, 0)
    assert state.error_code is ErrorCode.none
    assert state.start_offset == 12
    assert [
        (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        for b in state.state_batches
    ] == [(12, 14, ACKNOWLEDGED, 1), (15, 15, ARCHIVED, 5)]
    described = summary(client, key, 0)
    assert (described.error_code, described.start_offset, described.leader_epoch) == (
        ErrorCode.none,
        12,
        0,
    )
    assert described.delivery_complete_count == 4
    assert delete(client, key) is ErrorCode.none
    assert read(client, key, 0).start_offset == -1


def test_bad_keys_are_invalid_request_and_any_batch_span_is_taken(client: RawClient) -> None:
    """Found by the fuzzer: a null topic id was an internal error that closed the
    connection, and a batch spanning 2^62 offsets was merged offset by offset (the broker
    grew to 23 GB and was OOM-killed)."""
    key = new_key()
    read(client, key, 0)  # the state partition is loaded
    null_topic = dataclasses.replace(key, topic_id=None)  # kio's null uuid
    assert answer(client.request(read_request(null_topic, 0))).error_code is (
        ErrorCode.invalid_request
    )
    negative = dataclasses.replace(key, partition=-1)
    assert answer(client.request(read_request(negative, 0))).error_code is (
        ErrorCode.invalid_request
    )
    huge = [StateBatch(0, 2**62, ACKNOWLEDGED, 1), StateBatch(5, 2**40, ARCHIVED, 2)]
    assert write(client, key, 0, 0, huge) is ErrorCode.none
    state = read(client, key, 0)
    assert [
        (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        for b in state.state_batches
    ] == [(0, 4, ACKNOWLEDGED, 1), (5, 2**40, ARCHIVED, 2), (2**40 + 1, 2**62, ACKNOWLEDGED, 1)]


def test_older_leader_and_state_epochs_are_fenced(client: RawClient) -> None:
    key = new_key()
    read(client, key, 0)  # the state partition is loaded
    assert write(client, key, 3, 0, [StateBatch(0, 0, ACKNOWLEDGED, 1)]) is ErrorCode.none
    # A newer leader reads: its epoch is recorded, the old leader's writes fenced from then.
    assert read(client, key, 4).error_code is ErrorCode.none
    assert write(client, key, 3, 0, []) is ErrorCode.fenced_leader_epoch
    assert read(client, key, 2).error_code is ErrorCode.fenced_leader_epoch
    assert summary(client, key, 2).error_code is ErrorCode.fenced_leader_epoch
    # Reset (state epoch 0 -> 1): a write for the older state epoch is fenced.
    assert initialize(client, key, 1, 7) is ErrorCode.none
    assert write(client, key, 4, 8, [], state_epoch=0) is ErrorCode.fenced_state_epoch
    assert initialize(client, key, 0, 9) is ErrorCode.fenced_state_epoch
    after = read(client, key, 4)
    assert (after.state_epoch, after.start_offset, after.state_batches) == (1, 7, ())
    assert write(client, key, 4, 8, [], state_epoch=1) is ErrorCode.none


@dataclass
class _Elsewhere:
    """A share coordinator that leads no state partition here: the persister goes remote."""

    runtime: Any = field(init=False)

    def __post_init__(self) -> None:
        self.runtime = SimpleNamespace(check=lambda _: ErrorCode.not_coordinator)

    def partition_of(self, key: SharePartitionKey) -> int:
        return 0


def test_the_persister_writes_and_reads_through_another_brokers_coordinator(
    broker: EmbeddedBroker,
) -> None:
    """A partition leader whose state partition is led by another broker (the embedded one,
    node 1): Write/ReadShareGroupState go there, answered once committed; a fenced write
    is answered FENCED_LEADER_EPOCH, not retried."""
    key = new_key()
    endpoint = Endpoint("PLAINTEXT", broker.host, broker.port)
    persister = SharePersister(
        cast(Any, _Elsewhere()), 2, lambda _: broker.broker.node_id, lambda _: endpoint, 10_000
    )

    async def scenario() -> list[Any]:
        try:
            unknown = await persister.read_state(key, 0)
            batches = [StateBatch(5, 6, ACKNOWLEDGED, 1)]
            written = await persister.write_state(key, 0, 2, 5, batches)
            committed = await persister.committed(key)
            state = await persister.read_state(key, 2)
            fenced = await persister.write_state(key, 0, 1, 5, [])
            return [unknown, written, committed, state, fenced]
        finally:
            await persister.close()

    unknown, written, committed, state, fenced = trio.run(scenario)
    assert unknown == (ErrorCode.none, None)
    assert (written, committed) == (ErrorCode.none, ErrorCode.none)
    error, found = state
    assert error is ErrorCode.none and found is not None
    assert (found.start_offset, found.batches) == (5, (StateBatch(5, 6, ACKNOWLEDGED, 1),))
    assert fenced is ErrorCode.fenced_leader_epoch
