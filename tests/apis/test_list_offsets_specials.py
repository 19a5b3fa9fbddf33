"""ListOffsets' special timestamps against the request version (Kafka's
isListOffsetsTimestampUnsupported): each is answered from the version that brought it, and
UNSUPPORTED_VERSION before that, as is a negative timestamp that is no special one."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis import list_offsets
from kafkalite.broker.broker import Broker
from kafkalite.protocol.entities import make
from tests.apis.harness import call

MIN_VERSION = {-1: 1, -2: 1, -3: 7, -4: 8, -5: 9, -6: 11}


def answer(broker: Broker, version: int, timestamp: int) -> Any:
    def build(m: Any) -> Any:
        partition = make(
            m.ListOffsetsPartition, partition_index=0, timestamp=timestamp, current_leader_epoch=-1
        )
        topic = make(m.ListOffsetsTopic, name="t", partitions=(partition,))
        return make(
            m.ListOffsetsRequest, replica_id=-1, isolation_level=0, topics=(topic,), timeout=0
        )

    response = call(broker, list_offsets.API, version, build)
    (row,) = response.topics[0].partitions
    return row


def test_each_special_timestamp_from_its_version(broker: Broker) -> None:
    outcome, _ = broker.admin_manager.create_topic("t", 1)
    assert outcome.error is ErrorCode.none
    for timestamp in [*sorted(MIN_VERSION), -7, -100]:
        first = MIN_VERSION.get(timestamp, 12)
        for version in range(1, 12):
            row = answer(broker, version, timestamp)
            expected = ErrorCode.none if version >= first else ErrorCode.unsupported_version
            assert row.error_code == expected, (version, timestamp)
            if expected is ErrorCode.unsupported_version:
                assert row.offset == -1
    for timestamp in (-5, -6):  # not tiered: nothing copied, nothing pending
        assert answer(broker, 11, timestamp).offset == -1
