"""Topic administration (Kafka's ZkAdminManager): create and delete topics, add partitions,
replace a topic's configs, and the checks CreateTopics and CreatePartitions answer with.

Changes go to the cluster metadata (`ClusterMetadata`: this node's files, or ZooKeeper in a
cluster); the ReplicaManager creates, removes and reconfigures the local replicas when the
metadata reports them. Handlers (apis/create_topics.py, delete_topics.py,
create_partitions.py, incremental_alter_configs.py, metadata.py's auto-creation) call it.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from kafkalite.broker import partition_limits, views
from kafkalite.broker.cluster_metadata import ClusterMetadata, TopicMetadata
from kafkalite.broker.replica_assignment import assign_replicas
from kafkalite.broker.topic_config import InvalidConfig, validate_topic_configs
from kafkalite.config import BrokerConfig

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
VIEW_IS_FIXED = "{name} is a view: its definition is fixed at creation; delete and create it again."


class AdminManager:
    def __init__(
        self,
        config: BrokerConfig,
        metadata: ClusterMetadata,
        local_partition_count: Callable[[], int],
    ) -> None:
        self.config = config  # replaced on a dynamic config change (Broker.reconfigure)
        self.metadata = metadata
        # Partitions this broker holds (ReplicaManager.partition_count), for the per-broker cap.
        self.local_partition_count = local_partition_count

    # -- topics ----------------------------------------------------------------------------

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
        if name in self.metadata.topics:
            return Outcome(ErrorCode.topic_already_exists, f"Topic '{name}' already exists."), {}
        colliding = self._colliding_topic(name)
        if colliding is not None:
            # '.' and '_' are the same character in metric names (Kafka's Topic.hasCollision).
            return Outcome(
                ErrorCode.invalid_topic_exception,
                f"Topic '{name}' collides with existing topic: {colliding}",
            ), {}
        if views.is_view_request(configs):
            return self._check_new_view(name, num_partitions, replication_factor, configs)
        if num_partitions < 1:
            return Outcome(
                ErrorCode.invalid_partitions, "Number of partitions must be larger than 0."
            ), {}
        if replication_factor < 1:
            return Outcome(
                ErrorCode.invalid_replication_factor,
                "Replication factor must be larger than 0.",
            ), {}
        refusal = self._partition_cap(num_partitions)
        if refusal:
            return Outcome(partition_limits.REFUSAL, refusal), {}
        brokers = len(self.metadata.brokers())
        if replication_factor > brokers:
            return Outcome(
                ErrorCode.invalid_replication_factor,
                f"Unable to replicate the partition {replication_factor} time(s): "
                "The target replication factor of "
                f"{replication_factor} cannot be reached because only {brokers} broker(s) "
                "are registered.",
            ), {}
        try:
            return OK, validate_topic_configs(configs, self.config)
        except InvalidConfig as exc:
            return Outcome(ErrorCode.invalid_config, str(exc)), {}

    def _check_new_view(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str | None],
    ) -> tuple[Outcome, dict[str, str]]:
        """A view: its definition is checked, its counts must be unset or its source's."""
        try:
            source, normalised = views.check_view_configs(self.metadata, name, configs)
            views.check_view_counts(source, num_partitions, replication_factor)
        except views.ViewError as exc:
            return Outcome(exc.error, str(exc)), {}
        return OK, normalised

    def _colliding_topic(self, name: str) -> str | None:
        normalised = name.replace(".", "_")
        topics = self.metadata.topics
        return next((t for t in topics if t.replace(".", "_") == normalised), None)

    def _partition_cap(self, added: int) -> str | None:
        return partition_limits.check_broker(self.config, self.local_partition_count(), added)

    def assign_replicas(
        self, num_partitions: int, replication_factor: int, first: int = 0
    ) -> list[list[int]]:
        """Kafka's placement over the live brokers (round-robin from a random start,
        rack-aware when racks are set); partition `first` onwards."""
        racks = {b.broker_id: b.rack for b in self.metadata.brokers()}
        return assign_replicas(racks, num_partitions, replication_factor, first)

    def create_topic(
        self,
        name: str,
        num_partitions: int | None = None,
        replication_factor: int | None = None,
        configs: Mapping[str, str | None] | None = None,
        assignment: list[list[int]] | None = None,  # manual (validated): replicas by partition
    ) -> tuple[Outcome, TopicMetadata | None]:
        if views.is_view_request(configs or {}):
            return self._create_view(name, num_partitions, replication_factor, configs or {})
        num_partitions = num_partitions or self.config.int("num.partitions")
        replication_factor = replication_factor or self.config.int("default.replication.factor")
        outcome, normalised = self.check_new_topic(
            name, num_partitions, replication_factor, configs or {}
        )
        if not outcome.ok:
            return outcome, None
        meta = TopicMetadata(name, uuid.uuid4(), num_partitions, replication_factor, normalised)
        placed = assignment or self.assign_replicas(num_partitions, replication_factor)
        self.metadata.create_topic(meta, placed)
        # As the cluster metadata knows it: a broker need not hold a replica of every topic.
        return OK, self.metadata.topics.get(name)

    def _create_view(
        self,
        name: str,
        num_partitions: int | None,
        replication_factor: int | None,
        configs: Mapping[str, str | None],
    ) -> tuple[Outcome, TopicMetadata | None]:
        """A view takes its source's partitions and their replicas (it has no log)."""
        outcome, normalised = self.check_new_topic(
            name, num_partitions or -1, replication_factor or -1, configs
        )
        if not outcome.ok:
            return outcome, None
        source = self.metadata.topics[normalised[views.VIEW_SOURCE]]
        meta = TopicMetadata(
            name, uuid.uuid4(), source.num_partitions, source.replication_factor, normalised
        )
        placed = [list(state.replicas) for state in self.metadata.partition_states(source.name)]
        self.metadata.create_topic(meta, placed)
        return OK, self.metadata.topics.get(name)

    def delete_topic(self, name: str) -> Outcome:
        if name not in self.metadata.topics:
            return Outcome(ErrorCode.unknown_topic_or_partition)
        readers = views.views_of(self.metadata, name)
        if readers:
            return Outcome(
                ErrorCode.invalid_request,
                f"Topic {name} has views ({', '.join(readers)}); delete them first.",
            )
        self.metadata.delete_topic(name)
        return OK

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> Outcome:
        """Replace the topic's overrides (already validated); the ReplicaManager applies them
        to its logs when the metadata reports the change."""
        if name not in self.metadata.topics:
            return Outcome(ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist.")
        if views.is_view(self.metadata.topics[name]):
            return Outcome(ErrorCode.invalid_config, VIEW_IS_FIXED.format(name=name))
        self.metadata.set_topic_configs(name, configs)
        return OK

    # -- partitions ------------------------------------------------------------------------

    def check_new_partitions(self, name: str, count: int) -> Outcome:
        """Validate growing a topic to `count` partitions (also for validate_only), with the
        messages of Kafka's ReplicationControlManager.createPartitions."""
        topic = self.metadata.topics.get(name)
        if topic is None:
            return Outcome(ErrorCode.unknown_topic_or_partition)  # Kafka sends no message here
        if views.is_view(topic):
            return Outcome(
                ErrorCode.invalid_request,
                f"{name} is a view: it has the partitions of its source "
                f"{topic.configs[views.VIEW_SOURCE]}; add partitions there.",
            )
        current = topic.num_partitions
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
        refusal = self._partition_cap(count - current)
        if refusal:
            return Outcome(partition_limits.REFUSAL, refusal)
        return OK

    def create_partitions(self, name: str, count: int) -> Outcome:
        outcome = self.check_new_partitions(name, count)
        if not outcome.ok:
            return outcome
        topic = self.metadata.topics[name]
        added = count - topic.num_partitions
        assignment = self.assign_replicas(added, topic.replication_factor, topic.num_partitions)
        self.metadata.add_partitions(name, assignment)
        for view in views.views_of(self.metadata, name):  # a view has its source's partitions
            self.metadata.add_partitions(view, assignment)
        return OK
