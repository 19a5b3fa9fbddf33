"""InitProducerId: idempotent producers get fresh ids; a transactional id keeps its producer id
and gets its epoch bumped on each call (fencing the previous instance)."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kafkalite.apis import init_producer_id
from kafkalite.broker.broker import Broker
from kafkalite.protocol.entities import make

from .harness import call


def init(broker: Broker, version: int, transactional_id: str | None) -> Any:
    def build(m: Any) -> Any:
        return make(
            m.InitProducerIdRequest,
            transactional_id=transactional_id,
            transaction_timeout=datetime.timedelta(seconds=60),
            producer_id=-1,
            producer_epoch=-1,
            enable2_pc=False,
            keep_prepared_txn=False,
        )

    return call(broker, init_producer_id.API, version, build)


@pytest.mark.parametrize("version", range(6))
def test_idempotent_producers_get_fresh_ids(broker: Broker, version: int) -> None:
    first, second = init(broker, version, None), init(broker, version, None)
    assert (first.error_code, first.producer_epoch) == (ErrorCode.none, 0)
    assert second.producer_id > first.producer_id >= 0


@pytest.mark.parametrize("version", range(6))
def test_transactional_ids_keep_their_id_and_bump_the_epoch(broker: Broker, version: int) -> None:
    first, second = init(broker, version, "txn-1"), init(broker, version, "txn-1")
    assert (first.error_code, first.producer_epoch) == (ErrorCode.none, 0)
    assert (second.error_code, second.producer_epoch) == (ErrorCode.none, 1)
    assert second.producer_id == first.producer_id >= 0


def test_a_timeout_above_the_maximum_is_refused(broker: Broker) -> None:
    def build(m: Any) -> Any:
        return make(
            m.InitProducerIdRequest,
            transactional_id="txn-2",
            transaction_timeout=datetime.timedelta(milliseconds=900_001),
        )

    response = call(broker, init_producer_id.API, 4, build)
    assert response.error_code is ErrorCode.invalid_transaction_timeout
