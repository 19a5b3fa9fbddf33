"""RemoteLogManager on a real log with an in-memory store: copy, crash safety, an unreachable
store, local and remote retention, reads below the local log start and ListOffsets' tiers.
(The same against a real S3 server: tests/integration/test_e2e_tiered_storage.py.)"""

from __future__ import annotations

import logging
import shutil
import uuid
from pathlib import Path

import pytest
import trio
from kio.schema.errors import ErrorCode
from partition_fixtures import batch, open_partition, state

from kafkalite.broker.delayed import FetchInfo
from kafkalite.broker.partition import (
    EARLIEST,
    EARLIEST_LOCAL,
    EARLIEST_PENDING_UPLOAD,
    LATEST_TIERED,
    Partition,
)
from kafkalite.broker.remote_log_manager import DELETIONS_DIR, RemoteLogManager
from kafkalite.broker.topic_config import (
    InvalidConfig,
    check_remote_storage_kept,
    validate_topic_configs,
)
from kafkalite.config import BrokerConfig
from kafkalite.metrics import remote_storage
from kafkalite.storage.log import LogConfig
from kafkalite.storage.records import encode_batch
from kafkalite.storage.remote import keys
from kafkalite.storage.remote.metadata import (
    COPY_SEGMENT_FINISHED,
    COPY_SEGMENT_STARTED,
    DELETE_SEGMENT_FINISHED,
    DELETE_SEGMENT_STARTED,
    METADATA_FILE,
    RemoteLogSegmentMetadata,
    RemoteLogSegments,
    event,
    leader_epoch_record,
)
from kafkalite.storage.remote.s3_storage import RemotePartition, RemoteStorageError, SegmentFiles

SEGMENTS = 6  # one batch each; the last stays active


class MemoryStore:
    """The RemoteStorageManager's methods over a dict; `fail_after` PUTs then it fails."""

    def __init__(self) -> None:
        self.objects: dict[tuple[uuid.UUID, str], bytes] = {}
        self.fail_after: int | None = None

    def _check(self) -> None:
        if self.fail_after is not None:
            if self.fail_after <= 0:
                raise RemoteStorageError("connection refused")
            self.fail_after -= 1

    def copy_log_segment_data(
        self,
        partition: RemotePartition,
        base_offset: int,
        segment_id: uuid.UUID,
        segment: SegmentFiles,
        log_size: int,
    ) -> None:
        for suffix, path in segment.files.items():
            self._check()
            self.objects[segment_id, suffix] = Path(path).read_bytes()
        for suffix, data in segment.data.items():
            self._check()
            self.objects[segment_id, suffix] = data

    def fetch(
        self,
        partition: RemotePartition,
        base_offset: int,
        segment_id: uuid.UUID,
        suffix: str,
        start: int = 0,
        end: int | None = None,
    ) -> bytes:
        self._check()
        data = self.objects[segment_id, suffix]
        return data[start : None if end is None else end + 1]

    def delete_log_segment_data(
        self, partition: RemotePartition, base_offset: int, segment_id: uuid.UUID
    ) -> None:
        self._check()
        for key in [key for key in self.objects if key[0] == segment_id]:
            del self.objects[key]

    def segment_ids(self) -> set[uuid.UUID]:
        return {segment_id for segment_id, _ in self.objects}


def _tiered(**fields: int) -> LogConfig:
    return LogConfig(
        **{
            "segment_bytes": 100,
            "remote_storage_enable": True,
            "local_retention_bytes": 0,
            **fields,
        }
    )  # type: ignore[arg-type]


def _leader(tmp_path: Path, config: LogConfig) -> tuple[Partition, list[bytes]]:
    partition = open_partition(tmp_path, config)
    partition.make_leader(state(), 0)
    written = []
    for _ in range(SEGMENTS):
        partition.append_records_to_leader(batch(1), 1, min_isr=1, now_ms=1_000)
        written.append(partition.log.read(partition.log_end_offset - 1, 1 << 20, 1 << 40))
    assert len(partition.log.segments) == SEGMENTS
    return partition, written


