"""Tiered storage (KIP-405) on a real S3-compatible server (gofakes3, built from the Go
module proxy on first use by kafkalite/s3_server.py): a stock client reads from offset 0
after the local segments were uploaded and deleted, with exact checksums, also after the
store was down for a while and after a broker restart; the objects follow the documented
key layout."""

from __future__ import annotations

import hashlib
import json
import re
import signal
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from e2e_helpers import (
    admin,
    consumer,
    create_topic,
    produce_all,
    producer,
    segment_files,
    wait_until,
    watermarks,
)

from compat.cli_runner import kafkalite_here, ok_json
from kafkalite.console.cluster import Cluster
from kafkalite.process import BrokerProcess
from kafkalite.s3_server import S3Server
from kafkalite.storage.remote import keys as keys_module
from kafkalite.storage.remote.metadata import (
    COPY_SEGMENT_FINISHED,
    COPY_SEGMENT_STARTED,
    DELETE_SEGMENT_FINISHED,
    METADATA_FILE,
    RemoteLogSegments,
)
from kafkalite.storage.remote.s3_storage import S3RemoteStorageManager, S3Settings
from kafkalite.testing import EmbeddedBroker, free_ports

RECORDS = 300
SEGMENT_BYTES = 2048
TASK_INTERVAL_MS = 100
KEY = re.compile(
    r"(?P<topic>.+)-(?P<id>[A-Za-z0-9_-]{22})/0/(?P<base>\d{20})-[A-Za-z0-9_-]{22}"
    r"(?P<suffix>\.log|\.index|\.timeindex|\.snapshot|\.leader_epoch_checkpoint)"
)


def _store(server: S3Server) -> S3RemoteStorageManager:
    settings = server.broker_properties()
    return S3RemoteStorageManager(
        S3Settings(
            bucket=server.bucket,
            endpoint_url=server.endpoint_url,
            region="us-east-1",
            path_style=True,
            access_key_id=settings["rsm.config.storage.aws.access.key.id"],
            secret_access_key=settings["rsm.config.storage.aws.secret.access.key"],
        )
    )


def _values(start: int, end: int) -> list[bytes]:
    return [hashlib.sha256(b"%d" % i).digest() * 3 + b"-%06d" % i for i in range(start, end)]


def _read_from_start(bootstrap: str, topic: str, count: int) -> list[tuple[int, str]]:
    """(offset, sha256 of the value) of every record, read from offset 0 by a new consumer."""
    cons = consumer(bootstrap)
    got: list[tuple[int, str]] = []
    try:
        cons.assign([TopicPartition(topic, 0, 0)])
        wait_until(
            lambda: _poll_into(cons, got) or len(got) >= count,
            timeout=30,
            message=f"all {count} records",
        )
    finally:
        cons.close()
    return got


def _poll_into(cons: object, got: list[tuple[int, str]]) -> bool:
    for message in cons.consume(500, 0.5):  # type: ignore[attr-defined]
        assert message.error() is None, message.error()
        got.append((message.offset(), hashlib.sha256(message.value()).hexdigest()))
    return False


def _offset_for_time(bootstrap: str, topic: str, timestamp: int) -> int:
    cons = consumer(bootstrap)
    try:
        (found,) = cons.offsets_for_times([TopicPartition(topic, 0, timestamp)], timeout=10)
        assert found.error is None, found.error
        return found.offset  # type: ignore[no-any-return]
    finally:
        cons.close()


def _local_bases(broker: EmbeddedBroker, topic: str) -> list[int]:
    return [int(path.stem) for path in segment_files(broker.data_dir, topic, 0)]


def test_consumer_reads_uploaded_and_locally_deleted_segments(
    s3_server: S3Server, tmp_path: Path, topic_name: Callable[..., str]
) -> None:
    (metrics_port,) = free_ports(1)
    overrides = {
        **s3_server.broker_properties(TASK_INTERVAL_MS),
        "log.retention.check.interval.ms": "100",
        "kafkalite.metrics.port": str(metrics_port),
    }
    with EmbeddedBroker(tmp_path, overrides) as broker:
        _produce_tier_and_read(s3_server, broker, topic_name(), metrics_port)


def _describe(broker: EmbeddedBroker, topic: str, metrics_port: int) -> dict:
    metrics = ["--metrics", f"http://127.0.0.1:{metrics_port}/metrics"]
    bootstrap = ["--bootstrap", broker.bootstrap]
    [described] = ok_json(
        kafkalite_here("topic", "describe", topic, *metrics, "--format", "json", *bootstrap)
    )
    return described  # type: ignore[no-any-return]


