"""Delayed delivery through the ReplicaManager, on a real broker with a clock the test moves:
what is held, when it is released, exactly once across restarts and interrupted releases."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from kafkalite.apis.base import RequestContext
from kafkalite.broker.broker import Broker
from kafkalite.broker.delayed_delivery_store import store_dir
from kafkalite.config import build_config
from kafkalite.storage.batch import TRANSACTIONAL_FLAG, iter_batches
from kafkalite.storage.control_batch import EndTxnMarker
from kafkalite.storage.records import GZIP, LZ4, NONE, Record, decode_records, encode_record_batch

T0 = 1_800_000_000_000
TP = ("d", 0)
OPT_IN = {"kafkalite.delayed.delivery.enable": "true"}


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


def open_broker(path: Path, clock: Clock, **overrides: str) -> Broker:
    return Broker.open(build_config({"log.dirs": str(path), **overrides}), clock_ms=clock)


def create(broker: Broker, configs: dict[str, str] | None = None) -> None:
    configs = OPT_IN if configs is None else configs
    outcome, _ = broker.admin_manager.create_topic("d", 1, 1, configs)
    assert outcome.ok


def batch(
    records: Sequence[tuple[bytes, Sequence[tuple[str, bytes]]]],
    *,
    compression: int = NONE,
    producer_id: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
) -> bytes:
    """(value, headers) records, keyed k<i>, stamped T0 + i."""
    encoded = [
        Record(i, T0 + i, b"k%d" % i, value, tuple(headers))
        for i, (value, headers) in enumerate(records)
    ]
    return encode_record_batch(
        encoded,
        base_offset=0,
        base_timestamp=T0,
        max_timestamp=T0 + len(records) - 1,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=base_sequence,
        attributes=attributes,
        compression=compression,
    )


def delay(ms: int) -> list[tuple[str, bytes]]:
    return [("kafkalite-delay-ms", b"%d" % ms)]


def produce(broker: Broker, records: bytes, tp: tuple[str, int] = TP):
    results, _ = broker.replica_manager.append_records({tp: records}, 1)
    return results[tp]


def log_records(broker: Broker, tp: tuple[str, int] = TP) -> list[Record]:
    partition = broker.replica_manager.partition(*tp)
    assert partition is not None
    data = partition.log.read(0, 1 << 24, partition.high_watermark)
    view = memoryview(data)
    return [
        record
        for pos, header in iter_batches(view)
        if not header.is_control  # transaction markers
        for record in decode_records(view[pos : pos + header.size])
    ]


def values(broker: Broker, tp: tuple[str, int] = TP) -> list[bytes | None]:
    return [record.value for record in log_records(broker, tp)]


def held(broker: Broker) -> int:
    return broker.replica_manager.delayed_delivery.held


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.mark.parametrize("compression", [NONE, GZIP, LZ4])
def test_mixed_batch_appends_the_undelayed_at_once_and_the_delayed_when_due(
    tmp_path: Path, clock: Clock, compression: int
) -> None:
    broker = open_broker(tmp_path, clock)
    create(broker)
    headers = [("x", b"1"), *delay(1000)]
    result = produce(
        broker,
        batch([(b"a", []), (b"late", headers), (b"b", [])], compression=compression),
    )
    assert result.error is ErrorCode.none
    assert result.base_offset == -1  # a record is held: offsets come at release
    assert values(broker) == [b"a", b"b"]
    assert held(broker) == 1

    clock.now = T0 + 999
    assert broker.replica_manager.release_delayed() == 1
    assert values(broker) == [b"a", b"b"]
    clock.now = T0 + 1000
    assert broker.replica_manager.release_delayed() == 0
    records = log_records(broker)
    assert [(r.offset, r.value) for r in records] == [(0, b"a"), (1, b"b"), (2, b"late")]
    # Key, headers and timestamp as produced.
    assert (records[2].key, records[2].headers, records[2].timestamp) == (
        b"k1",
        tuple(headers),
        T0 + 1,
    )
    broker.shutdown()


def test_topics_not_opted_in_ignore_the_headers(tmp_path: Path, clock: Clock) -> None:
    broker = open_broker(tmp_path, clock)
    create(broker, configs={})
    result = produce(broker, batch([(b"a", delay(5000))]))
    assert (result.error, result.base_offset) == (ErrorCode.none, 0)
    assert values(broker) == [b"a"]
    assert broker.replica_manager.delayed_delivery.stores == {}
    broker.shutdown()


def test_broker_default_topic_delay_and_deliver_at(tmp_path: Path, clock: Clock) -> None:
    broker = open_broker(tmp_path, clock, **{"kafkalite.delayed.delivery.enable": "true"})
    create(broker, configs={"kafkalite.delivery.delay.ms": "500"})
    deliver_at = [("kafkalite-deliver-at", b"%d" % (T0 + 200))]
    produce(broker, batch([(b"topic-delay", []), (b"at", deliver_at), (b"now", delay(0))]))
    assert values(broker) == [b"now"]
    clock.now = T0 + 200
    broker.replica_manager.release_delayed()
    assert values(broker) == [b"now", b"at"]
    clock.now = T0 + 500
    broker.replica_manager.release_delayed()
    assert values(broker) == [b"now", b"at", b"topic-delay"]
    broker.shutdown()


def test_an_undelayed_batch_of_a_plain_producer_keeps_its_offsets(
    tmp_path: Path, clock: Clock
) -> None:
    broker = open_broker(tmp_path, clock)
    create(broker)
    assert produce(broker, batch([(b"a", []), (b"b", [])])).base_offset == 0
    # An idempotent one goes through the store and is released at once: offsets known.
    result = produce(broker, batch([(b"c", []), (b"d", [])], producer_id=7, base_sequence=0))
    assert (result.error, result.base_offset) == (ErrorCode.none, 2)
    assert values(broker) == [b"a", b"b", b"c", b"d"]
    broker.shutdown()


@pytest.mark.parametrize(
    ("headers", "named"),
    [
        (delay(7 * 24 * 3600 * 1000 + 1), "kafkalite-delay-ms"),
        ([("kafkalite-deliver-at", b"%d" % (T0 + 10**12))], "kafkalite-deliver-at"),
        ([("kafkalite-delay-ms", b"-5")], "kafkalite-delay-ms"),
        ([("kafkalite-delay-ms", b"1e3")], "kafkalite-delay-ms"),
        ([*delay(1), *delay(2)], "kafkalite-delay-ms"),
        ([*delay(1), ("kafkalite-deliver-at", b"1")], "kafkalite-deliver-at"),
    ],
)
def test_bad_delays_are_refused_and_nothing_of_the_batch_is_written(
    tmp_path: Path, clock: Clock, headers: list[tuple[str, bytes]], named: str
) -> None:
    broker = open_broker(tmp_path, clock)
    create(broker)
    result = produce(broker, batch([(b"ok", []), (b"bad", headers), (b"late", delay(10))]))
    assert result.error is ErrorCode.invalid_record
    assert [e.batch_index for e in result.record_errors] == [1]
    assert named in result.record_errors[0].message
    assert values(broker) == []
    assert held(broker) == 0
    broker.shutdown()


def test_max_delay_is_a_topic_config(tmp_path: Path, clock: Clock) -> None:
    broker = open_broker(tmp_path, clock)
    create(broker, configs={**OPT_IN, "kafkalite.delayed.delivery.max.ms": "1000"})
    assert produce(broker, batch([(b"a", delay(1000))])).error is ErrorCode.none
    result = produce(broker, batch([(b"b", delay(1001))]))
    assert result.error is ErrorCode.invalid_record
    assert "kafkalite.delayed.delivery.max.ms=1000" in result.record_errors[0].message
    broker.shutdown()


def test_idempotent_retry_is_held_once(tmp_path: Path, clock: Clock) -> None:
    broker = open_broker(tmp_path, clock)
    create(broker)
    sent = batch([(b"a", delay(100)), (b"b", [])], producer_id=3, base_sequence=0)
    assert produce(broker, sent).error is ErrorCode.none
    assert produce(broker, sent).error is ErrorCode.none  # the retry
    assert held(broker) == 1
    following = batch([(b"c", [])], producer_id=3, base_sequence=2)
    assert produce(broker, following).error is ErrorCode.none
    out_of_order = batch([(b"x", [])], producer_id=3, base_sequence=9)
    assert produce(broker, out_of_order).error is ErrorCode.out_of_order_sequence_number
    clock.now = T0 + 100
    broker.replica_manager.release_delayed()
    assert values(broker) == [b"b", b"c", b"a"]
    broker.shutdown()


def txn_batch(records: Sequence[tuple[bytes, Sequence[tuple[str, bytes]]]], seq: int) -> bytes:
    return batch(records, producer_id=4, base_sequence=seq, attributes=TRANSACTIONAL_FLAG)


def end_txn(broker: Broker, commit: bool) -> ErrorCode:
    marker = EndTxnMarker(commit=commit, coordinator_epoch=0)
    return broker.replica_manager.append_txn_marker(TP, 4, 0, marker)


def test_a_transactions_records_are_released_when_it_commits(tmp_path: Path, clock: Clock) -> None:
    broker = open_broker(tmp_path, clock)
    create(broker)
    assert produce(broker, txn_batch([(b"a", delay(100)), (b"b", [])], 0)).error is ErrorCode.none
    assert produce(broker, txn_batch([(b"c", [])], 2)).error is ErrorCode.none
    clock.now = T0 + 100
    assert broker.replica_manager.release_delayed() == 3  # all wait for the commit
    assert values(broker) == []
    broker.shutdown()

    broker = open_broker(tmp_path, clock)  # the open transaction survives a restart
    assert broker.replica_manager.release_delayed() == 3
    clock.now = T0 + 50
    produce(broker, txn_batch([(b"d", delay(100))], 3))  # due at T0 + 150
    assert end_txn(broker, commit=True) is ErrorCode.none
    # Released with the commit (after its marker, at offset 0): the due ones at once.
    assert [(r.offset, r.value) for r in log_records(broker)] == [(1, b"b"), (2, b"c")]
    assert held(broker) == 2
    clock.now = T0 + 150
    broker.replica_manager.release_delayed()
    assert values(broker) == [b"b", b"c", b"a", b"d"]
    broker.shutdown()


def test_an_aborted_transactions_records_are_never_released(tmp_path: Path, clock: Clock) -> None:
    broker = open_broker(tmp_path, clock)
    create(broker)
    produce(broker, txn_batch([(b"a", delay(100)), (b"b", [])], 0))
    assert end_txn(broker, commit=False) is ErrorCode.none
    assert held(broker) == 0
    clock.now = T0 + 100
    broker.replica_manager.release_delayed()
    broker.shutdown()
    broker = open_broker(tmp_path, clock)
    assert held(broker) == 0
    broker.replica_manager.release_delayed()
    assert values(broker) == []
    assert broker.replica_manager.delayed_delivery.aborted == 0  # counted since start
    # The next transaction of the producer goes on.
    produce(broker, txn_batch([(b"c", [])], 2))
    assert end_txn(broker, commit=True) is ErrorCode.none
    assert values(broker) == [b"c"]
    broker.shutdown()


def test_held_records_survive_a_restart(tmp_path: Path, clock: Clock) -> None:
    broker = open_broker(tmp_path, clock)
    create(broker)
    produce(broker, batch([(b"a", delay(300)), (b"b", delay(100)), (b"c", [])]))
    clock.now = T0 + 100
    broker.replica_manager.release_delayed()
    broker.shutdown()

    broker = open_broker(tmp_path, clock)
    assert held(broker) == 1
    assert values(broker) == [b"c", b"b"]
    clock.now = T0 + 300
    assert broker.replica_manager.release_delayed() == 0
    broker.shutdown()
    broker = open_broker(tmp_path, clock)  # released ones stay released
    assert held(broker) == 0
    assert values(broker) == [b"c", b"b", b"a"]
    broker.shutdown()


def test_a_release_interrupted_before_the_partition_append_happens_once(
    tmp_path: Path, clock: Clock
) -> None:
    """The broker dies between the intent and the partition append: held again on restart."""
    broker = open_broker(tmp_path, clock)
    create(broker)
    produce(broker, batch([(b"a", delay(100)), (b"b", delay(100))]))
    store = broker.replica_manager.delayed_delivery.stores[TP]
    clock.now = T0 + 100
    taken = store.take_due(clock.now, 10)
    store.write_intent(TP, 0, sorted(offset for _, offset in taken), clock.now)
    broker.shutdown()  # (the in-memory state is lost as in a crash; the files are what count)

    broker = open_broker(tmp_path, clock)
    assert held(broker) == 2
    broker.replica_manager.release_delayed()
    assert values(broker) == [b"a", b"b"]
    broker.shutdown()
    broker = open_broker(tmp_path, clock)
    broker.replica_manager.release_delayed()
    assert values(broker) == [b"a", b"b"]
    broker.shutdown()


def test_a_release_interrupted_after_the_partition_append_is_not_repeated(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker dies after the partition append, before anything else is written."""
    broker = open_broker(tmp_path, clock)
    create(broker)
    produce(broker, batch([(b"a", delay(100))]))
    store = broker.replica_manager.delayed_delivery.stores[TP]
    monkeypatch.setattr(store, "confirm", lambda offsets: None)  # forgotten in the crash
    clock.now = T0 + 100
    broker.replica_manager.release_delayed()
    broker.shutdown()

    broker = open_broker(tmp_path, clock)
    assert held(broker) == 0
    broker.replica_manager.release_delayed()
    assert values(broker) == [b"a"]
    broker.shutdown()


