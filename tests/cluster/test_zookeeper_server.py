"""kafkalite.cluster.zookeeper_server: a real ZooKeeper process, started, probed, stopped,
killed and restarted on the same data dir and port."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from kafkalite.cluster.zk_client import ZkClient
from kafkalite.cluster.zookeeper_server import (
    ZOOKEEPER,
    ZooKeeperServer,
    four_letter_word,
    parse_srvr,
)

pytestmark = pytest.mark.slow


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_started_server_answers_four_letter_words(zookeeper: ZooKeeperServer) -> None:
    assert four_letter_word(zookeeper.host, zookeeper.port, "ruok") == "imok"
    srvr = zookeeper.srvr()
    assert srvr["Mode"] == "standalone"
    assert srvr["Zookeeper version"].startswith(f"{ZOOKEEPER.version()}-")  # the pom's
    assert zookeeper.connect_string == f"127.0.0.1:{zookeeper.port}"


def test_stop_ends_the_process_group_and_restart_keeps_znodes_and_port(
    zookeeper_factory: Callable[[], ZooKeeperServer],
) -> None:
    server = zookeeper_factory()
    port, pgid = server.port, server.pid
    assert pgid is not None

    async def write() -> None:
        async with ZkClient.open(server.connect_string) as zk:
            await zk.create("/kept", b"across restarts")

    async def read() -> bytes:
        async with ZkClient.open(server.connect_string) as zk:
            return (await zk.get("/kept"))[0]

    trio.run(write)
    assert server.stop() == 128 + signal.SIGTERM  # the JVM's exit status on SIGTERM
    assert not _group_alive(pgid)
    assert server.probe("ruok") == ""
    server.start()
    assert server.port == port
    assert trio.run(read) == b"across restarts"
    assert server.kill() == -signal.SIGKILL
    server.start()
    assert trio.run(read) == b"across restarts"


def test_command_line_runs_until_sigterm(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "kafkalite.cluster.zookeeper_server", "--data-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("zookeeper.connect=127.0.0.1:")
        host, port = line.strip().split("=", 1)[1].split(":")
        assert parse_srvr(four_letter_word(host, int(port), "srvr"))["Mode"] == "standalone"
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
        assert (tmp_path / "zoo.cfg").is_file()
        with pytest.raises(ConnectionRefusedError):
            four_letter_word(host, int(port), "ruok")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