def _produce_tier_and_read(
    s3_server: S3Server, broker: EmbeddedBroker, topic: str, metrics_port: int
) -> None:
    create_topic(
        broker.bootstrap,
        topic,
        1,
        {
            "remote.storage.enable": "true",
            "segment.bytes": str(SEGMENT_BYTES),
            "local.retention.bytes": "0",  # only the active segment stays local
        },
    )
    values = _values(0, RECORDS)
    prod = producer(broker.bootstrap, **{"linger.ms": 0, "batch.num.messages": 1})
    produce_all(prod, topic, ({"value": value, "partition": 0} for value in values))
    expected = [(i, hashlib.sha256(value).hexdigest()) for i, value in enumerate(values)]

    # Every closed segment is uploaded, then deleted locally: one (active) segment is left.
    wait_until(
        lambda: len(_local_bases(broker, topic)) == 1,
        timeout=30,
        message="only the active segment left locally",
    )
    local_start = _local_bases(broker, topic)[0]
    assert local_start > RECORDS // 2

    assert _read_from_start(broker.bootstrap, topic, RECORDS) == expected
    assert watermarks(broker.bootstrap, topic, 0) == (0, RECORDS)  # ListOffsets: remote start
    assert _offset_for_time(broker.bootstrap, topic, 0) == 0  # found in the remote tier

    keys = _store(s3_server).list_keys("")
    parsed = [KEY.fullmatch(key) for key in keys]
    assert all(parsed), [k for k, m in zip(keys, parsed, strict=True) if not m]
    logs = sorted(int(m["base"]) for m in parsed if m and m["suffix"] == ".log")
    assert logs[0] == 0 and logs[-1] < local_start
    assert {m["topic"] for m in parsed if m} == {topic}
    # One object of each kind per segment (producer snapshots: where the broker still kept one).
    for suffix in (".index", ".timeindex", ".leader_epoch_checkpoint"):
        assert sum(1 for m in parsed if m and m["suffix"] == suffix) == len(logs)
    # `kafkalite topic describe` shows both tiers: offsets, and the remote bytes and segments.
    described = _describe(broker, topic, metrics_port)
    (row,) = described["partitions"]
    assert (row["log_start_offset"], row["local_start_offset"]) == (0, local_start)
    assert row["remote_end_offset"] == local_start - 1 and row["log_end_offset"] == RECORDS
    assert described["remote_segments"] == len(logs)
    remote = RemoteLogSegments.load(broker.data_dir / f"{topic}-0")
    assert described["remote_size_bytes"] == remote.size_in_bytes > 0
    # The console's topic page shows the same (its JSON API, as the page reads it).
    metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    page = Cluster(broker.bootstrap, metrics_urls=[metrics_url]).topic(topic)
    assert page["tiered"] and page["remote_size_bytes"] == remote.size_in_bytes
    assert page["remote_segments"] == len(logs)
    (part,) = page["partitions"]
    assert (part["local_start"], part["remote_end"]) == (local_start, local_start - 1)

    # The store goes away: nothing more is uploaded, so no local segment is deleted; once it
    # is back the uploads resume (the failed copy's orphan is deleted first).
    manager = broker.broker.remote_log_manager
    s3_server.stop()
    more = _values(RECORDS, 2 * RECORDS)
    produce_all(prod, topic, ({"value": value, "partition": 0} for value in more))
    wait_until(lambda: manager.copy_errors >= 1, timeout=30, message="a failed copy")
    kept = _local_bases(broker, topic)
    assert kept[0] == local_start and len(kept) > 1
    s3_server.start()
    wait_until(
        lambda: len(_local_bases(broker, topic)) == 1,
        timeout=30,
        message="uploads resumed",
    )
    expected += [(RECORDS + i, hashlib.sha256(value).hexdigest()) for i, value in enumerate(more)]

    del prod  # (it would reconnect during the restart)
    broker.stop()  # the data dir is kept
    broker.start()
    assert _read_from_start(broker.bootstrap, topic, 2 * RECORDS) == expected
    assert watermarks(broker.bootstrap, topic, 0) == (0, 2 * RECORDS)

    # Remote storage turned off (Kafka 3.9): remote.log.delete.on.disable deletes the remote
    # segments, and the log starts at the local log start again.
    off = _topic_configs(
        topic, {"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"}
    )
    admin(broker.bootstrap).incremental_alter_configs([off])[off].result(timeout=10)
    wait_until(
        lambda: not [k for k in _store(s3_server).list_keys("") if k.startswith(f"{topic}-")],
        timeout=30,
        message="the remote segments deleted",
    )
    local_start = _local_bases(broker, topic)[0]
    assert watermarks(broker.bootstrap, topic, 0) == (local_start, 2 * RECORDS)
    tail = _read_from_start(broker.bootstrap, topic, 2 * RECORDS - local_start)
    assert tail == expected[local_start:]


def _topic_configs(topic: str, configs: dict[str, str]) -> ConfigResource:
    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()
    ]
    return ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)


def _create_error(bootstrap: str, topic: str, config: dict[str, str]) -> KafkaError | None:
    try:
        create_topic(bootstrap, topic, 1, config)
    except KafkaException as exc:
        return exc.args[0]  # type: ignore[no-any-return]
    return None


