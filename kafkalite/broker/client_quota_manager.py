"""Kafka's ClientQuotaManager: byte-rate quotas per user, client id or both (KIP-13, KIP-55),
enforced by throttling (KIP-219): the handler records what a request cost and gets back how
long the client must wait; the answer carries that as throttle_time_ms and the server mutes
the connection for as long.

The rate is Kafka's `Rate` over a `WindowedSum` of `quota.window.num` samples, each
`quota.window.size.seconds` long; a recording that takes the rate above the quota is
throttled for the time that brings the rate back to it: (rate - quota) / quota * window
(QuotaUtils.throttleTime). Which quota applies, and which clients share a rate, follow
Kafka's DefaultQuotaCallback (its precedence list is in `_LOOKUP_ORDER`).

With no quota configured, `enabled` is False and handlers pay one attribute check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from kafkalite.broker.client_quotas import CLIENT_ID, USER, Entity, entity_of

# Kafka drops a client's sensors after an hour without a recording (checked once a minute here)
INACTIVE_SENSOR_EXPIRATION_MS = 3600 * 1000
EXPIRATION_CHECK_EVERY_MS = 60 * 1000
# Kafka's QuotaTypes: which levels of quotas were ever configured (never reset until restart)
CLIENT_ID_QUOTAS, USER_QUOTAS, USER_CLIENT_ID_QUOTAS = 1, 2, 4
DEFAULT = None  # an entity name: the default user or client id


@dataclass(slots=True)
class Sample:
    value: float
    start_ms: int
    last_event_ms: int

    def reset(self, now_ms: int) -> None:
        self.value, self.start_ms, self.last_event_ms = 0.0, now_ms, now_ms


@dataclass(slots=True)
class Rate:
    """Kafka's Rate(WindowedSum): the sum of the retained samples over the time they span
    (at least samples - 1 full windows)."""

    samples: int
    window_ms: int
    _samples: list[Sample] = field(default_factory=list)
    _current: int = 0
    last_record_ms: int = 0

    def record(self, value: float, now_ms: int) -> None:
        self.last_record_ms = now_ms
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.last_event_ms = now_ms

    def measure(self, now_ms: int) -> float:
        size = self.window_size(now_ms)
        return sum(sample.value for sample in self._samples) / (size / 1000)

    def window_size(self, now_ms: int) -> int:
        self._purge_obsolete(now_ms)
        oldest = min((s.start_ms for s in self._samples), default=now_ms)
        elapsed = now_ms - oldest
        full_windows = elapsed // self.window_ms
        if full_windows < self.samples - 1:
            elapsed += (self.samples - 1 - full_windows) * self.window_ms
        return max(elapsed, 1)

    def _current_sample(self, now_ms: int) -> Sample:
        if not self._samples:
            self._samples.append(Sample(0.0, now_ms, now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> Sample:
        # one extra sample for the one overlapping the window's start (as SampledStat)
        self._current = (self._current + 1) % (self.samples + 1)
        if self._current >= len(self._samples):
            self._samples.append(Sample(0.0, now_ms, now_ms))
        else:
            self._samples[self._current].reset(now_ms)
        return self._samples[self._current]

    def _purge_obsolete(self, now_ms: int) -> None:
        expire_age = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_age:
                sample.reset(now_ms)


def throttle_time_ms(rate: Rate, bound: float, now_ms: int) -> int:
    """QuotaUtils.throttleTime: the wait that brings the measured rate back to `bound`."""
    value = rate.measure(now_ms)
    if value <= bound:
        return 0
    return round((value - bound) / bound * rate.window_size(now_ms))


@dataclass(slots=True)
class ClientSensors:
    """A quota sensor (the rate) and its throttle-time sensor, per metric tags."""

    rate: Rate
    throttle_ms_total: float = 0.0
    throttles: int = 0


MetricTags = tuple[str, str]  # (user, client id); "" where the level does not apply


class ClientQuotaManager:
    def __init__(self, quota_key: str, samples: int, window_seconds: int) -> None:
        self.quota_key = quota_key  # producer_byte_rate or consumer_byte_rate
        self.samples = samples
        self.window_ms = window_seconds * 1000
        self._types_enabled = 0
        self._quotas: dict[Entity, float] = {}
        self.sensors: dict[MetricTags, ClientSensors] = {}
        self._next_expiration_ms = 0

    @property
    def enabled(self) -> bool:
        return self._types_enabled != 0

    def has_quota(self, entity: Entity) -> bool:
        return entity in self._quotas

    def update_quota(self, entity: Entity, quota: float | None) -> None:
        """A quota set (or removed: None) for a user, client-id or (user, client-id) entity."""
        kinds = dict(entity)
        if USER in kinds:
            self._types_enabled |= USER_CLIENT_ID_QUOTAS if CLIENT_ID in kinds else USER_QUOTAS
        elif CLIENT_ID in kinds:
            self._types_enabled |= CLIENT_ID_QUOTAS
        if quota is None:
            self._quotas.pop(entity, None)
        else:
            self._quotas[entity] = quota

    def record_and_get_throttle_time_ms(
        self, user: str, client_id: str, value: float, now_ms: int
    ) -> int:
        self._expire_inactive(now_ms)
        tags = self.metric_tags(user, client_id)
        rate = self._sensors(tags).rate
        rate.record(value, now_ms)
        bound = self.quota_limit(tags)
        return 0 if bound is None else throttle_time_ms(rate, bound, now_ms)

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """A throttled fetch answers no data: its bytes are taken back (unrecordQuotaSensor)."""
        self._sensors(self.metric_tags(user, client_id)).rate.record(-value, now_ms)

    def max_value_in_quota_window(self, user: str, client_id: str) -> float:
        """The most a single request may take without being throttled for sure."""
        bound = self.quota_limit(self.metric_tags(user, client_id))
        if bound is None:
            return math.inf
        return bound * (self.samples - 1) * self.window_ms / 1000

    def throttled(self, user: str, client_id: str, throttle_ms: int) -> None:
        """The throttle-time sensor (Kafka's throttle-time metric, an average)."""
        sensors = self._sensors(self.metric_tags(user, client_id))
        sensors.throttle_ms_total += throttle_ms
        sensors.throttles += 1

    def _expire_inactive(self, now_ms: int) -> None:
        """So that clients come and go without the sensors growing without bound."""
        if now_ms < self._next_expiration_ms:
            return
        self._next_expiration_ms = now_ms + EXPIRATION_CHECK_EVERY_MS
        cutoff = now_ms - INACTIVE_SENSOR_EXPIRATION_MS
        self.sensors = {t: s for t, s in self.sensors.items() if s.rate.last_record_ms >= cutoff}

    def _sensors(self, tags: MetricTags) -> ClientSensors:
        sensors = self.sensors.get(tags)
        if sensors is None:
            sensors = self.sensors[tags] = ClientSensors(Rate(self.samples, self.window_ms))
        return sensors

    def metric_tags(self, user: str, client_id: str) -> MetricTags:
        """DefaultQuotaCallback.quotaMetricTags: the clients sharing one rate."""
        enabled = self._types_enabled
        if enabled in (0, CLIENT_ID_QUOTAS):
            return "", client_id
        if enabled == USER_QUOTAS:
            return user, ""
        if enabled == USER_CLIENT_ID_QUOTAS:
            return user, client_id
        for entity, tags in _lookup_order(user, client_id):
            if entity in self._quotas:
                return tags
        return "", client_id

    def quota_limit(self, tags: MetricTags) -> float | None:
        """DefaultQuotaCallback.quotaLimit: the most specific quota for the tags."""
        user, client_id = tags
        if user and client_id:
            candidates = _USER_CLIENT_LOOKUP
        elif user:
            candidates = _USER_LOOKUP
        elif client_id:
            candidates = _CLIENT_LOOKUP
        else:
            return None
        for user_name, client_name in candidates:
            entity = _entity(user_name, client_name, user, client_id)
            quota = self._quotas.get(entity)
            if quota is not None:
                return quota
        return None


# The precedence of /config/users/<user>/clients/<client-id> ... /config/clients/<default>,
# as (user part, client part): "name" the client's own, DEFAULT the default, "" absent.
Lookup = tuple[tuple[str | None, str | None], ...]
_USER_CLIENT_LOOKUP: Lookup = (
    ("name", "name"),
    ("name", DEFAULT),
    (DEFAULT, "name"),
    (DEFAULT, DEFAULT),
)
_USER_LOOKUP: Lookup = (("name", ""), (DEFAULT, ""))
_CLIENT_LOOKUP: Lookup = (("", "name"), ("", DEFAULT))


def _entity(user_part: str | None, client_part: str | None, user: str, client_id: str) -> Entity:
    pairs: list[tuple[str, str | None]] = []
    if user_part != "":
        pairs.append((USER, user if user_part == "name" else None))
    if client_part != "":
        pairs.append((CLIENT_ID, client_id if client_part == "name" else None))
    return entity_of(pairs)


def _lookup_order(user: str, client_id: str) -> list[tuple[Entity, MetricTags]]:
    """Kafka's eight levels with the metric tags each gives (multi-level quotas)."""
    levels = (
        (("name", "name"), (user, client_id)),
        (("name", DEFAULT), (user, client_id)),
        (("name", ""), (user, "")),
        ((DEFAULT, "name"), (user, client_id)),
        ((DEFAULT, DEFAULT), (user, client_id)),
        ((DEFAULT, ""), (user, "")),
    )
    return [(_entity(u, c, user, client_id), tags) for (u, c), tags in levels]


class ClientRequestQuotaManager(ClientQuotaManager):
    """Kafka's ClientRequestQuotaManager: request_percentage, the share of a request handler
    thread a user / client id may keep busy (100: one thread), from the time each request's
    handler ran; its throttle time is at most one quota window."""

    def __init__(self, samples: int, window_seconds: int) -> None:
        super().__init__("request_percentage", samples, window_seconds)

    def record_request_time(self, user: str, client_id: str, seconds: float, now_ms: int) -> int:
        throttle_ms = self.record_and_get_throttle_time_ms(user, client_id, seconds * 100, now_ms)
        return min(throttle_ms, self.window_ms)


@dataclass(slots=True)
class TokenBucket:
    """Kafka's TokenBucket: `quota` tokens a second, at most samples * window of them (the
    burst); a mutation takes as many tokens as partitions, and may take the bucket below 0."""

    samples: int
    window_ms: int
    tokens: float = 0.0
    last_update_ms: int = 0

    def measure(self, quota: float, now_ms: int) -> float:
        self._refill(quota, now_ms)
        return self.tokens

    def record(self, quota: float, value: float, now_ms: int) -> None:
        self._refill(quota, now_ms)
        self.tokens = min(self._burst(quota), self.tokens - value)

    def _refill(self, quota: float, now_ms: int) -> None:
        refilled = self.tokens + quota * (now_ms - self.last_update_ms) / 1000
        self.tokens = min(self._burst(quota), refilled)
        self.last_update_ms = now_ms

    def _burst(self, quota: float) -> float:
        return self.samples * self.window_ms / 1000 * quota


class ControllerMutationQuotaManager(ClientQuotaManager):
    """Kafka's ControllerMutationQuotaManager: controller_mutation_rate (partitions created
    or deleted a second, KIP-599) as a token bucket per user / client id."""

    def __init__(self, samples: int, window_seconds: int) -> None:
        super().__init__("controller_mutation_rate", samples, window_seconds)
        self._buckets: dict[MetricTags, TokenBucket] = {}

    def record_mutation(
        self, user: str, client_id: str, permits: float, now_ms: int, strict: bool
    ) -> int:
        """The throttle time in ms; strict (StrictControllerMutationQuota): a positive one
        means the mutation is refused and nothing was recorded; permissive: it was done."""
        tags = self.metric_tags(user, client_id)
        bound = self.quota_limit(tags)
        if bound is None:
            return 0
        if now_ms >= self._next_expiration_ms:
            cutoff = now_ms - INACTIVE_SENSOR_EXPIRATION_MS
            self._buckets = {t: b for t, b in self._buckets.items() if b.last_update_ms >= cutoff}
            self._expire_inactive(now_ms)
        bucket = self._buckets.get(tags)
        if bucket is None:
            bucket = self._buckets[tags] = TokenBucket(self.samples, self.window_ms)
        if strict and (tokens := bucket.measure(bound, now_ms)) < 0:
            return round(-tokens / bound * 1000)
        bucket.record(bound, permits, now_ms)
        if not strict and (tokens := bucket.measure(bound, now_ms)) < 0:
            return round(-tokens / bound * 1000)
        return 0
