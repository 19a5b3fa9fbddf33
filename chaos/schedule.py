"""The seeded fault schedule: the same seed, duration, faults and broker count give the same
schedule (`random.Random(seed)`, nothing else). Roles (the leader of a partition, a follower,
the controller) are chosen here and resolved to a broker at fault time, from metadata.

Kinds:
  kill        SIGKILL a broker, restart it after `hold` s
  pause       SIGSTOP a broker for `hold` s, then SIGCONT: shorter (0.5x) or longer (1.5x)
              than the session / replica-lag timeouts of the target
  term        SIGTERM (controlled shutdown) a broker and start it again
  rolling     SIGTERM restart of every broker in turn
  zookeeper   SIGKILL ZooKeeper, restart it after `hold` s (clusters on ZooKeeper only)
  drop        every link through a broker's proxy cut, and new ones refused, for `hold` s
  latency     `latency_ms` added on a broker's proxy for `hold` s
  blackhole   one direction through a broker's proxy stops for `hold` s
  partition   a broker cut off from the other brokers (clients still reach it) (clusters only)
  disk        the broker's log dir (a small tmpfs) filled up for `hold` s
  s3          the S3 server of a tiered run (chaos/tiered.py) SIGKILLed and started again on
              its port and data (`mode` down), or SIGSTOPped then SIGCONTed (stall), after
              `hold` s; skipped on Kafka (it tiers through a plugin RemoteStorageManager)
  coordinator-kill  SIGKILL the workload's group coordinator or (txn workload) a transform's
              transaction coordinator right after it answered a commit, restart it after
              `hold` s (chaos/coordinator_kill.py)
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field, replace

KINDS = ("kill", "pause", "term", "rolling", "zookeeper", "drop", "latency", "blackhole",
         "partition", "disk", "coordinator-kill", "s3")  # fmt: skip
SINGLE_NODE_KINDS = ("kill", "pause", "term", "drop", "latency", "blackhole", "disk",
                     "coordinator-kill", "s3")  # fmt: skip
CLUSTER_ONLY = {"zookeeper", "partition", "rolling"}
NETWORK = {"drop", "latency", "blackhole", "partition"}
PROCESS = {"kill", "pause", "term", "zookeeper", "coordinator-kill"}
ROLES = ("leader", "follower", "controller", "any")
S3_MODES = ("down", "stall")  # SIGKILL and restart, or SIGSTOP and SIGCONT
COORDINATOR_ROLES = ("group-coordinator", "txn-coordinator")  # see chaos/coordinator_kill.py


@dataclass(frozen=True)
class Fault:
    at: float  # seconds after the workload started
    kind: str
    hold: float  # seconds the fault lasts
    role: str = "any"  # which broker: resolved at fault time
    params: dict = field(default_factory=dict)
    together: bool = False  # the next fault starts at the same time (several at once)

    def to_json(self) -> dict:
        return asdict(self)


def make_schedule(
    seed: int,
    duration: float,
    kinds: list[str],
    brokers: int,
    timeouts: dict[str, float],
    warmup: float = 8.0,
) -> list[Fault]:
    """Faults from `warmup` until 75% of `duration` (the rest is for recovery), cycling through
    the kinds in a seeded order so each kind comes up as often as the others. No kinds: no
    faults (a baseline run)."""
    if not kinds:
        return []
    rng = random.Random(seed)
    timeout = max(timeouts.values() or [6.0])
    end = duration * 0.75
    faults: list[Fault] = []
    at = warmup
    order: list[str] = []
    longer = rng.random() < 0.5  # pauses alternate: shorter, longer than the timeout, ...
    while True:
        if not order:
            order = list(kinds)
            rng.shuffle(order)
        kind = order.pop()
        if kind == "pause":
            longer = not longer
        fault = _fault(rng, kind, at, brokers, timeout, longer)
        if at + fault.hold > end:
            break
        if faults and faults[-1].together:
            fault = replace(fault, at=faults[-1].at)
        elif brokers > 1 and kind in NETWORK and order and order[-1] in PROCESS:
            # A network fault and a process fault at once (on a cluster), half the time.
            fault = replace(fault, together=rng.random() < 0.5)
        faults.append(fault)
        if not fault.together:
            at = max(at, fault.at + fault.hold) + _settle(kind, brokers) + rng.uniform(1.0, 3.0)
    return faults


def _settle(kind: str, brokers: int) -> float:
    """Rough seconds a fault's healing takes (a restart), so faults do not pile up."""
    settle = {"kill": 4.0, "coordinator-kill": 4.0, "term": 6.0, "rolling": 6.0 * brokers,
              "zookeeper": 4.0, "s3": 2.0}  # fmt: skip
    return settle.get(kind, 0.0)


def _role(rng: random.Random, brokers: int) -> str:
    return rng.choice(ROLES) if brokers > 1 else "any"


def _fault(
    rng: random.Random, kind: str, at: float, brokers: int, timeout: float, longer: bool
) -> Fault:
    at = round(at, 2)
    if kind == "kill":
        return Fault(at, kind, round(rng.uniform(0.5, 4.0), 2), _role(rng, brokers))
    if kind == "pause":
        hold = timeout * (1.5 if longer else 0.5)
        return Fault(at, kind, round(hold, 2), _role(rng, brokers), {"longer_than_timeout": longer})
    if kind in ("term", "rolling"):
        return Fault(at, kind, 0.0, _role(rng, brokers) if kind == "term" else "all")
    if kind == "zookeeper":
        return Fault(at, kind, round(rng.uniform(1.0, timeout * 1.5), 2), "zookeeper")
    if kind == "drop":
        return Fault(at, kind, round(rng.uniform(1.0, 6.0), 2), _role(rng, brokers))
    if kind == "latency":
        params = {"latency_ms": rng.choice((20, 100, 300, 800))}
        return Fault(at, kind, round(rng.uniform(3.0, 8.0), 2), _role(rng, brokers), params)
    if kind == "blackhole":
        params = {"direction": rng.choice(("upstream", "downstream"))}
        return Fault(at, kind, round(rng.uniform(1.0, 6.0), 2), _role(rng, brokers), params)
    if kind == "partition":
        return Fault(at, kind, round(rng.uniform(2.0, timeout * 1.5), 2), _role(rng, brokers))
    if kind == "disk":
        return Fault(at, kind, round(rng.uniform(2.0, 6.0), 2), _role(rng, brokers))
    if kind == "coordinator-kill":
        return Fault(at, kind, round(rng.uniform(0.5, 4.0), 2), rng.choice(COORDINATOR_ROLES))
    if kind == "s3":  # no broker: the store
        params = {"mode": rng.choice(S3_MODES)}
        return Fault(at, kind, round(rng.uniform(2.0, 10.0), 2), "s3", params)
    raise ValueError(f"unknown fault kind {kind!r}")


def usable_kinds(kinds: list[str], brokers: int) -> tuple[list[str], list[str]]:
    """The kinds that make sense for `brokers` brokers, and a note for each one dropped."""
    kept, notes = [], []
    for kind in kinds:
        if kind not in KINDS:
            raise ValueError(f"unknown fault kind {kind!r} (known: {', '.join(KINDS)})")
        if brokers == 1 and kind in CLUSTER_ONLY:
            notes.append(f"{kind}: skipped, needs a cluster (--brokers > 1)")
        else:
            kept.append(kind)
    return kept, notes
