"""Throughput and connection set-up rate per security protocol: kafkalite and Apache Kafka.

    python -m bench.security_bench [--target both|kafkalite|kafka] [--messages 100000]
        [--size 1024] [--connections 200] [--rounds 3]

Not a test: it prints figures. Each broker listens on PLAINTEXT, SSL, SASL_PLAINTEXT and
SASL_SSL with the same certificates (one `trustme` CA; the broker's key, PKCS#8, and chain in
one PEM file, SANs localhost and 127.0.0.1, as `ssl.keystore.type=PEM` takes it) and the same
SASL users (PLAIN from the listeners' JAAS config, SCRAM-SHA-256 added with
AlterUserScramCredentials). kafkalite is a `kafkalite serve` subprocess; Kafka 4.4 the KRaft
node of compat/kafka_server.py. Per protocol: confluent-kafka produces `--messages` x `--size`
B (acks=1, linger.ms=5) to a new 1-partition topic and consumes them back from offset 0, in MB/s
of payload, with the broker process's CPU (user + system, all threads) per MB in each phase,
the steadier figure on a shared machine; then `--connections` fresh connections are opened one
after another, each completing TLS and SASL (SCRAM-SHA-256 where SASL) and one ApiVersions, in
set-ups per second. The protocols are measured in turn `--rounds` times (after an untimed
PLAINTEXT warm-up) and each figure's median kept. With both targets a last table gives the
ratio kafkalite/Kafka.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import itertools
import os
import secrets
import socket
import ssl
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import scramp
import trustme
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from cryptography.hazmat.primitives import serialization

from bench.procstat import cpu_seconds
from compat.kafka_server import KafkaServer
from kafkalite.testing import BrokerProcess, free_ports
from protocol_tests.raw_client import RawClient, api_versions_request, build

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
USER, PASSWORD = "bench", "bench-pw"
JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{USER}="{PASSWORD}";'
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


@dataclass(frozen=True)
class Certificates:
    ca: Path  # the CA certificate (clients' trust store)
    keystore: Path  # the broker's PKCS#8 key followed by its certificate chain


@dataclass
class Running:
    """A started broker: its port per security protocol and how to stop it."""

    ports: dict[str, int]
    stop: Callable[[], object]
    pid: int | None = None  # the broker's process (its CPU time)


def write_certificates(folder: Path) -> Certificates:
    ca = trustme.CA()
    leaf = ca.issue_cert("localhost", "127.0.0.1")
    key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), password=None)
    pkcs8 = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,  # Kafka's PEM keystore reads PKCS#8 keys only
        serialization.NoEncryption(),
    )
    keystore = folder / "broker.pem"
    keystore.write_bytes(pkcs8 + b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    return Certificates(folder / "ca.pem", keystore)


def security_overrides(certs: Certificates) -> dict[str, str]:
    """The TLS and SASL settings both brokers take, with Kafka's names."""
    settings = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.keystore),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
    }
    for listener in ("sasl_plaintext", "sasl_ssl"):
        settings[f"listener.name.{listener}.plain.sasl.jaas.config"] = JAAS
        settings[f"listener.name.{listener}.scram-sha-256.sasl.jaas.config"] = SCRAM_JAAS
    return settings


def start_kafkalite(folder: Path, certs: Certificates) -> Running:
    ports = dict(zip(PROTOCOLS, free_ports(len(PROTOCOLS)), strict=True))
    overrides = {
        "listeners": ",".join(f"{p}://127.0.0.1:{port}" for p, port in ports.items()),
        "num.partitions": "1",
        **security_overrides(certs),
    }
    broker = BrokerProcess(folder / "kafkalite", overrides).start()
    return Running(ports, broker.stop, broker.process.pid if broker.process else None)


def start_kafka(folder: Path, certs: Certificates) -> Running:
    *listener_ports, controller_port = free_ports(len(PROTOCOLS) + 1)
    ports = dict(zip(PROTOCOLS, listener_ports, strict=True))
    endpoints = [f"{p}://127.0.0.1:{port}" for p, port in ports.items()]
    overrides = {
        "listeners": ",".join([*endpoints, f"CONTROLLER://127.0.0.1:{controller_port}"]),
        "advertised.listeners": ",".join(endpoints),
        "listener.security.protocol.map": ",".join(
            f"{p}:{p}" for p in (*PROTOCOLS, "CONTROLLER")
        ).replace("CONTROLLER:CONTROLLER", "CONTROLLER:PLAINTEXT"),
        **security_overrides(certs),
    }
    server = KafkaServer(folder / "kafka", overrides)
    server.port, server.controller_port = ports["PLAINTEXT"], controller_port
    server.start()
    return Running(ports, server.stop, server.pid)


