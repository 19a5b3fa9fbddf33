"""Tiered storage throughput on one node with a local S3 server (gofakes3).

    .venv/bin/python -m bench.tiered_bench [--mb 64] [--segment-mb 8]
    .venv/bin/python -m bench.tiered_bench --restart-segments 10000

Produces `--mb` MB to a tiered topic (local.retention.bytes=0) and to a plain one, then
reports: upload MB/s (bytes the RemoteLogManager copied over the time it took), a cold
consumer's MB/s from offset 0 on the tiered topic (read from the store) and on the plain
one (local disk), and the S3 server's own GET MB/s for the same objects through boto3 (the
limit to compare the remote read with). Everything on 127.0.0.1, stopped at the end.

`--restart-segments N` measures instead a broker restart with N remote segments: one-record
segments (segment.bytes 1 KiB, local.retention.bytes 16 KiB) are produced to a tiered topic
until the broker's remote metadata lists N copied, the local disk held by the partition is
set beside the data retained (local + remote), then the broker is stopped and started as a
`kafkalite serve` process: the time from exec to the first answered request and to the
first record of offset 0 (read from the store), after a clean stop and after kill -9. The
same for a plain topic of the same N one-record segments on a broker of its own.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench import procstat
from kafkalite.s3_server import S3Server
from kafkalite.storage.remote.metadata import METADATA_FILE
from kafkalite.storage.remote.s3_storage import S3RemoteStorageManager, S3Settings
from kafkalite.testing import EMBEDDED_DEFAULTS, EmbeddedBroker

VALUE = 1000  # bytes per record


def _produce(bootstrap: str, topic: str, total: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"})
    value = os.urandom(VALUE)
    for _ in range(total // VALUE):
        while True:
            try:
                producer.produce(topic, value, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(120)


def _consume_all(bootstrap: str, topic: str, count: int) -> float:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "tiered-bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 8 << 20,
            "max.partition.fetch.bytes": 8 << 20,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    started, seen = time.monotonic(), 0
    deadline = started + 300
    while seen < count and time.monotonic() < deadline:
        seen += sum(1 for m in consumer.consume(10_000, 1.0) if m.error() is None)
    elapsed = time.monotonic() - started
    consumer.close()
    if seen < count:
        raise SystemExit(f"read {seen} of {count} records of {topic}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.tiered_bench")
    parser.add_argument("--mb", type=int, default=64)
    parser.add_argument("--segment-mb", type=int, default=8)
    parser.add_argument("--restart-segments", type=int, default=0)
    args = parser.parse_args()
    if args.restart_segments:
        restart_bench(args.restart_segments)
        return
    total, count = args.mb << 20, (args.mb << 20) // VALUE
    with S3Server() as s3:
        overrides = {**s3.broker_properties(200), "log.retention.check.interval.ms": "200"}
        with EmbeddedBroker(overrides=overrides) as broker:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            segment = str(args.segment_mb << 20)
            tiered = {"remote.storage.enable": "true", "segment.bytes": segment}
            topics = [
                NewTopic("tiered", 1, 1, config={**tiered, "local.retention.bytes": "0"}),
                NewTopic("plain", 1, 1, config={"segment.bytes": segment}),
            ]
            for future in admin.create_topics(topics).values():
                future.result(30)
            manager = broker.broker.remote_log_manager
            started = time.monotonic()
            _produce(broker.bootstrap, "tiered", total)
            produced = time.monotonic() - started
            # Every closed segment copied (the active one never is).
            while (
                manager.copy_bytes == 0 or broker.call(manager.copy_lag_bytes)
            ) and time.monotonic() - started < 600:
                time.sleep(0.05)
            uploaded = time.monotonic() - started
            _produce(broker.bootstrap, "plain", total)
            remote_read = _consume_all(broker.bootstrap, "tiered", count)
            local_read = _consume_all(broker.bootstrap, "plain", count)
            store = S3RemoteStorageManager(
                S3Settings(
                    s3.bucket,
                    s3.endpoint_url,
                    "us-east-1",
                    True,
                    "kafkalite",
                    "kafkalite-secret",
                )
            )
            logs = [key for key in store.list_keys("tiered-") if key.endswith(".log")]
            get_started, got = time.monotonic(), 0
            client = store._client
            for key in logs:
                got += len(client.get_object(Bucket=s3.bucket, Key=key)["Body"].read())
            get_elapsed = time.monotonic() - get_started
    mb = total / (1 << 20)
    print(f"produced {mb:.0f} MB in {produced:.1f} s ({mb / produced:.1f} MB/s)")
    print(
        f"uploaded {manager.copy_bytes / (1 << 20):.0f} MB by {uploaded:.1f} s after the "
        f"first record ({manager.copy_bytes / (1 << 20) / uploaded:.1f} MB/s, produce included)"
    )
    print(f"cold consumer, remote tier: {mb / remote_read:.1f} MB/s ({remote_read:.1f} s)")
    print(f"cold consumer, local disk:  {mb / local_read:.1f} MB/s ({local_read:.1f} s)")
    print(f"S3 server GET (boto3, one stream): {got / (1 << 20) / get_elapsed:.1f} MB/s")


# -- restart with many remote segments -------------------------------------------------------

TINY_SEGMENT = {"segment.bytes": "2048"}  # one 1000-byte record (a batch) per segment
LOCAL_RETENTION = 16 << 10


def _produce_one_per_batch(bootstrap: str, topic: str, count: int) -> None:
    """`count` records, each its own batch (so its own segment)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 0,
            "batch.size": 1200,
            "acks": "all",
            "max.in.flight": 5,  # not thousands of one-batch requests queued at the broker
        }
    )
    value = os.urandom(VALUE)
    errors: list[Any] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            errors.append(error)

    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value, partition=0, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    if producer.flush(300) or errors:
        raise SystemExit(f"{topic}: {len(errors)} records not delivered: {errors[:1]}")


