"""Prometheus /metrics of a real broker: counters move by exactly what a workload sent.

Exact batches go through the raw protocol client (so their byte sizes are known), the rest
through confluent-kafka (its bytes are checked against the log files on disk).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from kio.schema.errors import ErrorCode

from kafkalite.storage.records import encode_batch
from kafkalite.testing import BrokerProcess
from protocol_tests.raw_client import (
    RawClient,
    build,
    decode_response,
    encode_request,
    fetch_request,
    produce_request,
    response_class,
)
from tests.integration.e2e_helpers import admin, create_topic, producer, segment_files
from tests.integration.metrics_helpers import base_url, get, scrape

MESSAGE_MAX_BYTES = 4096
DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "kafkalite-dashboard.json"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(
        tmp_path_factory.mktemp("metrics-broker"),
        {"kafkalite.metrics.port": "0", "message.max.bytes": str(MESSAGE_MAX_BYTES)},
    )
    with process:
        yield process


def delta(before: dict[str, float], after: dict[str, float], key: str) -> float:
    return after.get(key, 0.0) - before.get(key, 0.0)


class CountingClient(RawClient):
    """A raw client that counts the bytes it sends and receives (size prefixes included)."""

    sent = received = 0

    def send_frame(self, frame: bytes) -> None:
        self.sent += 4 + len(frame)
        super().send_frame(frame)

    def recv_frame(self, timeout: float | None = None) -> bytes:
        frame = super().recv_frame(timeout)
        self.received += 4 + len(frame)
        return frame


def batch(count: int, value_size: int = 50) -> bytes:
    records = [(f"k{i}".encode(), bytes([65 + i % 26]) * value_size) for i in range(count)]
    return encode_batch(records, timestamp=int(time.time() * 1000))


def topic_key(name: str, topic: str) -> str:
    return f'kafka_server_brokertopicmetrics_{name}_total{{topic="{topic}"}}'


def total_key(name: str) -> str:
    return f"kafka_server_brokertopicmetrics_{name}_total"


def test_network_bytes_and_connections(broker: BrokerProcess) -> None:
    request = build(
        18, 3, "ApiVersionsRequest", client_software_name="t", client_software_version="1"
    )
    connections = "kafka_server_socket_server_metrics_connection_count"
    labels = '{listener="PLAINTEXT",networkProcessor="0"}'
    before = scrape(broker)  # the first test: no Kafka client has connected yet
    assert before[connections + labels] == 0
    with CountingClient(broker.host, broker.port) as client:
        for _ in range(3):
            client.send_frame(encode_request(request, client.next_correlation_id()))
            decode_response(client.recv_frame(), response_class(18, 3))
        during = scrape(broker)
    assert during[connections + labels] == 1
    prefix = "kafka_server_socket_server_metrics_"
    assert delta(before, during, prefix + "incoming_byte_total" + labels) == client.sent
    assert delta(before, during, prefix + "outgoing_byte_total" + labels) == client.received
    assert delta(before, during, prefix + "connection_creation_total" + labels) == 1


def test_health_ready_and_unknown_paths(broker: BrokerProcess) -> None:
    url = base_url(broker)
    assert get(url + "/health") == (200, "ok\n")
    assert get(url + "/ready") == (200, "ready\n")
    assert get(url + "/nope")[0] == 404


def test_raw_produce_and_fetch_move_topic_counters_exactly(broker: BrokerProcess) -> None:
    topic = "metrics-raw"
    create_topic(broker.bootstrap, topic, partitions=2)
    first, second, too_large = batch(5), batch(7), batch(100, value_size=100)
    assert len(too_large) > MESSAGE_MAX_BYTES
    before = scrape(broker)
    with RawClient(broker.host, broker.port) as client:
        for partition, records, error in (
            (0, first, ErrorCode.none),
            (1, second, ErrorCode.none),
            (0, too_large, ErrorCode.message_too_large),
        ):
            response = client.request(produce_request(topic, partition, records))
            assert response.responses[0].partition_responses[0].error_code == error
        fetched = client.request(fetch_request(topic, (0, 1), 0))
    sizes = [len(p.records or b"") for p in fetched.responses[0].partitions]
    assert sizes == [len(first), len(second)]
    after = scrape(broker)

    expected = {
        "messagesin": 12,
        "bytesin": len(first) + len(second),
        "bytesrejected": len(too_large),
        "totalproducerequests": 3,
        "failedproducerequests": 0,  # a too-large batch is the client's mistake (as in Kafka)
        "bytesout": len(first) + len(second),
        "totalfetchrequests": 2,
        "failedfetchrequests": 0,
    }
    for name, value in expected.items():
        assert delta(before, after, topic_key(name, topic)) == value, name
        assert delta(before, after, total_key(name)) == value, name
    assert after[f'kafka_log_log_size{{partition="0",topic="{topic}"}}'] == len(first)
    assert after[f'kafka_log_log_logendoffset{{partition="1",topic="{topic}"}}'] == 7
    assert after[f'kafka_log_log_numlogsegments{{partition="1",topic="{topic}"}}'] == 1
    produce_count = 'kafka_network_requestmetrics_requests_total{request="Produce",version="9"}'
    assert delta(before, after, produce_count) == 3
    latency_count = 'kafka_network_requestmetrics_totaltimems_count{request="Produce"}'
    assert delta(before, after, latency_count) == 3


def test_invalid_record_counts_as_failed_produce(broker: BrokerProcess) -> None:
    topic = "metrics-compacted"
    create_topic(broker.bootstrap, topic, config={"cleanup.policy": "compact"})
    keyless = encode_batch([(None, b"v")], timestamp=int(time.time() * 1000))
    before = scrape(broker)
    with RawClient(broker.host, broker.port) as client:
        response = client.request(produce_request(topic, 0, keyless))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.invalid_record
    after = scrape(broker)
    assert delta(before, after, topic_key("failedproducerequests", topic)) == 1
    assert delta(before, after, topic_key("messagesin", topic)) == 0
    assert delta(before, after, total_key("failedproducerequests")) == 1


def test_confluent_workload_counts_messages_and_bytes_and_lag(broker: BrokerProcess) -> None:
    topic, group, count = "metrics-client", "metrics-group", 40
    create_topic(broker.bootstrap, topic)
    before = scrape(broker)
    client = producer(broker.bootstrap)
    for i in range(count):
        client.produce(topic, key=f"key-{i}".encode(), value=b"v" * (i + 1))
    assert client.flush(30) == 0
    on_disk = sum(f.stat().st_size for f in segment_files(broker.data_dir, topic, 0))
    futures = admin(broker.bootstrap).alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 15)])]
    )
    futures[group].result(20)
    after = scrape(broker)
    assert delta(before, after, topic_key("messagesin", topic)) == count
    assert delta(before, after, topic_key("bytesin", topic)) == on_disk
    assert delta(before, after, total_key("messagesin")) == count
    key = f'{{consumergroup="{group}",partition="0",topic="{topic}"}}'
    assert after["kafka_consumergroup_current_offset" + key] == 15
    assert after["kafka_consumergroup_lag" + key] == count - 15
    assert after[f'kafka_consumergroup_lag_sum{{consumergroup="{group}",topic="{topic}"}}'] == 25
    assert after["kafka_coordinator_group_groupmetadatamanager_numgroupsempty"] >= 1
    assert after["kafka_server_replicamanager_underreplicatedpartitions"] == 0
    assert after["kafka_controller_kafkacontroller_offlinepartitionscount"] == 0


def test_metrics_port_in_use_is_one_line_and_exit_2(broker: BrokerProcess, tmp_path: Path) -> None:
    port = base_url(broker).rsplit(":", 1)[1]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kafkalite",
            "serve",
            "--override",
            "listeners=PLAINTEXT://127.0.0.1:0",
            "--override",
            f"log.dirs={tmp_path}",
            "--override",
            f"kafkalite.metrics.port={port}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"kafkalite: cannot listen for metrics on 127.0.0.1:{port}:"
    ), result.stderr


def test_every_metric_the_grafana_dashboard_graphs_is_served(broker: BrokerProcess) -> None:
    exprs = [
        target["expr"]
        for panel in json.loads(DASHBOARD.read_text())["panels"]
        for target in panel.get("targets", [])
    ]
    names = re.compile(r"\b(?:kafka|kafkalite|process)_\w+")
    graphed = {name for expr in exprs for name in names.findall(expr)}
    served = {key.split("{", 1)[0] for key in scrape(broker)}
    assert len(graphed) == 32
    assert graphed - served == set()
