"""The cluster metadata a broker runs on: one interface, two implementations.

* `SingleNodeMetadata` (broker/metadata_store.py): this node alone, kept in files in the log
  dir (`meta.properties`, `kafkalite-metadata.json`). What `kafkalite serve` uses without
  `zookeeper.connect`.
* A ZooKeeper-backed store (kafkalite/cluster/, Kafka's znode layout) for clusters: its
  cache maps `/brokers/ids/<id>` to `BrokerInfo`, `/brokers/topics/<t>` plus
  `.../partitions/<p>/state` to `PartitionState` (the state znode's version is the partition
  epoch, so a stale decision is fenced like a stale epoch).

What it holds: the cluster id; live brokers (id, endpoints, rack); the controller's id;
topics (name, id, configs) with, per partition, the assignment and the controller's latest
decision (`PartitionState`: replicas, leader, leader epoch, ISR, partition epoch =
the state znode's version, controller epoch); producer ids (unique across the cluster).

Writes (`create_topic`, `add_partitions`, `delete_topic`, `set_topic_configs`) ask for a
change. How it becomes true is the implementation's business: the single node applies it at
once; the ZooKeeper store hands the znode writes to the trio task that owns its client and
returns (CreateTopics then waits for the new partitions' states, as Kafka's
DelayedCreatePartitions does), and the controller decides. Either way the broker learns the
outcome only through events, delivered in order to the `MetadataListener`s that
subscribed, on the trio side (the ZooKeeper store hands kazoo's watch callbacks over from its
thread; it never calls listeners from kazoo's thread):

* `on_partition_state_changed(topic, state)`: a partition was created or got a new
  decision. The ReplicaManager applies it with `Partition.make_leader` / `make_follower`,
  which fence stale epochs.
* `on_topic_configs_changed(name, configs)` and `on_topic_deleted(name)`.
* `on_broker_registered(broker)` / `on_broker_gone(broker_id)`: `/brokers/ids/<id>`
  appeared or vanished (session expiry).

Reads (`topics`, `partition_state`, `brokers`, `controller_id`, ...) answer from the
implementation's cache of the latest state; Metadata, FindCoordinator and DescribeCluster
answer from them, never from "this node".

What handlers ask the controller to do (elections, reassignments, dynamic broker configs) is
the seam beside this one: broker/controller_api.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kafkalite.broker.partition import PartitionState

Assignment = Sequence[Sequence[int]]  # per partition index, its replicas (preferred first)


@dataclass
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    num_partitions: int
    replication_factor: int = 1
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Endpoint:
    listener: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A live broker, as `/brokers/ids/<id>` registers it."""

    broker_id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None

    def endpoint(self, listener: str) -> Endpoint | None:
        return next((e for e in self.endpoints if e.listener == listener), None)


class MetadataListener(Protocol):
    """What learns about metadata changes (the ReplicaManager, the coordinators)."""

    def on_partition_state_changed(self, topic: TopicMetadata, state: PartitionState) -> None: ...

    def on_topic_configs_changed(self, name: str, configs: Mapping[str, str]) -> None: ...

    def on_topic_deleted(self, name: str) -> None: ...

    def on_broker_registered(self, broker: BrokerInfo) -> None: ...

    def on_broker_gone(self, broker_id: int) -> None: ...


class ClusterMetadata(Protocol):
    """The interface the broker runs on; see the module docstring."""

    cluster_id: str

    def load(self, node_id: int, configured_cluster_id: str | None) -> None:
        """Read (or create) the cluster's identity and state; no events yet."""
        ...

    def subscribe(self, listener: MetadataListener) -> None:
        """Deliver every later change to `listener`."""
        ...

    # -- reads -----------------------------------------------------------------------------

    @property
    def topics(self) -> Mapping[str, TopicMetadata]: ...

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None: ...

    def partition_state(self, topic: str, partition: int) -> PartitionState | None: ...

    def partition_states(self, topic: str) -> list[PartitionState]:
        """Every partition's state, by index (empty for an unknown topic)."""
        ...

    def brokers(self) -> list[BrokerInfo]:
        """The live brokers, by id."""
        ...

    def broker(self, broker_id: int) -> BrokerInfo | None: ...

    def controller_id(self) -> int:
        """The active controller's broker id (-1: none right now)."""
        ...

    # -- writes ----------------------------------------------------------------------------

    def create_topic(self, topic: TopicMetadata, assignment: Assignment) -> None: ...

    def add_partitions(self, name: str, assignment: Assignment) -> None:
        """Grow `name` by the partitions of `assignment` (the new ones only)."""
        ...

    def delete_topic(self, name: str) -> None: ...

    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None: ...

    def alter_isr(
        self,
        topic: str,
        partition: int,
        new_isr: Sequence[int],
        leader_epoch: int,
        partition_epoch: int,
    ) -> None:
        """The leader's ISR change (Kafka's ZK-era leaders wrote it themselves): applied only
        if the state is still at `partition_epoch` (the state znode's version). Either way
        the resulting state reaches the listeners as `on_partition_state_changed`."""
        ...

    async def wait_for_partitions(self, names: Sequence[str], timeout_s: float) -> bool:
        """Until every partition of the topics `names` has a state with a leader (Kafka's
        DelayedCreatePartitions after CreateTopics); False at the timeout."""
        ...

    async def catch_up(self, names: Sequence[str]) -> None:
        """Read the topics of `names` this cache does not know (or not all partitions of)
        from the cluster's source of truth now, not when its watches fire: a topic another
        broker has created is then known here, its listeners told. Bounded; never raises."""
        ...

    def allocate_producer_id(self) -> int:
        """A producer id never handed out before in this cluster."""
        ...
