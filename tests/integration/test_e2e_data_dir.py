"""One broker per data dir, and files that are garbage (issue 9, points 5 and 6).

Each case runs real broker processes and checks the exit code, the line printed and what
is left on disk.
"""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import KafkaError
from e2e_helpers import CLIENT_TIMEOUT, Deliveries, admin, consume_all, create_topic, producer

from kafkalite.testing import error_records

TIMEOUT = 60


def _serve(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "kafkalite", "serve"]
    command += [
        "--override",
        f"log.dirs={data_dir}",
        "--override",
        "listeners=PLAINTEXT://127.0.0.1:0",
    ]
    return subprocess.run(
        [*command, *args], capture_output=True, text=True, timeout=TIMEOUT, cwd=data_dir.parent
    )


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert result.stdout == "", result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def _tree(data_dir: Path) -> dict[str, tuple[int, int]]:
    """Every file under the data dir with its size and modification time."""
    return {
        str(p.relative_to(data_dir)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(data_dir.rglob("*"))
        if p.is_file()
    }


def _produce(bootstrap: str, topic: str, count: int, **conf: object) -> Deliveries:
    deliveries = Deliveries()
    prod = producer(bootstrap, **conf)
    for i in range(count):
        prod.produce(topic, value=b"%d" % i, on_delivery=deliveries.callback)
        assert prod.flush(CLIENT_TIMEOUT) == 0
    return deliveries


# ---- point 5: one broker per data directory ---------------------------------------------------


def test_a_second_broker_on_the_same_log_dir_exits_2_and_touches_nothing(
    broker_factory, topic_name
) -> None:
    first = broker_factory()
    topic = topic_name()
    create_topic(first.bootstrap, topic)
    assert not _produce(first.bootstrap, topic, 3).failed
    assert first.process is not None
    first.process.send_signal(signal.SIGSTOP)  # holds its lock, writes no checkpoint meanwhile
    try:
        before = _tree(first.data_dir)
        line = _one_line(_serve(first.data_dir))
        after = _tree(first.data_dir)
    finally:
        first.process.send_signal(signal.SIGCONT)

    assert line == (
        f"kafkalite: Failed to acquire lock on file .lock in {first.data_dir}. A Kafka "
        "instance in another process or thread is using this directory."
    )
    assert after == before
    assert topic in admin(first.bootstrap).list_topics(timeout=CLIENT_TIMEOUT).topics
    assert len(consume_all(first.bootstrap, topic, [0])[0]) == 3


def test_the_lock_is_released_when_the_broker_stops(broker_factory) -> None:
    first = broker_factory()
    first.stop()
    second = broker_factory(data_dir=first.data_dir)
    assert (second.data_dir / ".lock").is_file()


# ---- point 6: garbage files -------------------------------------------------------------------


def test_a_recovery_point_checkpoint_of_garbage_bytes_recovers_from_the_segments(
    broker_factory, topic_name
) -> None:
    broker = broker_factory()
    topic = topic_name()
    create_topic(broker.bootstrap, topic, partitions=2)
    assert not _produce(broker.bootstrap, topic, 5).failed
    broker.stop()
    checkpoint = broker.data_dir / "recovery-point-offset-checkpoint"
    checkpoint.write_bytes(b"0\n2\n\xff\xfe\x00garbage 0 5\n")
    first_line = len(broker.lines)

    broker.start()

    new_lines = broker.lines[first_line:]
    warnings = [line for line in new_lines if " WARNING " in line]
    assert len(warnings) == 1, warnings
    assert f"{checkpoint} is malformed" in warnings[0]
    assert "ignoring it" in warnings[0]
    assert error_records(new_lines) == []
    records = consume_all(broker.bootstrap, topic, [0, 1])
    assert sorted(r.value for part in records.values() for r in part) == [
        b"%d" % i for i in range(5)
    ]
    broker.stop()
    assert checkpoint.read_bytes().decode("ascii").startswith("0\n")  # rewritten whole


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"version=1\nnode.id=0\n\xff\xfecluster.id=x\n", "byte 20 is not UTF-8"),
        (b"version=1\nnode.id=0\n", "cluster.id is missing"),
        (b"node.id=0\ncluster.id=abc\n", "version None is not 0 or 1"),
        (b"\x00\x00\x00\x00", "line 1 is not key=value"),
        (b"version=1\nnode.id=zero\ncluster.id=abc\n", "node id 'zero' is not a number"),
    ],
)
def test_a_corrupt_meta_properties_stops_the_broker_and_stays(
    broker_factory, content: bytes, why: str
) -> None:
    broker = broker_factory()
    broker.stop()
    meta = broker.data_dir / "meta.properties"
    meta.write_bytes(content)
    before = _tree(broker.data_dir)

    line = _one_line(_serve(broker.data_dir))

    assert line == (
        f"kafkalite: cannot use log dir {broker.data_dir}: {meta} is corrupt ({why}); refusing "
        "to start: restore the file, or remove it to adopt this directory with a new identity"
    )
    assert meta.read_bytes() == content
    assert _tree(broker.data_dir) == before


def test_a_config_file_with_non_utf8_bytes_exits_2(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_bytes(b"broker.id=0\nlog.retention.hours=\xff\n")

    line = _one_line(_serve(tmp_path / "data", "--config", str(config)))

    assert line == f"kafkalite: cannot read config file {config}: byte 32 is not UTF-8"
    assert not (tmp_path / "data").exists()


def test_a_full_disk_is_logged_once_per_episode(broker_factory, topic_name) -> None:
    """RLIMIT_FSIZE makes the segment file "full": appends fail with EFBIG (Python ignores
    SIGXFSZ), as with ENOSPC, until the test raises the limit again."""
    broker = broker_factory()
    topic = topic_name()
    create_topic(broker.bootstrap, topic)
    assert broker.process is not None
    pid = broker.process.pid
    unlimited = resource.prlimit(pid, resource.RLIMIT_FSIZE)
    value = b"v" * 10_000
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (45_000, unlimited[1]))
    try:
        failing = Deliveries()
        prod = producer(broker.bootstrap, retries=0, **{"enable.idempotence": False})
        for _ in range(8):
            prod.produce(topic, value=value, on_delivery=failing.callback)
            assert prod.flush(CLIENT_TIMEOUT) == 0
    finally:
        resource.prlimit(pid, resource.RLIMIT_FSIZE, unlimited)
    recovered = _produce(broker.bootstrap, topic, 2)

    # Four batches of 10,070 bytes fit below 45,000 bytes; the other four fail.
    assert len(failing.succeeded) == 4
    assert [d.error.code() for d in failing.failed] == [KafkaError.KAFKA_STORAGE_ERROR] * 4
    assert not recovered.failed
    errors = error_records(broker.lines)
    assert len(errors) == 1, errors
    assert f"writes to log dir {broker.data_dir} fail (File too large)" in errors[0]
    assert "Traceback" not in broker.output()
    recoveries = [line for line in broker.lines if "succeed again" in line]
    assert len(recoveries) == 1
    assert f"writes to log dir {broker.data_dir} succeed again" in recoveries[0]
    assert len(consume_all(broker.bootstrap, topic, [0])[0]) == 6
