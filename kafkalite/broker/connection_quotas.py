"""Kafka's ConnectionQuotas for client addresses: an `ip` entity's `connection_creation_rate`
(or the default ip entity's, KIP-612) bounds how many connections a second an address may
open: a connection over it is not served but held, unanswered, for the throttle time (at
most one quota window) and then closed, as Kafka's acceptor does; `max.connections.per.ip`
(with `max.connections.per.ip.overrides`) bounds how many it may hold: one more is closed at
once."""

from __future__ import annotations

from collections.abc import Mapping

from kafkalite.broker.client_quota_manager import (
    EXPIRATION_CHECK_EVERY_MS,
    INACTIVE_SENSOR_EXPIRATION_MS,
    Rate,
    throttle_time_ms,
)
from kafkalite.broker.client_quotas import CONNECTION_CREATION_RATE, IP, Entity, normalized_ip


class ConnectionQuotas:
    def __init__(self, samples: int, window_seconds: int) -> None:
        self.samples = samples
        self.window_ms = window_seconds * 1000
        self._default: float | None = None
        self._per_ip: dict[str, float] = {}
        self._rates: dict[str, Rate] = {}
        self._next_expiration_ms = 0
        self._counts: dict[str, int] = {}
        self._overrides: tuple[str, dict[str, int]] = ("", {})

    @property
    def enabled(self) -> bool:
        return self._default is not None or bool(self._per_ip)

    def on_client_quota_changed(self, entity: Entity, quotas: Mapping[str, float]) -> None:
        kinds = dict(entity)
        if set(kinds) != {IP}:
            return
        quota = quotas.get(CONNECTION_CREATION_RATE)
        name = kinds[IP]
        if name is None:
            self._default = quota
            return
        ip = normalized_ip(name) or name
        if quota is None:
            self._per_ip.pop(ip, None)
        else:
            self._per_ip[ip] = quota

    def record_connection(self, address: str, now_ms: int) -> int:
        """A new connection from `address`: the throttle time in ms (0: accepted). A
        throttled connection is not counted (Kafka un-records it)."""
        ip = normalized_ip(address) or address
        quota = self._per_ip.get(ip, self._default)
        if quota is None:
            return 0
        self._expire_inactive(now_ms)
        rate = self._rates.get(ip)
        if rate is None:
            rate = self._rates[ip] = Rate(self.samples, self.window_ms)
        rate.record(1, now_ms)
        throttle_ms = min(throttle_time_ms(rate, quota, now_ms), self.window_ms)
        if throttle_ms:
            rate.record(-1, now_ms)
        return throttle_ms

    def _expire_inactive(self, now_ms: int) -> None:
        if now_ms < self._next_expiration_ms:
            return
        self._next_expiration_ms = now_ms + EXPIRATION_CHECK_EVERY_MS
        cutoff = now_ms - INACTIVE_SENSOR_EXPIRATION_MS
        self._rates = {ip: r for ip, r in self._rates.items() if r.last_record_ms >= cutoff}

    def accepted(self, address: str, max_per_ip: int, overrides: str) -> int | None:
        """A connection from `address` is open: None, or the maximum it already holds (the
        connection is to be closed; it is not counted)."""
        ip = normalized_ip(address) or address
        count = self._counts.get(ip, 0)
        most = self._override(overrides).get(ip, max_per_ip)
        if count >= most:
            return most
        self._counts[ip] = count + 1
        return None

    def closed(self, address: str) -> None:
        ip = normalized_ip(address) or address
        count = self._counts.get(ip, 0) - 1
        if count > 0:
            self._counts[ip] = count
        else:
            self._counts.pop(ip, None)

    def _override(self, overrides: str) -> dict[str, int]:
        """max.connections.per.ip.overrides, parsed once per value of it."""
        if overrides != self._overrides[0]:
            parsed = {}
            for part in filter(None, (p.strip() for p in overrides.split(","))):
                address, _, count = part.rpartition(":")
                parsed[normalized_ip(address.strip("[]")) or address] = int(count)
            self._overrides = (overrides, parsed)
        return self._overrides[1]
