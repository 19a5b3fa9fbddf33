"""Kafka's QuotaFactory.QuotaManagers: every quota manager of the broker, and the one place
stored quota changes reach them (Kafka's ClientQuotaMetadataManager)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kafkalite.broker.client_quota_manager import (
    ClientQuotaManager,
    ClientRequestQuotaManager,
    ControllerMutationQuotaManager,
)
from kafkalite.broker.client_quotas import Entity
from kafkalite.broker.connection_quotas import ConnectionQuotas


@dataclass
class QuotaManagers:
    """Kafka's QuotaFactory.QuotaManagers: the produce and fetch byte-rate managers, the
    request-time manager, the controller mutation manager, and the per-IP connection
    creation quotas."""

    produce: ClientQuotaManager
    fetch: ClientQuotaManager
    request: ClientRequestQuotaManager
    controller_mutation: ControllerMutationQuotaManager
    connections: ConnectionQuotas

    @classmethod
    def create(
        cls, samples: int, window_seconds: int, controller_samples: int, controller_window: int
    ) -> QuotaManagers:
        return cls(
            ClientQuotaManager("producer_byte_rate", samples, window_seconds),
            ClientQuotaManager("consumer_byte_rate", samples, window_seconds),
            ClientRequestQuotaManager(samples, window_seconds),
            ControllerMutationQuotaManager(controller_samples, controller_window),
            ConnectionQuotas(samples, window_seconds),
        )

    def on_client_quota_changed(self, entity: Entity, quotas: Mapping[str, float]) -> None:
        """An entity's quotas as now stored (Kafka's ClientQuotaMetadataManager)."""
        self.connections.on_client_quota_changed(entity, quotas)
        for manager in (self.produce, self.fetch, self.request, self.controller_mutation):
            quota = quotas.get(manager.quota_key)
            if quota is not None or manager.has_quota(entity):
                manager.update_quota(entity, quota)
