"""Byte-rate quotas as Produce and Fetch apply them (KafkaApis): record what the request cost
against the client's quota; on a violation the answer carries the throttle time and the
connection is muted for as long (KIP-219)."""

from __future__ import annotations

import datetime

from kafkalite.apis.base import RequestContext
from kafkalite.broker.client_quota_manager import ClientQuotaManager


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


def throttle_time(ms: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ms)
