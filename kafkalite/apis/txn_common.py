"""What the transaction APIs share: the coordinator service of the broker."""

from __future__ import annotations

from kafkalite.apis.base import RequestContext
from kafkalite.broker.txn_coordinator_service import TransactionCoordinatorService


def txn_service(ctx: RequestContext) -> TransactionCoordinatorService:
    service = ctx.broker.txn
    assert service is not None, "Broker.open sets the transaction coordinator"
    return service
