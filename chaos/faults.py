"""Applying a scheduled fault to a running target, and healing it. Roles are resolved here, at
fault time, from the cluster's metadata (asked of the brokers directly, behind the proxies, so a
proxy fault does not blind the harness). Each applied fault returns a record for faults.jsonl
with wall-clock `start` and `heal` times."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time
from pathlib import Path

from chaos import coordinator_kill
from chaos.coordinator_kill import WorkloadClients
from chaos.schedule import Fault
from chaos.targets import Target, signal_group


def resolve(target: Target, role: str, topic: str, rng: random.Random) -> tuple[int, str]:
    """The broker id playing `role` now, and how it was found."""
    live = _live(target)
    if not live:
        raise RuntimeError("no broker is running")
    if role in ("any", "all") or len(target.nodes) == 1:
        return rng.choice(live), "any live broker"
    try:
        metadata = _metadata(target, topic)
    except Exception as exc:  # metadata unavailable: still inject the fault
        return rng.choice(live), f"{role} unresolved ({exc}); any live broker"
    if role == "controller":
        if metadata.controller_id in target.nodes:
            return metadata.controller_id, "controller from metadata"
        return rng.choice(live), "no controller in metadata; any live broker"
    partitions = metadata.topics[topic].partitions
    partition = partitions[rng.choice(sorted(partitions))]
    if role == "leader" and partition.leader in target.nodes:
        return partition.leader, f"leader of {topic}-{partition.id}"
    followers = [r for r in partition.replicas if r != partition.leader and r in live]
    if role == "follower" and followers:
        return rng.choice(followers), f"follower of {topic}-{partition.id}"
    return rng.choice(live), f"no {role} for {topic}-{partition.id}; any live broker"


def _admin(target: Target):
    from confluent_kafka.admin import AdminClient

    direct = ",".join(f"127.0.0.1:{p.target_port}" for p in target.proxies.values())
    return AdminClient({**target.admin_config, "bootstrap.servers": direct, "log_level": 0})


def _metadata(target: Target, topic: str):
    return _admin(target).list_topics(topic, timeout=5)


def _live(target: Target) -> list[int]:
    return sorted(i for i, n in target.nodes.items() if n.process and n.process.poll() is None)


def apply(
    fault: Fault,
    target: Target,
    topic: str,
    rng: random.Random,
    disks: dict[int, Path],
    clients: WorkloadClients | None = None,
) -> dict:
    """Inject `fault`, hold it, heal it; the record of what happened."""
    record: dict = {"kind": fault.kind, "role": fault.role, "params": fault.params}
    if fault.kind == "zookeeper":
        return _zookeeper(fault, target, record)
    if fault.kind == "s3":
        return _s3(fault, target, record)
    if fault.kind == "coordinator-kill":
        return _coordinator_kill(fault, target, rng, clients, record)
    if fault.kind == "rolling":
        return _rolling(target, record)
    if fault.kind == "disk" and not disks:
        return {**record, "start": time.time(), "heal": time.time(),
                "skipped": "no tmpfs log dir (needs root and mount -t tmpfs)"}  # fmt: skip
    node_id, how = resolve(target, fault.role, topic, rng)
    record.update(node=node_id, resolved=how)
    node, proxy = target.nodes[node_id], target.proxies[node_id]
    record["start"] = time.time()
    if fault.kind == "kill":
        node.stop(signal.SIGKILL)
        time.sleep(fault.hold)
        node.start()
    elif fault.kind == "term":
        node.stop(signal.SIGTERM)
        node.start()
    elif fault.kind == "pause":
        process = node.process
        if process is None:  # stopped by a fault running alongside
            return {**record, "heal": time.time(), "skipped": "broker not running"}
        signal_group(process, signal.SIGSTOP)
        time.sleep(fault.hold)
        signal_group(process, signal.SIGCONT)
    elif fault.kind == "drop":
        proxy.set_down(True)
        time.sleep(fault.hold)
        proxy.set_down(False)
    elif fault.kind == "latency":
        proxy.faults.latency_s = fault.params["latency_ms"] / 1000
        time.sleep(fault.hold)
        proxy.heal()
    elif fault.kind == "blackhole":
        proxy.faults.blackhole = fault.params["direction"]
        time.sleep(fault.hold)
        proxy.heal()
    elif fault.kind == "partition":
        _partition(target, node_id, fault.hold)
    elif fault.kind == "disk":
        filler = _fill(disks[node_id])
        record["start"] = time.time()  # the fault is on once the disk is full
        try:
            time.sleep(fault.hold)
        finally:
            os.remove(filler)
    else:
        raise ValueError(f"unknown fault kind {fault.kind!r}")
    record["heal"] = time.time()
    return record


def _coordinator_kill(
    fault: Fault,
    target: Target,
    rng: random.Random,
    clients: WorkloadClients | None,
    record: dict,
) -> dict:
    """SIGKILL the workload's group or transaction coordinator at its next answer to a client
    (chaos/coordinator_kill.py), start it again after `hold` s."""
    chosen = coordinator_kill.plan(fault.role, clients, rng) if clients else None
    if chosen is None:
        return {**record, "start": time.time(), "heal": time.time(),
                "skipped": "the workload has no group or transaction coordinator"}  # fmt: skip
    assert clients is not None
    try:
        node_id = coordinator_kill.find_coordinator(_admin(target), chosen)
        how = f"{chosen.role} of {chosen.key}"
    except Exception as exc:  # no coordinator known (a fault alongside): still kill one
        node_id, how = -1, f"{chosen.role} of {chosen.key} unresolved ({exc})"
    if node_id not in target.nodes:
        node_id, how = rng.choice(_live(target)), f"{how}; any live broker"
    watch = coordinator_kill.AnswerWatch(clients.logs, chosen.files)  # answers from now on
    answer = watch.next_answer(chosen.events, coordinator_kill.ANSWER_TIMEOUT_S)
    record["start"] = time.time()
    target.nodes[node_id].stop(signal.SIGKILL)
    record.update(node=node_id, resolved=", ".join(filter(None, (how, chosen.note))))
    if answer is None:
        record["answer"] = f"none within {coordinator_kill.ANSWER_TIMEOUT_S} s"
    else:
        record["answer"] = {key: answer[key] for key in ("file", "ev", "t")}
        record["killed_after_answer_ms"] = round((record["start"] - answer["t"]) * 1000, 1)
    time.sleep(fault.hold)
    target.nodes[node_id].start()
    record["heal"] = time.time()
    return record


def _zookeeper(fault: Fault, target: Target, record: dict) -> dict:
    if target.zookeeper is None:
        return {**record, "start": time.time(), "heal": time.time(),
                "skipped": f"{target.name} runs without ZooKeeper"}  # fmt: skip
    record["start"] = time.time()
    target.zookeeper.kill()
    time.sleep(fault.hold)
    target.zookeeper.restart()
    record["heal"] = time.time()
    return record


def _s3(fault: Fault, target: Target, record: dict) -> dict:
    """The store of a tiered run goes down (SIGKILL, then started on its port with its data)
    or stalls (SIGSTOP, SIGCONT) for `hold` s."""
    store = target.store
    if store is None or store.process is None:
        why = "Kafka tiers through a plugin RSM" if target.name == "kafka" else "not tiered"
        return {**record, "start": time.time(), "heal": time.time(), "skipped": why}
    record["start"] = time.time()
    if fault.params["mode"] == "down":
        store.kill()
        time.sleep(fault.hold)
        store.start()
    else:
        store.process.send_signal(signal.SIGSTOP)
        try:
            time.sleep(fault.hold)
        finally:
            store.process.send_signal(signal.SIGCONT)
    record["heal"] = time.time()
    return record


def _rolling(target: Target, record: dict) -> dict:
    record["start"] = time.time()
    for node in target.nodes.values():
        node.stop(signal.SIGTERM)
        node.start()
    record["heal"] = time.time()
    return record


def _partition(target: Target, node_id: int, hold: float) -> None:
    """Cut `node_id` off from the other brokers both ways (through every proxy of each, Kafka's
    controller listeners included); clients still reach every broker."""
    pids = {i: n.process.pid for i, n in target.nodes.items() if n.process}
    others = frozenset(pid for i, pid in pids.items() if i != node_id)
    for proxy in target.all_proxies(node_id):
        proxy.refuse(others)
    for i in target.nodes:
        if i != node_id and node_id in pids:
            for proxy in target.all_proxies(i):
                proxy.refuse(frozenset({pids[node_id]}))
    time.sleep(hold)
    for proxy in target.all_proxies(None):
        proxy.heal()


def _fill(disk: Path) -> Path:
    """Write zeros to `disk` until it is full (ENOSPC); the filler's path."""
    filler = disk / "chaos-filler"
    block = b"\0" * (1 << 20)
    with open(filler, "wb", buffering=0) as out, contextlib.suppress(OSError):
        while True:
            out.write(block)
    return filler
