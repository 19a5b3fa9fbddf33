"""One chaos run: start the target behind proxies, run the workload's client processes, apply
the seeded schedule, let the faults heal, read everything back, judge and plot.

The run directory holds options.json (with the seed), schedule.json, faults.jsonl (what was
applied, when, to which broker), logs/ (every broker's and client's output; the clients' JSON
lines), final.jsonl (the read-back), verdict.json and plot.png. Every process is stopped at the
end, also when the run fails or is interrupted (Ctrl-C): brokers and clients run in their own
process groups, which the harness signals."""

from __future__ import annotations

import contextlib
import json
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from chaos import faults as fault_ops
from chaos import tiered
from chaos.checker import check, summary
from chaos.coordinator_kill import WorkloadClients
from chaos.plot import plot_run
from chaos.schedule import make_schedule, usable_kinds
from chaos.security import generate_security, grant_workload
from chaos.share import SHARE_GROUP, all_acknowledged, share_offsets, share_overrides
from chaos.targets import (
    CHAOS_TIMEOUTS,
    KafkaliteNode,
    Target,
    signal_group,
    start_kafka,
    start_kafkalite,
)
from chaos.workload import transactional_id

TOPIC = "chaos"
OUT_TOPIC = "chaos-out"  # the transactional workload's output
CONSUMER_GROUP, TXN_GROUP = "chaos", "chaos-txn"


class TargetError(RuntimeError):
    """The target cannot run the workload (the run stops; every process is stopped)."""


# txn: the producers' records go through a transactional consume-transform-produce loop
# (`--consumers` processes) to OUT_TOPIC; the checker wants each exactly once there.
# share: `--consumers` ShareConsumers in one share group ACCEPT every record (chaos/share.py).
WORKLOADS = ("produce-consume", "produce", "txn", "share")


@dataclass
class Options:
    duration: float = 120.0
    seed: int = 1
    faults: list[str] = field(default_factory=lambda: ["kill", "pause", "term", "drop", "latency"])
    brokers: int = 1
    target: str = "kafkalite"  # or "kafka"
    workload: str = "produce-consume"
    producers: int = 2
    consumers: int = 2
    rate: float = 100.0  # records/s per producer
    partitions: int = 4
    stall_bound: float = 30.0
    runs_dir: Path = Path("data/chaos")
    tiered: bool = False  # the topic tiered to an S3 server (also with the `s3` fault kind)
    secure: bool = False  # SASL_SSL, ACLs, the workload a SCRAM user (chaos/security.py)

    def is_tiered(self) -> bool:
        """Kafka tiers through a plugin RemoteStorageManager: not here."""
        return self.target == "kafkalite" and (self.tiered or "s3" in self.faults)

    def run_dir(self) -> Path:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        return self.runs_dir / f"{self.target}-b{self.brokers}-seed{self.seed}-{stamp}"


