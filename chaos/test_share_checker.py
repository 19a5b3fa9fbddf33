"""The share-group checker (chaos/share.py judge_share) on a synthetic history: each planted
fault is counted exactly."""

from __future__ import annotations

from chaos.share import judge_share


def _record(p: int, o: int, value: str) -> dict:
    return {"ev": "record", "partition": p, "offset": o, "key": "k0", "value": value}


def _deliver(t: float, p: int, o: int, value: str, count: int = 1) -> dict:
    return {"ev": "deliver", "t": t, "partition": p, "offset": o, "key": "k0", "value": value,
            "count": count}  # fmt: skip


def test_planted_share_faults_are_counted_exactly() -> None:
    acks = {f"p0:{i}": {"ev": "ack", "seq": i, "partition": 0, "offset": i} for i in range(5)}
    records = [_record(0, i, f"p0:{i}") for i in range(5)]
    share = {
        "share-c0": [
            _deliver(1.0, 0, 0, "p0:0"),
            _deliver(1.0, 0, 1, "p0:1"),
            {"ev": "accepted", "t": 1.1, "records": [[0, 0], [0, 1]]},
            _deliver(2.0, 0, 2, "p0:2"),
            {"ev": "accept_err", "t": 2.1, "records": [[0, 2]], "error": "_TRANSPORT"},
            _deliver(3.0, 0, 9, "p0:9"),  # not in the log
        ],
        "share-c1": [
            _deliver(1.5, 0, 1, "p0:1", 2),  # after its ACCEPT was answered
            {"ev": "accepted", "t": 1.6, "records": [[0, 1]]},  # a second ACCEPT
            _deliver(2.5, 0, 2, "p0:2", 2),  # after a failed ACCEPT: allowed
            {"ev": "accepted", "t": 2.6, "records": [[0, 2]]},
        ],
    }
    # p0:3 and p0:4 never delivered; the broker's lag: two unaccepted.
    final = [{"ev": "share_offsets", "offsets": {"0": {"start": 3, "lag": 2}}}]
    verdict = judge_share(acks, records, share, final)
    assert verdict["counts"] == {
        "share_acked_never_delivered": 2,
        "share_redelivered_after_ack": 1,
        "share_accepted_twice": 1,
        "share_delivered_not_in_log": 1,
        "share_unaccepted": 2,
    }
    figures = verdict["figures"]
    assert figures["deliveries"] == 6
    assert figures["redeliveries"] == 2
    assert figures["accepted"] == 3
    assert figures["accept_failed"] == {"_TRANSPORT": 1}
    assert figures["accepted_unanswered"] == 2
    assert verdict["examples"]["share_redelivered_after_ack"][0]["offset"] == 1


def test_without_the_broker_offsets_every_record_counts_as_unaccepted() -> None:
    records = [_record(0, i, f"p0:{i}") for i in range(3)]
    share = {"share-c0": [_deliver(1.0, 0, i, f"p0:{i}") for i in range(3)]}
    verdict = judge_share({}, records, share, [])
    assert verdict["counts"]["share_unaccepted"] == 3
    assert verdict["figures"]["offsets_known"] is False


def test_the_brokers_lag_counts_unaccepted_records_behind_a_persisted_start_offset() -> None:
    """Kafka's start offset is the persisted one: it may stay behind acknowledged records."""
    records = [_record(0, i, f"p0:{i}") for i in range(4)]
    share = {
        "share-c0": [_deliver(1.0, 0, i, f"p0:{i}") for i in range(4)]
        + [{"ev": "accepted", "t": 1.1, "records": [[0, i] for i in range(4)]}]
    }
    final = [{"ev": "share_offsets", "offsets": {"0": {"start": 1, "lag": 0}}}]
    assert judge_share({}, records, share, final)["counts"]["share_unaccepted"] == 0
