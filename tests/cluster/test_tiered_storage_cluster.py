"""Tiered storage in a cluster (KIP-405 with Kafka's TopicBasedRemoteLogMetadataManager): a
real ZooKeeper, three `kafkalite serve` brokers and a real S3 server (gofakes3), a tiered
topic with replication factor 3 and only the active segment kept locally.

The leader uploads, the followers delete their local copies of what the replicated segment
list (`__remote_log_metadata`) says is uploaded; the leader is SIGKILLed; the new leader
serves every acknowledged record from offset 0 (mostly from S3), continues uploading where
the old leader stopped without uploading any segment twice, expires remote segments by
retention and deletes them all with the topic. The killed broker, restarted, rejoins the ISR
from the remote tier's metadata (OFFSET_MOVED_TO_TIERED_STORAGE), not by copying the log.
"""

from __future__ import annotations

import collections
import hashlib
import re

import pytest
from cluster_helpers import StartBrokers, poll
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from kafkalite.s3_server import S3Server
from kafkalite.storage.remote.s3_storage import S3RemoteStorageManager, S3Settings
from kafkalite.testing import BrokerProcess
from tests.integration.e2e_helpers import consumer, produce_all, producer, segment_files

pytest.importorskip("kafkalite.cluster.member")

TOPIC = "tiered"
RECORDS = 150  # per phase: before and after the kill
WAIT = 60.0
REBUILT = re.compile(r"tiered-0: starting at (?P<offset>\d+) after remote segment")
LOG_KEY = re.compile(r"tiered-[A-Za-z0-9_-]{22}/0/(?P<base>\d{20})-[A-Za-z0-9_-]{22}\.log")


def _remote_logs(server: S3Server) -> list[int]:
    """The base offsets of the topic's uploaded `.log` objects, one per object."""
    properties = server.broker_properties()
    store = S3RemoteStorageManager(
        S3Settings(
            bucket=server.bucket,
            endpoint_url=server.endpoint_url,
            region="us-east-1",
            path_style=True,
            access_key_id=properties["rsm.config.storage.aws.access.key.id"],
            secret_access_key=properties["rsm.config.storage.aws.secret.access.key"],
        )
    )
    found = [LOG_KEY.fullmatch(key) for key in store.list_keys(f"{TOPIC}-")]
    return sorted(int(match["base"]) for match in found if match)


def _values(start: int, end: int) -> list[bytes]:
    return [hashlib.sha256(b"%d" % i).digest() * 3 + b"-%06d" % i for i in range(start, end)]


def _local_start(broker: BrokerProcess) -> int:
    return int(segment_files(broker.data_dir, TOPIC, 0)[0].stem)


def _leader(admin: AdminClient, alive: int) -> int | None:
    """The partition's leader once it has `alive` in-sync replicas."""
    found = admin.list_topics(TOPIC, timeout=10).topics.get(TOPIC)
    if found is None or found.error is not None or 0 not in found.partitions:
        return None
    partition = found.partitions[0]
    return partition.leader if partition.leader >= 0 and len(partition.isrs) == alive else None


def _read_from_start(bootstrap: str, count: int) -> list[tuple[int, str]]:
    cons: Consumer = consumer(bootstrap)
    got: list[tuple[int, str]] = []
    try:
        cons.assign([TopicPartition(TOPIC, 0, 0)])

        def more() -> bool:
            for message in cons.consume(500, 0.5):
                assert message.error() is None, message.error()
                got.append((message.offset(), hashlib.sha256(message.value()).hexdigest()))
            return len(got) >= count

        poll(more, f"{count} records from offset 0", WAIT)
    finally:
        cons.close()
    return got


def _earliest(bootstrap: str) -> int:
    cons: Consumer = consumer(bootstrap)
    try:
        low, _ = cons.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
        return int(low)
    finally:
        cons.close()