def _manager(partition: Partition, store: MemoryStore) -> RemoteLogManager:
    config = BrokerConfig({"broker.id": "1"})
    return RemoteLogManager(config, lambda: [partition], lambda: 1_000, storage=store)  # type: ignore[arg-type]


def _read(
    manager: RemoteLogManager, partition: Partition, offset: int, log_start: int = 0
) -> bytes:
    result = partition.fetch_records(offset, 1 << 20)
    assert result.error is ErrorCode.none and result.remote_fetch is not None
    info = FetchInfo(partition.topic, 0, offset, 1 << 20)
    (answer,) = trio.run(manager.read_remote, [info], [result], lambda tp: partition)
    assert answer.error is ErrorCode.none and answer.remote_fetch is None
    assert answer.log_start_offset == log_start
    return answer.records


def test_closed_segments_are_copied_then_deleted_locally_and_read_back(tmp_path: Path) -> None:
    partition, written = _leader(tmp_path, _tiered())
    store = MemoryStore()
    manager = _manager(partition, store)
    assert partition.log.apply_retention(1_000) == 0  # nothing uploaded: nothing deleted
    assert partition.fetch_offset_for_timestamp(EARLIEST_PENDING_UPLOAD)[1][0] == 0

    trio.run(manager.run_once)

    remote = partition.log.remote
    assert remote is not None
    assert [m.start_offset for m in remote.copied] == list(range(SEGMENTS - 1))
    assert len(store.segment_ids()) == SEGMENTS - 1
    # Producer snapshots: for the segments whose snapshot the broker still keeps (2 newest).
    suffixes = {suffix for _, suffix in store.objects} - {keys.PRODUCER_SNAPSHOT}
    assert suffixes == {keys.LOG, keys.OFFSET_INDEX, keys.TIME_INDEX, keys.LEADER_EPOCH}
    assert partition.log.apply_retention(1_000) == SEGMENTS - 1
    assert partition.log_start_offset == SEGMENTS - 1
    for offset in range(SEGMENTS - 1):
        assert _read(manager, partition, offset) == written[offset]
    # The metadata file survives a restart: the same remote segments are served.
    assert RemoteLogSegments.load(partition.log.dir).copied == remote.copied
    # ListOffsets across tiers.
    assert partition.fetch_offset_for_timestamp(EARLIEST)[1][0] == 0
    assert partition.fetch_offset_for_timestamp(EARLIEST_LOCAL)[1][0] == SEGMENTS - 1
    assert partition.fetch_offset_for_timestamp(LATEST_TIERED)[1][0] == SEGMENTS - 2
    assert partition.fetch_offset_for_timestamp(EARLIEST_PENDING_UPLOAD)[1][0] == SEGMENTS - 1
    # A follower (Kafka's fetchEarliestOffset) is told the log start across tiers too; it
    # asks for the local log start (EARLIEST_LOCAL) when rebuilding from the remote tier.
    assert partition.fetch_offset_for_timestamp(EARLIEST, from_client=False)[1][0] == 0


def test_tier_offsets_of_a_topic_without_remote_storage_are_unknown(tmp_path: Path) -> None:
    partition, _ = _leader(tmp_path, LogConfig(segment_bytes=100))
    for spec in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        assert partition.fetch_offset_for_timestamp(spec) == (ErrorCode.none, (-1, -1, -1))