def prepare(running: Running, certs: Certificates) -> None:
    """The SCRAM user and one topic per protocol, over PLAINTEXT; waits until SCRAM works."""
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{running.ports['PLAINTEXT']}"})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    upsert = UserScramCredentialUpsertion(USER, info, PASSWORD.encode())
    admin.alter_user_scram_credentials([upsert])[USER].result(timeout=30)
    topics = [NewTopic(topic_name(p), 1, 1) for p in (*PROTOCOLS, "warm-up")]
    for future in admin.create_topics(topics, operation_timeout=30).values():
        future.result(timeout=30)
    deadline = time.monotonic() + 30  # Kafka applies the credential from its metadata log
    while True:
        try:
            one_connection("SASL_SSL", running.ports["SASL_SSL"], certs.ca)
            return
        except (OSError, scramp.ScramException, ValueError, AttributeError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def topic_name(protocol: str) -> str:
    return f"bench-{protocol.lower()}"


def client_settings(protocol: str, port: int, ca: Path) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": protocol,
    }
    if "SSL" in protocol:
        settings["ssl.ca.location"] = str(ca)
    if protocol.startswith("SASL"):
        settings.update(
            {"sasl.mechanism": "PLAIN", "sasl.username": USER, "sasl.password": PASSWORD}
        )
    return settings


@dataclass(frozen=True)
class Throughput:
    produce_mb_s: float
    consume_mb_s: float
    produce_cpu_ms_mb: float  # the broker's CPU per MB produced
    consume_cpu_ms_mb: float


