"""`ZkMetadata`: the cluster metadata of a broker in a ZooKeeper cluster (Kafka's ZK-era layout).

The other implementation of broker/cluster_metadata.py's `ClusterMetadata`. `start()` joins
the cluster (top-level znodes, `/cluster/id`, the ephemeral `/brokers/ids/<id>`, a producer
id block) and reads everything once; `run()` then keeps the cache current with watches, each
change re-read and compared with the cache, and the difference delivered to the listeners in
this trio task, in order (partition states of a topic by index). A watch loop per topic
covers its assignment, its configs and its partitions' state znodes; one loop covers the live
brokers and the topic list, one the controller's id. A view (broker/views.py) has no state
znodes: the controller decides none, and its partition states here are its source's.

Writes are requests, as Kafka's brokers made them in the ZooKeeper era: a topic is created by
writing `/config/topics/<t>` and `/brokers/topics/<t>` (the controller assigns the states;
`wait_for_partitions` is CreateTopics' bounded wait, Kafka's DelayedCreatePartitions),
deleted by `/admin/delete_topics/<t>`. The synchronous interface methods queue the writes for
the writer task (in order); their outcome comes back through the watches. `alter_isr` is the
leader's own conditional write of the state znode (plus `/isr_change_notification`).
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace

import trio

from kafkalite.broker import views
from kafkalite.broker.admin_manager import topic_name_error
from kafkalite.broker.cluster_metadata import (
    Assignment,
    BrokerInfo,
    Endpoint,
    MetadataListener,
    TopicMetadata,
)
from kafkalite.broker.partition import PartitionState
from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.kafka_zk import (
    KafkaZkClient,
    StalePartitionState,
    TopicExists,
    keep_broker_registered,
    now_ms,
)
from kafkalite.cluster.zk_client import (
    BadVersion,
    ConnectionLost,
    NoNode,
    SessionExpired,
    ZkClient,
    ZkError,
    ZkWatch,
    ZnodeStat,
)

log = logging.getLogger(__name__)
Write = Callable[[], Awaitable[None]]
CATCH_UP_TIMEOUT_S = 5.0  # a Metadata request waits no longer for ZooKeeper
PID_REFILL_AT = zd.PRODUCER_ID_BLOCK_SIZE // 2  # ids left when the next block is fetched


def to_zk_broker(info: BrokerInfo) -> zd.BrokerInfo:
    endpoints = tuple(
        zd.Endpoint(
            e.listener,
            e.host,
            e.port,
            e.listener if e.listener in zd.SECURITY_PROTOCOLS else "PLAINTEXT",
        )
        for e in info.endpoints
    )
    return zd.BrokerInfo(info.broker_id, endpoints, rack=info.rack, timestamp_ms=now_ms())


def from_zk_broker(info: zd.BrokerInfo) -> BrokerInfo:
    endpoints = tuple(Endpoint(e.listener, e.host, e.port) for e in info.endpoints)
    return BrokerInfo(info.broker_id, endpoints, info.rack)


async def wait_any(watches: Sequence[ZkWatch]) -> None:
    """Until one of `watches` fires (or drops with the connection)."""
    async with trio.open_nursery() as nursery:

        async def one(watch: ZkWatch) -> None:
            try:
                await watch.wait()
            except ConnectionLost:
                pass
            nursery.cancel_scope.cancel()

        for watch in watches:
            nursery.start_soon(one, watch)


class ZkMetadata:
    def __init__(self, zk: ZkClient, local_broker: BrokerInfo) -> None:
        self.zk = zk
        self.kafka_zk = KafkaZkClient(zk)
        self.local_broker = local_broker
        self.cluster_id = ""
        self._brokers: dict[int, BrokerInfo] = {}
        self._topics: dict[str, TopicMetadata] = {}
        self._states: dict[tuple[str, int], PartitionState] = {}
        self._controller = -1
        self._listeners: list[MetadataListener] = []
        self._writes_in, self._writes_out = trio.open_memory_channel[tuple[str, Write]](math.inf)
        self._pid_next = 0
        self._pid_last = -1
        self._pid_refilling = False
        self._topic_scopes: dict[str, trio.CancelScope] = {}
        self._topic_names_in_zk: set[str] = set()
        self._creating: set[str] = set()  # created here, the znode not written yet
        self._nursery: trio.Nursery | None = None
        self._changed = trio.Event()

    @property
    def node_id(self) -> int:
        return self.local_broker.broker_id

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self, proposed_cluster_id: str) -> None:
        """Join the cluster and read its state (no events: nobody subscribed yet)."""
        await self.kafka_zk.create_top_level_paths()
        self.cluster_id = await self.kafka_zk.get_or_create_cluster_id(proposed_cluster_id)
        await self.kafka_zk.register_broker(to_zk_broker(self.local_broker))
        await self._refill_producer_ids()
        await self._read_cluster()
        await self._read_controller()
        for name in list(self._topic_names_in_zk):
            await self._read_topic(name)

    def load(self, node_id: int, configured_cluster_id: str | None) -> None:
        if node_id != self.node_id:
            raise ValueError(f"this store registers broker {self.node_id}, not {node_id}")
        if configured_cluster_id and configured_cluster_id != self.cluster_id:
            raise ValueError(
                f"ZooKeeper holds cluster {self.cluster_id}, not cluster.id {configured_cluster_id}"
            )

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Keep the registration, the cache and the writes going until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(
                keep_broker_registered, self.kafka_zk, to_zk_broker(self.local_broker)
            )
            nursery.start_soon(self._writer)
            nursery.start_soon(self._watch_loop, self._read_cluster)
            nursery.start_soon(self._watch_loop, self._read_controller)
            task_status.started()

    def subscribe(self, listener: MetadataListener) -> None:
        self._listeners.append(listener)

    # -- reads -------------------------------------------------------------------------------

    @property
    def topics(self) -> Mapping[str, TopicMetadata]:
        return self._topics

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return next((t for t in self._topics.values() if t.topic_id == topic_id), None)

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        meta = self._topics.get(topic)
        if not views.is_view(meta):
            return self._states.get((topic, partition))
        assert meta is not None
        if not 0 <= partition < meta.num_partitions:
            return None
        source = self._states.get((meta.configs[views.VIEW_SOURCE], partition))
        return replace(source, topic=topic) if source is not None else None

    def partition_states(self, topic: str) -> list[PartitionState]:
        meta = self._topics.get(topic)
        count = meta.num_partitions if meta is not None else 0
        return [s for i in range(count) if (s := self.partition_state(topic, i)) is not None]

    def brokers(self) -> list[BrokerInfo]:
        return [self._brokers[b] for b in sorted(self._brokers)]

    def broker(self, broker_id: int) -> BrokerInfo | None:
        return self._brokers.get(broker_id)

    def controller_id(self) -> int:
        return self._controller

    async def wait_for_partitions(self, names: Sequence[str], timeout_s: float) -> bool:
        """Until every partition of `names` has a state with a leader (Kafka's
        DelayedCreatePartitions); False at the timeout."""
        with trio.move_on_after(timeout_s):
            while not all(self._ready(name) for name in names):
                await self._changed.wait()
            return True
        return False

    async def wait_until(self, condition: Callable[[], bool], timeout_s: float) -> bool:
        """Until `condition()` holds on the cache (checked after every change); False at the
        timeout."""
        with trio.move_on_after(timeout_s):
            while not condition():
                await self._changed.wait()
            return True
        return False

    async def catch_up(self, names: Sequence[str]) -> None:
        """Read the topics of `names` this cache lacks (or lacks partition states of) from
        ZooKeeper now, after a sync, not when their watches fire: once CreateTopics has
        answered on one broker, every broker answers the topic and hosts its replicas.
        (Kafka's controller ordered this by sending LeaderAndIsr before UpdateMetadata.)"""
        missing = [n for n in names if not self._complete(n) and topic_name_error(n) is None]
        sources = [  # a view's states are its source's
            meta.configs[views.VIEW_SOURCE]
            for n in missing
            if views.is_view(meta := self._topics.get(n))
        ]
        missing = list(dict.fromkeys([*missing, *sources]))
        if not missing:
            return
        with trio.move_on_after(CATCH_UP_TIMEOUT_S):
            try:
                await self.zk.sync(zd.TOPICS)
                for name in missing:
                    if not self._complete(name):
                        # The watches it sets go unheeded: the topic's loop has its own.
                        await self._read_topic(name)
            except (ConnectionLost, SessionExpired, ZkError, zd.ZkDataError) as exc:
                log.info("catching up on topics %s failed: %s", missing, exc)

    def _complete(self, name: str) -> bool:
        meta = self._topics.get(name)
        return meta is not None and len(self.partition_states(name)) == meta.num_partitions

    def _ready(self, name: str) -> bool:
        """Written to ZooKeeper (a view's states, its source's, are there before it is) and
        every partition led."""
        meta = self._topics.get(name)
        states = self.partition_states(name)
        return (
            meta is not None
            and name not in self._creating
            and len(states) == meta.num_partitions
            and all(s.leader >= 0 for s in states)
        )

    # -- writes (queued for the writer task) -----------------------------------------------

    def create_topic(self, topic: TopicMetadata, assignment: Assignment) -> None:
        self._topics[topic.name] = topic  # known here at once; the watches confirm it
        self._creating.add(topic.name)
        znode = zd.TopicAssignment(
            {p: zd.ReplicaAssignment(tuple(r)) for p, r in enumerate(assignment)}, topic.topic_id
        )

        async def write() -> None:
            try:
                await self.kafka_zk.create_topic_with_config(topic.name, dict(topic.configs), znode)
            except TopicExists:
                log.info("topic %s was created by another broker meanwhile", topic.name)
            finally:
                self._creating.discard(topic.name)
                self._notify()

        self._queue(f"create topic {topic.name}", write)

    def add_partitions(self, name: str, assignment: Assignment) -> None:
        async def write() -> None:
            while True:
                data, stat = await self.zk.get(zd.topic_path(name))
                current = zd.TopicAssignment.decode(name, data)
                partitions = dict(current.partitions)
                first = len(partitions)
                for offset, replicas in enumerate(assignment):
                    partitions[first + offset] = zd.ReplicaAssignment(tuple(replicas))
                znode = replace(current, partitions=partitions)
                try:
                    await self.zk.set(zd.topic_path(name), znode.encode(), stat.version)
                    return
                except BadVersion:
                    continue

        self._queue(f"add partitions to {name}", write)

    def delete_topic(self, name: str) -> None:
        self._queue(f"delete topic {name}", lambda: self.kafka_zk.mark_topic_for_deletion(name))

    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        self._topics[name].configs = dict(configs)
        self._tell("on_topic_configs_changed", name, configs)
        self._queue(
            f"configs of {name}",
            lambda: self.kafka_zk.set_entity_config("topics", name, dict(configs)),
        )

    def alter_isr(
        self,
        topic: str,
        partition: int,
        new_isr: Sequence[int],
        leader_epoch: int,
        partition_epoch: int,
    ) -> None:
        """The leader's ISR change: the state znode rewritten if still at `partition_epoch`
        (its version); either way the resulting state reaches the listeners."""

        async def write() -> None:
            current = self._states.get((topic, partition))
            controller_epoch = current.controller_epoch if current is not None else 0
            state = zd.PartitionState(self.node_id, leader_epoch, tuple(new_isr), controller_epoch)
            try:
                await self.kafka_zk.set_partition_state(topic, partition, state, partition_epoch)
            except (StalePartitionState, NoNode):
                log.info("%s-%d: ISR change refused (state moved on)", topic, partition)
            else:
                await self.zk.create(
                    f"{zd.ISR_CHANGE_NOTIFICATION}/{zd.ISR_CHANGE_PREFIX}",
                    zd.encode_isr_change([(topic, partition)]),
                    sequence=True,
                    make_parents=True,
                )
            await self._read_topic(topic)  # the watch would too; this answers sooner

        self._queue(f"alter ISR of {topic}-{partition}", write)

    def allocate_producer_id(self) -> int:
        if self._pid_next > self._pid_last:
            raise RuntimeError("no producer id block available from ZooKeeper yet")
        producer_id = self._pid_next
        self._pid_next += 1
        if self._pid_last - self._pid_next < PID_REFILL_AT and not self._pid_refilling:
            self._pid_refilling = True
            self._queue("producer id block", self._refill_producer_ids)
        return producer_id

    async def _refill_producer_ids(self) -> None:
        block = await self.kafka_zk.allocate_producer_id_block(self.node_id)
        if self._pid_next > self._pid_last:
            self._pid_next = block.first
        self._pid_last = block.last  # blocks only grow: ids in between are still ours
        self._pid_refilling = False

    def _queue(self, what: str, write: Write) -> None:
        self._writes_in.send_nowait((what, write))

    async def _writer(self) -> None:
        async for what, write in self._writes_out:
            while True:
                try:
                    await write()
                    break
                except (ConnectionLost, SessionExpired):
                    log.info("ZooKeeper connection lost during %s: retrying", what)
                    await self.zk.wait_connected()
                except (ZkError, zd.ZkDataError) as exc:
                    log.error("ZooKeeper write %s failed: %s", what, exc)
                    break

    # -- watches -----------------------------------------------------------------------------

    async def _watch_loop(self, read: Callable[[], Awaitable[list[ZkWatch]]]) -> None:
        while True:
            try:
                watches = await read()
            except (ConnectionLost, SessionExpired):
                await self.zk.wait_connected()
                continue
            if not watches:
                return
            await wait_any(watches)

    async def _read_controller(self) -> list[ZkWatch]:
        data, _, watch = await self._get_or_watch_creation(zd.CONTROLLER)
        controller = zd.ControllerInfo.decode(data).broker_id if data is not None else -1
        if controller != self._controller:
            log.info("controller: %d", controller)
            self._controller = controller
            self._notify()
        return [watch]

    async def _read_cluster(self) -> list[ZkWatch]:
        """Live brokers and the topic list; a watch loop per topic for what is new."""
        names, brokers_watch = await self.zk.children_watch(zd.BROKER_IDS)
        brokers = {}
        for name in names:
            try:
                data, _ = await self.zk.get(zd.broker_path(int(name)))
            except NoNode:
                continue
            brokers[int(name)] = from_zk_broker(zd.BrokerInfo.decode(int(name), data))
        gone = set(self._brokers) - set(brokers)
        added = [b for b in brokers.values() if self._brokers.get(b.broker_id) != b]
        self._brokers = brokers
        for broker_id in sorted(gone):
            self._tell("on_broker_gone", broker_id)
        for info in added:
            self._tell("on_broker_registered", info)
        topics, topics_watch = await self.zk.children_watch(zd.TOPICS)
        self._topic_names_in_zk = set(topics)
        for name in sorted(set(self._topic_scopes) - set(topics)):
            self._topic_scopes.pop(name).cancel()
        for name in sorted(set(self._topics) - set(topics) - self._creating):
            self._forget_topic(name)
        if self._nursery is not None:
            for name in sorted(set(topics) - set(self._topic_scopes)):
                scope = self._topic_scopes[name] = trio.CancelScope()
                self._nursery.start_soon(self._follow_topic, name, scope)
        self._notify()
        return [brokers_watch, topics_watch]

    def _states_of(self, name: str) -> list[tuple[str, int]]:
        return [key for key in self._states if key[0] == name]

    def _forget_topic(self, name: str) -> None:
        if self._topics.pop(name, None) is None:
            return
        for key in self._states_of(name):
            del self._states[key]
        self._tell("on_topic_deleted", name)

    async def _follow_topic(self, name: str, scope: trio.CancelScope) -> None:
        with scope:
            await self._watch_loop(lambda: self._read_topic(name))
        if self._topic_scopes.get(name) is scope:
            del self._topic_scopes[name]

    async def _read_topic(self, name: str) -> list[ZkWatch]:
        """A topic's assignment, configs and partition states; the difference to listeners."""
        try:
            data, _, topic_watch = await self.zk.get_watch(zd.topic_path(name))
        except NoNode:
            return []  # deleted: the topic list's loop tells the listeners
        assignment = zd.TopicAssignment.decode(name, data)
        watches = [topic_watch]
        config_data, _, config_watch = await self._get_or_watch_creation(
            zd.config_path("topics", name)
        )
        configs = zd.decode_config(config_data) if config_data is not None else {}
        watches.append(config_watch)
        known = self._topics.get(name)
        replicas = {p: a.replicas for p, a in assignment.partitions.items()}
        topic_id = assignment.topic_id or (known.topic_id if known else uuid.uuid4())
        rf = len(replicas.get(0, ()))
        meta = known if known is not None and known.topic_id == topic_id else None
        if meta is None:
            meta = TopicMetadata(name, topic_id, len(replicas), rf, configs)
            self._topics[name] = meta
        meta.num_partitions = len(replicas)
        meta.replication_factor = rf
        if meta.configs != configs:
            meta.configs = configs
            self._tell("on_topic_configs_changed", name, configs)
        if views.is_view(meta):  # no states of its own: partition_state answers its source's
            self._notify()
            return watches
        for index in sorted(replicas):
            path = zd.partition_state_path(name, index)
            read = await self._get_or_watch_creation(path)
            watches.append(read[-1])
            if read[0] is None:
                continue
            raw, stat, _ = read
            znode = zd.PartitionState.decode(raw, path)
            state = PartitionState(
                name,
                index,
                tuple(replicas[index]),
                znode.leader,
                znode.leader_epoch,
                znode.isr,
                stat.version,
                znode.controller_epoch,
            )
            if self._states.get((name, index)) != state:
                self._states[(name, index)] = state
                self._tell("on_partition_state_changed", meta, state)
        self._notify()
        return watches

    async def _get_or_watch_creation(
        self, path: str
    ) -> tuple[bytes, ZnodeStat, ZkWatch] | tuple[None, None, ZkWatch]:
        """The node and a watch on it, or a watch for its creation when it does not exist
        (read again if it appeared between the two requests)."""
        while True:
            try:
                return await self.zk.get_watch(path)
            except NoNode:
                stat, watch = await self.zk.exists_watch(path)
                if stat is None:
                    return None, None, watch

    def _tell(self, event: str, *args: object) -> None:
        """Deliver one event to every listener; one that fails is logged, the rest go on
        (the watches must survive a listener's bug)."""
        for listener in self._listeners:
            try:
                getattr(listener, event)(*args)
            except Exception:
                log.exception("metadata listener %r failed on %s%r", listener, event, args)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()
