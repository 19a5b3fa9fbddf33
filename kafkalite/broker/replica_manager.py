"""Topics and partitions of this broker: creation, deletion, configs, append and read.

Sans-IO: plain synchronous state. The trio layer wakes waiting fetches through
`on_append`. Every partition carries log start offset, high watermark, log end offset and
leader epoch from day one; on a single node the high watermark follows the log end offset.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from kafkalite.broker.metadata_store import MetadataStore, TopicMetadata
from kafkalite.broker.topic_config import InvalidConfig, log_config_for, validate_topic_configs
from kafkalite.config import BrokerConfig
from kafkalite.storage.errors import StorageError
from kafkalite.storage.log import AppendResult, UnifiedLog
from kafkalite.storage.log_dirs import LogDirs

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")


def topic_name_error(name: str) -> str | None:
    """Why Kafka would reject this topic name, or None (Kafka's Topic.validate)."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters"
    if not _LEGAL_TOPIC_NAME.fullmatch(name):
        return (
            f'Topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return None


@dataclass(frozen=True, slots=True)
class Outcome:
    """Result of an admin operation: an error code (NONE on success) and an optional message."""

    error: ErrorCode = ErrorCode.none
    message: str | None = None

    @property
    def ok(self) -> bool:
        return self.error == ErrorCode.none


OK = Outcome()


@dataclass
class Partition:
    topic: str
    topic_id: uuid.UUID
    index: int
    log: UnifiedLog
    leader_id: int
    leader_epoch: int = 0
    high_watermark: int = 0
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def check_leader_epoch(self, requested: int) -> ErrorCode:
        """Kafka's check of a client's current_leader_epoch (-1: not checked)."""
        if requested == -1 or requested == self.leader_epoch:
            return ErrorCode.none
        if requested > self.leader_epoch:
            return ErrorCode.unknown_leader_epoch
        return ErrorCode.fenced_leader_epoch

    def advance_high_watermark(self) -> None:
        # Single node: every replica in the ISR is this one, so HW = LEO.
        self.high_watermark = self.log.log_end_offset


@dataclass
class Topic:
    metadata: TopicMetadata
    partitions: list[Partition]

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def topic_id(self) -> uuid.UUID:
        return self.metadata.topic_id


class ReplicaManager:
    def __init__(
        self,
        config: BrokerConfig,
        store: MetadataStore,
        log_manager: LogDirs,
        clock_ms: Callable[[], int],
    ) -> None:
        self.config = config
        self.node_id = config.broker_id
        self.store = store
        self.log_manager = log_manager
        self.clock_ms = clock_ms
        self.topics: dict[str, Topic] = {}
        self.topics_by_id: dict[uuid.UUID, Topic] = {}
        self.on_append: Callable[[], None] = lambda: None

    # -- lifecycle -------------------------------------------------------------------------

    def load(self) -> None:
        """Open every partition log of every known topic; drop logs of unknown topics."""
        overrides = {name: topic.configs for name, topic in self.store.topics.items()}
        logs = self.log_manager.load(
            lambda name, _: log_config_for(self.config, overrides.get(name, {})), self.clock_ms()
        )
        for (name, index), _log in list(logs.items()):
            meta = self.store.topics.get(name)
            if meta is None or index >= meta.num_partitions:
                self.log_manager.delete_log(name, index)
        for meta in self.store.topics.values():
            self._install_topic(meta)

    def _install_topic(self, meta: TopicMetadata) -> Topic:
        topic = Topic(meta, [])
        self.topics[meta.name] = topic
        self.topics_by_id[meta.topic_id] = topic
        self._add_partitions(topic, meta.num_partitions)
        return topic

    def _add_partitions(self, topic: Topic, count: int) -> None:
        log_config = log_config_for(self.config, topic.metadata.configs)
        now = self.clock_ms()
        for index in range(len(topic.partitions), count):
            log = self.log_manager.logs.get((topic.name, index))
            if log is None:
                log = self.log_manager.create_log(topic.name, index, log_config, now)
            # A single node keeps its epoch across restarts (KRaft bumps it on leader change).
            epoch = max(log.leader_epoch_cache.latest_epoch or 0, 0)
            partition = Partition(
                topic.name,
                topic.topic_id,
                index,
                log,
                self.node_id,
                epoch,
                replicas=[self.node_id],
                isr=[self.node_id],
            )
            partition.advance_high_watermark()
            topic.partitions.append(partition)

    def shutdown(self) -> None:
        self.log_manager.shutdown()

    # -- lookup ----------------------------------------------------------------------------

    def partition(self, topic: str, index: int) -> Partition | None:
        found = self.topics.get(topic)
        if found is None or not 0 <= index < len(found.partitions):
            return None
        return found.partitions[index]

    def leader_partition(
        self, topic: str, index: int, current_leader_epoch: int = -1
    ) -> tuple[Partition | None, ErrorCode]:
        """The partition a client addresses as leader, checking its current_leader_epoch."""
        partition = self.partition(topic, index)
        if partition is None:
            return None, ErrorCode.unknown_topic_or_partition
        return partition, partition.check_leader_epoch(current_leader_epoch)

    def topic_by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self.topics_by_id.get(topic_id)

    # -- admin -----------------------------------------------------------------------------

    def check_new_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str | None],
    ) -> tuple[Outcome, dict[str, str]]:
        """Validate a CreateTopics entry (also for validate_only); returns normalised configs."""
        reason = topic_name_error(name)
        if reason:
            return Outcome(ErrorCode.invalid_topic_exception, reason), {}
        if name in self.topics:
            return Outcome(ErrorCode.topic_already_exists, f"Topic '{name}' already exists."), {}
        colliding = self._colliding_topic(name)
        if colliding is not None:
            # '.' and '_' are the same character in metric names (Kafka's Topic.hasCollision).
            return Outcome(
                ErrorCode.invalid_topic_exception,
                f"Topic '{name}' collides with existing topic: {colliding}",
            ), {}
        if num_partitions < 1:
            return Outcome(
                ErrorCode.invalid_partitions, "Number of partitions must be larger than 0."
            ), {}
        if replication_factor < 1:
            return Outcome(
                ErrorCode.invalid_replication_factor,
                "Replication factor must be larger than 0.",
            ), {}
        if replication_factor > 1:
            return Outcome(
                ErrorCode.invalid_replication_factor,
                f"Unable to replicate the partition {replication_factor} time(s): "
                "The target replication factor of "
                f"{replication_factor} cannot be reached because only 1 broker(s) are registered.",
            ), {}
        try:
            return OK, validate_topic_configs(configs)
        except InvalidConfig as exc:
            return Outcome(ErrorCode.invalid_config, str(exc)), {}

    def _colliding_topic(self, name: str) -> str | None:
        normalised = name.replace(".", "_")
        return next((t for t in self.topics if t.replace(".", "_") == normalised), None)

    def create_topic(
        self,
        name: str,
        num_partitions: int | None = None,
        replication_factor: int | None = None,
        configs: Mapping[str, str | None] | None = None,
    ) -> tuple[Outcome, Topic | None]:
        num_partitions = num_partitions or self.config.int("num.partitions")
        replication_factor = replication_factor or self.config.int("default.replication.factor")
        outcome, normalised = self.check_new_topic(
            name, num_partitions, replication_factor, configs or {}
        )
        if not outcome.ok:
            return outcome, None
        meta = TopicMetadata(name, uuid.uuid4(), num_partitions, replication_factor, normalised)
        self.store.topics[name] = meta
        self.store.save()
        return OK, self._install_topic(meta)

    def delete_topic(self, name: str) -> Outcome:
        topic = self.topics.pop(name, None)
        if topic is None:
            return Outcome(ErrorCode.unknown_topic_or_partition)
        del self.topics_by_id[topic.topic_id]
        del self.store.topics[name]
        self.store.save()
        for partition in topic.partitions:
            self.log_manager.delete_log(name, partition.index)
        return OK

    def check_new_partitions(self, name: str, count: int) -> Outcome:
        """Validate growing a topic to `count` partitions (also for validate_only), with the
        messages of Kafka's ReplicationControlManager.createPartitions."""
        topic = self.topics.get(name)
        if topic is None:
            return Outcome(ErrorCode.unknown_topic_or_partition)  # Kafka sends no message here
        current = len(topic.partitions)
        if count == current:
            return Outcome(
                ErrorCode.invalid_partitions, f"Topic already has {current} partition(s)."
            )
        if count < current:
            return Outcome(
                ErrorCode.invalid_partitions,
                f"The topic {name} currently has {current} partition(s); {count} would not be "
                "an increase.",
            )
        return OK

    def create_partitions(self, name: str, count: int) -> Outcome:
        outcome = self.check_new_partitions(name, count)
        if not outcome.ok:
            return outcome
        topic = self.topics[name]
        topic.metadata.num_partitions = count
        self.store.save()
        self._add_partitions(topic, count)
        return OK

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> Outcome:
        """Replace the topic's overrides (already validated) and apply them to its logs."""
        topic = self.topics.get(name)
        if topic is None:
            return Outcome(ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist.")
        topic.metadata.configs = dict(configs)
        self.store.save()
        log_config = log_config_for(self.config, configs)
        for partition in topic.partitions:
            partition.log.update_config(log_config)
        return OK

    # -- data ------------------------------------------------------------------------------

    def append(self, partition: Partition, records: bytes) -> AppendResult | StorageError:
        """Append a producer's batches as leader; a rejected append returns its error."""
        try:
            result = partition.log.append_as_leader(
                records, partition.leader_epoch, self.clock_ms()
            )
        except StorageError as exc:
            return exc
        partition.advance_high_watermark()
        self.on_append()
        return result

    def delete_records(self, partition: Partition, offset: int) -> tuple[ErrorCode, int]:
        """Move the log start offset to `offset` (-1: the high watermark)."""
        if offset == -1:
            offset = partition.high_watermark
        if offset < 0 or offset > partition.high_watermark:
            return ErrorCode.offset_out_of_range, -1
        return ErrorCode.none, partition.log.delete_records_before(offset)

    def apply_retention(self) -> int:
        return self.log_manager.apply_retention(self.clock_ms())

    def clean_logs(self) -> int:
        """Compact the logs of cleanup.policy=compact topics; returns the bytes reclaimed."""
        high_watermarks = {
            (topic.name, p.index): p.high_watermark
            for topic in self.topics.values()
            for p in topic.partitions
        }
        return self.log_manager.clean_logs(self.clock_ms(), high_watermarks)

    def maintenance(self) -> None:
        """Periodic work: flush policy and checkpoints."""
        self.log_manager.flush_all(self.clock_ms())
        self.log_manager.checkpoint()
