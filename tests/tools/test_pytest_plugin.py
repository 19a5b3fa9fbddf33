"""The pytest plugin (installed through the `pytest11` entry point) and EmbeddedBroker: the
docs' example runs as a user's project would run it; brokers stop even when a test fails."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from kafkalite.testing import BrokerProcess, EmbeddedBroker

DOCS = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def _pytest(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """pytest in a project of its own: only the installed entry point brings the plugin."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _refuses(bootstrap: str) -> bool:
    host, port = bootstrap.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def test_the_docs_example_passes_with_the_installed_plugin(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n# (\S+\.py)\n(.*?)```", DOCS.read_text(), re.S)
    assert [name for name, _ in blocks] == ["order_totals.py", "test_order_totals.py"]
    for name, code in blocks:
        (tmp_path / name).write_text(code)
    result = _pytest(tmp_path, "-p", "no:randomly")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout


def test_brokers_stop_even_when_tests_fail(tmp_path: Path) -> None:
    (tmp_path / "test_failing.py").write_text(
        "from pathlib import Path\n"
        "def test_fresh(kafkalite_fresh_broker):\n"
        "    Path('fresh.txt').write_text(kafkalite_fresh_broker.bootstrap)\n"
        "    assert False, 'the test fails'\n"
        "def test_session(kafkalite_broker, kafkalite_topic):\n"
        "    kafkalite_topic(partitions=3)\n"
        "    Path('session.txt').write_text(kafkalite_broker.bootstrap)\n"
        "    raise RuntimeError('the test errs')\n"
        "def test_process(kafkalite_broker_factory):\n"
        "    broker = kafkalite_broker_factory({'num.partitions': '2'}, process=True)\n"
        "    Path('process.txt').write_text(broker.bootstrap)\n"
        "    assert False\n"
    )
    result = _pytest(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "3 failed" in result.stdout
    for name in ("fresh.txt", "session.txt", "process.txt"):
        assert _refuses((tmp_path / name).read_text()), name


def test_topics_of_kafkalite_topic_are_fresh_and_deleted_after(tmp_path: Path) -> None:
    (tmp_path / "test_topics.py").write_text(
        "names = []\n"
        "def test_make(kafkalite_broker, kafkalite_topic):\n"
        "    names.append(kafkalite_topic(partitions=4, config={'cleanup.policy': 'compact'}))\n"
        "    topic = kafkalite_broker.broker.replica_manager.topics[names[0]]\n"
        "    assert len(topic.partitions) == 4\n"
        "def test_deleted_after(kafkalite_broker):\n"
        "    assert names[0] not in kafkalite_broker.broker.replica_manager.topics\n"
    )
    result = _pytest(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_embedded_broker_context_manager_round_trip() -> None:
    with EmbeddedBroker(overrides={"num.partitions": "2"}) as broker:
        data_dir = broker.data_dir
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(10):
            producer.produce("cm", str(i).encode(), partition=i % 2)
        assert producer.flush(10) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "cm"})
        consumer.assign([TopicPartition("cm", p, 0) for p in (0, 1)])
        values = []
        while len(values) < 10:
            message = consumer.poll(10)
            assert message is not None and message.error() is None
            values.append(int(message.value()))
        consumer.close()
        assert sorted(values) == list(range(10))
    assert _refuses(broker.bootstrap)
    assert not data_dir.exists()  # its own temp dir, removed


def test_embedded_broker_reports_a_bad_property() -> None:
    broker = EmbeddedBroker(overrides={"num.partitions": "zero"})
    try:
        broker.start()
    except RuntimeError as exc:
        assert "num.partitions" in str(exc)
    else:
        broker.stop()
        raise AssertionError("a bad property started a broker")
    assert not broker.data_dir.exists()


def test_embedded_broker_names_what_failed() -> None:
    broker = EmbeddedBroker(overrides={"num.partitions": "zero"})
    try:
        broker.start()
    except RuntimeError as exc:
        assert str(exc).endswith("(while reading its configuration)")
    else:
        broker.stop()
        raise AssertionError("a bad property started a broker")


def test_embedded_broker_timeout_names_what_it_waited_for(monkeypatch) -> None:
    from kafkalite.broker.broker import Broker

    real_open = Broker.open

    def slow_open(config, *args, **kwargs):  # a disk that takes longer than the timeout
        time.sleep(1.0)
        return real_open(config, *args, **kwargs)

    monkeypatch.setattr(Broker, "open", staticmethod(slow_open))
    broker = EmbeddedBroker()
    try:
        broker.start(timeout=0.2)
    except RuntimeError as exc:
        assert str(exc) == (
            "kafkalite did not start within 0.2s (imports excluded): "
            f"still opening its log dirs ({broker.data_dir})"
        )
    else:
        broker.stop()
        raise AssertionError("started within the timeout")
    assert not broker.data_dir.exists()


# The broker's imports take 2.5 s more here; the start timeout, 2 s, must not count them.
_SLOW_IMPORTS = """
import sys, time
from kafkalite.testing import BrokerProcess, EmbeddedBroker

class SlowImports:
    def find_spec(self, name, path=None, target=None):
        if name == "kafkalite.server":
            time.sleep(2.5)
        return None

sys.meta_path.insert(0, SlowImports())
broker = EmbeddedBroker().start(timeout=2)
broker.stop()
print("started")
"""


def test_embedded_broker_start_timeout_excludes_imports() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _SLOW_IMPORTS], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "started\n"


def test_broker_process_says_it_exited(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path, {"num.partitions": "zero"})
    try:
        broker.start()
    except RuntimeError as exc:
        reason, _, output = str(exc).partition(":\n")
        assert reason == "kafkalite exited with code 2 before it started"
        assert "num.partitions" in output
    else:
        broker.stop()
        raise AssertionError("a bad property started a broker")


class _SilentProcess(BrokerProcess):
    """A process that prints nothing (an interpreter still importing, say)."""

    def command(self) -> list[str]:
        return [sys.executable, "-c", "import time; time.sleep(60)"]


def test_broker_process_says_what_it_waited_for(tmp_path: Path) -> None:
    broker = _SilentProcess(tmp_path)
    try:
        broker.start(timeout=0.5)
    except RuntimeError as exc:
        assert str(exc) == "kafkalite did not start within 0.5s: no output yet (still importing):\n"
    else:
        raise AssertionError("a silent process counted as started")
    assert broker.process is None  # stopped
