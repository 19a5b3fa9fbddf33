"""kafka-python's metadata race, made deterministic (the FINDINGS lead of
test_idempotent_producer_max_in_flight[1]: a group-less consumer that read nothing).

Runs in the kafka-python venv (compat/kafka_python/run.py's ensure_setup()):

    python metadata_race.py BOOTSTRAP TOPIC in-flight|first

A KafkaConsumer(group_id=None, api_version given, as the suite's fixture builds it) connects
through a proxy in this process that holds back Metadata responses until the consumer has
subscribed. `in-flight`: subscribe() only once the consumer's first Metadata request (for no
topics) is on the wire; `first`: subscribe() before anything is sent. Prints one JSON line:
{"mode", "read", "assignment"} after the consumer has been idle for 5 s.

kafka-python's ClusterMetadata.set_topics() flags an update, but the answer to the request
already in flight clears that flag (update_metadata: `_need_update = len(_retry_topics) > 0`;
set_topics even says "TODO: handle future when old metadata request is currently in-flight").
The topic's metadata is then not asked for until metadata.max.age.ms (5 minutes), the
consumer assigns itself nothing and reads nothing, whatever the broker.
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import threading

from kafka import KafkaConsumer

METADATA = 3
IDLE_MS = 5_000


def _read(sock: socket.socket, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _frame(sock: socket.socket) -> bytes | None:
    """One size-prefixed Kafka frame (None: the connection closed)."""
    head = _read(sock, 4)
    body = None if head is None else _read(sock, struct.unpack(">i", head)[0])
    return None if head is None or body is None else head + body


class HoldingProxy:
    """Forwards to the broker; Metadata responses wait for `release`."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.metadata_sent = threading.Event()
        self.release = threading.Event()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            client, _ = self.server.accept()
            broker = socket.create_connection(self.upstream)
            held: set[int] = set()
            threading.Thread(
                target=self._requests, args=(client, broker, held), daemon=True
            ).start()
            threading.Thread(
                target=self._responses, args=(broker, client, held), daemon=True
            ).start()

    def _requests(self, client: socket.socket, broker: socket.socket, held: set[int]) -> None:
        while (frame := _frame(client)) is not None:
            api_key, _, correlation_id = struct.unpack_from(">hhi", frame, 4)
            if api_key == METADATA:
                held.add(correlation_id)
            broker.sendall(frame)
            if api_key == METADATA:
                self.metadata_sent.set()
        broker.close()

    def _responses(self, broker: socket.socket, client: socket.socket, held: set[int]) -> None:
        while (frame := _frame(broker)) is not None:
            if struct.unpack_from(">i", frame, 4)[0] in held:
                self.release.wait()
            client.sendall(frame)
        client.close()


def main() -> None:
    bootstrap, topic, mode = sys.argv[1:4]
    host, port = bootstrap.rsplit(":", 1)
    proxy = HoldingProxy((host, int(port)))
    consumer = KafkaConsumer(
        bootstrap_servers=f"127.0.0.1:{proxy.port}",
        group_id=None,
        api_version=(4, 0),  # as the suite's fixture: no blocking bootstrap in the constructor
        auto_offset_reset="earliest",
        consumer_timeout_ms=IDLE_MS,
    )
    if mode == "in-flight" and not proxy.metadata_sent.wait(30):
        raise SystemExit("the consumer sent no Metadata request")
    consumer.subscribe([topic])
    proxy.release.set()
    read = sum(1 for _ in consumer)
    assignment = sorted([tp.topic, tp.partition] for tp in consumer.assignment())
    consumer.close()
    print(json.dumps({"mode": mode, "read": read, "assignment": assignment}))


if __name__ == "__main__":
    main()
