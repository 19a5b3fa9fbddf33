"""Kafka's ConnectionQuotas (kafka/network/SocketServer.scala), sans-IO.

Broker-wide and per listener (`listener.name.<listener>.` overrides, falling back to the
broker-wide value as Kafka's ListenerConnectionQuota does): `max.connections` bounds the
connections held; at the bound a listener's acceptor waits until one closes (it does not
refuse). `max.connection.creation.rate` bounds how many a second are accepted: one over it is
accepted only after the throttle time (at most one quota window). The inter-broker listener is
protected when there are other listeners: it has only its own bound, and a connection it takes
over the broker-wide one makes the other listeners close their least recently active
connection (`max_connections_exceeded`).

For client addresses: an `ip` entity's `connection_creation_rate`
(or the default ip entity's, KIP-612) bounds how many connections a second an address may
open: a connection over it is not served but held, unanswered, for the throttle time (at
most one quota window) and then closed, as Kafka's acceptor does; `max.connections.per.ip`
(with `max.connections.per.ip.overrides`) bounds how many it may hold: one more is closed at
once."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kafkalite.broker.client_quota_manager import (
    EXPIRATION_CHECK_EVERY_MS,
    INACTIVE_SENSOR_EXPIRATION_MS,
    Rate,
    throttle_time_ms,
)
from kafkalite.broker.client_quotas import CONNECTION_CREATION_RATE, IP, Entity, normalized_ip
from kafkalite.config import BrokerConfig

UNBOUNDED = 2**31 - 1  # Kafka's Int.MaxValue: no bound


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """max.connections and max.connection.creation.rate, broker-wide and per listener."""

    max_connections: int = UNBOUNDED
    max_rate: int = UNBOUNDED
    listener_max_connections: Mapping[str, int] = field(default_factory=dict)
    listener_max_rate: Mapping[str, int] = field(default_factory=dict)
    inter_broker_listener: str | None = None

    @classmethod
    def of(cls, config: BrokerConfig) -> ConnectionLimits:
        names = [listener.name for listener in config.listeners]
        return cls(
            config.int("max.connections"),
            config.int("max.connection.creation.rate"),
            _per_listener(config, names, "max.connections"),
            _per_listener(config, names, "max.connection.creation.rate"),
            config.inter_broker_listener if len(names) > 1 else None,
        )


def _per_listener(config: BrokerConfig, listeners: list[str], name: str) -> dict[str, int]:
    """Each listener's value: its override, else the broker-wide one (Kafka's
    valuesWithPrefixOverride)."""
    values = {listener: config.listener_str(listener, name) for listener in listeners}
    return {listener: UNBOUNDED if v is None else int(v) for listener, v in values.items()}


@dataclass(slots=True)
class AcceptStats:
    """A listener's connection-accept-rate, connection-accept-throttle-time and
    ip-connection-accept-throttle-time (the averages of the non-zero throttle times, as
    Kafka's Avg sensors)."""

    accepted: int = 0
    throttled: int = 0
    throttle_ms_total: int = 0
    ip_throttled: int = 0
    ip_throttle_ms_total: int = 0

    @property
    def throttle_time_avg_ms(self) -> float:
        return self.throttle_ms_total / self.throttled if self.throttled else 0.0

    @property
    def ip_throttle_time_avg_ms(self) -> float:
        return self.ip_throttle_ms_total / self.ip_throttled if self.ip_throttled else 0.0


def _nothing() -> None:
    pass


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
        self.limits = ConnectionLimits()
        self.total = 0
        self.listener_counts: dict[str, int] = {}
        self._broker_rate = Rate(samples, self.window_ms)
        self._listener_rates: dict[str, Rate] = {}
        self.accept_stats: dict[str, AcceptStats] = {}
        self._blocked: dict[str, Rate] = {}  # ms each listener's acceptor was held
        # what runs whenever a slot may have come free: the server's acceptors' wake-up
        self.on_change: Callable[[], None] = _nothing

    def configure(self, limits: ConnectionLimits) -> None:
        """New limits (at start and on a dynamic broker config change): waiting acceptors
        look again."""
        self.limits = limits
        self._changed()

    def _changed(self) -> None:
        self.on_change()

    def record_accept(self, listener: str, now_ms: int) -> int:
        """A connection accepted on `listener`: the ms to wait before taking it in (the
        broker's and the listener's creation rates; a protected listener only its own)."""
        throttle_ms = 0
        if not self._protected(listener):
            throttle_ms = self._record(self._broker_rate, self.limits.max_rate, now_ms)
        rate = self._listener_rates.get(listener)
        if rate is None:
            rate = self._listener_rates[listener] = Rate(self.samples, self.window_ms)
        bound = self.limits.listener_max_rate.get(listener, UNBOUNDED)
        throttle_ms = max(throttle_ms, self._record(rate, bound, now_ms))
        stats = self.accept_stats.setdefault(listener, AcceptStats())
        stats.accepted += 1
        if throttle_ms:
            stats.throttled += 1
            stats.throttle_ms_total += throttle_ms
        return throttle_ms

    def _record(self, rate: Rate, bound: int, now_ms: int) -> int:
        rate.record(1, now_ms)
        if bound >= UNBOUNDED:
            return 0
        return min(throttle_time_ms(rate, bound, now_ms), self.window_ms)

    def accept_rate(self, listener: str | None, now_ms: int) -> float:
        """Connections accepted a second, on `listener` (None: the broker's)."""
        rate = self._broker_rate if listener is None else self._listener_rates.get(listener)
        return 0.0 if rate is None else rate.measure(now_ms)

    def record_blocked(self, listener: str, blocked_ms: int, now_ms: int) -> None:
        """The acceptor of `listener` was held `blocked_ms` (a creation rate's throttle time,
        or no slot free), Kafka's AcceptorBlockedPercent meter."""
        rate = self._blocked.get(listener)
        if rate is None:
            rate = self._blocked[listener] = Rate(self.samples, self.window_ms)
        rate.record(blocked_ms, now_ms)

    def blocked_percent(self, listener: str, now_ms: int) -> float:
        """The share of the quota window (`quota.window.num` x `.size.seconds`, at least) the
        acceptor of `listener` was held, in percent."""
        rate = self._blocked.get(listener)
        return 0.0 if rate is None else rate.measure(now_ms) / 10  # ms a second -> percent

    def slot_available(self, listener: str) -> bool:
        if self.listener_counts.get(listener, 0) >= self.limits.listener_max_connections.get(
            listener, UNBOUNDED
        ):
            return False
        return self._protected(listener) or self.total < self.limits.max_connections

    def inc(self, listener: str) -> None:
        """A connection taken in on `listener` (after `slot_available`)."""
        self.total += 1
        self.listener_counts[listener] = self.listener_counts.get(listener, 0) + 1

    def dec(self, listener: str) -> None:
        self.total -= 1
        self.listener_counts[listener] -= 1
        self._changed()

    def max_connections_exceeded(self, listener: str) -> bool:
        """Over the broker-wide bound (the protected listener took one more): `listener`
        closes its least recently active connection."""
        return self.total > self.limits.max_connections and not self._protected(listener)

    def _protected(self, listener: str) -> bool:
        return listener == self.limits.inter_broker_listener

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

    def record_connection(self, address: str, now_ms: int, listener: str = "") -> int:
        """A new connection from `address` on `listener`: the throttle time in ms (0:
        accepted). A throttled connection is not counted, by its address, its listener nor
        the broker (Kafka un-records it)."""
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
            self._unrecord(listener, now_ms)
            if listener:  # one the acceptors know
                stats = self.accept_stats.setdefault(listener, AcceptStats())
                stats.ip_throttled += 1
                stats.ip_throttle_ms_total += throttle_ms
        return throttle_ms

    def _unrecord(self, listener: str, now_ms: int) -> None:
        if not self._protected(listener):
            self._broker_rate.record(-1, now_ms)
        if listener in self._listener_rates:
            self._listener_rates[listener].record(-1, now_ms)

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
