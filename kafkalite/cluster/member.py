"""A broker joining a ZooKeeper cluster (`kafkalite serve` with `zookeeper.connect`).

`join_cluster` opens the ZooKeeper session (zookeeper.session.timeout.ms,
zookeeper.connection.timeout.ms), registers the broker and reads the cluster's metadata and
this broker's dynamic configs, so Broker.open can load on them (`metadata`, `controller_api`);
the caller runs `tasks` (the store's watches and writes, the controller candidacy, the config
change notifications, the ACL change notifications) in the server's nursery. With
authorizer.class.name the ACLs are ZooKeeper's `/kafka-acl` (cluster/zk_acl_store.py), and
SCRAM credentials, client quotas and group configs are always ZooKeeper's `/config/users`
(and quotas' `/config/clients`, `/config/ips`; group configs' `/config/groups`:
cluster/zk_scram_store.py, cluster/zk_quota_store.py, cluster/zk_group_config_store.py): the
broker's `authorizer`, `scram_store`, `quota_store` and `group_config_store`, which every
broker follows. Leaving the
block ends the session: the broker's ephemeral registration (and `/controller`, if it held it)
goes at once.
Only imported in cluster mode: the single-node broker never imports kazoo.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from kafkalite.broker.broker import open_authorizer
from kafkalite.broker.cluster_metadata import BrokerInfo, Endpoint
from kafkalite.broker.metadata_store import new_cluster_id
from kafkalite.broker.replica_fetcher_manager import inter_broker_endpoint
from kafkalite.cluster import meta_properties
from kafkalite.cluster.broker_liveness import BrokerLiveness, LivenessSettings
from kafkalite.cluster.controlled_shutdown_zk import Follower, controlled_shutdown
from kafkalite.cluster.controller import Controller
from kafkalite.cluster.leader_rebalancer import LeaderRebalancer
from kafkalite.cluster.zk_acl_store import AclChangeListener, ZkAclStore
from kafkalite.cluster.zk_client import ZkClient
from kafkalite.cluster.zk_controller_api import ZkControllerApi
from kafkalite.cluster.zk_data import GROUPS
from kafkalite.cluster.zk_group_config_store import ZkGroupConfigStore
from kafkalite.cluster.zk_metadata import ZkMetadata
from kafkalite.cluster.zk_quota_store import CLIENTS, IPS, ZkClientQuotaStore
from kafkalite.cluster.zk_scram_store import USERS, ZkScramCredentialStore
from kafkalite.config import BrokerConfig
from kafkalite.security.authorizer import Authorizer
from kafkalite.security.inter_broker import inter_broker_security

log = logging.getLogger(__name__)


@dataclass
class ClusterMember:
    metadata: ZkMetadata
    controller: Controller
    config: BrokerConfig
    liveness: BrokerLiveness
    controller_api: ZkControllerApi
    scram_store: ZkScramCredentialStore
    quota_store: ZkClientQuotaStore
    group_config_store: ZkGroupConfigStore
    authorizer: Authorizer | None = None  # with authorizer.class.name: ZooKeeper's ACLs
    acl_changes: AclChangeListener | None = None  # other brokers' ACL changes, to it

    @property
    def tasks(self) -> list[Callable[..., Awaitable[None]]]:
        """For `nursery.start`: each reports started once running."""
        tasks: list[Callable[..., Awaitable[None]]] = [
            self.metadata.run,
            self.liveness.run,
            self.controller.run,
            self.controller_api.run,
        ]
        if self.acl_changes is not None:
            tasks.append(self.acl_changes.run)
        if self.config.bool("auto.leader.rebalance.enable"):
            interval = self.config.int("leader.imbalance.check.interval.seconds")
            share = self.config.int("leader.imbalance.per.broker.percentage")
            tasks.append(LeaderRebalancer(self.controller, interval, share).run)
        return tasks

    async def controlled_shutdown(self, follower: Follower) -> bool:
        """On SIGTERM, before the server stops (cluster/controlled_shutdown_zk.py); a failure
        is logged and the broker stops anyway."""
        try:
            return await controlled_shutdown(self.config, self.metadata.zk, self.metadata, follower)
        except Exception:
            log.exception("controlled shutdown failed: shutting down without it")
            return False


@contextlib.asynccontextmanager
async def join_cluster(
    config: BrokerConfig, local_broker: BrokerInfo
) -> AsyncIterator[ClusterMember]:
    connect = config.str("zookeeper.connect")
    assert connect is not None
    session_timeout = config.int("zookeeper.session.timeout.ms")
    connection_timeout = config.int("zookeeper.connection.timeout.ms") or None
    async with ZkClient.open(connect, session_timeout, connection_timeout) as zk:
        metadata = ZkMetadata(zk, local_broker)
        # The log dirs are checked against /cluster/id before the broker registers.
        proposed = config.str("cluster.id") or new_cluster_id()
        cluster_id = await metadata.kafka_zk.get_or_create_cluster_id(proposed)
        meta_properties.check_and_write(config.log_dirs, config.broker_id, cluster_id)
        await metadata.start(cluster_id)
        unclean = config.bool("unclean.leader.election.enable")
        liveness = _liveness(config, metadata)
        controller = Controller(zk, config.broker_id, unclean, liveness)
        controller_api = ZkControllerApi(metadata, controller)
        await controller_api.start()
        scram_store = await ZkScramCredentialStore.open(metadata.kafka_zk)
        controller_api.configs.follow(USERS, scram_store.on_user_config_changed)
        quota_store = await ZkClientQuotaStore.open(metadata.kafka_zk)
        for entity_type in (USERS, CLIENTS, IPS):
            controller_api.configs.follow(
                entity_type, functools.partial(quota_store.on_config_changed, entity_type)
            )
        group_config_store = await ZkGroupConfigStore.open(metadata.kafka_zk)
        controller_api.configs.follow(GROUPS, group_config_store.on_group_config_changed)
        authorizer, acl_changes = await _zk_authorizer(config, zk)
        yield ClusterMember(
            metadata,
            controller,
            config,
            liveness,
            controller_api,
            scram_store,
            quota_store,
            group_config_store,
            authorizer,
            acl_changes,
        )


async def _zk_authorizer(
    config: BrokerConfig, zk: ZkClient
) -> tuple[Authorizer | None, AclChangeListener | None]:
    """The authorizer on ZooKeeper's ACLs and the listener that hands it other brokers'
    changes (Kafka's AclAuthorizer.configure), or none without authorizer.class.name."""
    if not config.str("authorizer.class.name"):
        return None, None
    listener = AclChangeListener(zk, lambda _: None)
    await listener.mark_seen()  # before the read: a change made meanwhile is followed
    authorizer = open_authorizer(config, await ZkAclStore.open(zk))
    assert authorizer is not None
    listener.on_change = authorizer.acls_changed
    return authorizer, listener


def _liveness(config: BrokerConfig, metadata: ZkMetadata) -> BrokerLiveness:
    settings = LivenessSettings(
        config.int("kafkalite.liveness.probe.interval.ms"),
        config.int("kafkalite.liveness.probe.timeout.ms"),
        inter_broker_security(config),
    )

    def endpoint_of(broker_id: int) -> Endpoint | None:
        return inter_broker_endpoint(config, metadata, broker_id)

    def registered() -> list[int]:
        return [b.broker_id for b in metadata.brokers()]

    return BrokerLiveness(config.broker_id, settings, registered, endpoint_of)