def throughput(
    settings: dict[str, Any], topic: str, messages: int, size: int, broker_pid: int
) -> Throughput:
    payload = b"x" * size
    mb = messages * size / 2**20
    producer = Producer({**settings, "linger.ms": 5, "acks": 1})
    cpu_started = broker_cpu(broker_pid)
    started = time.perf_counter()
    for _ in range(messages):
        while True:
            try:
                producer.produce(topic, payload)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120):
        raise RuntimeError(f"{topic}: records left unacknowledged after 120 s")
    produce_s = time.perf_counter() - started
    produce_cpu = broker_cpu(broker_pid) - cpu_started
    consumer = Consumer({**settings, "group.id": "bench", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        cpu_started = broker_cpu(broker_pid)
        started, received = time.perf_counter(), 0
        while received < messages:
            if time.perf_counter() - started > 120:
                raise RuntimeError(f"{topic}: {received} of {messages} consumed after 120 s")
            received += sum(
                1
                for m in consumer.consume(min(10_000, messages - received), 5.0)
                if m.error() is None
            )
        consume_s = time.perf_counter() - started
        consume_cpu = broker_cpu(broker_pid) - cpu_started
    finally:
        consumer.close()
    return Throughput(
        mb / produce_s, mb / consume_s, 1000 * produce_cpu / mb, 1000 * consume_cpu / mb
    )


def broker_cpu(pid: int) -> float:
    seconds = cpu_seconds(pid)
    if seconds is None:
        raise RuntimeError(f"the broker (pid {pid}) is gone")
    return seconds


def connect(protocol: str, port: int, ca: Path, source: str | None = None) -> RawClient:
    """A raw-protocol client on a new connection (from the local address `source`, if
    given), TLS handshake done where SSL."""
    bind = None if source is None else (source, 0)
    raw = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=bind)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock: socket.socket = raw
    if "SSL" in protocol:
        context = ssl.create_default_context(cafile=str(ca))
        sock = context.wrap_socket(raw, server_hostname="localhost")
    client = RawClient.__new__(RawClient)
    client.sock, client.timeout, client._buffer = sock, 10.0, bytearray()
    client._correlation = itertools.count(1)
    return client


def scram_exchange(client: RawClient, user: str, password: str) -> None:
    """SaslHandshake v1 and the two SaslAuthenticate rounds of SCRAM-SHA-256; raises
    scramp.ScramException (or ValueError) when the broker refuses."""
    client.request(build(17, 1, "SaslHandshakeRequest", mechanism="SCRAM-SHA-256"))
    scram = scramp.ScramClient(["SCRAM-SHA-256"], user, password)
    first = client.request(_token(scram.get_client_first()))
    scram.set_server_first(first.auth_bytes.decode())
    final = client.request(_token(scram.get_client_final()))
    scram.set_server_final(final.auth_bytes.decode())


def wrong_scram_exchange(client: RawClient, user: str) -> bool:
    """SCRAM-SHA-256 with a random proof: to the broker a wrong password, at the same cost
    to it, without the client's PBKDF2 (an attacker's own CPU, on another machine in real
    life). True when the broker refused it."""
    client.request(build(17, 1, "SaslHandshakeRequest", mechanism="SCRAM-SHA-256"))
    first = client.request(_token(f"n,,n={user},r={secrets.token_urlsafe(18)}"))
    if first.error_code:
        return True
    server_first = dict(part.split("=", 1) for part in first.auth_bytes.decode().split(","))
    proof = base64.b64encode(secrets.token_bytes(32)).decode()
    final = client.request(_token(f"c=biws,r={server_first['r']},p={proof}"))
    return bool(final.error_code)


def one_connection(protocol: str, port: int, ca: Path) -> None:
    with connect(protocol, port, ca) as client:
        if protocol.startswith("SASL"):
            scram_exchange(client, USER, PASSWORD)
        client.request(api_versions_request())


def _token(message: str) -> Any:
    return build(36, 2, "SaslAuthenticateRequest", auth_bytes=message.encode())


# protocol -> produce MB/s, consume MB/s, set-ups/s, broker CPU ms/MB produce and consume
Row = tuple[float, float, float, float, float]
Figures = dict[str, Row]
HEADER = ("produce MB/s", "consume MB/s", "set-ups/s", "cpu ms/MB p", "cpu ms/MB c")


def measure(running: Running, certs: Certificates, args: argparse.Namespace) -> Figures:
    pid = running.pid
    assert pid is not None
    # An untimed run first, so the JVM's JIT has compiled the produce and fetch paths.
    warm_up = client_settings("PLAINTEXT", running.ports["PLAINTEXT"], certs.ca)
    throughput(warm_up, topic_name("warm-up"), min(args.messages, 20_000), args.size, pid)
    rounds: dict[str, list[Row]] = {p: [] for p in PROTOCOLS}
    for round_ in range(args.rounds):
        for protocol in PROTOCOLS:
            port = running.ports[protocol]
            settings = client_settings(protocol, port, certs.ca)
            topic = topic_name(protocol)
            moved = throughput(settings, topic, args.messages, args.size, pid)
            started = time.perf_counter()
            for _ in range(args.connections):
                one_connection(protocol, port, certs.ca)
            rate = args.connections / (time.perf_counter() - started)
            row = (
                moved.produce_mb_s,
                moved.consume_mb_s,
                rate,
                moved.produce_cpu_ms_mb,
                moved.consume_cpu_ms_mb,
            )
            rounds[protocol].append(row)
            print(f"  {round_ + 1:<6} {protocol:<14}{format_row(row)}", flush=True)
    figures = {p: median_figures(rounds[p]) for p in PROTOCOLS}
    for protocol, row in figures.items():
        print(f"  median {protocol:<14}{format_row(row)}", flush=True)
    return figures


def format_row(row: Row) -> str:
    produce, consume, rate, produce_cpu, consume_cpu = row
    return f"{produce:>14.1f}{consume:>14.1f}{rate:>12.0f}{produce_cpu:>13.2f}{consume_cpu:>13.2f}"


def median_figures(rounds: list[Row]) -> Row:
    produce, consume, rate, produce_cpu, consume_cpu = (
        statistics.median(column) for column in zip(*rounds, strict=True)
    )
    return produce, consume, rate, produce_cpu, consume_cpu


@contextlib.contextmanager
def started(target: str, folder: Path, certs: Certificates) -> Iterator[Running]:
    running = (start_kafkalite if target == "kafkalite" else start_kafka)(folder, certs)
    try:
        prepare(running, certs)
        yield running
    finally:
        running.stop()


def print_ratios(results: dict[str, Figures]) -> None:
    print("kafkalite/Kafka")
    print(f"  {'protocol':<21}" + "".join(f"{name:>14}" for name in HEADER))
    for protocol in PROTOCOLS:
        ratios = [
            a / b
            for a, b in zip(results["kafkalite"][protocol], results["kafka"][protocol], strict=True)
        ]
        print(f"  {protocol:<21}" + "".join(f"{ratio:>14.2f}" for ratio in ratios))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=("both", "kafkalite", "kafka"), default="both")
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3, help="per protocol; medians are kept")
    args = parser.parse_args()
    targets = ("kafkalite", "kafka") if args.target == "both" else (args.target,)
    print(f"load average {os.getloadavg()[0]:.1f} at start", flush=True)
    results: dict[str, Figures] = {}
    with tempfile.TemporaryDirectory(prefix="kafkalite-security-bench-") as tmp:
        certs = write_certificates(Path(tmp))
        for target in targets:
            with started(target, Path(tmp), certs) as running:
                print(target)
                print(f"  {'round  protocol':<21}" + "".join(f"{n:>14}" for n in HEADER))
                results[target] = measure(running, certs, args)
    if len(results) == 2:
        print_ratios(results)
    print(f"load average {os.getloadavg()[0]:.1f} at end", flush=True)


if __name__ == "__main__":
    main()