def test_remote_storage_configs_are_checked_as_kafka_does(
    tmp_path: Path, topic_name: Callable[..., str]
) -> None:
    tiered = {"remote.storage.enable": "true"}
    with EmbeddedBroker(tmp_path / "plain") as plain:
        error = _create_error(plain.bootstrap, topic_name(), tiered)
        assert error is not None and error.code() == KafkaError.INVALID_CONFIG
        assert "remote.log.storage.system.enable" in error.str()
    # (No S3 request is made: the topics hold no data.)
    overrides = S3Server(tmp_path / "unused", port=1).broker_properties()
    with EmbeddedBroker(tmp_path / "tiered", overrides) as broker:
        compacted = {**tiered, "cleanup.policy": "compact"}
        error = _create_error(broker.bootstrap, topic_name(), compacted)
        assert error is not None and error.code() == KafkaError.INVALID_CONFIG
        topic = topic_name()
        assert _create_error(broker.bootstrap, topic, tiered) is None
        off = _topic_configs(topic, {"remote.storage.enable": "false"})
        future = admin(broker.bootstrap).incremental_alter_configs([off])[off]
        with pytest.raises(KafkaException) as refused:
            future.result(timeout=10)
        assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
        assert "remote.log.delete.on.disable=true" in refused.value.args[0].str()


def _copy_states(partition_dir: Path) -> dict[str, str]:
    """Each remote segment's last state in the partition's metadata file (by segment id)."""
    states: dict[str, str] = {}
    path = partition_dir / METADATA_FILE
    for line in path.read_text().splitlines() if path.exists() else []:
        record = json.loads(line)
        if "segment_id" in record:
            states[record["segment_id"]] = record["event"]
    return states


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    prod = producer(bootstrap, **{"linger.ms": 0, "batch.num.messages": 1})
    produce_all(prod, topic, ({"value": value, "partition": 0} for value in values))


def _started_not_finished(partition_dir: Path) -> list[str]:
    return [s for s, state in _copy_states(partition_dir).items() if state == COPY_SEGMENT_STARTED]


def test_broker_killed_in_the_middle_of_an_upload(
    s3_server: S3Server,
    broker_factory: Callable[..., BrokerProcess],
    topic_name: Callable[..., str],
) -> None:
    """kill -9 while a segment's upload hangs (the store SIGSTOPped after COPY_SEGMENT_STARTED
    was written): after the restart the half-uploaded segment is never served, its objects are
    deleted, the segment is copied again under a new id, and a consumer from offset 0 reads
    every record once, with exact checksums; each segment's data is in the bucket once.
    (gofakes3 resumed stores the killed client's torn PUT: an empty `.log` object of the
    interrupted segment, which also makes its listing fail until the orphan is deleted.)"""
    topic = topic_name()
    overrides = {**s3_server.broker_properties(TASK_INTERVAL_MS),
                 "log.retention.check.interval.ms": "100"}  # fmt: skip
    broker = broker_factory(overrides)
    create_topic(broker.bootstrap, topic, 1, {
        "remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES),
        "local.retention.bytes": "0",
    })  # fmt: skip
    part_dir = broker.data_dir / f"{topic}-0"
    values = _values(0, RECORDS)
    _produce(broker.bootstrap, topic, values[: RECORDS // 2])
    wait_until(lambda: COPY_SEGMENT_FINISHED in _copy_states(part_dir).values(), timeout=30)
    assert s3_server.process is not None
    s3_server.process.send_signal(signal.SIGSTOP)  # every request to the store now hangs
    try:
        _produce(broker.bootstrap, topic, values[RECORDS // 2 :])
        wait_until(lambda: _started_not_finished(part_dir), timeout=30, message="a copy started")
        broker.kill()
        (interrupted,) = _started_not_finished(part_dir)  # as the killed broker left it
    finally:
        s3_server.process.send_signal(signal.SIGCONT)
    broker.restart()

    wait_until(lambda: len(_local_bases(broker, topic)) == 1, timeout=30, message="all copied")
    expected = [(i, hashlib.sha256(value).hexdigest()) for i, value in enumerate(values)]
    assert _read_from_start(broker.bootstrap, topic, RECORDS) == expected
    assert _copy_states(part_dir)[interrupted] == DELETE_SEGMENT_FINISHED
    keys = [key for key in _store(s3_server).list_keys("") if key.startswith(f"{topic}-")]
    assert not [key for key in keys if keys_module.kafka_uuid(uuid.UUID(interrupted)) in key]
    parsed = [KEY.fullmatch(key) for key in keys]
    assert all(parsed), keys
    logs = Counter(int(m["base"]) for m in parsed if m and m["suffix"] == ".log")
    assert logs and set(logs.values()) == {1}, logs  # no segment's data twice
    remote = RemoteLogSegments.load(part_dir)
    assert sorted(m.start_offset for m in remote.copied) == sorted(logs)
