"""Throughput and connection set-up rate of one kafkalite broker per security protocol.

    python -m bench.security_bench [--messages 100000] [--size 1024] [--connections 200]

Not a test: it prints figures. A `kafkalite serve` subprocess listens on PLAINTEXT, SSL,
SASL_PLAINTEXT and SASL_SSL (certificates from `trustme`, SANs localhost and 127.0.0.1;
SASL/PLAIN and SCRAM-SHA-256 users). Per protocol: confluent-kafka produces `--messages` x
`--size` B (acks=1, linger.ms=5) and consumes them back from offset 0, in MB/s of payload;
then `--connections` fresh connections are opened one after another, each completing TLS and
SASL (SCRAM-SHA-256 where SASL) and one ApiVersions, in set-ups per second.
"""

from __future__ import annotations

import argparse
import socket
import ssl
import tempfile
import time
from pathlib import Path
from typing import Any

import scramp
import trustme
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from kafkalite.testing import BrokerProcess, free_ports
from protocol_tests.raw_client import RawClient, api_versions_request, build

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_bench="bench-pw";'


def _start(folder: Path) -> tuple[BrokerProcess, dict[str, int], Path]:
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    ca.issue_cert("localhost", "127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
        str(folder / "broker.pem")
    )
    ports = dict(zip(PROTOCOLS, free_ports(len(PROTOCOLS)), strict=True))
    overrides = {
        "listeners": ",".join(f"{p}://127.0.0.1:{port}" for p, port in ports.items()),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(folder / "broker.pem"),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "num.partitions": "1",
    }
    broker = BrokerProcess(folder / "data", overrides).start()
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    upsert = UserScramCredentialUpsertion("bench", info, b"bench-pw")
    admin.alter_user_scram_credentials([upsert])["bench"].result(timeout=10)
    return broker, ports, folder / "ca.pem"


def _client_settings(protocol: str, port: int, ca: Path) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": protocol,
    }
    if "SSL" in protocol:
        settings["ssl.ca.location"] = str(ca)
    if protocol.startswith("SASL"):
        settings.update(
            {"sasl.mechanism": "PLAIN", "sasl.username": "bench", "sasl.password": "bench-pw"}
        )
    return settings


def _throughput(
    settings: dict[str, Any], topic: str, messages: int, size: int
) -> tuple[float, float]:
    payload = b"x" * size
    producer = Producer({**settings, "linger.ms": 5, "acks": 1})
    started = time.perf_counter()
    for _ in range(messages):
        while True:
            try:
                producer.produce(topic, payload)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    produce_s = time.perf_counter() - started
    consumer = Consumer({**settings, "group.id": "bench", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    started, received = time.perf_counter(), 0
    while received < messages:
        received += sum(1 for m in consumer.consume(10_000, 5.0) if m.error() is None)
    consume_s = time.perf_counter() - started
    consumer.close()
    mb = messages * size / 2**20
    return mb / produce_s, mb / consume_s


def _one_connection(protocol: str, port: int, ca: Path) -> None:
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock: socket.socket = raw
    if "SSL" in protocol:
        context = ssl.create_default_context(cafile=str(ca))
        sock = context.wrap_socket(raw, server_hostname="localhost")
    client = RawClient.__new__(RawClient)
    client.sock, client.timeout, client._buffer = sock, 10.0, bytearray()
    client._correlation = iter(range(1, 100))
    with client:
        if protocol.startswith("SASL"):
            handshake = build(17, 1, "SaslHandshakeRequest", mechanism="SCRAM-SHA-256")
            client.request(handshake)
            scram = scramp.ScramClient(["SCRAM-SHA-256"], "bench", "bench-pw")
            first = client.request(_token(scram.get_client_first()))
            scram.set_server_first(first.auth_bytes.decode())
            final = client.request(_token(scram.get_client_final()))
            scram.set_server_final(final.auth_bytes.decode())
        client.request(api_versions_request())


def _token(message: str) -> Any:
    return build(36, 2, "SaslAuthenticateRequest", auth_bytes=message.encode())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--connections", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kafkalite-security-bench-") as folder:
        broker, ports, ca = _start(Path(folder))
        try:
            print(f"{'protocol':<16}{'produce MB/s':>14}{'consume MB/s':>14}{'set-ups/s':>12}")
            for protocol in PROTOCOLS:
                settings = _client_settings(protocol, ports[protocol], ca)
                produce, consume = _throughput(
                    settings, f"bench-{protocol.lower()}", args.messages, args.size
                )
                started = time.perf_counter()
                for _ in range(args.connections):
                    _one_connection(protocol, ports[protocol], ca)
                rate = args.connections / (time.perf_counter() - started)
                print(f"{protocol:<16}{produce:>14.1f}{consume:>14.1f}{rate:>12.0f}")
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
