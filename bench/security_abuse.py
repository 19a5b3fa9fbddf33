"""Abuse figures on a SASL_SSL broker (issue 20): does one client's misbehaviour slow
the others, and does a quota hold?

    python -m bench.security_abuse [--seconds 10] [--scram-attempts 10000]
        [--half-open 1000] [--quota-bytes 1048576] [--quota-seconds 30]
        [--attacker-address 127.0.0.2] [--ip-quota N] [--phases scram,half-open,quota]
        [--warm-up 2] [--target kafkalite|kafka]

Not a test: it prints figures. One `kafkalite serve`, or with `--target kafka` Apache Kafka 4.4
(the listeners, certificates and users of bench/security_bench.py). A baseline client on
SASL_SSL (SCRAM-SHA-256) from 127.0.0.1 makes produce/consume round trips, one at a time:
produce one 1 KiB record (acks=1, linger.ms=0) and poll an assigned consumer until it has it;
latency p50/p99 and round trips a second, measured alone for `--seconds`, then again while
  (a) `--scram-attempts` SCRAM exchanges with a wrong password run from 4 other processes
      (16 connections at a time each; the window is as long as they take); the attackers
      send a random proof, which costs the broker what a wrong password does, without the
      client's PBKDF2 (4096 rounds, 64 threads of it took the shared cores from everyone),
  (b) `--half-open` TCP connections to the SASL_SSL port that never start the TLS handshake
      are held open for `--seconds` (from another process),
  (c) a producer with client id `throttled` (a `producer_byte_rate` quota of
      `--quota-bytes`, AlterClientQuotas) produces 1 KiB records flat out for
      `--quota-seconds` from another process; its acknowledged payload bytes a second are
      compared with the quota over each 10 s and over the whole run (Kafka's quota rate
      spans `quota.window.num` x `quota.window.size.seconds`, 11 s: a new client's first
      10 s of quota may come at once, and is paid back by throttling until it has left the
      window).
The attackers of (a) and (b) connect from `--attacker-address` (another loopback address);
`--ip-quota N` gives that address a `connection_creation_rate` of N (AlterClientQuotas,
entity type ip, as `kafka-configs.sh --entity-type ips`): the broker then holds each
connection over the rate unanswered for its throttle time and closes it, before any TLS
handshake. The attacker processes run at `--attacker-nice` (10): on this machine they
share the cores with the broker and the baseline client, in real life they would not.
Slowdown = baseline round trips a second in the `--seconds` alone just before the
phase / under abuse - 1. The attackers run on the same cores as the broker and the baseline
client, so their own CPU is part of the figure; so each window also gives the broker's own
CPU time (user + system, from /proc) per second of the window, in % of one core. With
`--split-cpus`, the broker (every thread) and the baseline client run on CPU 0 and the
attackers on the other CPUs, as if they came from other machines.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from bench.procstat import cpu_seconds
from bench.security_bench import (
    USER,
    Certificates,
    Running,
    client_settings,
    connect,
    prepare,
    start_kafka,
    start_kafkalite,
    topic_name,
    write_certificates,
    wrong_scram_exchange,
)

ATTACK_PROCESSES, ATTACK_THREADS = 4, 16
THROTTLED_CLIENT = "throttled"


@dataclass(frozen=True)
class Baseline:
    round_trips_per_s: float
    p50_ms: float
    p99_ms: float
    broker_cpu_percent: float | None = None  # of one core, over the window

    def slowdown(self, alone: Baseline) -> float:
        """How much fewer round trips a second than alone, in %."""
        return (alone.round_trips_per_s / self.round_trips_per_s - 1) * 100

    def __str__(self) -> str:
        cpu = (
            ""
            if self.broker_cpu_percent is None
            else f"  broker CPU {self.broker_cpu_percent:3.0f}%"
        )
        return (
            f"{self.round_trips_per_s:8.1f} round trips/s"
            f"  p50 {self.p50_ms:6.2f} ms  p99 {self.p99_ms:7.2f} ms{cpu}"
        )


class BaselineClient:
    """Produce one record, consume it back; one round trip at a time."""

    def __init__(self, settings: dict[str, Any], topic: str, broker_pid: int | None) -> None:
        self.topic = topic
        self.broker_pid = broker_pid
        self.producer = Producer({**settings, "linger.ms": 0, "acks": 1})
        self.consumer = Consumer(
            {**settings, "group.id": "baseline", "fetch.wait.max.ms": 100, "fetch.min.bytes": 1}
        )
        self.consumer.assign([TopicPartition(topic, 0, 0)])
        self.payload = b"b" * 1024
        while self.consumer.poll(0.5) is not None:  # skip what an earlier window left
            pass

    def round_trip(self) -> float:
        started = time.perf_counter()
        self.producer.produce(self.topic, self.payload)
        self.producer.flush(30)
        deadline = started + 30
        while True:
            message = self.consumer.poll(1.0)
            if message is not None and message.error() is None:
                return time.perf_counter() - started
            if time.perf_counter() > deadline:
                raise RuntimeError("baseline round trip took over 30 s")

    def run_while(self, busy: Callable[[], bool]) -> Baseline:
        latencies, started = [], time.perf_counter()
        cpu_before = self._broker_cpu()
        while busy():
            latencies.append(self.round_trip())
        elapsed = time.perf_counter() - started
        cpu_after = self._broker_cpu()
        cpu = None
        if cpu_before is not None and cpu_after is not None:
            cpu = (cpu_after - cpu_before) / elapsed * 100
        latencies.sort()
        return Baseline(
            len(latencies) / elapsed,
            statistics.median(latencies) * 1000,
            latencies[int(len(latencies) * 0.99)] * 1000,
            cpu,
        )

    def _broker_cpu(self) -> float | None:
        return None if self.broker_pid is None else cpu_seconds(self.broker_pid)

    def run_for(self, seconds: float) -> Baseline:
        end = time.perf_counter() + seconds
        return self.run_while(lambda: time.perf_counter() < end)

    def close(self) -> None:
        self.consumer.close()


ATTACKER_CPUS_ENV = "SECURITY_ABUSE_ATTACKER_CPUS"  # set by --split-cpus, read by attackers
DEFENDER_CPUS = {0}


def _become_attacker(nice: int) -> None:
    """Below the broker and the baseline client (nice), on CPUs of their own if split."""
    os.nice(nice)
    cpus = os.environ.get(ATTACKER_CPUS_ENV)
    if cpus:
        os.sched_setaffinity(0, {int(cpu) for cpu in cpus.split(",")})


def split_cpus(broker_pid: int) -> None:
    """The broker (all its threads) and this process (the baseline client) on CPU 0; the
    attacker processes, started later, on the others."""
    others = sorted(set(range(os.cpu_count() or 1)) - DEFENDER_CPUS)
    if not others:
        raise SystemExit("--split-cpus needs 2 CPUs or more")
    defenders = ",".join(map(str, sorted(DEFENDER_CPUS)))
    subprocess.run(["taskset", "-a", "-p", "-c", defenders, str(broker_pid)], check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    os.sched_setaffinity(0, DEFENDER_CPUS)
    os.environ[ATTACKER_CPUS_ENV] = ",".join(map(str, others))


def wrong_scram_attempts(
    port: int, ca: str, attempts: int, source: str, nice: int
) -> tuple[int, int, float]:
    """In an attacker process (at `nice`): `attempts` SCRAM exchanges with a wrong proof
    over TLS from the address `source`, ATTACK_THREADS at a time; returns how many the
    broker refused (SCRAM failed), how many it closed before that (its connection
    quota), and the CPU seconds the process used."""
    _become_attacker(nice)
    refused, closed, accepted, lock = [0], [0], [0], threading.Lock()
    counter = iter(range(attempts))

    def attacker() -> None:
        for _ in counter:
            try:
                with connect("SASL_SSL", port, Path(ca), source) as client:
                    outcome = refused if wrong_scram_exchange(client, USER) else accepted
            except OSError:
                outcome = closed
            with lock:
                outcome[0] += 1

    threads = [threading.Thread(target=attacker) for _ in range(ATTACK_THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if accepted[0]:
        raise RuntimeError(f"the broker accepted {accepted[0]} random SCRAM proofs")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return refused[0], closed[0], usage.ru_utime + usage.ru_stime


def hold_half_open(port: int, count: int, seconds: float, source: str, nice: int) -> int:
    """In an attacker process (at `nice`): `count` TCP connections from `source` that never
    send a ClientHello, held for `seconds`; returns how many the broker had closed by then."""
    _become_attacker(nice)
    target, bind = ("127.0.0.1", port), (source, 0)
    sockets = [socket.create_connection(target, 10, bind) for _ in range(count)]
    time.sleep(seconds)
    closed = 0
    for sock in sockets:
        sock.setblocking(False)
        try:
            closed += sock.recv(1) == b""
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
        sock.close()
    return closed


def scram_phase(
    baseline: BaselineClient,
    running: Running,
    certs: Certificates,
    total: int,
    source: str,
    nice: int,
) -> tuple[Baseline, int, int, float, float]:
    context = multiprocessing.get_context("spawn")
    per_process = [total // ATTACK_PROCESSES] * ATTACK_PROCESSES
    per_process[0] += total - sum(per_process)
    args = [(running.ports["SASL_SSL"], str(certs.ca), n, source, nice) for n in per_process]
    with context.Pool(ATTACK_PROCESSES) as pool:
        started = time.perf_counter()
        result = pool.starmap_async(wrong_scram_attempts, args)
        figures = baseline.run_while(lambda: not result.ready())
        outcomes = result.get(timeout=900)
        elapsed = time.perf_counter() - started
    refused, closed, cpu = (sum(counts) for counts in zip(*outcomes, strict=True))
    return figures, int(refused), int(closed), elapsed, cpu


def half_open_phase(
    baseline: BaselineClient, running: Running, count: int, seconds: float, source: str, nice: int
) -> tuple[Baseline, int]:
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        args = (running.ports["SASL_SSL"], count, seconds, source, nice)
        result = pool.apply_async(hold_half_open, args)
        time.sleep(1.0)  # let the connections open; then measure while they are held
        figures = baseline.run_while(lambda: not result.ready())
        closed = result.get(timeout=60)
    return figures, closed


def set_quota(running: Running, *entity_and_quota: str) -> None:
    """AlterClientQuotas with the kafkalite CLI (over the PLAINTEXT listener; Kafka too)."""
    command = [sys.executable, "-m", "kafkalite", "quota", "set"]
    command += ["-b", f"127.0.0.1:{running.ports['PLAINTEXT']}", *entity_and_quota]
    subprocess.run(command, check=True, capture_output=True, timeout=60)


def throttled_producer(settings: dict[str, Any], topic: str, seconds: float) -> list[float]:
    """Produce 1 KiB records flat out for `seconds`; the acknowledged bytes per second."""
    producer = Producer({**settings, "client.id": THROTTLED_CLIENT, "linger.ms": 5, "acks": 1})
    started = time.perf_counter()
    per_second = [0.0] * int(seconds)

    def acknowledged(error: Any, message: Any) -> None:
        second = int(time.perf_counter() - started)
        if error is None and second < len(per_second):
            per_second[second] += len(message.value())

    payload = b"t" * 1024
    while time.perf_counter() - started < seconds:
        try:
            producer.produce(topic, payload, on_delivery=acknowledged)
        except (BufferError, KafkaException):
            producer.poll(0.01)
        producer.poll(0)
    producer.purge()
    producer.flush(10)
    return per_second


def quota_phase(
    baseline: BaselineClient, running: Running, certs: Certificates, quota: int, seconds: float
) -> tuple[Baseline, list[float]]:
    set_quota(running, "--client-id", THROTTLED_CLIENT, "--producer-byte-rate", str(quota))
    settings = client_settings("SASL_SSL", running.ports["SASL_SSL"], certs.ca)
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:  # its own process: not the baseline's GIL
        result = pool.apply_async(throttled_producer, (settings, topic_name("SSL"), seconds))
        figures = baseline.run_while(lambda: not result.ready())
        per_second = result.get(timeout=seconds + 60)
    return figures, per_second


PHASES = ("scram", "half-open", "quota")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--scram-attempts", type=int, default=10_000)
    parser.add_argument("--half-open", type=int, default=1_000)
    parser.add_argument("--quota-bytes", type=int, default=1_048_576)
    parser.add_argument("--quota-seconds", type=int, default=30)
    parser.add_argument("--attacker-address", default="127.0.0.2")
    parser.add_argument("--ip-quota", type=int, default=0, help="0: none")
    parser.add_argument("--attacker-nice", type=int, default=10)
    parser.add_argument(
        "--split-cpus", action="store_true", help="broker and baseline on CPU 0, attackers apart"
    )
    parser.add_argument("--warm-up", type=float, default=2.0, help="seconds, untimed")
    parser.add_argument("--phases", default=",".join(PHASES))
    parser.add_argument("--target", choices=("kafkalite", "kafka"), default="kafkalite")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} at start", flush=True)
    with tempfile.TemporaryDirectory(prefix="kafkalite-security-abuse-") as tmp:
        certs = write_certificates(Path(tmp))
        start = start_kafkalite if args.target == "kafkalite" else start_kafka
        running = start(Path(tmp), certs)
        try:
            prepare(running, certs)
            if args.split_cpus:
                assert running.pid is not None, "the broker's process is not known"
                split_cpus(running.pid)
            if args.ip_quota:
                ip = ["--ip", args.attacker_address]
                set_quota(running, *ip, "--connection-creation-rate", str(args.ip_quota))
            run(running, certs, args)
        finally:
            running.stop()
    print(f"load average {os.getloadavg()[0]:.1f} at end", flush=True)


def run(running: Running, certs: Certificates, args: argparse.Namespace) -> None:
    settings = client_settings("SASL_SSL", running.ports["SASL_SSL"], certs.ca)
    settings.update({"sasl.mechanism": "SCRAM-SHA-256"})
    baseline = BaselineClient(settings, topic_name("SASL_SSL"), running.pid)
    phases = args.phases.split(",")
    quota = f"connection_creation_rate {args.ip_quota}/s" if args.ip_quota else "no ip quota"
    print(
        f"attackers from {args.attacker_address} ({quota}), nice {args.attacker_nice}"
        + (", on CPUs of their own" if args.split_cpus else ""),
        flush=True,
    )
    try:
        baseline.run_for(args.warm_up)  # Kafka's JIT needs longer than kafkalite
        if "scram" in phases:
            alone = baseline.run_for(args.seconds)  # each phase against the window just before
            print(f"alone                      {alone}", flush=True)
            scram, refused, closed, elapsed, attackers_cpu = scram_phase(
                baseline,
                running,
                certs,
                args.scram_attempts,
                args.attacker_address,
                args.attacker_nice,
            )
            print(
                f"(a) wrong SCRAM attempts   {scram}  slowdown {scram.slowdown(alone):+.1f}%"
                f"  ({refused} of {args.scram_attempts} refused, {closed} closed before"
                f" authenticating, in {elapsed:.1f} s; the attackers' CPU"
                f" {attackers_cpu / elapsed * 100:.0f}% of a core)",
                flush=True,
            )
        if "half-open" in phases:
            alone = baseline.run_for(args.seconds)
            print(f"alone                      {alone}", flush=True)
            half, closed = half_open_phase(
                baseline,
                running,
                args.half_open,
                args.seconds,
                args.attacker_address,
                args.attacker_nice,
            )
            print(
                f"(b) half-open handshakes   {half}  slowdown {half.slowdown(alone):+.1f}%"
                f"  ({closed} of {args.half_open} closed by the broker after"
                f" {args.seconds:.0f} s)",
                flush=True,
            )
        if "quota" in phases:
            alone = baseline.run_for(args.seconds)
            print(f"alone                      {alone}", flush=True)
            throttled_phase(baseline, running, certs, args, alone)
    finally:
        baseline.close()


def throttled_phase(
    baseline: BaselineClient,
    running: Running,
    certs: Certificates,
    args: argparse.Namespace,
    alone: Baseline,
) -> None:
    figures, per_second = quota_phase(
        baseline, running, certs, args.quota_bytes, args.quota_seconds
    )
    print(f"(c) throttled producer     {figures}  slowdown {figures.slowdown(alone):+.1f}%")
    print(f"    quota {args.quota_bytes / 2**20:.2f} MiB/s; achieved:")
    spans = [(start, min(start + 10, len(per_second))) for start in range(0, len(per_second), 10)]
    for start, end in [*spans, (0, len(per_second))]:
        achieved = sum(per_second[start:end]) / (end - start)
        print(
            f"      s {start:>2}-{end:<2} {achieved / 2**20:.2f} MiB/s"
            f" ({(achieved / args.quota_bytes - 1) * 100:+.1f}%)"
        )
    each = " ".join(f"{b / 2**20:.2f}" for b in per_second)
    print(f"    MiB acknowledged each second: {each}", flush=True)


if __name__ == "__main__":
    main()
