"""What the console shows and does, through confluent-kafka's AdminClient and Consumer.

Plain dicts and lists out (the JSON API returns them as they are). Every call has a timeout;
a cluster that does not answer raises `ClusterError`, a refused operation `ClusterError` with
Kafka's error text.
"""

from __future__ import annotations

import base64
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from kafkalite.console.health import BrokerRegistry, count_problems, partition_health
from kafkalite.console.log_sizes import partition_sizes
from kafkalite.tools.common import Connection, ToolError, group_type

MAX_MESSAGES = 1000
RETRY_BACKOFF_S = 0.2
_COORDINATOR_BUSY = frozenset(
    {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
    }
)
SEARCH_WINDOW = 100_000  # messages per partition a search for the latest matches reads at most
# librdkafka's own log (connection refused, broker down...) goes here rather than to stderr;
# the page reports failures through the API's answers.
CLIENT_LOG = logging.getLogger("kafkalite.console.librdkafka")
CLIENT_LOG.setLevel(logging.CRITICAL)
INTERNAL_PREFIX = "__"
MIN_ISR = "min.insync.replicas"
# A view's configs (issue 18; broker/views.py is not imported: it brings the broker).
VIEW_SOURCE, VIEW_FILTER = "kafkalite.view.source", "kafkalite.view.filter"


class ClusterError(Exception):
    def __init__(self, message: str, status: int = 502, retriable: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.retriable = retriable


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, KafkaException) and isinstance(exc.args[0], KafkaError):
        error: KafkaError = exc.args[0]
        return f"{error.name()}: {error.str()}"
    return str(exc)


def _status_of(exc: BaseException) -> int:
    if isinstance(exc, KafkaException) and isinstance(exc.args[0], KafkaError):
        code = exc.args[0].code()
        if code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.GROUP_ID_NOT_FOUND):
            return 404
        if code in (KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN):
            return 502
        return 409
    return 502


def _wait(future: Any, timeout: float) -> Any:
    try:
        return future.result(timeout)
    except KafkaException as exc:
        error = exc.args[0] if isinstance(exc.args[0], KafkaError) else None
        retriable = error is not None and (error.retriable() or _coordinator_busy(error))
        raise ClusterError(_error_text(exc), _status_of(exc), retriable) from None
    except TimeoutError:
        raise ClusterError(f"the cluster did not answer within {timeout:g}s") from None


def _coordinator_busy(error: KafkaError) -> bool:
    """A group coordinator moving or loading (librdkafka does not flag these retriable on a
    partition's result)."""
    return error.code() in _COORDINATOR_BUSY


