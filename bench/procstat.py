"""Process figures from /proc (Linux) and a raw ApiVersions probe for cold-start timing."""

from __future__ import annotations

import os
import socket
import struct
import time
from dataclasses import dataclass

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def status_kib(pid: int, field: str) -> int | None:
    """A `kB` field of /proc/<pid>/status (VmHWM: peak RSS, VmRSS: current RSS), in KiB."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def cpu_times(pid: int) -> tuple[float, float] | None:
    """(user, system) CPU seconds of a process so far (all its threads), from /proc/<pid>/stat."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # fields[0] is the state (field 3 of the man page): utime is field 14, stime field 15.
    return int(fields[11]) / _CLOCK_TICKS, int(fields[12]) / _CLOCK_TICKS


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process so far."""
    times = cpu_times(pid)
    return None if times is None else sum(times)


def self_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


@dataclass
class CpuMeter:
    """CPU seconds used by the broker (if local) and by this client process over a phase."""

    broker_pid: int | None
    wall: float = 0.0
    broker_cpu: float | None = None
    broker_sys: float | None = None  # the part of broker_cpu spent in the kernel
    client_cpu: float = 0.0

    def __enter__(self) -> CpuMeter:
        self._wall0 = time.perf_counter()
        self._client0 = self_cpu_seconds()
        self._broker0 = cpu_times(self.broker_pid) if self.broker_pid else None
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self._wall0
        self.client_cpu = self_cpu_seconds() - self._client0
        if self.broker_pid and self._broker0 is not None:
            now = cpu_times(self.broker_pid)
            if now is not None:
                self.broker_cpu = sum(now) - sum(self._broker0)
                self.broker_sys = now[1] - self._broker0[1]

    def percent(self, cpu: float | None) -> float | None:
        return None if cpu is None or self.wall <= 0 else 100.0 * cpu / self.wall


def _api_versions_v0(correlation_id: int) -> bytes:
    client_id = b"kafkalite-bench"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    chunks, remaining = [], size
    while remaining:
        chunk = sock.recv(remaining)
        if not chunk:
            raise ConnectionError("connection closed mid-response")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def api_versions_ok(host: str, port: int, timeout: float = 1.0) -> bool:
    """One raw ApiVersions v0 round trip; True when answered with error code 0."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(_api_versions_v0(1))
            (size,) = struct.unpack(">i", _recv_exactly(sock, 4))
            payload = _recv_exactly(sock, size)
    except OSError:
        return False
    correlation_id, error_code = struct.unpack_from(">ih", payload)
    return correlation_id == 1 and error_code == 0


def wait_until_answering(host: str, port: int, timeout: float, interval: float = 0.002) -> float:
    """Poll with ApiVersions until answered; returns the perf_counter time of the answer."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        if api_versions_ok(host, port, timeout=max(0.05, deadline - time.perf_counter())):
            return time.perf_counter()
        time.sleep(interval)
    raise TimeoutError(f"no ApiVersions answer from {host}:{port} within {timeout}s")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]
