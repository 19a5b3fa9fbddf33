"""Replica placement for new topics and partitions (Kafka's AdminUtils.assignReplicasToBrokers).

Sans-IO and free of kazoo, so the single-node path uses it too. Round-robin over the brokers
from a random start (`start_index`), the followers shifted by a second random amount that
grows by one each time the partitions wrap around the brokers, so replicas spread evenly;
rack-aware when every broker has a rack (brokers alternated by rack, a partition's replicas on
as many racks as possible), as Kafka does; with racks on some brokers only they are ignored
(Kafka's RackAwareMode.Safe). Pass fixed `start_index`/`replica_shift` for a
deterministic placement (tests).
"""

from __future__ import annotations

import random
from collections.abc import Mapping


class InvalidReplicaAssignment(ValueError):
    """Too few brokers; the message is Kafka's."""


def too_few_brokers_message(replication_factor: int, brokers: int) -> str:
    return (
        f"Unable to replicate the partition {replication_factor} time(s): The target "
        f"replication factor of {replication_factor} cannot be reached because only "
        f"{brokers} broker(s) are registered."
    )


def assign_replicas(
    racks: Mapping[int, str | None],
    num_partitions: int,
    replication_factor: int,
    first_partition: int = 0,
    *,
    start_index: int | None = None,
    replica_shift: int | None = None,
    rng: random.Random | None = None,
) -> list[list[int]]:
    """Replicas (preferred leader first) for partitions `first_partition`.. of a topic placed on
    the brokers of `racks` (broker id -> rack or None)."""
    if replication_factor <= 0:
        raise InvalidReplicaAssignment("Replication factor must be larger than 0.")
    if replication_factor > len(racks):
        raise InvalidReplicaAssignment(too_few_brokers_message(replication_factor, len(racks)))
    rng = rng or random.Random()
    # Racks count only when every broker has one (Kafka's RackAwareMode.Safe).
    with_rack = all(rack is not None for rack in racks.values())
    brokers = rack_alternated(racks) if with_rack else sorted(racks)
    count = len(brokers)
    start = start_index if start_index is not None else rng.randrange(count)
    shift = replica_shift if replica_shift is not None else rng.randrange(count)
    num_racks = len(set(racks.values())) if with_rack else 1
    result = []
    for partition in range(max(0, first_partition), max(0, first_partition) + num_partitions):
        if partition > 0 and partition % count == 0:
            shift += 1
        first = (partition + start) % count
        if with_rack:
            result.append(_rack_aware(brokers, racks, num_racks, first, shift, replication_factor))
        else:
            result.append(
                [brokers[first]]
                + [
                    brokers[_replica_index(first, shift, j, count)]
                    for j in range(replication_factor - 1)
                ]
            )
    return result


def _replica_index(first: int, shift: int, index: int, count: int) -> int:
    if count == 1:
        return first
    return (first + 1 + (shift + index) % (count - 1)) % count


def _rack_aware(
    brokers: list[int],
    racks: Mapping[int, str | None],
    num_racks: int,
    first: int,
    shift: int,
    replication_factor: int,
) -> list[int]:
    leader = brokers[first]
    replicas, used_racks, k = [leader], {racks[leader]}, 0
    while len(replicas) < replication_factor:
        broker = brokers[_replica_index(first, shift * num_racks, k, len(brokers))]
        rack = racks[broker]
        k += 1
        if (rack not in used_racks or len(used_racks) == num_racks) and (
            broker not in replicas or len(replicas) == len(brokers)
        ):
            replicas.append(broker)
            used_racks.add(rack)
    return replicas


def rack_alternated(racks: Mapping[int, str | None]) -> list[int]:
    """Brokers ordered rack by rack in turn (Kafka's getRackAlternatedBrokerList): with racks
    a: 0,1 and b: 2 -> 0, 2, 1."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(str(racks[broker]), []).append(broker)
    queues = [by_rack[rack] for rack in sorted(by_rack)]
    result: list[int] = []
    index = 0
    while len(result) < len(racks):
        queue = queues[index % len(queues)]
        if queue:
            result.append(queue.pop(0))
        index += 1
    return result
