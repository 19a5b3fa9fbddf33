"""Tiered storage throughput on one node with a local S3 server (gofakes3).

    .venv/bin/python -m bench.tiered_bench [--mb 64] [--segment-mb 8]

Produces `--mb` MB to a tiered topic (local.retention.bytes=0) and to a plain one, then
reports: upload MB/s (bytes the RemoteLogManager copied over the time it took), a cold
consumer's MB/s from offset 0 on the tiered topic (read from the store) and on the plain
one (local disk), and the S3 server's own GET MB/s for the same objects through boto3 (the
limit to compare the remote read with). Everything on 127.0.0.1, stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.s3_server import S3Server
from kafkalite.storage.remote.s3_storage import S3RemoteStorageManager, S3Settings
from kafkalite.testing import EmbeddedBroker

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
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