def _retrying(call: Callable[[], Any], timeout: float) -> Any:
    """`call()` again while it fails with a retriable error (a group coordinator still
    loading answers NOT_COORDINATOR), until `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except ClusterError as exc:
            if not exc.retriable or time.monotonic() + RETRY_BACKOFF_S > deadline:
                raise
        time.sleep(RETRY_BACKOFF_S)


def _text(data: bytes | None) -> dict[str, Any] | None:
    """Bytes as UTF-8 text (with a flag when it parses as JSON) or base64."""
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}
    try:
        json.loads(text)
        is_json = text.strip()[:1] in ("{", "[")
    except ValueError:
        is_json = False
    return {"text": text, "json": is_json}


@dataclass
class Cluster:
    bootstrap: str
    timeout: float = 10.0
    metrics_urls: list[str] = field(default_factory=list)  # for partition sizes
    client: dict[str, str] = field(default_factory=dict)  # librdkafka settings (TLS, SASL)

    def __post_init__(self) -> None:
        self.admin = AdminClient(self._conf())
        self._producer: Producer | None = None  # made on the first message produced
        self.brokers = BrokerRegistry()

    def _conf(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap,
            "socket.connection.setup.timeout.ms": int(self.timeout * 1000),
            "client.id": "kafkalite-console",
            "logger": CLIENT_LOG,
            **self.client,
        }

    # -- cluster and topics -------------------------------------------------------------

    def metadata(self) -> Any:
        try:
            return self.admin.list_topics(timeout=self.timeout)
        except KafkaException as exc:
            raise ClusterError(_error_text(exc), _status_of(exc)) from None

    def overview(self) -> dict[str, Any]:
        """The brokers, those seen before and gone listed offline, and the cluster's count of
        offline, under-min-ISR and under-replicated partitions."""
        description = _wait(self.admin.describe_cluster(request_timeout=self.timeout), self.timeout)
        controller = description.controller.id if description.controller else None
        live = [
            {
                "id": node.id,
                "host": node.host,
                "port": node.port,
                "rack": node.rack,
                "controller": node.id == controller,
            }
            for node in sorted(description.nodes, key=lambda n: n.id)
        ]
        metadata = self.metadata()
        replica_ids = {
            r
            for topic in metadata.topics.values()
            for p in topic.partitions.values()
            for r in p.replicas
        }
        configs = self._configs_of(list(metadata.topics), (MIN_ISR,))
        health = [
            flags
            for name, topic in metadata.topics.items()
            for flags in self._health(
                topic, int(configs.get(name, {}).get(MIN_ISR, 1)), set(metadata.brokers)
            ).values()
        ]
        return {
            "cluster_id": description.cluster_id,
            "controller": controller,
            "brokers": self.brokers.observe(live, replica_ids),
            "partitions": count_problems(health),
        }

    def _health(self, topic: Any, min_isr: int, live: set[int]) -> dict[int, dict[str, bool]]:
        return {
            index: partition_health(
                part.leader, list(part.replicas), list(part.isrs), min_isr, live
            )
            for index, part in topic.partitions.items()
        }

    def _configs_of(self, names: list[str], wanted: tuple[str, ...]) -> dict[str, dict[str, str]]:
        """The `wanted` configs of each topic that has them set, from one DescribeConfigs of
        them all (a topic that does not answer is left out)."""
        if not names:
            return {}
        resources = [ConfigResource(ResourceType.TOPIC, name) for name in names]
        futures = self.admin.describe_configs(resources, request_timeout=self.timeout)
        found: dict[str, dict[str, str]] = {}
        for resource, future in futures.items():
            try:
                entries = _wait(future, self.timeout)
            except ClusterError:
                continue
            found[resource.name] = {
                name: entries[name].value
                for name in wanted
                if name in entries and entries[name].value is not None
            }
        return found

    def _offsets(self, partitions: list[TopicPartition], spec: OffsetSpec) -> dict[Any, int]:
        """Offsets of the partitions that answer; one without a leader right now (a topic
        being created, a broker down) is left out, so the page shows it as unknown."""
        if not partitions:
            return {}
        futures = self.admin.list_offsets(
            {tp: spec for tp in partitions}, request_timeout=self.timeout
        )
        offsets = {}
        for tp, future in futures.items():
            try:
                offsets[(tp.topic, tp.partition)] = _wait(future, self.timeout).offset
            except ClusterError as exc:
                if exc.status == 502:  # the cluster itself did not answer
                    raise
        return offsets

    def _watermarks(self, partitions: list[TopicPartition]) -> tuple[dict, dict]:
        return (
            self._offsets(partitions, OffsetSpec.earliest()),
            self._offsets(partitions, OffsetSpec.latest()),
        )

    def sizes(self) -> dict[tuple[str, int], int] | None:
        if not self.metrics_urls:
            return None
        return partition_sizes(self.metrics_urls, self.timeout)

    def topics(self) -> list[dict[str, Any]]:
        metadata = self.metadata()
        sizes = self.sizes()
        partitions = [
            TopicPartition(name, index)
            for name, topic in metadata.topics.items()
            for index in topic.partitions
        ]
        low, high = self._watermarks(partitions)
        configs = self._configs_of(list(metadata.topics), (MIN_ISR, VIEW_SOURCE, VIEW_FILTER))
        rows = []
        for name, topic in sorted(metadata.topics.items()):
            own = configs.get(name, {})
            health = self._health(topic, int(own.get(MIN_ISR, 1)), set(metadata.brokers))
            ends = [(low.get((name, p)), high.get((name, p))) for p in topic.partitions]
            known = all(start is not None and end is not None for start, end in ends)
            replication = max((len(p.replicas) for p in topic.partitions.values()), default=0)
            rows.append(
                {
                    "name": name,
                    "internal": name.startswith(INTERNAL_PREFIX),
                    "partitions": len(topic.partitions),
                    "replication": replication,
                    "messages": sum(end - start for start, end in ends) if known else None,
                    "size": _total_size(sizes, name, topic.partitions),
                    **count_problems(health.values()),
                    **_view_of(own),
                }
            )
        return rows

    def topic(self, name: str) -> dict[str, Any]:
        try:
            configs = self.topic_configs(name)
        except ClusterError as exc:
            if exc.status == 404:
                raise ClusterError(f"topic {name!r} does not exist", 404) from None
            raise
        min_isr = next((int(c["value"]) for c in configs if c["name"] == MIN_ISR), 1)
        partitions = self.partitions(name, min_isr)
        tiered = any(c["name"] == "remote.storage.enable" and c["value"] == "true" for c in configs)
        return {
            "name": name,
            "partitions": partitions,
            "configs": configs,
            "min_isr": min_isr,
            "tiered": tiered,
            **(self._tiers(name, partitions) if tiered else {}),
            "held": self._held(name, partitions),
            **_view_of({c["name"]: c["value"] for c in configs}),
        }

    def _tiers(self, name: str, partitions: list[dict[str, Any]]) -> dict[str, Any]:
        """A tiered topic's local start and highest remote offset per partition (ListOffsets
        -4 and -5 at the leaders, PLAINTEXT only) and, from the metrics, its remote bytes and
        segments (as `kafkalite topic describe`)."""
        described = {"name": name, "partitions": [dict(p) for p in partitions], "tiered": True}
        if self._plaintext():
            from kafkalite.tools.topic import add_remote_sizes, add_tier_offsets

            try:
                add_tier_offsets(self._connection(), self.metadata(), described)
                if self.metrics_urls:
                    add_remote_sizes([described], self.metrics_urls, self.timeout)
            except ToolError as exc:
                raise ClusterError(str(exc)) from None
        for row, tiers in zip(partitions, described["partitions"], strict=True):
            row["local_start"] = tiers.get("local_start_offset")
            row["remote_end"] = tiers.get("remote_end_offset")
        return {
            "remote_size_bytes": described.get("remote_size_bytes"),
            "remote_segments": described.get("remote_segments"),
        }

    def _held(self, name: str, partitions: list[dict[str, Any]]) -> bool:
        """Held delayed records and the next due time per partition, from the metrics; False
        when no broker reports any for this topic (a topic without delayed delivery)."""
        if not self.metrics_urls:
            return False
        from kafkalite.tools.held_records import held_records

        try:
            held = held_records(self.metrics_urls, self.timeout)
        except ToolError:
            return False  # metrics are extra detail: an unreachable endpoint shows none
        mine = {index: v for (topic, index), v in held.items() if topic == name}
        for row in partitions:
            row["held"], row["next_due"] = mine.get(row["partition"], (0, None))
        return bool(mine)

    def partitions(self, name: str, min_isr: int = 1) -> list[dict[str, Any]]:
        """Each partition's replicas, offsets and health (under min ISR against `min_isr`)."""
        cluster = self.metadata()
        metadata = cluster.topics.get(name)  # naming it would auto-create it
        if metadata is None or metadata.error is not None:
            raise ClusterError(f"topic {name!r} does not exist", 404)
        health = self._health(metadata, min_isr, set(cluster.brokers))
        tps = [TopicPartition(name, index) for index in sorted(metadata.partitions)]
        low, high = self._watermarks(tps)
        sizes = self.sizes()
        partitions = [
            {
                "partition": index,
                "leader": part.leader,
                "replicas": list(part.replicas),
                "isr": list(part.isrs),
                "start": low.get((name, index)),
                "end": high.get((name, index)),
                "messages": _difference(high.get((name, index)), low.get((name, index))),
                "size": None if sizes is None else sizes.get((name, index)),
                **health[index],
            }
            for index, part in sorted(metadata.partitions.items())
        ]
        return partitions

    def topic_configs(self, name: str) -> list[dict[str, Any]]:
        resource = ConfigResource(ResourceType.TOPIC, name)
        futures = self.admin.describe_configs([resource], request_timeout=self.timeout)
        entries = _wait(futures[resource], self.timeout)
        return [
            {
                "name": e.name,
                "value": e.value,
                "default": e.is_default,
                "source": ConfigSource(e.source).name,
            }
            for e in sorted(entries.values(), key=lambda e: e.name)
        ]

    def create_topic(self, name: str, partitions: int, replication: int, configs: dict) -> None:
        new = NewTopic(name, partitions, replication, config=configs)
        futures = self.admin.create_topics([new], request_timeout=self.timeout)
        _wait(futures[name], self.timeout)

    def alter_topic_configs(self, name: str, set_: dict[str, str], delete: list[str]) -> None:
        """IncrementalAlterConfigs: set some properties, return others to their default."""
        set_op, delete_op = AlterConfigOpType.SET, AlterConfigOpType.DELETE
        entries = [ConfigEntry(k, v, incremental_operation=set_op) for k, v in set_.items()]
        entries += [ConfigEntry(k, None, incremental_operation=delete_op) for k in delete]
        resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
        futures = self.admin.incremental_alter_configs([resource], request_timeout=self.timeout)
        _wait(futures[resource], self.timeout)

    def delete_topic(self, name: str) -> None:
        futures = self.admin.delete_topics([name], request_timeout=self.timeout)
        _wait(futures[name], self.timeout)

    def throughput_sample(self) -> dict[str, Any]:
        """End offsets per (non-internal) topic now; the page derives messages per second."""
        metadata = self.metadata()
        partitions = [
            TopicPartition(name, index)
            for name, topic in metadata.topics.items()
            if not name.startswith(INTERNAL_PREFIX)
            for index in topic.partitions
        ]
        ends = self._offsets(partitions, OffsetSpec.latest())
        per_topic: dict[str, int] = {}
        for (name, _), end in ends.items():
            per_topic[name] = per_topic.get(name, 0) + end
        return {"time_ms": int(time.time() * 1000), "topics": per_topic}

    # -- messages -----------------------------------------------------------------------

    def produce(
        self,
        topic: str,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]],
    ) -> dict[str, Any]:
        """One message, acknowledged by all in-sync replicas: where it was written. The topic
        must exist (producing to an unknown one could auto-create it)."""
        indexes = [p["partition"] for p in self.partitions(topic)]
        if partition is not None and partition not in indexes:
            raise ClusterError(f"topic {topic!r} has no partition {partition}", 400)
        if self._producer is None:
            self._producer = Producer(
                {**self._conf(), "acks": "all", "linger.ms": 0, "allow.auto.create.topics": False}
            )
        written: list[Any] = []
        extra = {} if partition is None else {"partition": partition}
        self._producer.produce(
            topic,
            value,
            key,
            headers=headers,
            on_delivery=lambda error, message: written.append(error or message),
            **extra,
        )
        self._producer.flush(self.timeout)
        if not written:
            raise ClusterError(f"the message was not acknowledged within {self.timeout:g}s")
        if isinstance(written[0], KafkaError):
            raise ClusterError(_error_text(KafkaException(written[0])), 409)
        message = written[0]
        return {
            "partition": message.partition(),
            "offset": message.offset(),
            "timestamp": message.timestamp()[1],
        }

    def messages(
        self,
        topic: str,
        partition: int | None,
        limit: int,
        offset: int | None = None,
        timestamp_ms: int | None = None,
        contains: str = "",
    ) -> list[dict[str, Any]]:
        """One page of `page`, oldest first."""
        return self.page(topic, partition, limit, offset, timestamp_ms, contains)["messages"]

    def page(
        self,
        topic: str,
        partition: int | None,
        limit: int,
        offset: int | None = None,
        timestamp_ms: int | None = None,
        contains: str = "",
        newest_first: bool = False,
        cursor: dict[int, int] | None = None,
    ) -> dict[str, Any]:
        """The latest `limit` messages, or the first `limit` from an offset or a time; with
        `contains`, only those whose key, value or a header holds that text (the latest are
        looked for among the last SEARCH_WINDOW messages of each partition).

        `next` is the cursor of the following page (None after the last): per partition,
        where the page stopped. Given back as `cursor`, the latest are read below it (older
        messages), the others from it on (newer ones)."""
        latest = offset is None and timestamp_ms is None
        parts = [
            p
            for p in self.partitions(topic)
            if (partition is None or p["partition"] == partition) and p["messages"] is not None
        ]
        if not parts:
            raise ClusterError(f"topic {topic!r} has no partition {partition}", 404)
        limit = max(1, min(limit, MAX_MESSAGES))
        window = SEARCH_WINDOW if contains and latest else limit
        if cursor is None:
            ends = {p["partition"]: p["end"] for p in parts}
            starts = self._starts(topic, parts, window, offset, timestamp_ms)
        elif latest:
            ends = {p["partition"]: _within(cursor.get(p["partition"]), p) for p in parts}
            starts = {p["partition"]: max(p["start"], ends[p["partition"]] - window) for p in parts}
        else:
            ends = {p["partition"]: p["end"] for p in parts}
            starts = {p["partition"]: _within(cursor.get(p["partition"]), p) for p in parts}
        consumer = Consumer(
            {
                **self._conf(),
                "group.id": f"kafkalite-console-{uuid.uuid4().hex}",  # never joined
                "enable.auto.commit": False,
                "enable.partition.eof": True,
            }
        )
        try:
            found, reached = self._read(
                consumer, topic, starts, ends, None if latest else limit, contains
            )
        finally:
            consumer.close()
        found.sort(key=lambda m: (m["timestamp"], m["partition"], m["offset"]))
        shown = found[-limit:] if latest else found[:limit]
        if latest:
            following = _older_cursor(starts, found, shown)
            more = any(following[p["partition"]] > p["start"] for p in parts)
        else:
            following = _newer_cursor(reached, found, shown)
            more = any(following[p["partition"]] < p["end"] for p in parts)
        if newest_first:
            shown.reverse()
        return {"messages": shown, "next": following if more else None}

    def _starts(
        self, topic: str, parts: list[dict], limit: int, offset: int | None, ts: int | None
    ) -> dict[int, int]:
        if ts is not None:
            spec = OffsetSpec.for_timestamp(ts)
            found = self._offsets([TopicPartition(topic, p["partition"]) for p in parts], spec)
            return {
                p["partition"]: p["end"]
                if found[(topic, p["partition"])] < 0
                else found[(topic, p["partition"])]
                for p in parts
            }
        if offset is not None:
            return {p["partition"]: min(max(offset, p["start"]), p["end"]) for p in parts}
        return {p["partition"]: max(p["start"], p["end"] - limit) for p in parts}

    def _read(
        self,
        consumer: Consumer,
        topic: str,
        starts: dict[int, int],
        ends: dict[int, int],
        limit: int | None,
        contains: str,
    ) -> tuple[list[dict[str, Any]], dict[int, int]]:
        """Messages from `starts` up to `ends` (exclusive) per partition, or until `limit`
        found in it; and per partition the offset the reading reached."""
        pending = {i: end for i, end in ends.items() if starts[i] < end}
        reached = dict(starts)
        consumer.assign(
            [
                TopicPartition(topic, i, starts[i] if starts[i] >= 0 else OFFSET_BEGINNING)
                for i in pending
            ]
        )
        found: list[dict[str, Any]] = []
        per_partition: dict[int, int] = {}
        deadline = time.monotonic() + self.timeout
        while pending and time.monotonic() < deadline:
            for message in consumer.consume(500, timeout=0.1):  # returns at the timeout
                index = message.partition()
                if message.error():
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        if index in pending:
                            reached[index] = pending.pop(index)
                        continue
                    raise ClusterError(_error_text(KafkaException(message.error())))
                if index not in pending or message.offset() >= pending[index]:
                    if index in pending:
                        reached[index] = pending.pop(index)
                    continue
                reached[index] = message.offset() + 1
                shown = _message(message)
                if not contains or _holds(shown, contains):
                    per_partition[index] = per_partition.get(index, 0) + 1
                    found.append(shown)
                full = limit is not None and per_partition.get(index, 0) >= limit
                if message.offset() + 1 >= pending[index] or full:
                    pending.pop(index, None)
        return found, reached

    # -- consumer groups ----------------------------------------------------------------

    def groups(self) -> list[dict[str, Any]]:
        listed = _retrying(
            lambda: _wait(
                self.admin.list_consumer_groups(request_timeout=self.timeout), self.timeout
            ),
            self.timeout,
        )
        share_ids = {g["group"] for g in self._share_groups()}
        types = {g.group_id: group_type(g.type) for g in listed.valid}
        ids = sorted(set(types) - share_ids)
        described = self._describe_groups(ids)
        rows = []
        for group_id in ids:
            description = described[group_id]
            offsets = self.group_offsets(group_id)
            rows.append(
                {
                    "group_id": group_id,
                    "type": types[group_id],
                    "state": description.state.name,
                    "members": len(description.members),
                    "lag": sum(row["lag"] or 0 for row in offsets),
                }
            )
        for group_id in sorted(share_ids):
            share_group = self._share_group(group_id)
            if share_group is not None:  # (deleted in between)
                rows.append(
                    {
                        "group_id": group_id,
                        "type": "share",
                        "state": share_group.state,
                        "members": len(share_group.members),
                        "lag": share_group.total_lag,
                    }
                )
        return sorted(rows, key=lambda row: row["group_id"])

    # -- share groups (KIP-932): kio requests, tools/share_groups.py ----------------------

    def _connection(self) -> Connection:
        return Connection(self.bootstrap, self.timeout, self.client)

    def _plaintext(self) -> bool:  # kafkalite's own client speaks no TLS or SASL
        return self.client.get("security.protocol", "plaintext").lower() == "plaintext"

    def _share_groups(self) -> list[dict[str, str]]:
        from kafkalite.tools.share_groups import list_share_groups

        if not self._plaintext():
            return []

        addresses = [f"{b.host}:{b.port}" for b in self.metadata().brokers.values()]
        try:
            return list_share_groups(self._connection(), addresses)
        except ToolError as exc:
            raise ClusterError(str(exc)) from None

    def _share_group(self, group_id: str) -> Any:
        from kafkalite.tools.share_groups import describe_share_group

        if not self._plaintext():
            return None

        address = self.bootstrap.split(",")[0].strip()
        try:
            return describe_share_group(self._connection(), address, group_id)
        except ToolError as exc:
            raise ClusterError(str(exc)) from None

    def _describe_groups(self, ids: list[str]) -> dict[str, Any]:
        if not ids:
            return {}

        def describe() -> dict[str, Any]:
            futures = self.admin.describe_consumer_groups(ids, request_timeout=self.timeout)
            return {group_id: _wait(future, self.timeout) for group_id, future in futures.items()}

        return _retrying(describe, self.timeout)

    def group_offsets(
        self, group_id: str, assigned: Iterable[tuple[str, int]] = ()
    ) -> list[dict[str, Any]]:
        """Committed offset, end offset and lag per partition; partitions assigned to a member
        but never committed are listed with no committed offset and no lag (as
        kafka-consumer-groups.sh shows "-")."""
        request = [ConsumerGroupTopicPartitions(group_id)]

        def fetch() -> Any:
            futures = self.admin.list_consumer_group_offsets(request, request_timeout=self.timeout)
            return _wait(futures[group_id], self.timeout)

        listed = _retrying(fetch, self.timeout).topic_partitions or []
        committed = {(tp.topic, tp.partition): tp.offset for tp in listed if tp.offset >= 0}
        keys = sorted(set(committed) | set(assigned))
        ends = self._offsets([TopicPartition(t, p) for t, p in keys], OffsetSpec.latest())
        rows = []
        for key in keys:
            offset, end = committed.get(key), ends.get(key)
            lag = None if offset is None or end is None else max(end - offset, 0)
            rows.append(
                {"topic": key[0], "partition": key[1], "committed": offset, "end": end, "lag": lag}
            )
        return rows

    def group(self, group_id: str) -> dict[str, Any]:
        share_group = self._share_group(group_id)
        if share_group is not None:
            return {
                "group_id": group_id,
                "type": "share",
                "state": share_group.state,
                "protocol": share_group.assignor,
                "coordinator": share_group.coordinator,
                "members": [
                    {
                        **{k: m[k] for k in ("member_id", "client_id", "host")},
                        "instance_id": None,
                        "assignment": [f"{a['topic']}-{a['partition']}" for a in m["assignment"]],
                    }
                    for m in share_group.members
                ],
                "offsets": share_group.offsets,
                "lag": share_group.total_lag,
            }
        description = self._describe_groups([group_id])[group_id]
        assigned = [
            (tp.topic, tp.partition)
            for m in description.members
            for tp in (m.assignment.topic_partitions if m.assignment else [])
        ]
        offsets = self.group_offsets(group_id, assigned)
        if description.state.name == "DEAD" and not offsets:  # offsets alone keep it listed
            raise ClusterError(f"group {group_id!r} does not exist", 404)
        members = [
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "host": m.host,
                "instance_id": m.group_instance_id,
                "assignment": [
                    f"{tp.topic}-{tp.partition}"
                    for tp in (m.assignment.topic_partitions if m.assignment else [])
                ],
            }
            for m in description.members
        ]
        return {
            "group_id": group_id,
            "type": group_type(description.type),
            "state": description.state.name,
            "protocol": description.partition_assignor,
            "coordinator": description.coordinator.id if description.coordinator else None,
            "members": members,
            "offsets": offsets,
            "lag": sum(row["lag"] or 0 for row in offsets),
        }

    def _reset_targets(
        self, group_id: str, topic: str, parts: list[dict], to: str, value: int | None
    ) -> dict[int, int]:
        """Where each partition goes, before being kept between its start and end."""
        if to == "earliest":
            return {p["partition"]: p["start"] for p in parts}
        if to == "latest":
            return {p["partition"]: p["end"] for p in parts}
        if to not in ("offset", "datetime", "shift"):
            raise ClusterError(
                f"reset to must be earliest, latest, offset, datetime or shift, not {to!r}", 400
            )
        if value is None:
            raise ClusterError(f"reset to {to!r} needs a value", 400)
        if to == "offset":
            return {p["partition"]: value for p in parts}
        if to == "datetime":  # no message at or after it: the end
            spec = OffsetSpec.for_timestamp(value)
            at = self._offsets([TopicPartition(topic, p["partition"]) for p in parts], spec)
            found = {p["partition"]: at.get((topic, p["partition"]), -1) for p in parts}
            return {
                p["partition"]: p["end"] if found[p["partition"]] < 0 else found[p["partition"]]
                for p in parts
            }
        committed = {
            row["partition"]: row["committed"]
            for row in self.group_offsets(group_id)
            if row["topic"] == topic and row["committed"] is not None
        }
        missing = [p["partition"] for p in parts if p["partition"] not in committed]
        if missing:
            raise ClusterError(
                f"cannot shift partitions {missing} of {topic}: no committed offset", 400
            )
        return {index: offset + value for index, offset in committed.items()}

    def delete_group(self, group_id: str) -> None:
        """DeleteGroups: the group and its committed offsets (Kafka refuses a group with
        active members: NON_EMPTY_GROUP)."""

        def delete() -> None:
            futures = self.admin.delete_consumer_groups([group_id], request_timeout=self.timeout)
            _wait(futures[group_id], self.timeout)

        _retrying(delete, self.timeout)

    def reset_offsets(
        self, group_id: str, topic: str, to: str, value: int | None = None
    ) -> list[dict[str, Any]]:
        """Move the group's committed offsets of every partition of `topic`, as
        kafka-consumer-groups.sh --reset-offsets does: --to-earliest, --to-latest,
        --to-offset `value`, --to-datetime `value` (epoch ms; the first message at or after it,
        else the end) or --shift-by `value` (from the committed offset). Targets are kept
        between the partition's start and end; Kafka requires the group to have no active
        members."""
        parts = self.partitions(topic)
        for part in parts:
            if part["messages"] is None:
                raise ClusterError(f"partition {part['partition']} of {topic} has no leader", 409)
        wanted = self._reset_targets(group_id, topic, parts, to, value)
        targets = [
            TopicPartition(topic, p["partition"], _within(wanted[p["partition"]], p)) for p in parts
        ]
        request = [ConsumerGroupTopicPartitions(group_id, targets)]

        def alter() -> None:
            futures = self.admin.alter_consumer_group_offsets(request, request_timeout=self.timeout)
            for tp in _wait(futures[group_id], self.timeout).topic_partitions or []:
                if tp.error is not None:
                    text = _error_text(KafkaException(tp.error))
                    raise ClusterError(text, 409, _coordinator_busy(tp.error))

        _retrying(alter, self.timeout)
        return self.group_offsets(group_id)


