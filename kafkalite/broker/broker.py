"""The broker as handlers see it: config, identity, metadata, controller, partitions
(ReplicaManager) and topic administration (AdminManager)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kafkalite.broker.acl_file_store import ACLS_FILE, FileAclStore
from kafkalite.broker.admin_manager import AdminManager
from kafkalite.broker.client_quotas import ClientQuotas, ClientQuotaStore, SingleNodeQuotaStore
from kafkalite.broker.cluster_metadata import BrokerInfo, ClusterMetadata, Endpoint
from kafkalite.broker.connection_quotas import ConnectionLimits
from kafkalite.broker.controller_api import ControllerApi
from kafkalite.broker.dynamic_config import DynamicBrokerConfig, FileDynamicConfigStore
from kafkalite.broker.group_configs import (
    GroupConfigManager,
    GroupConfigStore,
    SingleNodeGroupConfigStore,
)
from kafkalite.broker.group_coordinator_service import GroupCoordinatorService
from kafkalite.broker.metadata_store import SingleNodeMetadata
from kafkalite.broker.partition import Partition
from kafkalite.broker.quota_managers import QuotaManagers
from kafkalite.broker.release_forward_sender import ReleaseForwardSender
from kafkalite.broker.remote_log_manager import RemoteLogManager
from kafkalite.broker.remote_log_metadata_manager import TopicBasedRemoteLogMetadataManager
from kafkalite.broker.replica_fetcher_manager import ReplicaFetcherManager, inter_broker_endpoint
from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.broker.scram_credentials import (
    ScramCredentials,
    ScramCredentialStore,
    SingleNodeScramStore,
)
from kafkalite.broker.share_coordinator_service import ShareCoordinatorService
from kafkalite.broker.share_group_service import ShareGroupService
from kafkalite.broker.share_partition_manager import SharePartitionManager
from kafkalite.broker.single_node_controller import SingleNodeController
from kafkalite.broker.topic_config import log_config_for
from kafkalite.broker.txn_coordinator_service import TransactionCoordinatorService
from kafkalite.config import BrokerConfig, Listener
from kafkalite.metrics.counters import BrokerMetrics
from kafkalite.security.acl_store import AclStore
from kafkalite.security.authorizer import Authorizer, parse_super_users
from kafkalite.security.inter_broker import inter_broker_security
from kafkalite.security.scram_credential import ScramCredential
from kafkalite.storage.log_dirs import LogDirs

DYNAMIC_CONFIGS_FILE = "dynamic-broker-configs.json"


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def _remote_log_manager(
    config: BrokerConfig, replicas: ReplicaManager, clock_ms: Callable[[], int]
) -> RemoteLogManager | None:
    if not config.bool("remote.log.storage.system.enable"):
        return None

    def partitions() -> list[Partition]:
        return [p for topic in replicas.topics.values() for p in topic.partitions.values()]

    metadata_manager = None
    if config.cluster_mode:

        def endpoint_of(broker_id: int) -> Endpoint | None:
            return inter_broker_endpoint(config, replicas.metadata, broker_id)

        metadata_manager = TopicBasedRemoteLogMetadataManager(
            config, replicas, endpoint_of, clock_ms, inter_broker_security(config)
        )
    manager = RemoteLogManager(config, partitions, clock_ms, metadata_manager=metadata_manager)
    replicas.topic_partition_deleted.append(manager.on_topic_partition_deleted)
    return manager


def _release_forwarder(
    config: BrokerConfig, replicas: ReplicaManager, clock_ms: Callable[[], int]
) -> ReleaseForwardSender:
    def endpoint_of(broker_id: int) -> Endpoint | None:
        return inter_broker_endpoint(config, replicas.metadata, broker_id)

    return ReleaseForwardSender(
        config.broker_id,
        replicas.delayed_delivery,
        replicas.metadata,
        endpoint_of,
        clock_ms,
        config.int("request.timeout.ms"),
        inter_broker_security(config),
    )


def local_broker_info(config: BrokerConfig) -> BrokerInfo:
    """This broker as it registers itself: id and advertised endpoints."""
    listeners = config.advertised_listeners
    endpoints = tuple(Endpoint(each.name, each.host, each.port) for each in listeners)
    return BrokerInfo(config.broker_id, endpoints, config.str("broker.rack"))


def open_authorizer(config: BrokerConfig, store: AclStore | None = None) -> Authorizer | None:
    """The ACL authorizer authorizer.class.name asks for, or None. Its ACLs are `store`'s (a
    cluster's: ZooKeeper's /kafka-acl), by default a single node's: a file in its data
    directory."""
    if not config.str("authorizer.class.name"):
        return None
    return Authorizer(
        store or FileAclStore(config.log_dir / ACLS_FILE),
        parse_super_users(config.str("super.users") or ""),
        config.bool("allow.everyone.if.no.acl.found"),
    )


def _single_node_scram_store(metadata: ClusterMetadata) -> ScramCredentialStore | None:
    if isinstance(metadata, SingleNodeMetadata):
        return SingleNodeScramStore(metadata)
    return None


def open_quotas(
    config: BrokerConfig, metadata: ClusterMetadata, store: ClientQuotaStore | None = None
) -> tuple[ClientQuotas, QuotaManagers]:
    """The stored client quotas (`store`, a cluster's: ZooKeeper's; by default a single
    node's: in its metadata file) and the quota managers enforcing them."""
    if store is None and isinstance(metadata, SingleNodeMetadata):
        store = SingleNodeQuotaStore(metadata)
    client_quotas = ClientQuotas(store)
    managers = QuotaManagers.create(
        config.int("quota.window.num"),
        config.int("quota.window.size.seconds"),
        config.int("controller.quota.window.num"),
        config.int("controller.quota.window.size.seconds"),
    )
    for entity, quotas in client_quotas.all().items():
        managers.on_client_quota_changed(entity, quotas)
    managers.connections.configure(ConnectionLimits.of(config))
    if store is not None:
        store.subscribe(managers)
    return client_quotas, managers


@dataclass
class Broker:
    config: BrokerConfig
    metadata: ClusterMetadata
    replica_manager: ReplicaManager
    admin_manager: AdminManager
    groups: GroupCoordinatorService
    controller: ControllerApi
    clock_ms: Callable[[], int] = wall_clock_ms
    metrics: BrokerMetrics = field(default_factory=BrokerMetrics)
    dynamic: DynamicBrokerConfig | None = None  # dynamic broker configs (kafka-configs)
    fetchers: ReplicaFetcherManager | None = None  # followers' fetchers (run by the server)
    txn: TransactionCoordinatorService | None = None  # set by open()
    scram: ScramCredentials = field(default_factory=lambda: ScramCredentials(None))
    share_groups: ShareGroupService | None = None  # share groups (KIP-932); set by open()
    authorizer: Authorizer | None = None  # ACLs, when authorizer.class.name names one
    group_configs: GroupConfigManager | None = None  # kafka-configs --entity-type groups
    # Tiered storage (remote.log.storage.system.enable): run by the server.
    remote_log_manager: RemoteLogManager | None = None
    # A retry topic's releases to partitions led by other brokers (run by the server).
    release_forwarder: ReleaseForwardSender | None = None
    client_quotas: ClientQuotas = field(default_factory=lambda: ClientQuotas(None))
    quotas: QuotaManagers = field(default_factory=lambda: QuotaManagers.create(11, 1, 11, 1))

    @classmethod
    def open(
        cls,
        config: BrokerConfig,
        clock_ms: Callable[[], int] = wall_clock_ms,
        metadata: ClusterMetadata | None = None,
        controller: ControllerApi | None = None,
        authorizer: Authorizer | None = None,
        scram_store: ScramCredentialStore | None = None,
        quota_store: ClientQuotaStore | None = None,
        group_config_store: GroupConfigStore | None = None,
    ) -> Broker:
        """Load metadata and dynamic configs (by default this node's own files: a single node)
        and every partition log (running recovery where needed). A cluster passes its
        authorizer, SCRAM credential, client quota and group config stores (ZooKeeper's); a
        single node keeps its own."""
        if metadata is None:
            metadata = SingleNodeMetadata(config.log_dir, local_broker_info(config))
        if controller is None:
            store = FileDynamicConfigStore(config.log_dir / DYNAMIC_CONFIGS_FILE)
            controller = SingleNodeController(metadata, store)
        dynamic = DynamicBrokerConfig(config)
        config = dynamic.load(controller.stored_broker_configs())
        metadata.load(config.broker_id, config.str("cluster.id"))
        log_dirs = LogDirs.for_dirs(config.log_dirs, background_io=True)  # see log_maintenance
        replica_manager = ReplicaManager(config, metadata, log_dirs, clock_ms)
        admin_manager = AdminManager(config, metadata, lambda: replica_manager.partition_count)
        replica_manager.admin_manager = admin_manager
        fetchers = replica_manager.fetchers = ReplicaFetcherManager(config, metadata, clock_ms)
        replica_manager.load()
        groups = GroupCoordinatorService(config, replica_manager)
        groups.load()
        txn = TransactionCoordinatorService(config, replica_manager, groups, metadata)
        txn.load()
        share_coordinator = ShareCoordinatorService(config, replica_manager)
        share_coordinator.load()
        if group_config_store is None and isinstance(metadata, SingleNodeMetadata):
            group_config_store = SingleNodeGroupConfigStore(metadata)
        group_configs = GroupConfigManager(config, group_config_store)
        share_partitions = SharePartitionManager(
            config, replica_manager, share_coordinator, group_configs
        )
        share_groups = ShareGroupService(config, groups, share_partitions)
        broker = cls(
            config,
            metadata,
            replica_manager,
            admin_manager,
            groups,
            controller,
            clock_ms,
            dynamic=dynamic,
            fetchers=fetchers,
            txn=txn,
            scram=ScramCredentials(scram_store or _single_node_scram_store(metadata)),
            share_groups=share_groups,
            authorizer=authorizer or open_authorizer(config),
            group_configs=group_configs,
            remote_log_manager=_remote_log_manager(config, replica_manager, clock_ms),
        )
        controller.subscribe(broker)
        broker.client_quotas, broker.quotas = open_quotas(config, metadata, quota_store)
        if not isinstance(metadata, SingleNodeMetadata):  # other brokers lead partitions
            broker.release_forwarder = _release_forwarder(config, replica_manager, clock_ms)
        if broker.remote_log_manager is not None:  # followers rebuild from the remote tier
            fetchers.build_aux_state = broker.remote_log_manager.build_remote_log_aux_state
        return broker

    def on_broker_configs_changed(self, entity: str, configs: Mapping[str, str]) -> None:
        """A dynamic broker config change (this broker's or the default), from whichever
        broker made it: applied at once, as Kafka's BrokerConfigHandler does."""
        if self.dynamic is not None and self.dynamic.apply(entity, configs):
            self.reconfigure(self.dynamic.effective())

    def reconfigure(self, config: BrokerConfig) -> None:
        """Apply a new effective config (dynamic broker configs) to everything holding one;
        every partition log gets its topic's log config again."""
        self.config = self.replica_manager.config = self.groups.config = config
        self.admin_manager.config = config
        self.quotas.connections.configure(ConnectionLimits.of(config))
        if self.txn is not None:
            self.txn.config = config
        if self.group_configs is not None:
            self.group_configs.config = config
        if self.share_groups is not None:
            self.share_groups.config = config
            self.share_groups.partitions.config = config
            self.share_groups.partitions.coordinator.config = config
        for topic in self.replica_manager.topics.values():
            log_config = log_config_for(config, topic.metadata.configs)
            for partition in topic.partitions.values():
                self.replica_manager.update_log_config(partition, log_config)

    @property
    def node_id(self) -> int:
        return self.config.broker_id

    @property
    def cluster_id(self) -> str:
        return self.metadata.cluster_id

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        """What a SASL/SCRAM exchange checks the client's proof against."""
        return self.scram.credential(user, mechanism)

    @property
    def advertised_listener(self) -> Listener:
        return self.config.advertised_listeners[0]

    def endpoint_of(self, broker_id: int, listener: str = "") -> Endpoint | None:
        """Where clients reach `broker_id`: its endpoint on `listener`, the one they use here
        (Kafka answers each client on its own listener); by default the first advertised
        listener (brokers reach each other on config.inter_broker_listener)."""
        info = self.metadata.broker(broker_id)
        return info.endpoint(listener or self.advertised_listener.name) if info else None

    def shutdown(self) -> None:
        self.replica_manager.shutdown()