def test_a_refused_release_is_cancelled_and_retried(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = open_broker(tmp_path, clock)
    create(broker)
    produce(broker, batch([(b"a", delay(100))]))
    partition = broker.replica_manager.partition(*TP)
    assert partition is not None
    original = partition.append_records_to_leader
    monkeypatch.setattr(
        partition, "append_records_to_leader", lambda *a, **k: ErrorCode.not_leader_or_follower
    )
    clock.now = T0 + 100
    assert broker.replica_manager.release_delayed() == 1
    monkeypatch.setattr(partition, "append_records_to_leader", original)
    broker.shutdown()  # the cancellation is in the store: a restart holds it still

    broker = open_broker(tmp_path, clock)
    assert held(broker) == 1
    # Others appended meanwhile at the offset the cancelled intent named change nothing.
    assert produce(broker, batch([(b"x", [])])).error is ErrorCode.none
    assert broker.replica_manager.release_delayed() == 0
    assert values(broker) == [b"x", b"a"]
    broker.shutdown()


def test_released_prefix_of_the_store_is_deleted(tmp_path: Path, clock: Clock) -> None:
    broker = open_broker(tmp_path, clock)
    create(broker)
    produce(broker, batch([(b"a", delay(100))]))  # store offsets 0 (its dues) and 1
    produce(broker, batch([(b"b", delay(200))]))  # 2 and 3
    store = broker.replica_manager.delayed_delivery.stores[TP]
    clock.now = T0 + 100
    broker.replica_manager.release_delayed()
    assert store.log.log_start_offset == 2  # "b" is held still, from its dues on
    clock.now = T0 + 200
    broker.replica_manager.release_delayed()
    assert store.log.log_start_offset == store.log.log_end_offset
    broker.shutdown()


def test_deleting_the_topic_drops_its_held_records(tmp_path: Path, clock: Clock) -> None:
    broker = open_broker(tmp_path, clock)
    create(broker)
    produce(broker, batch([(b"a", delay(100))]))
    partition = broker.replica_manager.partition(*TP)
    assert partition is not None
    directory = store_dir(partition.log.dir)
    assert directory.is_dir()
    broker.admin_manager.delete_topic("d")
    assert held(broker) == 0
    assert not directory.exists()
    clock.now = T0 + 100
    assert broker.replica_manager.release_delayed() == 0
    broker.shutdown()


def test_held_records_move_with_their_partition_to_another_log_dir(
    tmp_path: Path, clock: Clock
) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    broker = open_broker(tmp_path, clock, **{"log.dirs": ",".join(map(str, dirs))})
    create(broker)
    produce(broker, batch([(b"a", delay(100))]))
    partition = broker.replica_manager.partition(*TP)
    assert partition is not None
    destination = dirs[1] if partition.log.dir.parent == dirs[0] else dirs[0]
    assert alter_log_dir(broker, destination) == ErrorCode.none
    assert store_dir(partition.log.dir).parent.parent == destination
    clock.now = T0 + 100
    assert broker.replica_manager.release_delayed() == 0
    assert values(broker) == [b"a"]
    broker.shutdown()


def alter_log_dir(broker: Broker, destination: Path) -> ErrorCode:
    from kafkalite.apis.alter_replica_log_dirs import _move

    ctx = RequestContext(broker, 34, 2, correlation_id=1, client_id="tests")
    manager = broker.replica_manager.log_manager.manager_for_dir(str(destination))
    return _move(ctx, manager, *TP)


def test_metrics_show_held_records_releases_and_lateness(tmp_path: Path, clock: Clock) -> None:
    from kafkalite.metrics.collector import BrokerCollector

    broker = open_broker(tmp_path, clock)
    create(broker)
    produce(broker, batch([(b"a", delay(100)), (b"b", delay(300))]))
    clock.now = T0 + 150
    broker.replica_manager.release_delayed()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in BrokerCollector(broker, "PLAINTEXT", {}).collect()
        if family.name.startswith("kafkalite_delayeddelivery_")
        for s in family.samples
    }
    labels = (("partition", "0"), ("topic", "d"))
    assert samples[("kafkalite_delayeddelivery_heldrecords", labels)] == 1
    assert samples[("kafkalite_delayeddelivery_nextduetimestampms", labels)] == T0 + 300
    assert samples[("kafkalite_delayeddelivery_released_total", ())] == 1
    assert samples[("kafkalite_delayeddelivery_dropped_total", ())] == 0
    assert samples[("kafkalite_delayeddelivery_latenessms_count", ())] == 1
    assert samples[("kafkalite_delayeddelivery_latenessms_sum", ())] == 50
    broker.shutdown()


