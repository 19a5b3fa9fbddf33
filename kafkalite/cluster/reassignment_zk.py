"""The ZooKeeper writes of partition reassignment (cluster/reassignment.py decides them).

`start` is AlterPartitionReassignments on the controller: the topic znode's new assignments
and the bumped leader epochs (or, when the ISR already holds the target, the completed move)
in one transaction behind the controller epoch and both znodes' versions. `advance` is the
controller's pass over the reassignments in progress (from its round, controller.py): it
completes those whose target replicas are all in the ISR, with the same fencing, and watches
the state znodes of the others.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import replace

from kio.schema.errors import ErrorCode

from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.kafka_zk import ControllerEpoch, ControllerMoved
from kafkalite.cluster.reassignment import (
    Refusal,
    completion,
    in_progress,
    reassign_to,
    requested,
    started_state,
    validate,
)
from kafkalite.cluster.zk_client import BadVersion, CheckOp, NoNode, SetDataOp, ZkClient, ZkWatch


async def _controller_multi(zk: ZkClient, epoch: ControllerEpoch, ops: list[SetDataOp]) -> bool:
    """The writes behind the controller epoch; False when a znode moved on (read again)."""
    try:
        await zk.multi([CheckOp(zd.CONTROLLER_EPOCH, epoch.zk_version), *ops])
    except BadVersion as exc:
        if exc.op_index == 0:
            raise ControllerMoved(f"controller epoch {epoch.epoch} was superseded") from None
        return False
    return True


async def start(
    zk: ZkClient,
    epoch: ControllerEpoch,
    topic: str,
    targets: Mapping[int, tuple[int, ...] | None],
    live: Set[int],
    allow_rf_change: bool = True,
) -> dict[int, Refusal | None]:
    """Start (or cancel) the reassignments of `topic`'s partitions in `targets` (None:
    cancel); per partition, the refusal or None. Retries on a concurrent change."""
    while True:
        try:
            data, topic_stat = await zk.get(zd.topic_path(topic))
        except NoNode:
            unknown = Refusal(ErrorCode.unknown_topic_or_partition, "The partition does not exist.")
            return dict.fromkeys(targets, unknown)
        current = zd.TopicAssignment.decode(topic, data)
        results: dict[int, Refusal | None] = {}
        partitions = dict(current.partitions)
        ops = []
        for index, replicas in targets.items():
            if index not in partitions:
                results[index] = Refusal(
                    ErrorCode.unknown_topic_or_partition, "The partition does not exist."
                )
                continue
            refusal = results[index] = validate(partitions[index], replicas, live, allow_rf_change)
            if refusal is not None:
                continue
            new = reassign_to(partitions[index], requested(partitions[index], replicas))
            if new == partitions[index]:
                continue
            partitions[index] = new
            path = zd.partition_state_path(topic, index)
            try:
                raw, stat = await zk.get(path)
            except NoNode:
                continue  # no leader yet: the new replicas are in the assignment already
            state = zd.PartitionState.decode(raw, path)
            # Complete at once when the ISR holds the target already (a cancellation, a
            # shrink): Kafka's onPartitionReassignment goes straight to phase B.
            done = completion(new, state, live, epoch.epoch)
            if done is not None:
                partitions[index], state = done
            else:
                state = started_state(state, new.replicas, live, epoch.epoch)
            ops.append(SetDataOp(path, state.encode(), stat.version))
        if partitions == dict(current.partitions):
            return results
        znode = replace(current, partitions=partitions)
        topic_op = SetDataOp(zd.topic_path(topic), znode.encode(), topic_stat.version)
        if await _controller_multi(zk, epoch, [topic_op, *ops]):
            return results


async def ongoing(zk: ZkClient) -> dict[str, tuple[zd.TopicAssignment, int]]:
    """The topics with partitions being reassigned: their assignment and its znode version."""
    moving = {}
    for topic in await zk.children(zd.TOPICS):
        try:
            data, stat = await zk.get(zd.topic_path(topic))
        except NoNode:
            continue
        assignment = zd.TopicAssignment.decode(topic, data)
        if any(in_progress(a) for a in assignment.partitions.values()):
            moving[topic] = (assignment, stat.version)
    return moving


async def advance(zk: ZkClient, epoch: ControllerEpoch, live: Set[int]) -> list[ZkWatch]:
    """One controller pass over the reassignments in progress: complete those whose target
    replicas are all in the ISR; a watch on the state znode of each (Kafka's
    PartitionReassignmentIsrChangeHandler). A completion lost to a concurrent write is
    decided again on the next pass, which that write's watch starts."""
    watches = []
    for topic, (current, topic_version) in (await ongoing(zk)).items():
        for index, assignment in sorted(current.partitions.items()):
            if not in_progress(assignment):
                continue
            path = zd.partition_state_path(topic, index)
            try:
                raw, stat, watch = await zk.get_watch(path)
            except NoNode:
                continue
            watches.append(watch)
            step = completion(assignment, zd.PartitionState.decode(raw, path), live, epoch.epoch)
            if step is None:
                continue
            final, state = step
            znode = replace(current, partitions={**current.partitions, index: final})
            ops = [
                SetDataOp(path, state.encode(), stat.version),
                SetDataOp(zd.topic_path(topic), znode.encode(), topic_version),
            ]
            if not await _controller_multi(zk, epoch, ops):
                break  # the topic znode moved on: its watch starts the next pass
            current, topic_version = znode, topic_version + 1
    return watches
