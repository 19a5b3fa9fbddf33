"""InitProducerId: idempotent producers get fresh ids; transactional ids UNSUPPORTED_VERSION."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kafkalite.apis import init_producer_id
from kafkalite.apis.base import make
from kafkalite.broker.broker import Broker

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
def test_transactional_ids_are_not_supported_yet(broker: Broker, version: int) -> None:
    response = init(broker, version, "txn-1")
    assert (response.error_code, response.producer_id, response.producer_epoch) == (
        ErrorCode.unsupported_version,
        -1,
        -1,
    )