def _view_of(configs: Mapping[str, str | None]) -> dict[str, str | None]:
    """A view's source and filter (issue 18); both None for a topic that is not a view."""
    source = configs.get(VIEW_SOURCE) or None
    return {"view_of": source, "filter": configs.get(VIEW_FILTER) if source else None}


def _within(position: int | None, part: dict[str, Any]) -> int:
    """A cursor's position in a partition, kept between its start and end offsets."""
    return part["end"] if position is None else min(max(position, part["start"]), part["end"])


def _older_cursor(
    starts: dict[int, int], found: list[dict[str, Any]], shown: list[dict[str, Any]]
) -> dict[int, int]:
    """Where the next older page ends, per partition: above the newest message found but
    not shown (none: every match from where the reading started was shown)."""
    cursor = dict(starts)
    shown_ids = {(m["partition"], m["offset"]) for m in shown}
    for m in found:
        if (m["partition"], m["offset"]) not in shown_ids:
            cursor[m["partition"]] = max(cursor[m["partition"]], m["offset"] + 1)
    return cursor


def _newer_cursor(
    reached: dict[int, int], found: list[dict[str, Any]], shown: list[dict[str, Any]]
) -> dict[int, int]:
    """Where the next newer page starts, per partition: at the oldest message found but not
    shown, else where the reading reached."""
    cursor = dict(reached)
    shown_ids = {(m["partition"], m["offset"]) for m in shown}
    for m in found:
        if (m["partition"], m["offset"]) not in shown_ids:
            cursor[m["partition"]] = min(cursor[m["partition"]], m["offset"])
    return cursor


def _difference(end: int | None, start: int | None) -> int | None:
    return None if end is None or start is None else end - start


def _total_size(sizes: dict | None, topic: str, partitions: Any) -> int | None:
    if sizes is None or not all((topic, p) in sizes for p in partitions):
        return None
    return sum(sizes[(topic, p)] for p in partitions)


def _holds(shown: dict[str, Any], text: str) -> bool:
    parts = [shown["key"], shown["value"], *(value for _, value in shown["headers"])]
    names = [name for name, _ in shown["headers"]]
    texts = [p.get("text") or p.get("base64") or "" for p in parts if p is not None]
    return any(text in candidate for candidate in texts + names)


def _message(message: Any) -> dict[str, Any]:
    kind, timestamp = message.timestamp()
    return {
        "partition": message.partition(),
        "offset": message.offset(),
        "timestamp": timestamp,
        "timestamp_type": {1: "CreateTime", 2: "LogAppendTime"}.get(kind, "none"),
        "key": _text(message.key()),
        "value": _text(message.value()),
        "headers": [[name, _text(value)] for name, value in (message.headers() or [])],
    }