def _dir_bytes(path: Path, suffix: str = "") -> tuple[int, int]:
    """(apparent bytes, allocated bytes) of the files in `path` ending with `suffix`."""
    apparent = allocated = 0
    for entry in os.scandir(path):
        if entry.is_file() and entry.name.endswith(suffix):
            stat = entry.stat()
            apparent, allocated = apparent + stat.st_size, allocated + stat.st_blocks * 512
    return apparent, allocated


def _first_record_at_zero(bootstrap: str, topic: str, deadline: float) -> float:
    """perf_counter time of the first record read from offset 0."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "restart-bench", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        while time.perf_counter() < deadline:
            message = consumer.poll(0.01)
            if message is not None and message.error() is None:
                if message.offset() != 0:
                    raise SystemExit(f"{topic}: first record read is {message.offset()}, not 0")
                return time.perf_counter()
        raise SystemExit(f"{topic}: nothing read from offset 0 in time")
    finally:
        consumer.close()


def _timed_start(overrides: dict[str, str], topic: str, log_path: Path) -> tuple[Any, float, float]:
    """Exec `kafkalite serve`; (process, s to the first answered request, s to offset 0)."""
    port = procstat.free_port()
    settings = {**overrides, "listeners": f"PLAINTEXT://127.0.0.1:{port}"}
    command = [sys.executable, "-m", "kafkalite", "serve"]
    for key, value in settings.items():
        command += ["--override", f"{key}={value}"]
    output = open(log_path, "ab")  # noqa: SIM115 - the process's, closed with it
    spawned = time.perf_counter()
    process = subprocess.Popen(command, stdout=output, stderr=output)
    output.close()
    try:
        answered = procstat.wait_until_answering("127.0.0.1", port, timeout=300)
        first = _first_record_at_zero(f"127.0.0.1:{port}", topic, spawned + 300)
    except BaseException:
        process.kill()
        process.wait()
        raise
    return process, answered - spawned, first - spawned


def _restarts(overrides: dict[str, str], topic: str, log_path: Path) -> dict[str, tuple]:
    """Start after the clean stop, stop cleanly, start again (the figure), kill -9, start."""
    figures = {}
    process, *figures["clean"] = _timed_start(overrides, topic, log_path)
    process.send_signal(signal.SIGTERM)
    process.wait(120)
    process, *figures["clean"] = _timed_start(overrides, topic, log_path)
    process.kill()
    process.wait()
    process, *figures["kill -9"] = _timed_start(overrides, topic, log_path)
    process.send_signal(signal.SIGTERM)
    process.wait(120)
    return figures


def _fill(overrides: dict[str, str], data_dir: Path, topic: str, config: dict, count: int) -> dict:
    """Produce `count` one-record segments on an embedded broker; tiered: wait for them all
    but the active one copied. Returns the figures of the disk and the upload."""
    figures: dict[str, float] = {}
    with EmbeddedBroker(data_dir, overrides) as broker:
        broker.create_topic(topic, 1, config)
        started = time.perf_counter()
        _produce_one_per_batch(broker.bootstrap, topic, count)
        figures["produce s"] = time.perf_counter() - started
        manager = broker.broker.remote_log_manager
        if config.get("remote.storage.enable") == "true":
            deadline = started + 3600
            remote = (0, 0)
            while remote[1] < count - 1:
                if time.perf_counter() > deadline:
                    raise SystemExit(f"{topic}: {remote[1]} of {count - 1} segments copied")
                remote = broker.call(manager.remote_log_sizes).get(topic, (0, 0))
                if int(time.perf_counter() - started) % 30 == 0:
                    elapsed = time.perf_counter() - started
                    print(f"{elapsed:.0f} s: {remote[1]} copied", file=sys.stderr, flush=True)
                time.sleep(0.5)
            figures["uploaded s"] = time.perf_counter() - started
            figures["remote segments"], figures["remote bytes"] = remote[1], remote[0]
            # Local retention done (the retention check follows the uploads).
            local_limit = LOCAL_RETENTION + 2 * 1024
            while _dir_bytes(data_dir / f"{topic}-0", ".log")[0] > local_limit:
                if time.perf_counter() > deadline:
                    break
                time.sleep(0.2)
        figures["local log bytes"] = _dir_bytes(data_dir / f"{topic}-0", ".log")[0]
        figures["metadata file bytes"] = _dir_bytes(data_dir / f"{topic}-0", METADATA_FILE)[0]
        figures["local dir bytes"], figures["local dir allocated"] = _dir_bytes(
            data_dir / f"{topic}-0"
        )
    return figures


def _empty_start(data_dir: Path, log_path: Path) -> float:
    """Seconds from exec to the first answered request on an empty data dir (the floor)."""
    port = procstat.free_port()
    command = [sys.executable, "-m", "kafkalite", "serve", "--override"]
    command += [f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={data_dir}"]
    with open(log_path, "ab") as output:
        spawned = time.perf_counter()
        process = subprocess.Popen(command, stdout=output, stderr=output)
    try:
        return procstat.wait_until_answering("127.0.0.1", port, timeout=300) - spawned
    finally:
        process.terminate()
        process.wait(120)


def restart_bench(count: int) -> None:
    with tempfile.TemporaryDirectory(prefix="tiered-restart-") as name, S3Server() as s3:
        tmp = Path(name)
        empty = _empty_start(tmp / "empty", tmp / "log")
        results = {}
        for topic, config, remote in (
            (
                "tiered",
                {
                    **TINY_SEGMENT,
                    "remote.storage.enable": "true",
                    "local.retention.bytes": str(LOCAL_RETENTION),
                },
                True,
            ),
            ("plain", dict(TINY_SEGMENT), False),
        ):
            data_dir = tmp / topic
            overrides = {**EMBEDDED_DEFAULTS, "log.retention.check.interval.ms": "500"}
            if remote:
                overrides |= s3.broker_properties(200)
            filled = _fill(overrides, data_dir, topic, config, count)
            restarts = _restarts({**overrides, "log.dirs": str(data_dir)}, topic, tmp / "log")
            results[topic] = (filled, restarts)
    print(f"{count} one-record segments of {VALUE} B (segment.bytes 2048)")
    print(f"an empty broker's start (the floor): first answer {empty:.2f} s")
    for topic, (filled, restarts) in results.items():
        print(f"{topic}: produced in {filled['produce s']:.1f} s", end="")
        if "uploaded s" in filled:
            rate = filled["remote segments"] / filled["uploaded s"]
            print(
                f"; {filled['remote segments']:.0f} segments copied by {filled['uploaded s']:.1f}"
                f" s ({rate:.0f} segments/s, produce included)",
                end="",
            )
        print()
        retained = filled["local log bytes"] + filled.get("remote bytes", 0)
        print(
            f"  local disk held: {filled['local dir bytes'] / 1024:.0f} KiB in the partition dir"
            f" ({filled['local dir allocated'] / 1024:.0f} KiB allocated; segment data"
            f" {filled['local log bytes'] / 1024:.0f} KiB, remote segment list"
            f" {filled['metadata file bytes'] / 1024:.0f} KiB) for"
            f" {retained / (1 << 20):.1f} MiB retained"
            f" ({filled.get('remote bytes', 0) / (1 << 20):.1f} MiB remote)"
        )
        for kind, (answered, first) in restarts.items():
            print(
                f"  restart after {kind}: first answer {answered:.2f} s,"
                f" offset 0 read {first:.2f} s"
            )
    print(f"broker logs: not kept (temporary dir); load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
