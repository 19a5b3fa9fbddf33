"""A fuzz campaign against a real broker process: batches of mutants sent on parallel connections,
and after each batch the checks that the broker is alive, answers a probe (ApiVersions) within a
bound, keeps its RSS flat and logged no traceback.

Each mutant is followed on its connection by a probe request: the probe's answer (or the broker
closing the connection) ends the mutant's turn, whether or not the mutant itself was answered
(acks=0 produce is not). A mutant whose size prefix lies is sent alone and the connection
half-closed. A connection that gives neither within `frame_timeout` is dropped ("slow": a
mutated long-poll timeout, for instance); only the batch probe on a fresh connection decides a
hang.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from fuzz.fields import mutate_fields
from fuzz.mutate import Mutant, mutate
from fuzz.seeds import FUZZ_TOPIC, Seed, seeds
from kafkalite.testing import BrokerProcess, error_records
from protocol_tests.raw_client import (
    RawClient,
    api_versions_request,
    create_topics_request,
    encode_request,
)

FUZZ_BROKER_OVERRIDES = {
    "num.partitions": "1",
    "auto.create.topics.enable": "false",
    "socket.request.max.bytes": str(1 << 20),
    "group.initial.rebalance.delay.ms": "0",
    # Mutated CreateTopics/CreatePartitions counts: the broker's own caps refuse the large
    # ones (POLICY_VIOLATION); low caps keep a run from spending its time creating partitions.
    "kafkalite.max.partitions.per.request": "50",
    "kafkalite.max.partitions": "500",
}
_SIZE = struct.Struct(">i")
_PROBE_CID_BASE = 0x5A000000
FIELD_MUTANTS = 0.33


@dataclass(frozen=True, slots=True)
class Settings:
    frames: int
    seed: int
    batch: int = 2000
    lanes: int = 8
    frame_timeout: float = 2.0
    probe_bound: float = 10.0
    start_batch: int = 0


@dataclass
class Report:
    frames: int = 0
    batches: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)  # answered / closed / slow
    crashes: int = 0
    hangs: int = 0
    tracebacks: int = 0
    error_records: int = 0
    first_problem: str = ""
    rss_start_kib: int = 0
    rss_end_kib: int = 0
    rss_max_kib: int = 0
    probe_max_s: float = 0.0
    duration_s: float = 0.0
    log_lines: int = 0

    @property
    def clean(self) -> bool:
        return not (self.crashes or self.hangs or self.tracebacks or self.error_records)

    def summary(self) -> str:
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items()))
        return (
            f"frames {self.frames} in {self.batches} batches, {self.duration_s:.0f} s "
            f"({self.frames / max(self.duration_s, 1e-9):.0f}/s): {outcomes}\n"
            f"crashes {self.crashes}, hangs {self.hangs}, tracebacks {self.tracebacks}, "
            f"error records {self.error_records}\n"
            f"broker RSS {self.rss_start_kib // 1024} MiB after the first batch, "
            f"{self.rss_end_kib // 1024} MiB at the end (max {self.rss_max_kib // 1024} MiB); "
            f"slowest probe {self.probe_max_s:.2f} s; {self.log_lines} broker log lines"
            + (f"\nfirst problem: {self.first_problem}" if self.first_problem else "")
        )


def batch_mutants(settings: Settings, corpus: list[Seed], index: int) -> list[Mutant]:
    """Batch `index`'s mutants: the same for the same seed, whatever ran before."""
    rng = random.Random(f"{settings.seed}:{index}")
    size = min(settings.batch, settings.frames - index * settings.batch)
    return [_mutant(rng, rng.choice(corpus)) for _ in range(size)]


def _mutant(rng: random.Random, seed: Seed) -> Mutant:
    """A third are well-formed requests with an odd field value; the rest are byte mutations."""
    if rng.random() < FIELD_MUTANTS:
        frame = mutate_fields(rng, seed)
        if frame is not None:
            return Mutant(frame, len(frame))
    return mutate(rng, seed.frame, seed.body_start)


def run(settings: Settings, data_dir: Path, progress: bool = False) -> Report:
    """Start a broker in `data_dir`, fuzz it, stop it: the report."""
    broker = BrokerProcess(data_dir, FUZZ_BROKER_OVERRIDES)
    broker.start()
    try:
        return _campaign(settings, broker, progress)
    finally:
        broker.stop()


