"""The command line: bad input exits 2 with one line on stderr; SIGTERM/SIGINT stop cleanly."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from e2e_helpers import CLIENT_TIMEOUT, admin

from kafkalite.testing import BrokerProcess

TIMEOUT = 30


def _serve(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kafkalite", "serve", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=cwd,
    )


def _serve_overrides(cwd: Path, *overrides: str) -> subprocess.CompletedProcess[str]:
    """`kafkalite serve --override o` for each of `overrides`."""
    return _serve(*(arg for override in overrides for arg in ("--override", override)), cwd=cwd)


def _assert_usage_error(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got: {result.stderr!r}"
    for word in words:
        assert word in lines[0], (word, lines[0])


def _listener(port: int = 0) -> str:
    return f"listeners=PLAINTEXT://127.0.0.1:{port}"


def test_unknown_property(tmp_path: Path) -> None:
    result = _serve_overrides(tmp_path, f"log.dirs={tmp_path}", _listener(), "no.such.property=1")
    _assert_usage_error(result, "no.such.property")


@pytest.mark.parametrize(
    "override",
    [
        "num.partitions=abc",
        "num.partitions=0",
        "auto.create.topics.enable=maybe",
        "log.segment.bytes=10",
        "listeners=nonsense",
        "listeners=PLAINTEXT://127.0.0.1:70000",
        "broker.id=-1",
    ],
)
def test_bad_value(tmp_path: Path, override: str) -> None:
    result = _serve_overrides(tmp_path, f"log.dirs={tmp_path}", _listener(), override)
    _assert_usage_error(result, override.split("=")[0])


def test_override_without_equals(tmp_path: Path) -> None:
    result = _serve_overrides(tmp_path, "num.partitions")
    _assert_usage_error(result)


def test_missing_config_file(tmp_path: Path) -> None:
    result = _serve("--config", str(tmp_path / "nope.properties"), cwd=tmp_path)
    _assert_usage_error(result, "nope.properties")


def test_bad_config_file_line(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("# comment\nbroker.id=0\nthis line has no separator\n")
    result = _serve("--config", str(config), cwd=tmp_path)
    _assert_usage_error(result)


def test_unknown_property_in_config_file(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text(f"log.dirs={tmp_path / 'data'}\nbogus.setting=3\n")
    result = _serve("--config", str(config), "--override", _listener(), cwd=tmp_path)
    _assert_usage_error(result, "bogus.setting")


def test_port_in_use(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _serve_overrides(tmp_path, f"log.dirs={tmp_path / 'data'}", _listener(port))
    _assert_usage_error(result, str(port))


def test_port_in_use_by_another_broker(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "first") as first:
        result = _serve_overrides(
            tmp_path, f"log.dirs={tmp_path / 'second'}", _listener(first.port)
        )
        _assert_usage_error(result)
        # The first broker is unaffected.
        assert admin(first.bootstrap).list_topics(timeout=CLIENT_TIMEOUT).brokers


def test_log_dir_is_a_file(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("I am a file\n")
    result = _serve_overrides(tmp_path, f"log.dirs={not_a_dir}", _listener())
    _assert_usage_error(result, str(not_a_dir))


def test_log_dir_under_a_file(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    target = blocker / "data"
    result = _serve_overrides(tmp_path, f"log.dirs={target}", _listener())
    _assert_usage_error(result)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_cleanly(tmp_path: Path, sig: signal.Signals) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        assert admin(broker.bootstrap).list_topics(timeout=CLIENT_TIMEOUT).brokers
        assert not (tmp_path / "data" / ".kafka_cleanshutdown").exists()
    finally:
        code = broker.stop(sig)
    assert code == 0, broker.output()[-2000:]
    assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()
    assert "stopped cleanly" in broker.output()
    assert "Traceback" not in broker.output()


def test_started_line_reports_real_port(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data") as broker:
        assert broker.port > 0
        assert f"listening on 127.0.0.1:{broker.port}" in broker.output()
        with socket.create_connection((broker.host, broker.port), timeout=5):
            pass
