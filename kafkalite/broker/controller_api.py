"""The controller operations a broker's handlers ask for: one interface, two implementations.

Beside `ClusterMetadata` (broker/cluster_metadata.py, what the broker reads and is told), this
is what handlers ask the cluster's controller to do, as Kafka's `Controller` interface
(org.apache.kafka.controller.Controller) serves its KafkaApis:

* `elect_leaders`: ElectLeaders, preferred or unclean (NotController when this broker is not
  the controller: the handler forwards the request, as Kafka's brokers do);
* `alter_partition_reassignments` / `list_partition_reassignments`: start or cancel moves of
  partitions to other replicas, and the moves in progress;
* `alter_broker_configs`: the dynamic configs of one broker or of the cluster-wide default
  (`kafka-configs --entity-type brokers`); every broker it concerns learns the new configs
  through `BrokerConfigListener.on_broker_configs_changed`, the receiving broker before the
  call returns. `stored_broker_configs` are those read at start.

Implementations, picked at start the way the ClusterMetadata is:
* `SingleNodeController` (broker/single_node_controller.py): this node alone; dynamic configs
  in a file in the first log dir.
* `ZkControllerApi` (cluster/zk_controller_api.py): Kafka's ZooKeeper-era controller and
  admin manager; dynamic configs in `/config/brokers/<id>` and `/config/brokers/<default>`,
  announced under `/config/changes` and applied by every broker.

Next here, in the same shape (the request's entities in, per-entity ApiError out, the change
reaching every broker through a listener): ACLs (CreateAcls, DeleteAcls: `/kafka-acl` in
ZooKeeper), SCRAM credentials (AlterUserScramCredentials: `/config/users/<user>`) and client
quotas (AlterClientQuotas: `/config/users`, `/config/clients`, `/config/ips`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

TopicPartition = tuple[str, int]
Targets = Mapping[int, tuple[int, ...] | None]  # partition -> new replicas (None: cancel)
PREFERRED, UNCLEAN = 0, 1  # ElectLeaders' election_type (Kafka's ElectionType)


@dataclass(frozen=True, slots=True)
class ApiError:
    """Kafka's ApiError: an error code and its message (NONE: success)."""

    error: ErrorCode
    message: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is ErrorCode.none


NONE = ApiError(ErrorCode.none)
NOT_CONTROLLER = ApiError(
    ErrorCode.not_controller, "This is not the correct controller for this cluster."
)
ELECTION_NOT_NEEDED = ApiError(
    ErrorCode.election_not_needed, "Leader election not needed for topic partition."
)
UNKNOWN_PARTITION = ApiError(ErrorCode.unknown_topic_or_partition, "The partition does not exist.")


class NotController(Exception):
    """This broker is not (or no longer) the controller."""


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    """A partition being moved: its full replica set and the replicas joining and leaving."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


class BrokerConfigListener(Protocol):
    """What applies dynamic broker configs (the Broker)."""

    def on_broker_configs_changed(self, entity: str, configs: Mapping[str, str]) -> None:
        """`entity` (this broker's id or "<default>") now has exactly `configs`."""
        ...


class ControllerApi(Protocol):
    """The interface handlers use; see the module docstring."""

    def subscribe(self, listener: BrokerConfigListener) -> None:
        """Deliver every later change of this broker's dynamic configs to `listener`."""
        ...

    def stored_broker_configs(self) -> dict[str, dict[str, str]]:
        """The dynamic configs of this broker and of the default, as stored at start."""
        ...

    def unclean_leader_elections(self) -> int:
        """Leaders this broker elected as controller from outside the ISR, since it started
        (Kafka's ControllerStats UncleanLeaderElectionsPerSec, for metrics)."""
        ...

    async def elect_leaders(
        self, election_type: int, partitions: Sequence[TopicPartition] | None, timeout_s: float
    ) -> dict[TopicPartition, ApiError]:
        """Per partition named (None: every partition), its election's outcome, answered once
        the new leaders are known here (REQUEST_TIMED_OUT for those not within `timeout_s`).
        Raises NotController."""
        ...

    async def alter_partition_reassignments(
        self, reassignments: Mapping[str, Targets], allow_rf_change: bool
    ) -> dict[str, dict[int, ApiError]]:
        """Start (or cancel) the moves; per topic and partition, NONE or why not."""
        ...

    async def list_partition_reassignments(self) -> dict[str, dict[int, OngoingReassignment]]:
        """Every partition being moved, by topic."""
        ...

    async def alter_broker_configs(self, entity: str, configs: Mapping[str, str]) -> ApiError:
        """Replace the dynamic configs of `entity` (validated by the caller) durably; NONE or
        why not (the store out of reach)."""
        ...


def unknown_partition(topic: str, partition: int, topic_exists: bool) -> ApiError:
    """ElectLeaders' answer for a partition that does not exist (KRaft's
    ReplicationControlManager.electLeader messages)."""
    if not topic_exists:
        return ApiError(ErrorCode.unknown_topic_or_partition, f"No such topic as {topic}")
    return ApiError(
        ErrorCode.unknown_topic_or_partition, f"No such partition as {topic}-{partition}"
    )


def check_reassignment(
    origin: Sequence[int],
    target: Sequence[int],
    moving: bool,
    replicas: tuple[int, ...] | None,
    live: Set[int],
    allow_rf_change: bool = True,
) -> ApiError | None:
    """Kafka's KafkaController.validateReplicas for a partition whose move started from
    `origin` towards `target` (both the current replicas when not `moving`), plus
    NO_REASSIGNMENT_IN_PROGRESS for a cancel (`replicas` None) of a partition that is not
    moving and KIP-860's refusal of a replication factor change. None when valid."""
    if replicas is None:
        return None if moving else ApiError(ErrorCode.no_reassignment_in_progress, None)
    invalid = ErrorCode.invalid_replica_assignment
    if not replicas:
        return ApiError(invalid, "Empty replica list specified in partition reassignment.")
    if len(set(replicas)) != len(replicas):
        return ApiError(
            invalid,
            f"Duplicate replica ids in partition reassignment replica list: {list(replicas)}",
        )
    if any(r < 0 for r in replicas):
        return ApiError(invalid, f"Invalid broker id in replica list: {list(replicas)}")
    if not allow_rf_change and len(replicas) != len(target):
        return ApiError(
            ErrorCode.invalid_replication_factor,
            f"The replication factor is changed from {len(target)} to {len(replicas)}",
        )
    adding = [r for r in replicas if r not in origin]
    if not set(adding) <= live:
        return ApiError(
            invalid,
            "Replica assignment has brokers that are not alive. Replica list: "
            f"{adding}, live broker list: {sorted(live)}",
        )
    return None
