"""Views: topics that are a filtered reading of another topic (issue 18).

A view is a topic in the cluster metadata whose configs are `kafkalite.view.source` (the
topic it reads) and `kafkalite.view.filter` (broker/view_filter.py's language). It has its
own name and topic id, the partition count of its source (kept in step when the source
grows) and no log: the ReplicaManager keeps no replica of it, and serves a Fetch of view
partition p by reading source partition p and dropping the records the filter refuses
(storage/record_filter.py; through storage/header_index.py when the source indexes headers
with `kafkalite.index.headers`, so that batches the filter rules out are not read).
Offsets are the source's, so ListOffsets, OffsetForLeaderEpoch and committed offsets mean
the same on both. Metadata reports the source's partition states
(leaders, replicas, ISR); in a ZooKeeper cluster the controller keeps no states of a view's
partitions and every broker's metadata answers its source's (cluster/zk_metadata.py), so a
view follows its source's leader through failovers on every broker. Views are read-only
(Produce is refused), their definition is fixed at creation, and a source cannot be deleted
while views read it.

This module holds the definitions and their checks; handlers and managers call it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from kafkalite.broker.cluster_metadata import ClusterMetadata, TopicMetadata
from kafkalite.broker.partition import PartitionState
from kafkalite.broker.view_filter import Filter, FilterSyntaxError, parse
from kafkalite.storage.record_filter import FilterStats

VIEW_SOURCE = "kafkalite.view.source"
VIEW_FILTER = "kafkalite.view.filter"
VIEW_CONFIGS = (VIEW_SOURCE, VIEW_FILTER)
# The coordinators' topics (replica_manager.INTERNAL_TOPICS, which imports this module).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
USE_DEFAULT = -1


class ViewError(ValueError):
    """A view request refused: the Kafka error code and a message for the client."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error


def is_view_request(configs: Mapping[str, object]) -> bool:
    """Do these CreateTopics configs define a view?"""
    return any(name in configs for name in VIEW_CONFIGS)


def is_view(topic: TopicMetadata | None) -> bool:
    return topic is not None and VIEW_SOURCE in topic.configs


@dataclass
class View:
    """A view as the data path uses it, with what reading it did so far."""

    name: str
    source: str
    filter: Filter
    stats: FilterStats = field(default_factory=FilterStats)


def check_view_configs(
    metadata: ClusterMetadata, name: str, configs: Mapping[str, str | None]
) -> tuple[TopicMetadata, dict[str, str]]:
    """The source and the normalised configs of a new view; raises ViewError."""
    others = sorted(set(configs) - set(VIEW_CONFIGS))
    if others:
        raise ViewError(
            ErrorCode.invalid_config,
            f"A view takes only {VIEW_SOURCE} and {VIEW_FILTER}; {', '.join(others)} "
            "belong(s) to its source topic.",
        )
    source_name, text = configs.get(VIEW_SOURCE), configs.get(VIEW_FILTER)
    if source_name is None or not source_name.strip():
        raise ViewError(ErrorCode.invalid_config, f"A view needs {VIEW_SOURCE}.")
    if text is None or not text.strip():
        raise ViewError(ErrorCode.invalid_config, f"A view needs {VIEW_FILTER}.")
    source_name = source_name.strip()
    if source_name in INTERNAL_TOPICS:
        raise ViewError(
            ErrorCode.invalid_config,
            f"Invalid value {source_name} for configuration {VIEW_SOURCE}: "
            "internal topics have no views.",
        )
    source = metadata.topics.get(source_name)
    if source is None:
        raise ViewError(
            ErrorCode.invalid_config,
            f"Invalid value {source_name} for configuration {VIEW_SOURCE}: "
            f"topic {source_name} does not exist.",
        )
    if is_view(source):
        raise ViewError(
            ErrorCode.invalid_config,
            f"Invalid value {source_name} for configuration {VIEW_SOURCE}: "
            f"{source_name} is itself a view; a view reads a topic.",
        )
    try:
        parse(text)
    except FilterSyntaxError as exc:
        raise ViewError(
            ErrorCode.invalid_config,
            f"Invalid value {text} for configuration {VIEW_FILTER}: {exc}",
        ) from None
    return source, {VIEW_SOURCE: source_name, VIEW_FILTER: text}


def check_view_counts(
    source: TopicMetadata, num_partitions: int, replication_factor: int
) -> tuple[int, int]:
    """A view has its source's partitions and replicas: -1 (the default) or the same."""
    if num_partitions not in (USE_DEFAULT, source.num_partitions):
        raise ViewError(
            ErrorCode.invalid_partitions,
            f"A view has the partitions of its source {source.name} "
            f"({source.num_partitions}); leave the partition count unset or give that.",
        )
    if replication_factor not in (USE_DEFAULT, source.replication_factor):
        raise ViewError(
            ErrorCode.invalid_replication_factor,
            f"A view has the replicas of its source {source.name} (replication factor "
            f"{source.replication_factor}); leave it unset or give that.",
        )
    return source.num_partitions, source.replication_factor


def views_of(metadata: ClusterMetadata, source: str) -> list[str]:
    """The names of the views that read `source`, sorted."""
    return sorted(
        topic.name for topic in metadata.topics.values() if topic.configs.get(VIEW_SOURCE) == source
    )


def partition_states(metadata: ClusterMetadata, topic: TopicMetadata) -> list[PartitionState]:
    """A topic's partition states; a view's are its source's (it is served where they are)."""
    if is_view(topic):
        return metadata.partition_states(topic.configs[VIEW_SOURCE])
    return metadata.partition_states(topic.name)


class ViewCatalog:
    """The views of the cluster metadata with their parsed filters, parsed once per view."""

    def __init__(self, metadata: ClusterMetadata) -> None:
        self.metadata = metadata
        self._views: dict[str, View] = {}

    def get(self, name: str) -> View | None:
        topic = self.metadata.topics.get(name)
        if not is_view(topic):
            self._views.pop(name, None)
            return None
        assert topic is not None
        source, text = topic.configs[VIEW_SOURCE], topic.configs[VIEW_FILTER]
        view = self._views.get(name)
        if view is None or view.source != source or view.filter.text != text:
            view = self._views[name] = View(name, source, parse(text))
        return view

    def all(self) -> list[View]:
        return [view for name in list(self.metadata.topics) if (view := self.get(name))]


def view_refusal(view: View) -> str:
    """Why a produce to a view is refused (non-retriable INVALID_TOPIC_EXCEPTION)."""
    return f"{view.name} is a view of {view.source} and is read-only: produce to {view.source}."
