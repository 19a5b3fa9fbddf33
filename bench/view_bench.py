"""Views (issue 18): reading a view vs reading its source and filtering in the client.

    python -m bench.view_bench [--records 200000] [--size 100] [--compression none]
        [--clustered] [--index] [--segment-bytes N] [--restart]

One kafkalite broker process (kafkalite.testing.BrokerProcess, its own temp dir), one source
partition of `--records` records of `--size` bytes whose header `p` is `i % 100` (with
`--clustered`: `(i // 1000) % 100`, runs of 1000 records with one value, as when producers
write one tag at a time), and views `p < 50`, `p < 10`, `p < 1` (50%, 10%, 1% selectivity).
With `--index` the source indexes `p` (kafkalite.index.headers). Each reading is a fresh
confluent-kafka consumer in assign mode from offset 0 to the end; it reports records
delivered (that match), seconds, records/s, the bytes the client received (librdkafka's
statistics, `rxbytes` of the broker connections) and the bytes the broker process read
(`rchar` of /proc/<pid>/io: log reads, page cache included, and requests). With
`--restart` every view is read once (building the header indexes, stored for rolled
segments), the broker restarted, and the readings made after it: with `--index` and a
`--segment-bytes` that rolls segments, the views' reads load the stored indexes instead of
reading the segments again. It prints figures, it is not a test.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.testing import BrokerProcess

SELECTIVITIES = (50, 10, 1)  # percent


def _broker_read_bytes(broker: BrokerProcess) -> int:
    assert broker.process is not None
    with open(f"/proc/{broker.process.pid}/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("rchar:"))


def _fill(
    bootstrap: str, topic: str, records: int, size: int, compression: str, clustered: bool
) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "compression.type": compression}
    )
    value = b"x" * size
    for i in range(records):
        while True:
            try:
                p = (i // 1000) % 100 if clustered else i % 100
                producer.produce(topic, value, headers=[("p", str(p).encode())])
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def _read(bootstrap: str, topic: str, keep: Callable[[Any], bool]) -> dict[str, float]:
    """Records kept, seconds and bytes received reading `topic` to its end."""
    stats: dict[str, Any] = {}

    def on_stats(text: str) -> None:
        stats.update(json.loads(text))

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "view-bench",
            "enable.auto.commit": False,
            "statistics.interval.ms": 100,
            "stats_cb": on_stats,
        }
    )
    tp = TopicPartition(topic, 0)
    end = consumer.get_watermark_offsets(tp, 30)[1]
    started = time.monotonic()
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    kept = 0

    def fetched() -> int:
        partition = stats.get("topics", {}).get(topic, {}).get("partitions", {}).get("0", {})
        return int(partition.get("next_offset", -1))

    while True:
        done = fetched() >= end
        messages = consumer.consume(10_000, 0.05)
        kept += sum(1 for m in messages if not m.error() and keep(m))
        if done and not messages:
            break
    seconds = time.monotonic() - started
    time.sleep(0.3)  # one more statistics report with the final byte counts
    consumer.poll(0.2)
    received = sum(b.get("rxbytes", 0) for b in stats.get("brokers", {}).values())
    consumer.close()
    return {"records": kept, "seconds": seconds, "rx_bytes": received}


def run(
    records: int,
    size: int,
    compression: str,
    clustered: bool,
    index: bool,
    segment_bytes: int | None = None,
    restart: bool = False,
) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as data_dir:
        broker = BrokerProcess(Path(data_dir), {"num.partitions": "1"}).start()
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            config = {"kafkalite.index.headers": "p"} if index else {}
            if segment_bytes is not None:
                config["segment.bytes"] = str(segment_bytes)
            admin.create_topics([NewTopic("source", 1, 1, config=config)])["source"].result(30)
            _fill(broker.bootstrap, "source", records, size, compression, clustered)
            for percent in SELECTIVITIES:
                view = f"source.p{percent}"
                configs = {
                    "kafkalite.view.source": "source",
                    "kafkalite.view.filter": f"p < {percent}",
                }
                admin.create_topics([NewTopic(view, -1, -1, config=configs)])[view].result(30)
            if restart:
                for percent in SELECTIVITIES:
                    _read(broker.bootstrap, f"source.p{percent}", lambda m: True)
                broker.restart()
            rows = []
            for percent in SELECTIVITIES:
                view = f"source.p{percent}"

                def client_side(m: Any, limit: int = percent) -> bool:
                    return int(dict(m.headers())["p"]) < limit

                before = _broker_read_bytes(broker)
                client = _read(broker.bootstrap, "source", client_side)
                client["read_bytes"], before = (
                    _broker_read_bytes(broker) - before,
                    _broker_read_bytes(broker),
                )
                served = _read(broker.bootstrap, view, lambda m: True)
                served["read_bytes"] = _broker_read_bytes(broker) - before
                assert client["records"] == served["records"], (client, served)
                rows.append({"selectivity": percent, "client_filter": client, "view": served})
            return rows
        finally:
            broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--compression", default="none")
    parser.add_argument("--clustered", action="store_true")
    parser.add_argument("--index", action="store_true")
    parser.add_argument("--segment-bytes", type=int, default=None)
    parser.add_argument("--restart", action="store_true")
    args = parser.parse_args()
    rows = run(
        args.records,
        args.size,
        args.compression,
        args.clustered,
        args.index,
        args.segment_bytes,
        args.restart,
    )
    print(
        f"{args.records} records of {args.size} B, compression {args.compression}, "
        f"{'clustered' if args.clustered else 'interleaved'} values, "
        f"{'indexed' if args.index else 'no index'}, segment.bytes "
        f"{args.segment_bytes or 'default'}{', after a restart' if args.restart else ''}"
    )
    print("selectivity  reader         records  seconds  records/s  MB received  MB read")
    for row in rows:
        for reader in ("client_filter", "view"):
            r = row[reader]
            print(
                f"{row['selectivity']:>10}%  {reader:<13} {r['records']:>8} {r['seconds']:>8.2f}"
                f" {r['records'] / r['seconds']:>10.0f} {r['rx_bytes'] / 2**20:>12.2f}"
                f" {r['read_bytes'] / 2**20:>8.2f}"
            )


if __name__ == "__main__":
    main()
