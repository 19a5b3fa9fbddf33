"""Kafka's uses of ZooKeeper, as building blocks for the controller and the brokers.

After Kafka's KafkaZkClient: every operation is one or a few requests on a `ZkClient`, with
the fencing Kafka relies on:
- Broker registration: an ephemeral `/brokers/ids/<id>`, created "checked" (a node left by this
  same session counts as ours; one left by this broker's previous run, killed before its
  session expired, is waited for), re-created by `keep_broker_registered` on every new session.
- Controller election: an atomic multi creates the ephemeral `/controller` and bumps
  `/controller_epoch` conditionally on the version read; the winner keeps that znode version
  (`ControllerEpoch.zk_version`) and puts a CheckOp on it in front of each of its writes, so
  once another broker has been elected, a deposed controller's write fails (ControllerMoved).
- Partition state writes are conditional on the state znode's version: a stale writer gets
  BadVersion (StalePartitionState) and learns someone newer decided.
- Producer id blocks: read `/latest_producer_id_block`, write the next block conditionally on
  the version read, retry on BadVersion: every block goes to exactly one broker.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import trio

from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.zk_client import (
    BadVersion,
    CheckOp,
    ConnectionLost,
    CreateOp,
    DeleteOp,
    NodeExists,
    NoNode,
    OpResult,
    SessionExpired,
    SessionState,
    SetDataOp,
    ZkClient,
    ZkError,
)

log = logging.getLogger(__name__)
# Beyond zookeeper.session.timeout.ms * 1.5 (ZooKeeper expires a session up to a tick late, a
# tick being at most half the timeout): the server's own delays under load.
SESSION_EXPIRY_MARGIN_MS = 2000


class BrokerIdInUse(ZkError):
    """`/brokers/ids/<id>` belongs to another live session (another broker with this id)."""


class ControllerMoved(ZkError):
    """`/controller_epoch` moved on: this broker is no longer the controller."""


class StalePartitionState(ZkError):
    """The partition state changed since it was read: the write was refused."""


class TopicExists(ZkError):
    pass


@dataclass(frozen=True, slots=True)
class ControllerEpoch:
    epoch: int
    zk_version: int  # of /controller_epoch: the condition that fences this controller


@dataclass(frozen=True, slots=True)
class VersionedPartitionState:
    state: zd.PartitionState
    zk_version: int


def now_ms() -> int:
    return int(time.time() * 1000)


class KafkaZkClient:
    def __init__(self, zk: ZkClient) -> None:
        self.zk = zk

    # -- cluster ----------------------------------------------------------------------------

    async def create_top_level_paths(self) -> None:
        """The persistent znodes every Kafka broker creates at startup (empty when new)."""
        for path in zd.PERSISTENT_PATHS:
            await self.zk.ensure_path(path)

    async def get_or_create_cluster_id(self, proposed: str) -> str:
        """The cluster's id: `proposed` if this call created `/cluster/id`, else the stored one."""
        try:
            await self.zk.create(zd.CLUSTER_ID, zd.encode_cluster_id(proposed), make_parents=True)
            return proposed
        except NodeExists:
            data, _ = await self.zk.get(zd.CLUSTER_ID)
            return zd.decode_cluster_id(data)

    # -- brokers ----------------------------------------------------------------------------

    async def register_broker(self, info: zd.BrokerInfo) -> int:
        """Create the ephemeral registration; returns its czxid (Kafka's broker epoch).

        A registration of another session is this broker's own previous one (its process was
        killed and restarted before ZooKeeper expired the old session) when it names the same
        endpoints; then the broker waits for it to go, up to the session timeout plus a margin
        (ZooKeeper expires sessions a tick late at most; the old session's clock started
        before this process did). The rule is sound because this process holds the lock of
        every log dir and listens on its endpoints before it registers: no other live broker
        can serve these endpoints or this data from this host, so a live broker with this id
        elsewhere names other endpoints and is refused at once (BrokerIdInUse, as Kafka).
        One advertising the very same endpoints from another host (a misconfiguration) is
        refused too, after the wait, as its session never expires. Kafka refuses at once in
        both cases (KAFKA-7165)."""
        waited_until: float | None = None
        while True:
            try:
                await self.zk.create(info.path, info.encode(), ephemeral=True)
            except NodeExists:
                pass  # ours from a request retried after a connection loss, or another's
            except NoNode:
                await self.zk.ensure_path(zd.BROKER_IDS)
                continue
            try:
                data, stat, gone = await self.zk.get_watch(info.path)
            except NoNode:  # the other session expired meanwhile: try again
                continue
            if stat.ephemeral_owner == self.zk.session_id:
                return stat.czxid
            if not _same_endpoints(info, data):
                raise BrokerIdInUse(
                    f"broker id {info.broker_id} is registered by another session"
                    f" (0x{stat.ephemeral_owner:x})",
                    info.path,
                )
            if waited_until is None:
                wait_ms = self.zk.session_timeout_ms * 3 // 2 + SESSION_EXPIRY_MARGIN_MS
                log.warning(
                    "broker id %d is registered by session 0x%x with this broker's endpoints,"
                    " taken for its previous run: waiting up to %d ms for that session to expire",
                    info.broker_id,
                    stat.ephemeral_owner,
                    wait_ms,
                )
                waited_until = trio.current_time() + wait_ms / 1000
            with trio.move_on_at(waited_until):
                try:
                    await gone.wait()
                except ConnectionLost:
                    await self.zk.wait_connected()
                continue
            raise BrokerIdInUse(
                f"broker id {info.broker_id} is registered by another session"
                f" (0x{stat.ephemeral_owner:x}), which did not expire within {wait_ms} ms",
                info.path,
            )

    async def live_brokers(self) -> dict[int, zd.BrokerInfo]:
        brokers = {}
        for name in await self.zk.children(zd.BROKER_IDS):
            try:
                data, _ = await self.zk.get(zd.broker_path(int(name)))
            except NoNode:
                continue  # went away between the listing and the read
            brokers[int(name)] = zd.BrokerInfo.decode(int(name), data)
        return brokers

    # -- controller -------------------------------------------------------------------------

    async def controller_id(self) -> int | None:
        try:
            data, _ = await self.zk.get(zd.CONTROLLER)
        except NoNode:
            return None
        return zd.ControllerInfo.decode(data).broker_id

    async def controller_epoch(self) -> ControllerEpoch | None:
        try:
            data, stat = await self.zk.get(zd.CONTROLLER_EPOCH)
        except NoNode:
            return None
        return ControllerEpoch(zd.decode_controller_epoch(data), stat.version)

    async def try_become_controller(self, broker_id: int) -> ControllerEpoch | None:
        """One election attempt: the new epoch if this broker won, None if another holds
        `/controller` (watch it with `zk.exists_watch(zd.CONTROLLER)` and try again when it
        is deleted)."""
        current = await self.controller_epoch()
        if current is None:
            try:
                initial = zd.encode_controller_epoch(zd.INITIAL_CONTROLLER_EPOCH)
                await self.zk.create(zd.CONTROLLER_EPOCH, initial)
            except NodeExists:
                pass
            current = await self.controller_epoch()
            assert current is not None
        new_epoch = current.epoch + 1
        try:
            results = await self.zk.multi(
                [
                    CreateOp(
                        zd.CONTROLLER,
                        zd.ControllerInfo(broker_id, now_ms()).encode(),
                        ephemeral=True,
                    ),
                    SetDataOp(
                        zd.CONTROLLER_EPOCH,
                        zd.encode_controller_epoch(new_epoch),
                        current.zk_version,
                    ),
                ]
            )
        except (NodeExists, BadVersion):
            return None  # another broker is (or just became) the controller
        stat = results[1]
        assert not isinstance(stat, (str, bool))
        log.info("broker %d is the controller, epoch %d", broker_id, new_epoch)
        return ControllerEpoch(new_epoch, stat.version)

    async def resign_controller(self, epoch: ControllerEpoch) -> None:
        """Delete `/controller` if this controller still holds the epoch (else a no-op)."""
        try:
            await self.zk.multi(
                [CheckOp(zd.CONTROLLER_EPOCH, epoch.zk_version), DeleteOp(zd.CONTROLLER)]
            )
        except (BadVersion, NoNode):
            pass

    # -- topics and partition state ---------------------------------------------------------

    async def create_topic(self, topic: str, assignment: zd.TopicAssignment) -> None:
        try:
            await self.zk.create(zd.topic_path(topic), assignment.encode(), make_parents=True)
        except NodeExists:
            raise TopicExists(f"topic {topic!r} already exists", zd.topic_path(topic)) from None

    async def create_topic_with_config(
        self, topic: str, config: dict[str, str], assignment: zd.TopicAssignment
    ) -> None:
        """A new topic's `/config/topics/<t>` and `/brokers/topics/<t>` in one transaction
        (configs first for who reads them on seeing the topic), then the config change
        notification. TopicExists, and nothing written, when another broker created the
        topic first: its configs stay (a lagging broker's auto-creation must not replace a
        view's definition). A config znode without a topic (a creation that died half
        way) is overwritten."""
        config_path, topic_path = zd.config_path("topics", topic), zd.topic_path(topic)
        data = zd.encode_config(config)
        while True:
            if await self.zk.exists(topic_path) is not None:
                raise TopicExists(f"topic {topic!r} already exists", topic_path)
            leftover = await self.zk.exists(config_path) is not None
            config_op = SetDataOp(config_path, data) if leftover else CreateOp(config_path, data)
            try:
                await self.zk.multi([config_op, CreateOp(topic_path, assignment.encode())])
                break
            except NodeExists:  # created between the reads and the transaction
                continue
            except NoNode:  # the leftover config deleted meanwhile, or a parent missing
                await self.create_top_level_paths()
        await self.zk.create(
            f"{zd.CONFIG_CHANGES}/{zd.CONFIG_CHANGE_PREFIX}",
            zd.encode_config_change("topics", topic),
            sequence=True,
            make_parents=True,
        )

    async def topic_assignment(self, topic: str) -> zd.TopicAssignment | None:
        try:
            data, _ = await self.zk.get(zd.topic_path(topic))
        except NoNode:
            return None
        return zd.TopicAssignment.decode(topic, data)

    async def topics(self) -> list[str]:
        return await self.zk.children(zd.TOPICS)

    async def partition_state(self, topic: str, partition: int) -> VersionedPartitionState | None:
        path = zd.partition_state_path(topic, partition)
        try:
            data, stat = await self.zk.get(path)
        except NoNode:
            return None
        return VersionedPartitionState(zd.PartitionState.decode(data, path), stat.version)

    async def create_partition_state(
        self, topic: str, partition: int, state: zd.PartitionState, controller: ControllerEpoch
    ) -> int:
        """The first state of a new partition, written by the controller; its znode version."""
        await self.zk.ensure_path(zd.partition_path(topic, partition))
        path = zd.partition_state_path(topic, partition)
        await self._controller_write(controller, CreateOp(path, state.encode()))
        return 0

    async def set_partition_state(
        self,
        topic: str,
        partition: int,
        state: zd.PartitionState,
        expected_version: int,
        controller: ControllerEpoch | None = None,
    ) -> int:
        """Replace the state if its znode is still at `expected_version`; the new version.

        With `controller`, only while that controller's epoch stands (ControllerMoved else);
        without, as a partition leader updating its ISR. StalePartitionState when another
        write came first: re-read, and stand down if the state names a newer leader epoch."""
        path = zd.partition_state_path(topic, partition)
        write = SetDataOp(path, state.encode(), expected_version)
        try:
            if controller is None:
                return (await self.zk.set(path, write.data, expected_version)).version
            stat = await self._controller_write(controller, write)
        except BadVersion as exc:
            raise StalePartitionState(
                f"{path} is no longer at version {expected_version}", path
            ) from exc
        assert not isinstance(stat, (str, bool))
        return stat.version

    async def _controller_write(
        self, controller: ControllerEpoch, op: CreateOp | SetDataOp
    ) -> OpResult:
        try:
            results = await self.zk.multi([CheckOp(zd.CONTROLLER_EPOCH, controller.zk_version), op])
        except BadVersion as exc:
            if exc.op_index == 0:
                raise ControllerMoved(
                    f"controller epoch {controller.epoch} was superseded", zd.CONTROLLER_EPOCH
                ) from None
            raise
        return results[1]

    # -- configs and admin ------------------------------------------------------------------

    async def set_entity_config(
        self, entity_type: str, entity_name: str, config: dict[str, str]
    ) -> None:
        """Write `/config/<type>/<name>`, then announce it under `/config/changes`."""
        path = zd.config_path(entity_type, entity_name)
        data = zd.encode_config(config)
        try:
            await self.zk.set(path, data)
        except NoNode:
            try:
                await self.zk.create(path, data, make_parents=True)
            except NodeExists:  # another broker created it meanwhile (both creating a topic)
                await self.zk.set(path, data)
        await self.zk.create(
            f"{zd.CONFIG_CHANGES}/{zd.CONFIG_CHANGE_PREFIX}",
            zd.encode_config_change(entity_type, entity_name),
            sequence=True,
            make_parents=True,
        )

    async def update_entity_config(
        self,
        entity_type: str,
        entity_name: str,
        update: Callable[[dict[str, str]], dict[str, str]],
    ) -> dict[str, str]:
        """Rewrite `/config/<type>/<name>` as `update` makes its configs (the keys it leaves
        alone stay: a user's quotas beside its SCRAM credentials), conditionally on the
        version read, again on a conflict; then announce it under `/config/changes`."""
        path = zd.config_path(entity_type, entity_name)
        while True:
            try:
                data, stat = await self.zk.get(path)
                current, version = zd.decode_config(data), stat.version
            except NoNode:
                current, version = {}, None
            config = update(dict(current))
            try:
                if version is None:
                    await self.zk.create(path, zd.encode_config(config), make_parents=True)
                else:
                    await self.zk.set(path, zd.encode_config(config), version)
                break
            except (BadVersion, NodeExists, NoNode):
                continue  # another broker changed it meanwhile: again on what it wrote
        await self.zk.create(
            f"{zd.CONFIG_CHANGES}/{zd.CONFIG_CHANGE_PREFIX}",
            zd.encode_config_change(entity_type, entity_name),
            sequence=True,
            make_parents=True,
        )
        return config

    async def entity_config(self, entity_type: str, entity_name: str) -> dict[str, str]:
        try:
            data, _ = await self.zk.get(zd.config_path(entity_type, entity_name))
        except NoNode:
            return {}
        return zd.decode_config(data)

    async def entity_configs(self, entity_type: str) -> dict[str, dict[str, str]]:
        """Every entity's configs of one type, by its (sanitized) znode name: Kafka's
        AdminZkClient.fetchAllEntityConfigs, as brokers read each entity type at start."""
        try:
            entities = await self.zk.children(f"/config/{entity_type}")
        except NoNode:
            return {}
        return {entity: await self.entity_config(entity_type, entity) for entity in entities}

    async def mark_topic_for_deletion(self, topic: str) -> None:
        try:
            await self.zk.create(zd.delete_topic_path(topic), make_parents=True)
        except NodeExists:
            pass  # deletion already requested

    # -- producer ids -----------------------------------------------------------------------

    async def allocate_producer_id_block(self, broker_id: int) -> zd.ProducerIdBlock:
        """The next block of 1000 producer ids, for this broker alone (ZkProducerIdManager)."""
        while True:
            try:
                data, stat = await self.zk.get(zd.PRODUCER_ID_BLOCK)
            except NoNode:
                await self.zk.ensure_path(zd.PRODUCER_ID_BLOCK)
                continue
            current = zd.ProducerIdBlock.decode(data) if data else None
            block = zd.next_producer_id_block(current, broker_id)
            try:
                await self.zk.set(zd.PRODUCER_ID_BLOCK, block.encode(), stat.version)
            except BadVersion:
                continue  # another broker took this block: read the newer one and go on
            return block


def _same_endpoints(info: zd.BrokerInfo, registered: bytes) -> bool:
    try:
        other = zd.BrokerInfo.decode(info.broker_id, registered)
    except zd.ZkDataError:
        return False
    return set(other.endpoints) == set(info.endpoints)


async def keep_broker_registered(
    kafka_zk: KafkaZkClient,
    info: zd.BrokerInfo,
    *,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Register the broker, then re-register on every reconnection, so the registration
    comes back with each new session after an expiry (Kafka re-registers after
    `zookeeper.session.timeout.ms` too). Reports the first registration's czxid as started."""
    changes = kafka_zk.zk.state_changes()
    task_status.started(await kafka_zk.register_broker(info))
    async for state in changes:
        if state is not SessionState.CONNECTED:
            continue
        try:
            epoch = await kafka_zk.register_broker(replace(info, timestamp_ms=now_ms()))
        except (ConnectionLost, SessionExpired):
            continue  # lost again: the next CONNECTED tries again
        log.info("broker %d registered after reconnecting (broker epoch %d)", info.broker_id, epoch)