def test_unreachable_store_keeps_every_local_segment_then_uploads_resume(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    partition, written = _leader(tmp_path, _tiered())
    store = MemoryStore()
    store.fail_after = 0
    manager = _manager(partition, store)
    with caplog.at_level(logging.INFO):
        trio.run(manager.run_once)
        trio.run(manager.run_once)
        assert partition.log.apply_retention(1_000) == 0
    # The first round's copy failed; the second stopped at deleting that copy's orphan.
    assert manager.copy_errors == 1
    assert len(partition.log.remote.orphans) == 1  # type: ignore[union-attr]
    assert len(partition.log.segments) == SEGMENTS
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert sum("remote storage failed" in w for w in warnings) == 1  # once per outage
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert sum("not yet in remote storage: kept" in i for i in infos) == 1

    store.fail_after = None
    trio.run(manager.run_once)
    assert partition.log.apply_retention(1_000) == SEGMENTS - 1
    assert _read(manager, partition, 0) == written[0]
    # The copy that failed was started: its (empty) orphan was deleted.
    assert partition.log.remote.orphans == []  # type: ignore[union-attr]
    assert len(store.segment_ids()) == SEGMENTS - 1


class OnePartitionDown(MemoryStore):
    """Refuses every request about one partition (its objects' bucket or prefix is down)."""

    def __init__(self, down: uuid.UUID) -> None:
        super().__init__()
        self.down = down

    def copy_log_segment_data(self, partition: RemotePartition, *args: object) -> None:  # type: ignore[override]
        if partition.topic_id == self.down:
            raise RemoteStorageError("access denied")
        super().copy_log_segment_data(partition, *args)  # type: ignore[arg-type]

    def delete_log_segment_data(self, partition: RemotePartition, *args: object) -> None:  # type: ignore[override]
        if partition.topic_id == self.down:
            raise RemoteStorageError("access denied")
        super().delete_log_segment_data(partition, *args)  # type: ignore[arg-type]


def test_one_partition_failing_while_another_uploads_warns_once_per_outage(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    failing, _ = _leader(tmp_path / "a", _tiered())
    working, _ = _leader(tmp_path / "b", _tiered())
    store = OnePartitionDown(failing.topic_id)
    config = BrokerConfig({"broker.id": "1"})
    manager = RemoteLogManager(config, lambda: [failing, working], lambda: 1_000, storage=store)  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO):
        for _ in range(3):
            trio.run(manager.run_once)
    messages = [r.getMessage() for r in caplog.records]
    # Before, the working partition's pass said "reachable again" and the next failure warned anew.
    assert sum("remote storage failed" in m for m in messages) == 1
    assert not any("reachable again" in m for m in messages)
    assert len(store.segment_ids()) == SEGMENTS - 1  # the working partition's, all copied


def test_a_copy_interrupted_midway_is_never_served_and_is_copied_again(tmp_path: Path) -> None:
    partition, written = _leader(tmp_path, _tiered())
    store = MemoryStore()
    store.fail_after = 2  # the first segment's .log and .index, then the store fails
    trio.run(_manager(partition, store).run_once)
    half = RemoteLogSegments.load(partition.log.dir)  # as a restarted broker reads it
    assert [m.state for m in half.segments.values()] == [COPY_SEGMENT_STARTED]
    assert half.copied == [] and half.log_start_offset is None and half.copied_end == -1
    orphan = next(iter(half.segments))
    assert store.segment_ids() == {orphan}

    partition.log.remote = half
    store.fail_after = None
    manager = _manager(partition, store)
    trio.run(manager.run_once)
    assert orphan not in store.segment_ids()
    assert len(store.segment_ids()) == SEGMENTS - 1
    assert partition.log.apply_retention(1_000) == SEGMENTS - 1
    assert _read(manager, partition, 0) == written[0]


def test_retention_bytes_deletes_the_oldest_remote_segments(tmp_path: Path) -> None:
    partition, _ = _leader(tmp_path, _tiered())
    store = MemoryStore()
    manager = _manager(partition, store)
    trio.run(manager.run_once)
    size = partition.log.segments[0].size
    # The whole log (5 remote segments, 1 local) may hold 3 segments' bytes.
    partition.log.update_config(_tiered(retention_bytes=3 * size))
    trio.run(manager.run_once)
    remote = partition.log.remote
    assert remote is not None
    assert [m.start_offset for m in remote.copied] == [3, 4]
    assert len(store.segment_ids()) == 2
    assert partition.fetch_offset_for_timestamp(EARLIEST)[1][0] == 3
    partition.log.apply_retention(1_000)
    assert partition.fetch_records(2, 1 << 20).error is ErrorCode.offset_out_of_range


def test_delete_records_moves_the_log_start_across_tiers(tmp_path: Path) -> None:
    partition, written = _leader(tmp_path, _tiered())
    store = MemoryStore()
    manager = _manager(partition, store)
    trio.run(manager.run_once)
    partition.log.apply_retention(1_000)
    assert partition.log_start_offset == SEGMENTS - 1  # the local log start

    assert partition.delete_records_on_leader(2) == (ErrorCode.none, 2)
    assert partition.fetch_offset_for_timestamp(EARLIEST)[1][0] == 2
    assert partition.low_watermark(()) == 2
    assert partition.fetch_records(1, 1 << 20).error is ErrorCode.offset_out_of_range
    assert _read(manager, partition, 2, log_start=2) == written[2]
    # Durable, and the remote segments wholly below it are deleted by the next task run.
    assert RemoteLogSegments.load(partition.log.dir).log_start_offset == 2
    trio.run(manager.run_once)
    remote = partition.log.remote
    assert remote is not None
    assert [m.start_offset for m in remote.copied] == [2, 3, 4]
    assert len(store.segment_ids()) == 3


def test_deleting_the_topic_deletes_its_remote_objects(tmp_path: Path) -> None:
    partition, _ = _leader(tmp_path, _tiered())
    store = MemoryStore()
    manager = _manager(partition, store)
    trio.run(manager.run_once)
    assert len(store.segment_ids()) == SEGMENTS - 1
    manager.on_topic_partition_deleted(partition)
    store.fail_after = 1  # the store fails midway: the rest goes on the next run
    trio.run(manager.run_once)
    assert len(store.segment_ids()) == SEGMENTS - 2
    store.fail_after = None
    trio.run(manager.run_once)
    assert store.objects == {}


def test_a_restart_before_the_next_run_still_deletes_a_deleted_topics_objects(
    tmp_path: Path,
) -> None:
    partition, _ = _leader(tmp_path, _tiered())
    store = MemoryStore()
    trio.run(_manager(partition, store).run_once)
    assert len(store.segment_ids()) == SEGMENTS - 1
    _manager(partition, store).on_topic_partition_deleted(partition)
    shutil.rmtree(partition.log.dir)  # the log manager removes the partition's directory
    # The broker stops here; after its restart a new manager finds what is left to delete.
    config = BrokerConfig({"broker.id": "1", "log.dirs": str(partition.log.dir.parent)})
    restarted = RemoteLogManager(config, lambda: [], lambda: 1_000, storage=store)  # type: ignore[arg-type]
    trio.run(restarted.run_once)
    assert store.objects == {}
    assert list((partition.log.dir.parent / DELETIONS_DIR).iterdir()) == []


def test_remote_log_manager_metrics_have_kafkas_names(tmp_path: Path) -> None:
    partition, written = _leader(tmp_path, _tiered())
    store = MemoryStore()
    manager = _manager(partition, store)

    def samples() -> dict[str, float]:
        return {s.name: s.value for f in remote_storage.collect(manager) for s in f.samples}

    closed = sum(segment.size for segment in partition.log.segments[:-1])
    assert samples()["kafka_server_brokertopicmetrics_remotecopylagbytes"] == closed
    trio.run(manager.run_once)
    partition.log.apply_retention(1_000)
    _read(manager, partition, 0)
    assert samples() == {
        "kafka_server_brokertopicmetrics_remotecopybytes_total": closed,
        "kafka_server_brokertopicmetrics_remotefetchbytes_total": len(written[0]),
        "kafka_server_brokertopicmetrics_remotecopyerrors_total": 0,
        "kafka_server_brokertopicmetrics_remotefetcherrors_total": 0,
        "kafka_server_brokertopicmetrics_remotecopylagbytes": 0,
        # Per topic (labelled): the copied segments and their bytes (KIP-963).
        "kafka_server_brokertopicmetrics_remotelogsizebytes": closed,
        "kafka_server_brokertopicmetrics_remotelogmetadatacount": SEGMENTS - 1,
    }


def test_offset_for_leader_epoch_sees_the_epochs_of_the_remote_tier(tmp_path: Path) -> None:
    partition = open_partition(tmp_path, _tiered())
    for epoch in range(3):  # epoch e: offsets 2e and 2e+1, a segment each
        partition.make_leader(state(epoch=epoch), 0)
        for _ in range(2):
            partition.append_records_to_leader(batch(1), 1, min_isr=1, now_ms=1_000)
    trio.run(_manager(partition, MemoryStore()).run_once)
    partition.log.apply_retention(1_000)
    assert partition.log_start_offset == 5
    assert [e.epoch for e in partition.log.leader_epoch_cache.entries] == [2]
    assert partition.last_offset_for_leader_epoch(-1, 0) == (ErrorCode.none, 0, 2)
    assert partition.last_offset_for_leader_epoch(-1, 1) == (ErrorCode.none, 1, 4)
    assert partition.last_offset_for_leader_epoch(-1, 2) == (ErrorCode.none, 2, 6)


def test_list_offsets_by_timestamp_searches_the_remote_tier_first(tmp_path: Path) -> None:
    partition = open_partition(tmp_path, _tiered())
    partition.make_leader(state(), 0)
    for i in range(SEGMENTS):  # offsets 2i and 2i+1, both at 10_000i + 1_000
        records = [(None, b"a"), (None, b"b")]
        partition.append_records_to_leader(
            encode_batch(records, timestamp=10_000 * i + 1_000), 1, min_isr=1, now_ms=1_000
        )
    manager = _manager(partition, MemoryStore())
    trio.run(manager.run_once)
    partition.log.apply_retention(1_000)
    assert partition.log_start_offset == 2 * (SEGMENTS - 1)

    def lookup(timestamp: int) -> tuple[int, int, int] | None:
        return trio.run(manager.find_offset_by_timestamp, partition, timestamp)

    assert lookup(0) == (0, 1_000, 0)
    assert lookup(1_000) == (0, 1_000, 0)
    assert lookup(1_001) == (2, 11_000, 0)
    assert lookup(31_001) == (8, 41_000, 0)
    assert lookup(41_001) is None  # past the remote tier: the local segments answer
    assert partition.fetch_offset_for_timestamp(41_001)[1][0] == 10


@pytest.mark.parametrize(
    ("configs", "refusal"),
    [
        ({"local.retention.ms": "1000", "retention.ms": "10000"}, None),
        ({"local.retention.bytes": "-2", "retention.bytes": "10"}, None),
        ({"local.retention.bytes": "1000", "retention.bytes": "-1"}, None),
        ({"local.retention.ms": "20000", "retention.ms": "10000"}, "must not be more than"),
        ({"local.retention.bytes": "-1", "retention.bytes": "10"}, "must not be -1"),
        ({"cleanup.policy": "compact"}, "cleanup.policy=delete"),
        ({"remote.log.copy.disable": "true", "local.retention.ms": "-2"}, None),
        (
            {
                "remote.log.copy.disable": "true",
                "local.retention.bytes": "5",
                "retention.bytes": "5",
            },
            None,
        ),
        (
            {"remote.log.copy.disable": "true", "local.retention.ms": "10", "retention.ms": "20"},
            "the `local.retention.ms` and `retention.ms` must be set to the identical value",
        ),
    ],
)
def test_remote_storage_topic_configs_are_checked_as_kafka_does(
    configs: dict[str, str], refusal: str | None
) -> None:
    broker = BrokerConfig(
        {"remote.log.storage.system.enable": "true", "rsm.config.storage.s3.bucket.name": "b"}
    )
    tiered = {"remote.storage.enable": "true", **configs}
    if refusal is None:
        assert validate_topic_configs(tiered, broker) == tiered
        return
    with pytest.raises(InvalidConfig, match=refusal):
        validate_topic_configs(tiered, broker)
    validate_topic_configs(configs, broker)  # without remote storage: no such rule


def test_turning_remote_storage_off_needs_delete_on_disable_as_kafka() -> None:
    tiered = {"remote.storage.enable": "true"}
    with pytest.raises(InvalidConfig, match="without deleting remote data"):
        check_remote_storage_kept(tiered, {"remote.storage.enable": "false"})
    off = {"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"}
    check_remote_storage_kept(tiered, off)
    check_remote_storage_kept({}, {"remote.storage.enable": "false"})  # never was on


def test_copy_disabled_uploads_nothing_more_and_retention_spans_both_tiers(
    tmp_path: Path,
) -> None:
    partition, written = _leader(tmp_path, _tiered())
    store = MemoryStore()
    manager = _manager(partition, store)
    trio.run(manager.run_once)  # segments 0-4 copied
    size = partition.log.segments[0].size
    assert partition.log.apply_retention(1_000) == SEGMENTS - 1  # and deleted locally
    partition.log.update_config(_tiered(remote_log_copy_disable=True, local_retention_bytes=-2))
    for _ in range(3):  # segments 6-8 (5 closes)
        partition.append_records_to_leader(batch(1), 1, min_isr=1, now_ms=1_000)
    trio.run(manager.run_once)
    remote = partition.log.remote
    assert remote is not None and [m.start_offset for m in remote.copied] == [0, 1, 2, 3, 4]
    assert manager.copy_lag_bytes() == 0  # nothing is to be copied
    assert partition.log.apply_retention(1_000) == 0  # retention.bytes unlimited: all kept
    assert _read(manager, partition, 2) == written[2]  # the remote data stays readable

    # retention.bytes (local.retention.bytes -2): local segments go, uploaded or not, and
    # the log start across tiers follows: the older remote segments are deleted too.
    partition.log.update_config(
        _tiered(remote_log_copy_disable=True, local_retention_bytes=-2, retention_bytes=3 * size)
    )
    assert partition.log.apply_retention(1_000) > 0
    assert partition.log_start_offset == partition.fetch_offset_for_timestamp(EARLIEST)[1][0]
    trio.run(manager.run_once)
    assert [m.start_offset for m in remote.copied] == []
    assert store.segment_ids() == set()


def test_turning_remote_storage_off_deletes_the_remote_data_even_across_a_crash(
    tmp_path: Path,
) -> None:
    partition, _ = _leader(tmp_path, _tiered())
    store = MemoryStore()
    manager = _manager(partition, store)
    trio.run(manager.run_once)
    partition.log.apply_retention(1_000)
    local_start = partition.log_start_offset
    assert local_start == SEGMENTS - 1 and len(store.segment_ids()) == SEGMENTS - 1
    off = LogConfig(segment_bytes=100, remote_log_delete_on_disable=True)
    partition.log.update_config(off)
    # Served from the local log only at once: the remote tier is on its way out.
    assert partition.fetch_offset_for_timestamp(EARLIEST)[1][0] == local_start
    store.fail_after = 3  # the deletion stops midway (the broker dies, say)
    trio.run(manager.run_once)
    assert 0 < len(store.segment_ids()) < SEGMENTS - 1

    reopened = open_partition(tmp_path, off)  # the metadata says what is left to delete
    reopened.make_leader(state(), 0)
    assert reopened.log.remote is not None
    store.fail_after = None
    trio.run(_manager(reopened, store).run_once)
    assert store.segment_ids() == set()
    assert reopened.log.remote is None
    assert not (reopened.log.dir / "remote-log-segment-metadata").exists()
    assert reopened.fetch_offset_for_timestamp(EARLIEST)[1][0] == local_start


class PruningStore(MemoryStore):
    """While segment 3 is copied, the log's producer snapshots are pruned (as a roll prunes
    all but the newest two); reading a file fails as S3's manager's reads do."""

    def __init__(self, log_dir: Path) -> None:
        super().__init__()
        self.log_dir = log_dir

    def copy_log_segment_data(self, *args: object) -> None:
        if args[1] == 3:
            for snapshot in self.log_dir.glob("*.snapshot"):
                snapshot.unlink()
        try:
            super().copy_log_segment_data(*args)  # type: ignore[arg-type]
        except OSError as exc:
            raise RemoteStorageError(str(exc)) from exc


def test_a_producer_snapshot_pruned_during_the_upload_does_not_fail_it(tmp_path: Path) -> None:
    partition, _ = _leader(tmp_path, _tiered())
    store = PruningStore(partition.log.dir)
    manager = _manager(partition, store)
    trio.run(manager.run_once)
    assert manager.copy_errors == 0
    assert len(store.segment_ids()) == SEGMENTS - 1
    remote = partition.log.remote
    assert remote is not None
    # Segment 3's end snapshot was read when its copy was planned (segment 4's was gone).
    with_snapshot = [m.start_offset for m in remote.copied if keys.PRODUCER_SNAPSHOT in m.suffixes]
    assert with_snapshot == [3]


def test_a_tiered_follower_following_the_leaders_local_start_keeps_the_remote_start(
    tmp_path: Path,
) -> None:
    """The leader's fetch answers carry its LOCAL log start: a follower moves its own local
    start there, but not the log start across tiers (that made a new leader delete the
    old leader's remote segments as 'below the log start')."""
    partition, _ = _leader(tmp_path, _tiered())
    trio.run(_manager(partition, MemoryStore()).run_once)
    partition.make_follower(state(leader=2, epoch=1, replicas=(1, 2)))
    partition.update_follower_high_watermark(SEGMENTS)
    partition.maybe_increment_log_start_offset(SEGMENTS - 1)
    remote = partition.log.remote
    assert remote is not None
    assert partition.log_start_offset == SEGMENTS - 1
    assert (remote.log_start_floor, remote.log_start_offset) == (0, 0)


def test_the_segment_holding_the_copied_end_is_copied_whole(tmp_path: Path) -> None:
    """A new leader's segments need not start where the old leader's did: the one that
    straddles the copied end is a candidate (as Kafka), so no offset is left uncopied."""
    partition = open_partition(tmp_path, _tiered())
    partition.make_leader(state(), 0)
    for _ in range(3):
        partition.append_records_to_leader(batch(3), 1, min_isr=1, now_ms=1_000)
    remote = partition.log.remote
    assert remote is not None
    remote.copied_end = 1  # the old leader's segment ended inside this leader's first one
    candidates = _manager(partition, MemoryStore()).copy_candidates(partition, remote)
    assert [segment.base_offset for segment in candidates] == [0, 3]


class ReplayedTopic:
    """The metadata manager without the network: `publish` writes to one list of records,
    which the partition's list replays as every broker's consumer does."""

    def __init__(self, remote: RemoteLogSegments) -> None:
        self.remote = remote
        self.records: list[dict[str, object]] = []

    def user(self, partition: Partition) -> tuple[uuid.UUID, int]:
        return partition.topic_id, partition.index

    def ready(self, partition: Partition) -> bool:
        return True

    async def publish(self, user: object, records: list[dict[str, object]]) -> None:
        self.records.extend(records)
        self.remote.apply(records)


class ReelectingStore(MemoryStore):
    """Its first upload completes while the controller elects a new leader epoch."""

    def __init__(self, partition: Partition, new_leader: int) -> None:
        super().__init__()
        self.partition, self.new_leader = partition, new_leader

    def copy_log_segment_data(self, *args: object) -> None:
        super().copy_log_segment_data(*args)  # type: ignore[arg-type]
        if self.partition.leader_epoch == 0:
            self.partition.make_leader(state(leader=self.new_leader, epoch=1), 0)


def _replicated(tmp_path: Path, store_of: object) -> tuple[Partition, ReplayedTopic, object]:
    partition, _ = _leader(tmp_path, _tiered())
    remote = RemoteLogSegments(tmp_path / "replicated")
    remote.sink = lambda records: None
    partition.log.remote = remote
    topic = ReplayedTopic(remote)
    store = store_of(partition)  # type: ignore[operator]
    manager = RemoteLogManager(
        BrokerConfig({"broker.id": "1"}),
        lambda: [partition],
        lambda: 1_000,
        storage=store,
        metadata_manager=topic,  # type: ignore[arg-type]
    )
    return partition, topic, (manager, store)


def _events(records: list[dict[str, object]]) -> list[tuple[object, object]]:
    return [(record["event"], record["leader_epoch"]) for record in records]


@pytest.mark.parametrize("new_leader", [1, 2])  # re-elected here, or another broker elected
def test_a_copy_is_abandoned_when_the_leader_epoch_moves_during_the_upload(
    tmp_path: Path, new_leader: int
) -> None:
    """COPY_SEGMENT_FINISHED is not written for the old epoch: the segment stays an orphan
    in the list, never served, and its uploaded objects are deleted."""
    partition, topic, (manager, store) = _replicated(
        tmp_path, lambda p: ReelectingStore(p, new_leader)
    )
    remote = partition.log.remote
    assert isinstance(manager, RemoteLogManager) and isinstance(store, MemoryStore)
    assert remote is not None
    trio.run(manager.run_once)
    assert _events(topic.records) == [("LEADER_EPOCH", 0), (COPY_SEGMENT_STARTED, 0)]
    assert store.segment_ids() == set()
    assert remote.copied == [] and len(remote.orphans) == 1
    if new_leader != 1:
        return
    trio.run(manager.run_once)  # the task of epoch 1 deletes the orphan and copies again
    assert _events(topic.records)[2:5] == [
        ("LEADER_EPOCH", 1),
        (DELETE_SEGMENT_STARTED, 1),
        (DELETE_SEGMENT_FINISHED, 1),
    ]
    assert len(topic.records) == 5 + 2 * (SEGMENTS - 1)
    assert remote.orphans == [] and len(remote.copied) == SEGMENTS - 1
    assert store.segment_ids() == {m.segment_id for m in remote.copied}


def test_a_deposed_leader_unaware_of_the_election_writes_nothing(tmp_path: Path) -> None:
    """Partitioned from ZooKeeper, it still thinks it leads epoch 0, but its list replayed
    the new leader's epoch 1: its task writes nothing and uploads nothing."""
    partition, topic, (manager, store) = _replicated(tmp_path, lambda p: MemoryStore())
    assert isinstance(manager, RemoteLogManager) and isinstance(store, MemoryStore)
    assert partition.log.remote is not None
    partition.log.remote.apply([leader_epoch_record(1)])
    trio.run(manager.run_once)
    assert topic.records == [] and store.objects == {}


def _segment_events(count: int, deleted: bool) -> list[dict[str, object]]:
    records: list[dict[str, object]] = []
    for offset in range(count):
        metadata = RemoteLogSegmentMetadata(
            uuid.uuid4(), offset, offset, 1_000, 1, 1_000, 100, ((0, 0),), (keys.LOG,)
        )
        states = [COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED]
        if deleted:
            states += [DELETE_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED]
        records += [event(metadata, s) for s in states]
    return records


def test_the_metadata_file_is_compacted_only_when_it_holds_dead_records(tmp_path: Path) -> None:
    """A start with many copied segments does not rewrite their (already compact) file: it
    did at every start (2.6 s of 3.7 to load 10,000 segments), as each COPY_SEGMENT_FINISHED
    line counted as dead."""
    live, dead = tmp_path / "live", tmp_path / "dead"
    for dir, deleted in ((live, False), (dead, True)):
        dir.mkdir()
        RemoteLogSegments(dir / METADATA_FILE).append(_segment_events(1_001, deleted))
    before = (live / METADATA_FILE).stat().st_ino
    remote = RemoteLogSegments.load(live)
    assert (live / METADATA_FILE).stat().st_ino == before  # not rewritten
    assert (len(remote.copied), remote.dead_records) == (1_001, 0)
    assert RemoteLogSegments.load(live).copied == remote.copied

    compacted = RemoteLogSegments.load(dead)  # 4,004 dead lines: rewritten without them
    assert len((dead / METADATA_FILE).read_text().splitlines()) == 2
    assert (compacted.copied, compacted.copied_end) == ([], 1_000)
