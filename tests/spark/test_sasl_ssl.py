"""Spark's Kafka source and sink on a kafkalite SASL_SSL listener (issue 20, stock clients).

A Structured Streaming query reads a topic with `format("kafka")` and writes it to another,
both over SASL_SSL with SCRAM (the Java client under Spark, configured with Kafka's property
names as `kafka.`-prefixed options, the broker's CA as a PEM truststore); the output is read
back exactly, by a Spark batch read over SASL_SSL and by confluent-kafka over PLAINTEXT. A
principal with Write but no Read ACL on the topic (so it may describe it) gets the
TopicAuthorizationException from Spark's batch read, and one with Read but no Write from
Spark's batch write.

The broker runs in this process (EmbeddedBroker) with an ACL authorizer; users and ACLs are
set up over the PLAINTEXT listener, whose ANONYMOUS principal is the super user.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from confluent_kafka import Producer
from confluent_kafka.admin import AclOperation, ScramMechanism

from kafkalite.testing import EmbeddedBroker
from spark_jobs.kafka_util import read_topic
from tests.security.scram_acl_broker import allow, scram_acl_broker

# A SparkSession of its own (tens of seconds to start): `make test-extended` runs it.
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.extended]

USERS = {  # user -> (mechanism, password)
    "spark-etl": (ScramMechanism.SCRAM_SHA_256, "etl-secret"),
    "spark-sink": (ScramMechanism.SCRAM_SHA_512, "sink-secret"),
    "spark-nosy": (ScramMechanism.SCRAM_SHA_256, "nosy-secret"),
}
RECORDS = 120
PARTITIONS = 3
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"


@pytest.fixture(scope="module")
def pki_files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    folder = tmp_path_factory.mktemp("spark-pki")
    ca = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    server.private_key_and_cert_chain_pem.write_to_path(str(folder / "broker.pem"))
    yield folder / "ca.pem", folder / "broker.pem"


@pytest.fixture(scope="module")
def secured(pki_files: tuple[Path, Path]) -> Iterator[EmbeddedBroker]:
    with scram_acl_broker(pki_files[1], USERS) as broker:
        yield broker


def kafka_options(broker: EmbeddedBroker, ca: Path, user: str) -> dict[str, str]:
    """The Kafka source's and sink's options for `user` over SASL_SSL (Kafka's names)."""
    mechanism, password = USERS[user]
    return {
        "kafka.bootstrap.servers": broker.bootstrap_of("SASL_SSL"),
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": mechanism.name.replace("_", "-"),
        "kafka.sasl.jaas.config": (
            f'{SCRAM_LOGIN} required username="{user}" password="{password}";'
        ),
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(ca),
    }


def produce(broker: EmbeddedBroker, topic: str) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_of("PLAINTEXT")})
    for i in range(RECORDS):
        producer.produce(topic, f"event-{i}".encode(), key=f"k{i}".encode(), partition=i % 3)
    assert producer.flush(30) == 0


def test_streaming_source_and_sink_over_sasl_ssl(
    spark: Any,
    secured: EmbeddedBroker,
    pki_files: tuple[Path, Path],
    topic_name: Any,
    tmp_path: Path,
) -> None:
    source, sink = topic_name("in"), topic_name("out")
    secured.create_topic(source, PARTITIONS)
    secured.create_topic(sink, PARTITIONS)
    allow(secured, "spark-etl", source, AclOperation.READ)
    allow(secured, "spark-sink", sink, AclOperation.WRITE, AclOperation.READ)
    produce(secured, source)
    ca = pki_files[0]

    stream = (
        spark.readStream.format("kafka")
        .options(**kafka_options(secured, ca, "spark-etl"))
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "upper(CAST(value AS STRING)) AS value", "partition")
    )
    query = (
        stream.writeStream.format("kafka")
        .options(**kafka_options(secured, ca, "spark-sink"))
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(300), "the query did not finish within 300 s"
    assert query.exception() is None

    expected = sorted((f"k{i}".encode(), f"EVENT-{i}".encode()) for i in range(RECORDS))
    written = read_topic(secured.bootstrap_of("PLAINTEXT"), sink)
    assert sorted((r.key, r.value) for r in written) == expected

    rows = (
        spark.read.format("kafka")
        .options(**kafka_options(secured, ca, "spark-sink"))
        .option("subscribe", sink)
        .load()
        .selectExpr("CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v")
        .collect()
    )
    assert sorted((r.k.encode(), r.v.encode()) for r in rows) == expected


def test_batch_read_without_read_acl_is_refused(
    spark: Any, secured: EmbeddedBroker, pki_files: tuple[Path, Path], topic_name: Any
) -> None:
    topic = secured.create_topic(topic_name("guarded"), PARTITIONS)
    produce(secured, topic)
    allow(secured, "spark-nosy", topic, AclOperation.WRITE)  # Describe, but no Read
    reader = (
        spark.read.format("kafka")
        .options(**kafka_options(secured, pki_files[0], "spark-nosy"))
        .option("subscribe", topic)
    )
    with pytest.raises(Exception, match="TopicAuthorizationException") as refused:
        reader.load().count()
    assert f"Not authorized to access topics: [{topic}]" in str(refused.value)


def test_batch_write_without_write_acl_is_refused(
    spark: Any, secured: EmbeddedBroker, pki_files: tuple[Path, Path], topic_name: Any
) -> None:
    topic = secured.create_topic(topic_name("readonly"), PARTITIONS)
    allow(secured, "spark-nosy", topic, AclOperation.READ)  # Describe, but no Write
    rows = spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(10)], ["key", "value"])
    writer = (
        rows.write.format("kafka")
        .options(**kafka_options(secured, pki_files[0], "spark-nosy"))
        .option("topic", topic)
    )
    with pytest.raises(Exception, match="TopicAuthorizationException"):
        writer.save()
    assert read_topic(secured.bootstrap_of("PLAINTEXT"), topic) == []
