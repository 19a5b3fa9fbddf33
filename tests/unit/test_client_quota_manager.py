"""The quota managers' rate and throttle time with a fake clock, ported from Kafka's
ClientQuotaManagerTest (testQuotaViolation, testQuotaConfigPrecedence): the same values
give the same throttle times."""

from __future__ import annotations

import math

from kafkalite.broker.client_quota_manager import (
    ClientQuotaManager,
    ClientRequestQuotaManager,
    ControllerMutationQuotaManager,
    Rate,
    TokenBucket,
    throttle_time_ms,
)
from kafkalite.broker.client_quotas import entity_of
from kafkalite.broker.connection_quotas import ConnectionQuotas

SAMPLES = 11  # quota.window.num
DEFAULT = None


def manager() -> ClientQuotaManager:
    return ClientQuotaManager("producer_byte_rate", SAMPLES, 1)


def set_quota(
    quotas: ClientQuotaManager,
    user: str | None | bool,
    client_id: str | None | bool,
    value: float | None,
) -> None:
    """False: the entity has no such part; None: the default."""
    pairs = []
    if user is not False:
        pairs.append(("user", user))
    if client_id is not False:
        pairs.append(("client-id", client_id))
    quotas.update_quota(entity_of(pairs), value)  # type: ignore[arg-type]


def test_quota_violation_throttles_until_the_burst_rolls_over() -> None:
    quotas = manager()
    set_quota(quotas, DEFAULT, DEFAULT, 500)
    now = 0
    for _ in range(10):  # under the quota: 400 B/s
        assert quotas.record_and_get_throttle_time_ms("ANONYMOUS", "unknown", 400, now) == 0
        now += 1000
    now += 500
    # 400*10 + 2300 = 6300 bytes over 10.5 s = 600 B/s: (600 - 500) / 500 * 10.5 s
    assert quotas.record_and_get_throttle_time_ms("ANONYMOUS", "unknown", 2300, now) == 2100
    now += 2100
    for _ in range(10):
        quotas.record_and_get_throttle_time_ms("ANONYMOUS", "unknown", 400, now)
        now += 1000
    assert quotas.record_and_get_throttle_time_ms("ANONYMOUS", "unknown", 0, now) == 0


def test_rate_counts_at_least_the_full_windows_and_forgets_old_samples() -> None:
    rate = Rate(SAMPLES, 1000)
    rate.record(15_000, 0)
    assert rate.window_size(0) == 10_000  # samples - 1 windows, even at the first record
    assert rate.measure(0) == 1500.0
    assert throttle_time_ms(rate, 1000, 0) == 5000  # (1500 - 1000) / 1000 * 10 s
    assert throttle_time_ms(rate, 1500, 0) == 0
    assert rate.measure(11_000) == 0.0  # every sample older than 11 windows is purged


def test_unrecord_takes_back_a_throttled_fetch() -> None:
    quotas = manager()
    set_quota(quotas, "alice", False, 100)
    assert quotas.record_and_get_throttle_time_ms("alice", "c", 5000, 0) > 0
    quotas.unrecord("alice", "c", 5000, 0)
    assert quotas.record_and_get_throttle_time_ms("alice", "c", 900, 0) == 0


def check(
    quotas: ClientQuotaManager,
    user: str,
    client_id: str,
    bound: float,
    value: float,
    throttled: bool,
) -> None:
    """Kafka's checkQuota: the bound applied, the most a window takes, and the throttling of
    value * samples recorded at once."""
    assert quotas.quota_limit(quotas.metric_tags(user, client_id)) == (
        None if bound == math.inf else bound
    )
    assert quotas.max_value_in_quota_window(user, client_id) == bound * (SAMPLES - 1)
    throttle_ms = quotas.record_and_get_throttle_time_ms(user, client_id, value * SAMPLES, 0)
    assert (throttle_ms > 0) is throttled, (user, client_id, throttle_ms)


