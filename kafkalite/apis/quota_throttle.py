"""Quotas as the handlers apply them (KafkaApis): byte rates on Produce and Fetch record what
the request cost against the client's quota; request_percentage the time its handler ran
(the server records it); controller_mutation_rate on CreateTopics,
CreatePartitions and DeleteTopics counts partitions (KIP-599). On a violation the answer
carries the throttle time and the connection is muted for as long (KIP-219)."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import RequestContext
from kafkalite.broker.admin_manager import Outcome
from kafkalite.broker.client_quota_manager import ClientQuotaManager, ClientRequestQuotaManager


def record_bandwidth(ctx: RequestContext, manager: ClientQuotaManager, value: float) -> int:
    """maybeRecordAndGetThrottleTimeMs then throttle: the throttle time in ms (0: within)."""
    user, client_id = ctx.quota_user, ctx.quota_client_id
    throttle_ms = manager.record_and_get_throttle_time_ms(
        user, client_id, value, ctx.broker.clock_ms()
    )
    if throttle_ms > 0:
        manager.throttled(user, client_id, throttle_ms)
        ctx.throttle(throttle_ms)
    return throttle_ms


def record_request_time(
    ctx: RequestContext, manager: ClientRequestQuotaManager, seconds: float
) -> None:
    """The handler's time against request_percentage; on a violation the answer carries the
    throttle time (at most a quota window) and the connection is muted."""
    user, client_id = ctx.quota_user, ctx.quota_client_id
    throttle_ms = manager.record_request_time(user, client_id, seconds, ctx.broker.clock_ms())
    if throttle_ms > 0:
        manager.throttled(user, client_id, throttle_ms)
        ctx.throttle(throttle_ms)


WRITE_TXN_MARKERS, FETCH = 27, 1


def exempt_from_request_quota(api_key: int, body: Any) -> bool:
    """Kafka's exempt requests: brokers' own (cluster actions, followers' fetches)."""
    if api_key == WRITE_TXN_MARKERS:
        return True
    if api_key != FETCH:
        return False
    state = getattr(body, "replica_state", None)
    return (state.replica_id if state is not None else getattr(body, "replica_id", -1)) >= 0


def throttle_time(ms: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ms)


def with_throttle_time(response: Any, ms: int) -> Any:
    """The answer with `ms` as its throttle_time_ms, if it has one and a smaller value there
    (Kafka's maybeSetThrottleTimeMs)."""
    current = getattr(response, "throttle_time", None)
    wanted = throttle_time(ms)
    if current is None or current >= wanted:
        return response
    return dataclasses.replace(response, throttle_time=wanted)


THROTTLED = Outcome(ErrorCode.throttling_quota_exceeded, "The throttling quota has been exceeded.")


@dataclasses.dataclass
class MutationQuota:
    """Kafka's ControllerMutationQuota for one request: a strict one (the API versions that
    know THROTTLING_QUOTA_EXCEEDED) refuses each topic while the client's bucket is empty;
    a permissive one lets every mutation through and only throttles."""

    ctx: RequestContext
    strict: bool
    throttle_ms: int = 0
    recorded_ms: int = 0

    def record(self, partitions: int) -> Outcome | None:
        """THROTTLED when the mutation of `partitions` is refused, else None."""
        manager = self.ctx.broker.quotas.controller_mutation
        if not manager.enabled:
            return None
        now_ms = self.ctx.broker.clock_ms()
        user, client_id = self.ctx.quota_user, self.ctx.quota_client_id
        throttle_ms = manager.record_mutation(user, client_id, partitions, now_ms, self.strict)
        if throttle_ms:
            self.throttle_ms, self.recorded_ms = throttle_ms, now_ms
        return THROTTLED if throttle_ms and self.strict else None

    def throttle(self) -> None:
        """Mute the connection for what is left of the last throttle time (throttleTime)."""
        if not self.throttle_ms:
            return
        left = self.throttle_ms - (self.ctx.broker.clock_ms() - self.recorded_ms)
        if left > 0:
            manager = self.ctx.broker.quotas.controller_mutation
            manager.throttled(self.ctx.quota_user, self.ctx.quota_client_id, left)
            self.ctx.throttle(left)


def mutation_quota(ctx: RequestContext, strict_since: int) -> MutationQuota:
    """newQuotaFor: strict from the version that knows THROTTLING_QUOTA_EXCEEDED."""
    return MutationQuota(ctx, ctx.api_version >= strict_since)