@dataclass
class Clients:
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    def launch(self, name: str, args: list[str], log: Path) -> None:
        with open(log, "ab") as out:
            self.processes[name] = subprocess.Popen(
                [sys.executable, "-m", "chaos.workload", *args],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip

    def wait(self, prefix: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for name, process in self.processes.items():
            if name.startswith(prefix):
                try:
                    process.wait(max(deadline - time.monotonic(), 0.1))
                except subprocess.TimeoutExpired:  # stuck: its stacks to its log, then kill
                    signal_group(process, signal.SIGUSR1)
                    time.sleep(1.0)
                    signal_group(process, signal.SIGKILL)
                    process.wait()

    def stop_all(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                signal_group(process, signal.SIGKILL)
                process.wait()


def run(options: Options, log=print) -> tuple[Path, dict]:
    kinds, notes = usable_kinds(options.faults, options.brokers)
    if options.workload not in WORKLOADS:
        raise ValueError(f"unknown workload {options.workload!r} (known: {', '.join(WORKLOADS)})")
    if options.secure and (options.target != "kafkalite" or options.workload == "share"):
        # The share workload's offsets are asked with kafkalite's PLAINTEXT-only client.
        raise ValueError(
            "--secure runs kafkalite with the produce-consume, produce or txn workload"
        )
    run_dir = options.run_dir()
    (run_dir / "logs").mkdir(parents=True)
    schedule = make_schedule(options.seed, options.duration, kinds, options.brokers, CHAOS_TIMEOUTS)
    _write(run_dir / "options.json", {**asdict(options), "runs_dir": str(options.runs_dir)})
    _write(run_dir / "schedule.json", {"notes": notes, "faults": [f.to_json() for f in schedule]})
    if options.target == "kafka" and (options.tiered or "s3" in kinds):
        notes.append("s3: skipped (and the topic not tiered): Kafka needs a plugin RSM")
    for note in notes:
        log(f"chaos: {note}")
    disks: dict[int, Path] = {}
    target: Target | None = None
    clients = Clients()
    try:
        if "disk" in kinds and options.target == "kafkalite":  # Kafka: on its own disk
            disks, note = mount_disks(run_dir, options.brokers)
            if note:
                log(f"chaos: {note}")
        target = _start_target(options, run_dir, disks)
        log(f"chaos: {target.name}, {options.brokers} broker(s), proxies {target.bootstrap}")
        create_topic(target, options)
        if options.workload == "txn":
            create_topic(target, options, OUT_TOPIC)
        if options.secure:
            assert target.security is not None
            grant_workload(target.security, target.bootstrap)
        if options.workload == "share":
            set_share_group_configs(target, {"share.auto.offset.reset": "earliest"})
        _start_clients(clients, options, target, run_dir)
        _apply_schedule(schedule, target, options, run_dir, disks, log)
        _finish_clients(clients, options, run_dir, log, target.bootstrap)
        _drain(target, options, run_dir)
        if options.workload == "txn":
            _drain(target, options, run_dir, "drain-output")
        if target.store is not None:
            _write_tier_figures(target, options, run_dir)
        if options.workload == "share":
            _write_share_offsets(target, run_dir)
    finally:
        clients.stop_all()
        if target is not None:
            target.stop()
        unmount_disks(disks)
    verdict = check(run_dir, options.stall_bound, TOPIC)
    verdict["target"] = options.target
    _write(run_dir / "verdict.json", verdict)
    with contextlib.suppress(Exception):  # a plot is a convenience; the verdict stands alone
        plot_run(run_dir, f"{options.target}, {options.brokers} broker(s), seed {options.seed}")
    log(summary(verdict))
    log(f"chaos: results in {run_dir}")
    return run_dir, verdict


def _write(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")


def _start_target(options: Options, run_dir: Path, disks: dict[int, Path]) -> Target:
    overrides = share_overrides(options.brokers) if options.workload == "share" else None
    if options.target == "kafka":
        return start_kafka(run_dir, options.brokers, overrides)
    security = generate_security(run_dir) if options.secure else None
    return start_kafkalite(
        run_dir,
        options.brokers,
        overrides,
        data_dirs=disks,
        tiered=options.is_tiered(),
        security=security,
    )


def _write_tier_figures(target: Target, options: Options, run_dir: Path) -> None:
    data_dirs = [n.data_dir for n in target.nodes.values() if isinstance(n, KafkaliteNode)]
    tier = tiered.figures(target.store, data_dirs, TOPIC, options.partitions)
    tiered.write(run_dir, tier)


def set_share_group_configs(target: Target, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs on the share group (a GROUP resource), before it has members."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )  # fmt: skip

    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
               for k, v in configs.items()]  # fmt: skip
    resource = ConfigResource(ResourceType.GROUP, SHARE_GROUP, incremental_configs=entries)
    admin = AdminClient(
        {**target.admin_config, "bootstrap.servers": target.bootstrap, "log_level": 0}
    )
    admin.incremental_alter_configs([resource])[resource].result(60)


def admin_client(target: Target):
    from confluent_kafka.admin import AdminClient

    return AdminClient(
        {**target.admin_config, "bootstrap.servers": target.bootstrap, "log_level": 0}
    )


def create_topic(target: Target, options: Options, topic: str = TOPIC) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(
        {**target.admin_config, "bootstrap.servers": target.bootstrap, "log_level": 0}
    )
    replicas = min(3, options.brokers)
    configs = tiered.TOPIC_CONFIGS if topic == TOPIC and target.store is not None else {}
    new = NewTopic(topic, options.partitions, replicas, config=configs)
    future = admin.create_topics([new])[topic]
    try:
        future.result(60)
    except KafkaException as exc:  # e.g. kafkalite brokers that do not form a cluster yet
        error = exc.args[0]
        raise TargetError(
            f"cannot create topic {topic} ({replicas} replicas): {error.str()}"
        ) from None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until every partition has a leader
        found = admin.list_topics(topic, timeout=10).topics.get(topic)
        if found and found.error is None and len(found.partitions) == options.partitions:
            if all(p.leader >= 0 for p in found.partitions.values()):
                return
        time.sleep(0.2)
    raise RuntimeError(f"topic {topic} has no leaders after 60s")


def _start_clients(clients: Clients, options: Options, target: Target, run_dir: Path) -> None:
    logs = run_dir / "logs"
    common = ["--bootstrap", target.bootstrap, "--topic", TOPIC, *target.client_config_args()]
    for i in range(options.producers):
        clients.launch(f"producer-{i}", [
            "producer", *common, "--name", f"p{i}", "--out", str(logs / f"producer-p{i}.jsonl"),
            "--rate", str(options.rate), "--stop-file", str(run_dir / "stop-producers"),
        ], logs / f"producer-p{i}.log")  # fmt: skip
    if options.workload == "produce-consume":
        for i in range(options.consumers):
            clients.launch(f"consumer-{i}", [
                "consumer", *common, "--group", CONSUMER_GROUP,
                "--out", str(logs / f"consumer-c{i}.jsonl"),
                "--stop-file", str(run_dir / "stop-consumers"),
            ], logs / f"consumer-c{i}.log")  # fmt: skip
    if options.workload == "txn":
        for i in range(options.consumers):
            clients.launch(f"transform-{i}", [
                "transform", *common, "--out-topic", OUT_TOPIC, "--group", TXN_GROUP,
                "--name", f"t{i}", "--out", str(logs / f"transform-t{i}.jsonl"),
                "--stop-file", str(run_dir / "stop-consumers"),
            ], logs / f"transform-t{i}.log")  # fmt: skip
    if options.workload == "share":
        for i in range(options.consumers):
            clients.launch(f"share-{i}", [
                "share-consumer", *common, "--group", SHARE_GROUP,
                "--out", str(logs / f"share-c{i}.jsonl"),
                "--stop-file", str(run_dir / "stop-consumers"),
            ], logs / f"share-c{i}.log")  # fmt: skip


def _apply_schedule(schedule, target, options, run_dir, disks, log) -> None:
    started = time.monotonic()
    running: list[threading.Thread] = []  # faults applied alongside the next one
    clients = workload_clients(options, run_dir)
    with open(run_dir / "faults.jsonl", "a") as out:
        lock = threading.Lock()

        def apply(index: int, fault) -> None:
            rng = random.Random(options.seed * 1000 + index)  # the same broker choices per seed
            record = fault_ops.apply(fault, target, TOPIC, rng, disks, clients)
            record = {"index": index, "at": fault.at, "hold": fault.hold, **record}
            with lock:
                out.write(json.dumps(record) + "\n")
                out.flush()
            where = record.get("skipped") or f"broker {record.get('node', '-')}"
            log(f"chaos: {time.monotonic() - started:6.1f}s {fault.kind} ({where})")

        for index, fault in enumerate(schedule):
            _sleep_until(started + fault.at)
            if fault.together:
                thread = threading.Thread(target=apply, args=(index, fault), daemon=True)
                thread.start()
                running.append(thread)
                continue
            apply(index, fault)
            for thread in running:
                thread.join()
            running.clear()
        for thread in running:  # the last fault was to go with one the run had no time for
            thread.join()
    # Time to recover after the last fault, also when slow restarts made the faults overrun.
    _sleep_until(max(started + options.duration, time.monotonic() + options.duration / 4))


def workload_clients(options: Options, run_dir: Path) -> WorkloadClients:
    """The clients a coordinator-kill fault watches, and whose coordinators it finds."""
    logs = run_dir / "logs"
    if options.workload == "txn":
        ids = {f"transform-t{i}.jsonl": transactional_id(TXN_GROUP, f"t{i}")
               for i in range(options.consumers)}  # fmt: skip
        return WorkloadClients(logs, options.workload, TXN_GROUP, ids)
    group = CONSUMER_GROUP if options.workload == "produce-consume" else None
    return WorkloadClients(logs, options.workload, group)


def _sleep_until(moment: float) -> None:
    delay = moment - time.monotonic()
    if delay > 0:
        time.sleep(delay)


def _finish_clients(clients: Clients, options: Options, run_dir: Path, log, bootstrap: str) -> None:
    (run_dir / "stop-producers").touch()
    clients.wait("producer", 180)
    if options.workload == "txn":  # transforms stop once their group committed the input's end
        (run_dir / "stop-consumers").touch()
        clients.wait("transform", 200)
        return
    if options.workload == "share":
        _await_share_acknowledged(bootstrap, log)
        (run_dir / "stop-consumers").touch()
        clients.wait("share", 60)
        return
    if options.workload != "produce-consume":
        return
    # Consumers catch up with what was written: until their output stops growing (3 s).
    files = list((run_dir / "logs").glob("consumer-*.jsonl"))
    size, still_since, deadline = -1, time.monotonic(), time.monotonic() + 90
    while time.monotonic() < deadline and time.monotonic() - still_since < 3:
        now = sum(f.stat().st_size for f in files if f.exists())
        if now != size:
            size, still_since = now, time.monotonic()
        time.sleep(0.5)
    (run_dir / "stop-consumers").touch()
    clients.wait("consumer", 60)


def log_ends(bootstrap: str) -> dict[int, int]:
    """The high watermark of each partition of TOPIC."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-ends", "log_level": 0})
    try:
        partitions = consumer.list_topics(TOPIC, timeout=30).topics[TOPIC].partitions
        return {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), 30)[1]
                for p in sorted(partitions)}  # fmt: skip
    finally:
        consumer.close()


def _await_share_acknowledged(bootstrap: str, log, timeout: float = 120.0) -> None:
    """Until the broker reports every record of the log acknowledged in the share group (the
    consumers redeliver what a fault left unacknowledged once its lock expires)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if all_acknowledged(share_offsets(bootstrap, SHARE_GROUP), log_ends(bootstrap)):
                return
        except Exception as exc:  # a broker still recovering: ask again
            log(f"chaos: share offsets not known yet ({exc})")
        time.sleep(1.0)
    log(f"chaos: the share group has not acknowledged every record after {timeout:.0f}s")


def _write_share_offsets(target: Target, run_dir: Path) -> None:
    """The share group's start offsets and lag after the run, for the checker."""
    try:
        offsets = share_offsets(target.bootstrap, SHARE_GROUP)
    except Exception as exc:  # the checker counts every record unaccepted then
        offsets, error = {}, str(exc)
    else:
        error = ""
    with open(run_dir / "final.jsonl", "a") as out:
        out.write(json.dumps({"ev": "share_offsets", "offsets": offsets, "error": error}) + "\n")


def _drain(target: Target, options: Options, run_dir: Path, role: str = "drain") -> None:
    log = run_dir / "logs" / f"{role}.log"
    group = ["--group", TXN_GROUP, "--out-topic", OUT_TOPIC] if role == "drain-output" else []
    with open(log, "ab") as out:
        result = subprocess.run(
            [sys.executable, "-m", "chaos.workload", role, "--bootstrap", target.bootstrap,
             "--topic", TOPIC, *group, *target.client_config_args(),
             "--out", str(run_dir / "final.jsonl")],
            stdout=out, stderr=subprocess.STDOUT, timeout=300, start_new_session=True,
        )  # fmt: skip
    # The transform's output read back short (an open transaction holding the last stable
    # offset back) is judged: the checker counts what is missing.
    if result.returncode != 0 and role == "drain":
        raise RuntimeError(f"the final read-back failed; see {log}")


def mount_disks(run_dir: Path, brokers: int) -> tuple[dict[int, Path], str]:
    """A small tmpfs per broker for its log dir (the disk-full fault), if this machine allows."""
    disks: dict[int, Path] = {}
    for i in range(1, brokers + 1):
        path = run_dir / f"disk-{i}"
        path.mkdir()
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", str(path)],
                                capture_output=True, text=True)  # fmt: skip
        if result.returncode != 0:
            unmount_disks(disks)
            reason = (result.stderr.strip() or f"exit {result.returncode}").splitlines()[0]
            return {}, f"disk faults skipped: cannot mount a tmpfs ({reason})"
        disks[i] = path
    return disks, ""


def unmount_disks(disks: dict[int, Path]) -> None:
    for path in disks.values():
        subprocess.run(["umount", "-l", str(path)], capture_output=True)