def test_quota_config_precedence() -> None:
    quotas = manager()
    set_quota(quotas, DEFAULT, False, 1000)
    set_quota(quotas, False, DEFAULT, 2000)
    set_quota(quotas, DEFAULT, DEFAULT, 3000)
    set_quota(quotas, "userA", False, 4000)
    set_quota(quotas, "userA", "client1", 5000)
    set_quota(quotas, "userB", False, 6000)
    set_quota(quotas, "userB", "client1", 7000)
    set_quota(quotas, "userB", DEFAULT, 8000)
    set_quota(quotas, "userC", False, 10000)
    set_quota(quotas, False, "client1", 9000)

    check(quotas, "userA", "client1", 5000, 4500, False)  # <user, client> before <user>
    check(quotas, "userA", "client2", 4000, 4500, True)  # <user> before <client> and defaults
    check(quotas, "userA", "client3", 4000, 0, True)  # <user> shared by the user's clients
    check(quotas, "userA", "client1", 5000, 0, False)  # <user, client> its own
    check(quotas, "userB", "client1", 7000, 8000, True)
    check(quotas, "userB", "client2", 8000, 7000, False)  # <user, default client>: per client
    check(quotas, "userB", "client3", 8000, 7000, False)
    check(quotas, "userD", "client1", 3000, 3500, True)  # <default user, default client>
    check(quotas, "userD", "client2", 3000, 2500, False)
    check(quotas, "userE", "client1", 3000, 2500, False)

    set_quota(quotas, DEFAULT, DEFAULT, None)  # back to the <user> default
    check(quotas, "userD", "client1", 1000, 0, False)  # other metric tags: a new rate
    check(quotas, "userE", "client4", 1000, 1500, True)
    check(quotas, "userF", "client4", 1000, 800, False)  # the <user> default: shared
    check(quotas, "userF", "client5", 1000, 800, True)

    set_quota(quotas, DEFAULT, False, None)  # back to the <client-id> default
    check(quotas, "userF", "client4", 2000, 0, False)  # shared by the client id's users
    check(quotas, "userF", "client5", 2000, 0, False)
    check(quotas, "userF", "client5", 2000, 2500, True)
    check(quotas, "userG", "client5", 2000, 0, True)

    set_quota(quotas, "userA", False, 8000)
    set_quota(quotas, "userA", "client1", 10000)
    check(quotas, "userA", "client2", 8000, 0, False)
    check(quotas, "userA", "client2", 8000, 4500, True)  # the sum of new and earlier values
    check(quotas, "userA", "client1", 10000, 0, False)
    check(quotas, "userA", "client1", 10000, 6000, True)
    set_quota(quotas, "userA", "client1", None)
    check(quotas, "userA", "client6", 8000, 0, True)  # the shared user quota
    set_quota(quotas, "userA", "client6", 11000)
    check(quotas, "userA", "client6", 11000, 8500, False)
    set_quota(quotas, "userA", DEFAULT, 12000)
    set_quota(quotas, "userA", "client6", None)
    check(quotas, "userA", "client6", 12000, 4000, True)


def test_no_quota_no_cost() -> None:
    quotas = manager()
    assert not quotas.enabled
    assert quotas.max_value_in_quota_window("u", "c") == math.inf


def test_token_bucket_refills_at_the_quota_up_to_the_burst() -> None:
    bucket = TokenBucket(SAMPLES, 1000)
    assert bucket.measure(2.0, 100_000) == 22.0  # burst: 11 windows of 1 s at 2 a second
    bucket.record(2.0, 30, 100_000)
    assert bucket.measure(2.0, 100_000) == -8.0
    assert bucket.measure(2.0, 102_000) == -4.0  # 2 tokens a second
    assert bucket.measure(2.0, 200_000) == 22.0


def test_strict_mutations_wait_for_tokens_permissive_ones_do_not() -> None:
    quotas = ControllerMutationQuotaManager(SAMPLES, 1)
    set_quota(quotas, False, "admin", 1.0)
    now = 1_000_000
    assert quotas.record_mutation("u", "admin", 15, now, strict=True) == 0  # 11 - 15 = -4
    assert quotas.record_mutation("u", "admin", 1, now, strict=True) == 4000  # refused
    assert quotas.record_mutation("u", "admin", 1, now, strict=False) == 5000  # done: -5
    assert quotas.record_mutation("u", "admin", 1, now + 5000, strict=True) == 0
    assert quotas.record_mutation("other", "client", 100, now, strict=True) == 0  # no quota