def _campaign(settings: Settings, broker: BrokerProcess, progress: bool) -> Report:
    corpus = seeds(_create_fuzz_topic(broker))
    report = Report()
    monitor = _Monitor(broker, settings.probe_bound, report)
    started = time.monotonic()
    batches = -(-settings.frames // settings.batch)
    for index in range(settings.start_batch, batches):
        mutants = batch_mutants(settings, corpus, index)
        report.outcomes.update(_send_batch(broker, mutants, settings))
        report.frames += len(mutants)
        report.batches += 1
        monitor.check(index)
        report.duration_s = time.monotonic() - started
        if progress:
            print(f"batch {index}: {report.summary()}", flush=True)
        if report.crashes or report.hangs:
            break
    return report


def _create_fuzz_topic(broker: BrokerProcess) -> uuid.UUID:
    with RawClient(broker.host, broker.port) as client:
        response = client.request(create_topics_request(FUZZ_TOPIC, partitions=1))
        (topic,) = response.topics
        assert topic.error_code == 0, f"creating {FUZZ_TOPIC}: error {topic.error_code}"
        return topic.topic_id


class _Monitor:
    """The checks after each batch: alive, probe answered in time, RSS, no traceback."""

    def __init__(self, broker: BrokerProcess, probe_bound: float, report: Report) -> None:
        self.broker, self.probe_bound, self.report = broker, probe_bound, report

    def check(self, batch: int) -> None:
        report, process = self.report, self.broker.process
        assert process is not None
        if process.poll() is not None:
            report.crashes += 1
            self._problem(f"batch {batch}: broker exited with {process.returncode}")
        else:
            self._probe(batch)
            rss = _rss_kib(process.pid)
            report.rss_start_kib = report.rss_start_kib or rss
            report.rss_end_kib = rss
            report.rss_max_kib = max(report.rss_max_kib, rss)
        self._scan_log(batch)

    def _probe(self, batch: int) -> None:
        began = time.monotonic()
        try:
            with RawClient(self.broker.host, self.broker.port, timeout=self.probe_bound) as c:
                ok = c.request(api_versions_request(3)).error_code == 0
        except (OSError, TimeoutError, AssertionError) as exc:
            ok = False
            self._problem(f"batch {batch}: probe failed: {type(exc).__name__}: {exc}")
        elapsed = time.monotonic() - began
        self.report.probe_max_s = max(self.report.probe_max_s, elapsed)
        if not ok:
            self.report.hangs += 1

    def _scan_log(self, batch: int) -> None:
        lines = self.broker.lines
        count = len(lines)
        chunk = lines[:count]
        del lines[:count]  # the reader thread only appends: keep memory flat over long runs
        self.report.log_lines += count
        self.report.tracebacks += sum("Traceback" in line for line in chunk)
        records = error_records(chunk)
        self.report.error_records += len(records)
        if records:
            self._problem(f"batch {batch}: {records[0]}")

    def _problem(self, text: str) -> None:
        self.report.first_problem = self.report.first_problem or text


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


# -- sending -------------------------------------------------------------------------------------


def _send_batch(broker: BrokerProcess, mutants: list[Mutant], settings: Settings) -> Counter[str]:
    lanes = [mutants[i :: settings.lanes] for i in range(settings.lanes)]
    results = [Counter[str]() for _ in lanes]
    threads = [
        threading.Thread(
            target=_lane, args=(broker.host, broker.port, lane, settings.frame_timeout, result)
        )
        for lane, result in zip(lanes, results, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(results, Counter())


def _lane(host: str, port: int, mutants: list[Mutant], timeout: float, out: Counter[str]) -> None:
    conn: _Connection | None = None
    for number, mutant in enumerate(mutants):
        if conn is None:
            try:
                conn = _Connection(host, port)
            except OSError:  # the broker is gone: the batch check reports it
                out["refused"] += len(mutants) - number
                return
        outcome = conn.exchange(mutant, _PROBE_CID_BASE + number, timeout)
        out[outcome] += 1
        if outcome != "answered":
            conn.close()
            conn = None
    if conn is not None:
        conn.close()


class _Connection:
    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = bytearray()

    def exchange(self, mutant: Mutant, probe_cid: int, timeout: float) -> str:
        """Send the mutant (and a probe after it): answered, closed or slow."""
        deadline = time.monotonic() + timeout
        data = _SIZE.pack(mutant.size) + mutant.frame
        try:
            if mutant.size_lies:
                self.sock.sendall(data)
                self.sock.shutdown(socket.SHUT_WR)
                return self._until_closed(deadline)
            probe = encode_request(api_versions_request(3), probe_cid)
            self.sock.sendall(data + _SIZE.pack(len(probe)) + probe)
            return self._until_probe(probe_cid, deadline)
        except (ConnectionError, BrokenPipeError):
            return "closed"
        except TimeoutError:
            return "slow"

    def _receive(self, deadline: float) -> bool:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        self.sock.settimeout(remaining)
        data = self.sock.recv(1 << 16)
        self.buffer += data
        return bool(data)

    def _until_probe(self, probe_cid: int, deadline: float) -> str:
        while True:
            while len(self.buffer) >= 8:
                size, cid = struct.unpack_from(">ii", self.buffer)
                if len(self.buffer) < 4 + size:
                    break
                del self.buffer[: 4 + size]
                if cid == probe_cid:
                    return "answered"
            if not self._receive(deadline):
                return "closed"

    def _until_closed(self, deadline: float) -> str:
        while self._receive(deadline):
            self.buffer.clear()
        return "closed"

    def close(self) -> None:
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.sock.close()
