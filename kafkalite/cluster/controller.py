"""The controller: the broker that wins `/controller` decides partition states (ZooKeeper era).

Every broker runs `Controller.run`: a candidacy that tries `/controller` (bumping
`/controller_epoch` conditionally, kafka_zk.try_become_controller) and, while another holds
it, waits for its deletion. The winner leads from what ZooKeeper holds, so a new controller
takes over where a dead one stopped: each round reads the live brokers, the topics with their
assignments and configs, the partition states and the deletion requests, applies
controller_decisions.decide, writes its decisions (each conditional on the state znode's
version, behind a check of the controller epoch: a deposed controller's write fails with
ControllerMoved), then waits for a watch on the brokers, the topic list, a topic's assignment
or `/admin/delete_topics` to fire.

How brokers learn the decisions: each broker's ZkMetadata watches the state znodes of every
partition (not a change sequence): the state znode is the single source of truth that the
controller and the leaders' ISR changes both write, each write fires the watch, and a broker
that reconnects re-reads the znodes rather than replaying a sequence that may have been
trimmed. The cost is a watch per partition per broker, which ZooKeeper handles well at the
sizes kafkalite runs.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable

import trio

from kafkalite.broker.views import VIEW_SOURCE
from kafkalite.cluster import reassignment_zk
from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.broker_liveness import BrokerLiveness, depose_dead_controller
from kafkalite.cluster.controlled_shutdown_controller import do_controlled_shutdowns
from kafkalite.cluster.controller_decisions import PartitionView, StateWrite, decide
from kafkalite.cluster.kafka_zk import (
    ControllerEpoch,
    ControllerMoved,
    KafkaZkClient,
    StalePartitionState,
)
from kafkalite.cluster.zk_client import (
    BadVersion,
    CheckOp,
    ConnectionLost,
    DeleteOp,
    NodeExists,
    NoNode,
    NotEmpty,
    SessionExpired,
    ZkClient,
    ZkError,
    ZkWatch,
)
from kafkalite.cluster.zk_metadata import wait_any

log = logging.getLogger(__name__)
UNCLEAN = "unclean.leader.election.enable"


class Controller:
    def __init__(
        self,
        zk: ZkClient,
        broker_id: int,
        unclean_default: bool = False,
        liveness: BrokerLiveness | None = None,
    ) -> None:
        self.zk = zk
        self.liveness = liveness  # brokers declared dead before their session expires
        self._verdict_changed = trio.Event()  # set when the liveness verdicts change
        self.kafka_zk = KafkaZkClient(zk)
        self.broker_id = broker_id
        self.unclean_default = unclean_default
        self.unclean_elections = 0  # leaders it elected from outside the ISR
        self.epoch: ControllerEpoch | None = None  # while this broker is the controller

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            try:
                epoch = await self._elect()
                if epoch is None:
                    continue
                self.epoch = epoch
                await self._lead(epoch)
            except ControllerMoved:
                log.info("broker %d is no longer the controller", self.broker_id)
            except (ConnectionLost, SessionExpired):
                await self.zk.wait_connected()
            finally:
                self.epoch = None

    async def _elect(self) -> ControllerEpoch | None:
        """This broker's epoch if it is (or still is, after a reconnection) the controller;
        else None after `/controller` changed."""
        epoch = await self.kafka_zk.try_become_controller(self.broker_id)
        if epoch is not None:
            return epoch
        stat, watch = await self.zk.exists_watch(zd.CONTROLLER)
        if stat is not None and stat.ephemeral_owner == self.zk.session_id:
            return await self.kafka_zk.controller_epoch()  # ours, from before a reconnection
        if stat is not None:
            await self._wait_for_controller_change(watch)
        return None

    async def _wait_for_controller_change(self, watch: ZkWatch) -> None:
        """Until `/controller` changes, or the controller is declared dead and deposed
        (broker_liveness.py: before its session expires). A lost connection or session is
        raised as such (not in the nursery's ExceptionGroup), for `run` to wait it out."""
        lost: ZkError | None = None
        async with trio.open_nursery() as nursery:

            async def changed() -> None:
                with contextlib.suppress(ConnectionLost):
                    await watch.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(changed)
            if self.liveness is None:
                await trio.sleep_forever()
            while True:
                dead, verdict_changed = self.liveness.snapshot()
                try:
                    with trio.CancelScope(shield=True):  # the watch fires before multi() returns
                        deposed = await depose_dead_controller(self.zk, self.broker_id, dead)
                except (ConnectionLost, SessionExpired) as exc:
                    lost = exc
                    nursery.cancel_scope.cancel()
                    break
                if deposed:
                    nursery.cancel_scope.cancel()
                await verdict_changed.wait()
        if lost is not None:
            raise lost

    async def _lead(self, epoch: ControllerEpoch) -> None:
        session = self.zk.session_id
        while True:
            try:
                watches = await self._round(epoch)
            except (ConnectionLost, SessionExpired):
                await self.zk.wait_connected()
                if self.zk.session_id != session:
                    return  # the session expired: /controller went with it
                continue
            if watches:
                await self._wait_any(watches)

    async def _wait_any(self, watches: list[ZkWatch]) -> None:
        """Until a watch fires or the liveness probes change their verdict on a broker."""
        async with trio.open_nursery() as nursery:

            async def one(wait: Callable[[], Awaitable[object]]) -> None:
                await wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(one, lambda: wait_any(watches))
            nursery.start_soon(one, self._verdict_changed.wait)

    async def _round(self, epoch: ControllerEpoch) -> list[ZkWatch]:
        """One pass over ZooKeeper's state; the watches to wait on ([] to go again now)."""
        ids, brokers_watch = await self.zk.children_watch(zd.BROKER_IDS)
        live = {int(i) for i in ids}
        if self.liveness is not None:  # as if their sessions had expired (broker_liveness.py)
            dead, self._verdict_changed = self.liveness.snapshot()
            live -= dead
        deletions, deletions_watch = await self.zk.children_watch(zd.DELETE_TOPICS)
        for topic in deletions:
            await self._delete_topic(topic, epoch)
        topics, topics_watch = await self.zk.children_watch(zd.TOPICS)
        watches = [brokers_watch, deletions_watch, topics_watch]
        views = []
        for topic in topics:
            try:
                data, _, watch = await self.zk.get_watch(zd.topic_path(topic))
            except NoNode:
                continue
            watches.append(watch)
            configs = await self.kafka_zk.entity_config("topics", topic)
            if VIEW_SOURCE in configs:
                continue  # a view has no partitions of its own: it is served at its source
            unclean = configs.get(UNCLEAN, str(self.unclean_default).lower()) == "true"
            for index, assignment in zd.TopicAssignment.decode(topic, data).partitions.items():
                current = await self.kafka_zk.partition_state(topic, index)
                views.append(
                    PartitionView(
                        topic,
                        index,
                        assignment.replicas,
                        current.state if current else None,
                        current.zk_version if current else -1,
                        unclean,
                    )
                )
        stale = False
        for write in decide(views, live, epoch.epoch):
            stale |= not await self._write(write, epoch)
        watches += await do_controlled_shutdowns(self.zk, epoch, live)
        watches += await reassignment_zk.advance(self.zk, epoch, live)
        return [] if stale else watches

    async def _write(self, write: StateWrite, epoch: ControllerEpoch) -> bool:
        """False when the state moved on meanwhile (a leader's ISR change): decide again."""
        try:
            if write.expected_version is None:
                await self.kafka_zk.create_partition_state(
                    write.topic, write.partition, write.state, epoch
                )
            else:
                await self.kafka_zk.set_partition_state(
                    write.topic, write.partition, write.state, write.expected_version, epoch
                )
        except (StalePartitionState, NodeExists):
            return False
        self.unclean_elections += write.unclean
        log.info(
            "%s-%d: leader %d, leader epoch %d, ISR %s",
            write.topic,
            write.partition,
            write.state.leader,
            write.state.leader_epoch,
            list(write.state.isr),
        )
        return True

    async def _delete_topic(self, topic: str, epoch: ControllerEpoch) -> None:
        """Kafka's TopicDeletionManager, briefly: states, assignment and configs removed, the
        request last; brokers delete their logs when the topic's znode goes."""
        try:
            partitions = await self.zk.children(zd.partitions_path(topic))
        except NoNode:
            partitions = []
        paths = [
            path
            for p in partitions
            for path in (zd.partition_state_path(topic, int(p)), zd.partition_path(topic, int(p)))
        ]
        paths += [zd.partitions_path(topic), zd.topic_path(topic), zd.config_path("topics", topic)]
        paths.append(zd.delete_topic_path(topic))
        existing = [path for path in paths if await self.zk.exists(path) is not None]
        # One transaction behind the controller epoch: a deposed controller deletes nothing.
        fence = CheckOp(zd.CONTROLLER_EPOCH, epoch.zk_version)
        try:
            await self.zk.multi([fence, *(DeleteOp(path) for path in existing)])
        except BadVersion as exc:
            if exc.op_index == 0:
                raise ControllerMoved(f"controller epoch {epoch.epoch} was superseded") from None
            raise
        except (NoNode, NotEmpty):
            return  # changed meanwhile (a partition added): the next round tries again
        log.info("deleted topic %s", topic)