def test_request_time_throttle_is_at_most_one_window() -> None:
    quotas = ClientRequestQuotaManager(SAMPLES, 1)
    set_quota(quotas, False, "busy", 1.0)  # 1% of a handler thread
    # 0.5 s of handler time = 50 (%·s) over 10 s: 5% against 1%, 40 s owed, capped at 1 s
    assert quotas.record_request_time("u", "busy", 0.5, 0) == 1000
    assert quotas.record_request_time("u", "other", 0.5, 0) == 0  # no quota


def test_sensors_of_clients_gone_for_an_hour_are_dropped() -> None:
    quotas = manager()
    set_quota(quotas, False, DEFAULT, 1000)
    quotas.record_and_get_throttle_time_ms("u", "gone", 10, 0)
    quotas.record_and_get_throttle_time_ms("u", "active", 10, 3_000_000)
    assert set(quotas.sensors) == {("", "gone"), ("", "active")}
    quotas.record_and_get_throttle_time_ms("u", "active", 10, 3_600_001)
    assert set(quotas.sensors) == {("", "active")}


def test_connection_creation_rate_per_ip_and_default() -> None:
    connections = ConnectionQuotas(SAMPLES, 1)
    assert not connections.enabled
    connections.on_client_quota_changed(entity_of([("ip", None)]), {"connection_creation_rate": 1})
    connections.on_client_quota_changed(
        entity_of([("ip", "10.0.0.2")]), {"connection_creation_rate": 100}
    )
    # 1 a second over at least 10 windows: the 11th connection at once is over, throttled
    # for at most one window, and not counted
    assert [connections.record_connection("/10.0.0.1", 0) for _ in range(10)] == [0] * 10
    assert connections.record_connection("10.0.0.1", 0) == 1000
    assert connections.record_connection("10.0.0.1", 5000) == 1000  # still 11 in 10 s
    assert connections.record_connection("10.0.0.1", 11_000) == 0  # the first ones expired
    assert [connections.record_connection("10.0.0.2", 0) for _ in range(11)] == [0] * 11
    connections.on_client_quota_changed(entity_of([("ip", None)]), {})
    assert connections.record_connection("10.0.0.1", 11_000) == 0


def test_max_connections_per_ip_and_its_overrides() -> None:
    connections = ConnectionQuotas(SAMPLES, 1)
    overrides = "10.0.0.9:1,[::1]:0"
    assert connections.accepted("/10.0.0.1", 2, overrides) is None
    assert connections.accepted("10.0.0.1", 2, overrides) is None
    assert connections.accepted("10.0.0.1", 2, overrides) == 2  # not counted
    connections.closed("10.0.0.1")
    assert connections.accepted("10.0.0.1", 2, overrides) is None
    assert connections.accepted("10.0.0.9", 2, overrides) is None
    assert connections.accepted("10.0.0.9", 2, overrides) == 1
    assert connections.accepted("0:0:0:0:0:0:0:1", 2, overrides) == 0


def test_a_client_sending_flat_out_gets_its_quota_in_bursts_as_kafka() -> None:
    # bench.security_abuse (c) on the fake clock: 100 B requests, each sent 5 ms after the
    # last answer and its throttle time, against 1000 B/s. Kafka's rate spans at least 10
    # windows, so the first ~10 s of quota pass at once; throttling then pays it back
    # until the burst leaves the window, and the next burst comes (a period of ~11 s).
    quotas = manager()
    set_quota(quotas, False, "flat-out", 1000.0)
    per_second = [0.0] * 60
    now_ms = throttles = 0
    while now_ms < 60_000:
        throttle_ms = quotas.record_and_get_throttle_time_ms("", "flat-out", 100, now_ms)
        per_second[now_ms // 1000] += 100
        throttles += throttle_ms > 0
        now_ms += throttle_ms + 5
    # the first throttle at 10,600 B (0.525 s in: the rate spans 10.525 s); 11,000 B in 1 s
    assert per_second[0] == 11_000
    assert per_second[2:10] == [100.0] * 8  # then one request a 1.1 s until it rolls over
    per_ten = [sum(per_second[s : s + 10]) / 10 for s in range(0, 60, 10)]
    assert per_ten == [1190.0, 1100.0, 1100.0, 1100.0, 1100.0, 1100.0]
    assert sum(per_second) / 60 == 1115.0  # within 20% of the quota, but not per second