def test_store_segments_of_released_records_go_and_a_restart_still_finds_the_held(
    tmp_path: Path, clock: Clock
) -> None:
    broker = open_broker(tmp_path, clock)
    create(broker)
    produce(broker, batch([(b"a", delay(100))]))
    store = broker.replica_manager.delayed_delivery.stores[TP]
    store.log.roll(clock.now)
    produce(broker, batch([(b"b", delay(300)), (b"c", delay(200))]))
    store.log.roll(clock.now)
    clock.now = T0 + 200
    broker.replica_manager.release_delayed()  # "a" and "c"; "b" is held
    assert [segment.base_offset for segment in store.log.segments] == [2, 5]
    broker.shutdown()

    broker = open_broker(tmp_path, clock)
    assert held(broker) == 1
    clock.now = T0 + 300
    broker.replica_manager.release_delayed()
    assert values(broker) == [b"a", b"c", b"b"]
    broker.shutdown()


def test_records_due_together_go_in_due_order_in_batches_the_topic_takes(
    tmp_path: Path, clock: Clock
) -> None:
    broker = open_broker(tmp_path, clock)
    create(broker, configs={**OPT_IN, "max.message.bytes": "2000"})
    value = b"v" * 300
    for due in (300, 200):
        produce(broker, batch([(value + b"%d" % i, delay(due)) for i in range(5)]))
    clock.now = T0 + 300
    broker.replica_manager.release_delayed()
    assert values(broker) == [value + b"%d" % i for _ in (200, 300) for i in range(5)]
    partition = broker.replica_manager.partition(*TP)
    assert partition is not None
    data = partition.log.read(0, 1 << 20, partition.high_watermark)
    sizes = [header.size for _, header in iter_batches(data)]
    assert len(sizes) > 1 and max(sizes) <= 2000
    broker.shutdown()


def test_the_store_follows_the_topics_config_changes(tmp_path: Path, clock: Clock) -> None:
    broker = open_broker(tmp_path, clock)
    create(broker)
    assert produce(broker, batch([(b"a", delay(100))])).error is ErrorCode.none
    broker.metadata.set_topic_configs("d", {**OPT_IN, "cleanup.policy": "compact"})
    keyless = encode_record_batch(
        [Record(0, T0, None, b"x", tuple(delay(100)))],
        base_offset=0,
        base_timestamp=T0,
        max_timestamp=T0,
    )
    result = produce(broker, keyless)  # refused as the compacted topic would
    assert result.error is ErrorCode.invalid_record
    assert held(broker) == 1
    broker.shutdown()