def test_new_leader_continues_tiering_after_the_leader_is_killed(
    start_brokers: StartBrokers, s3_server: S3Server
) -> None:
    brokers = start_brokers(
        {
            **s3_server.broker_properties(100),
            "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
            "min.insync.replicas": "2",
            "log.retention.check.interval.ms": "100",
            "controlled.shutdown.enable": "false",  # teardown: nothing to move to the dead one
        }
    )
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {
        "remote.storage.enable": "true",
        "segment.bytes": "2048",
        "local.retention.bytes": "0",  # only the active segment stays local
    }
    admin.create_topics([NewTopic(TOPIC, 1, 3, config=configs)])[TOPIC].result(30)
    old_leader = poll(lambda: _leader(admin, 3), "a leader with a full ISR", WAIT)

    first = _values(0, RECORDS)
    prod = producer(
        bootstrap, **{"acks": "all", "enable.idempotence": True, "batch.num.messages": 5}
    )
    acked = len(produce_all(prod, TOPIC, ({"value": v, "partition": 0} for v in first)).succeeded)
    assert acked == RECORDS
    # Uploaded by the leader, and deleted locally by all three: the followers too, once the
    # replicated list tells them the segments are in S3.
    poll(
        lambda: all(_local_start(b) > RECORDS // 2 for b in brokers.values()),
        "local segments deleted on every broker",
        WAIT,
    )
    before = _remote_logs(s3_server)
    assert before[0] == 0

    brokers[old_leader].kill()
    survivors = {i: b for i, b in brokers.items() if i != old_leader}
    bootstrap = ",".join(b.bootstrap for b in survivors.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new_leader = poll(lambda: _leader(admin, 2), "a new leader", WAIT)
    assert new_leader in survivors

    second = _values(RECORDS, 2 * RECORDS)
    prod = producer(
        bootstrap, **{"acks": "all", "enable.idempotence": True, "batch.num.messages": 5}
    )
    acked += len(produce_all(prod, TOPIC, ({"value": v, "partition": 0} for v in second)).succeeded)
    assert acked == 2 * RECORDS
    poll(
        lambda: all(_local_start(b) > RECORDS + RECORDS // 2 for b in survivors.values()),
        "the new leader's uploads deleted locally",
        WAIT,
    )

    # The killed broker restarts with its log ending before the new leader's local log start:
    # answered OFFSET_MOVED_TO_TIERED_STORAGE, it starts its log after the remote segment
    # there (epochs and producer state from the remote tier), copying nothing below it.
    # It restarts on new ports, so (as in Kafka) it may register only once its killed
    # session's registration has expired: until then it would be refused, exit code 2.
    poll(
        lambda: old_leader not in admin.list_topics(timeout=10).brokers,
        "the killed broker's registration expired",
        WAIT,
    )
    restarted = brokers[old_leader].start()
    poll(lambda: _leader(admin, 3) is not None, "the restarted broker back in the ISR", WAIT)
    rebuilt = [m for line in restarted.lines if (m := REBUILT.search(line))]
    assert len(rebuilt) == 1, rebuilt
    assert int(rebuilt[0]["offset"]) > RECORDS + RECORDS // 2
    assert _local_start(restarted) >= int(rebuilt[0]["offset"])

    expected = [(i, hashlib.sha256(v).hexdigest()) for i, v in enumerate(first + second)]
    assert _read_from_start(bootstrap, acked) == expected
    after = _remote_logs(s3_server)
    # Nothing uploaded twice, nothing the old leader uploaded lost or uploaded again.
    assert [base for base, n in collections.Counter(after).items() if n > 1] == []
    assert set(before) <= set(after) and max(after) > RECORDS

    # Remote retention by the new leader: a small retention.bytes expires the oldest
    # remote segments, and the log start across tiers follows.
    resource = ConfigResource(
        ResourceType.TOPIC,
        TOPIC,
        incremental_configs=[
            ConfigEntry("retention.bytes", "6000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(timeout=10)
    poll(lambda: _remote_logs(s3_server)[0] > 0, "the oldest remote segments expired", WAIT)
    poll(lambda: _earliest(bootstrap) > 0, "the log start moved", WAIT)

    # DeleteTopics: the leader deletes every remote object its replicated list holds.
    admin.delete_topics([TOPIC])[TOPIC].result(30)
    poll(lambda: _remote_logs(s3_server) == [], "the topic's remote objects deleted", WAIT)
