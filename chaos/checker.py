"""Reads a chaos run directory back and judges it (also alone: `python -m chaos.checker DIR`).

Inputs (written by chaos.workload and chaos.runner): logs/producer-*.jsonl, logs/consumer-*.jsonl,
final.jsonl (every record in the topic after the faults healed, and the group's committed
offsets), faults.jsonl. Output: verdict.json with the counts below; `ok` needs every count that
must be 0 to be 0.

Must be 0:
  acked_lost             acknowledged records not in the final log
  acked_moved            acknowledged records found at another offset than the ack said
                         (librdkafka acks an idempotent retry the broker found a duplicate of
                         without an offset: those are only checked for presence)
  duplicates             extra copies of a record in the final log written by the same
                         producer session (producer id and epoch) as the first: idempotence
  order_violations       per partition and key, a producer's sequence going down along offsets,
                         within one producer session
  unacked_disallowed     records in the log the producer never sent or was told definitely
                         failed (an ambiguous error or a pending send may be written: allowed)
  read_not_in_log        records a consumer read that the final log does not have there
  commit_regressions     a partition's committed offset going backwards (in time order, and
                         the final committed offset below the highest one acknowledged)
  stalls                 partitions where the group made no progress, with records waiting,
                         for longer than `stall_bound_s` after the last fault healed
With the transactional workload (final.jsonl holds the transform's committed output), also:
  txn_missing            input records (the final input log) not in the committed output
  txn_duplicates         extra copies of an input record in the committed output
  txn_mismatch           output records that are not their input record transformed (key,
                         value "x:<value>", header src "<partition>:<offset>" of the input)
  txn_input_uncommitted  input partitions whose transform group's committed offset is not the
                         input's end (some input was never consumed in a committed transaction)
With the share-group workload (logs/share-*.jsonl), also the SHARE_MUST_BE_ZERO counts and
`share_figures` of chaos/share.py's judge_share.
Figures: records acked / failed / unknown / read / in the log, and per fault the time to the
first acknowledged acks=all write sent after it started (`recover_s`) and after it healed.
`resent_copies` and `resent_out_of_order` count the copies, and the sequence going down, where
a later session of the producer wrote a record again: the client's resend after it bumped its
epoch (chaos.producer_sessions says why no broker can drop those). The sessions come from the
segment files in the run directory; without them every copy counts as a duplicate.
A tiered run (chaos/tiered.py) is `ok` only if it used the store: records drained from below
the local log start, and uploads after the last `s3` fault healed (`tiered` in the verdict).
"""

from __future__ import annotations

import argparse
import bisect
import json
import sys
from collections import defaultdict
from collections.abc import Iterable
from itertools import pairwise
from pathlib import Path
from typing import Any

from chaos import tiered
from chaos.producer_sessions import Session, producer_sessions
from chaos.share import SHARE_MUST_BE_ZERO, judge_share

MUST_BE_ZERO = (
    "acked_lost", "acked_moved", "duplicates", "order_violations", "unacked_disallowed",
    "read_not_in_log", "commit_regressions", "stalls",
)  # fmt: skip
TXN_MUST_BE_ZERO = ("txn_missing", "txn_duplicates", "txn_mismatch", "txn_input_uncommitted")

# librdkafka errors that say the record was definitely not written.
DEFINITE_FAILURES = frozenset(
    {"MSG_SIZE_TOO_LARGE", "_MSG_SIZE_TOO_LARGE", "INVALID_RECORD", "_INVALID_ARG",
     "TOPIC_AUTHORIZATION_FAILED", "CORRUPT_MESSAGE", "_QUEUE_FULL"}
)  # fmt: skip


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    events = []
    with open(path) as lines:
        for line in lines:
            line = line.strip()
            if line:
                try:
                    events.append(json.loads(line))
                except json.JSONDecodeError:  # a line cut short by a killed writer
                    continue
    return events


def producer_name(value: str) -> tuple[str, int]:
    name, _, seq = value.rpartition(":")
    return name, int(seq)


def check(run_dir: Path, stall_bound_s: float = 30.0, topic: str = "chaos") -> dict[str, Any]:
    run_dir = Path(run_dir)
    logs = run_dir / "logs"
    producers = {p.stem.removeprefix("producer-"): read_jsonl(p)
                 for p in sorted(logs.glob("producer-*.jsonl"))}  # fmt: skip
    consumers = {p.stem: read_jsonl(p) for p in sorted(logs.glob("consumer-*.jsonl"))}
    transforms = {p.stem: read_jsonl(p) for p in sorted(logs.glob("transform-*.jsonl"))}
    share = {p.stem: read_jsonl(p) for p in sorted(logs.glob("share-*.jsonl"))}
    final = read_jsonl(run_dir / "final.jsonl") if (run_dir / "final.jsonl").exists() else []
    faults_path = run_dir / "faults.jsonl"
    faults = read_jsonl(faults_path) if faults_path.exists() else []
    sessions = producer_sessions(run_dir, topic)
    verdict = judge(producers, consumers, final, faults, stall_bound_s, transforms, sessions, share)
    if (run_dir / tiered.FIGURES_FILE).exists():  # a tiered run must have used the store
        tier = json.loads((run_dir / tiered.FIGURES_FILE).read_text())
        verdict["tiered"] = tiered.judge(tier, final, faults)
        verdict["ok"] = verdict["ok"] and verdict["tiered"]["used"]
    return verdict


def judge(
    producers: dict[str, list[dict]],
    consumers: dict[str, list[dict]],
    final: list[dict],
    faults: list[dict],
    stall_bound_s: float = 30.0,
    transforms: dict[str, list[dict]] | None = None,
    sessions: dict[tuple[int, int], Session | None] | None = None,
    share: dict[str, list[dict]] | None = None,
) -> dict[str, Any]:
    acks: dict[str, dict] = {}
    errors: dict[str, dict] = {}
    unknown: set[str] = set()
    for name, events in producers.items():
        for ev in events:
            value = f"{name}:{ev['seq']}"
            if ev["ev"] == "ack":
                acks[value] = ev
            elif ev["ev"] == "err":
                errors[value] = ev
            elif ev["ev"] == "unknown":
                unknown.add(value)
    records = [ev for ev in final if ev["ev"] == "record"]
    at: dict[tuple[int, int], str] = {(r["partition"], r["offset"]): r["value"] for r in records}
    where: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for r in records:
        where[r["value"]].append((r["partition"], r["offset"]))

    lost = sorted(v for v in acks if v not in where)
    moved = sorted(
        v for v, ev in acks.items()
        if v in where and ev["offset"] is not None
        and (ev["partition"], ev["offset"]) not in where[v]
    )  # fmt: skip
    copies = {v: places for v, places in where.items() if len(places) > 1}
    resent = {v: places for v, places in copies.items() if _by_new_sessions(places, sessions)}
    duplicates = {v: len(places) for v, places in copies.items() if v not in resent}
    unacked = _classify_unacked(where, acks, errors, unknown)
    reads = [(name, ev) for name, events in consumers.items() for ev in events
             if ev["ev"] == "read"]  # fmt: skip
    read_not_in_log = [
        {"consumer": name, "partition": ev["partition"], "offset": ev["offset"],
         "value": ev["value"], "log_has": at.get((ev["partition"], ev["offset"]))}
        for name, ev in reads if at.get((ev["partition"], ev["offset"])) != ev["value"]
    ]  # fmt: skip
    order, resent_order = [], []
    for violation in order_violations(records):
        partition = violation["partition"]
        places = [(partition, violation["after_offset"]), (partition, violation["offset"])]
        (resent_order if _by_new_sessions(places, sessions) else order).append(violation)
    commits = commit_regressions(consumers, final)
    last_heal = max((f.get("heal", 0.0) for f in faults), default=0.0)
    # A produce-only workload has no group to stall.
    stalls = consumer_stalls(reads, acks, last_heal, stall_bound_s) if consumers else []
    must_be_zero = {
        "acked_lost": len(lost),
        "acked_moved": len(moved),
        "duplicates": sum(n - 1 for n in duplicates.values()),
        "order_violations": len(order),
        "unacked_disallowed": len(unacked["disallowed"]),
        "read_not_in_log": len(read_not_in_log),
        "commit_regressions": len(commits),
        "stalls": len(stalls),
    }
    done = [ev for ev in final if ev["ev"] == "done"]
    complete = bool(done) and not done[0].get("unfinished")
    # The transactional workload: its output must have been read back too.
    txn = judge_transform(records, final, transforms) if transforms or _has_output(final) else None
    if txn is not None:
        must_be_zero.update(txn["counts"])
        complete = complete and txn["complete"]
    # The share-group workload (chaos/share.py): its deliveries and acknowledgements.
    shared = judge_share(acks, records, share, final) if share else None
    if shared is not None:
        must_be_zero.update(shared["counts"])
    return {
        "ok": not any(must_be_zero.values()) and complete,
        **must_be_zero,
        "figures": {
            "acked": len(acks),
            "failed": len(errors),
            "unknown": len(unknown),
            "in_log": len(records),
            "read_by_consumers": len(reads),
            "distinct_read": len({ev["value"] for _, ev in reads}),
            "acked_never_consumed": len(set(acks) - {ev["value"] for _, ev in reads}),
            "unacked_allowed": len(unacked["allowed"]),
            "resent_copies": sum(len(places) - 1 for places in resent.values()),
            "resent_out_of_order": len(resent_order),
            "errors_by_name": _count(ev["error"] for ev in errors.values()),
            "final_read_complete": bool(done) and not done[0].get("unfinished"),
        },
        "faults": recovery_times(faults, acks),
        "examples": {
            "acked_lost": lost[:20],
            "acked_moved": moved[:20],
            "duplicates": dict(list(duplicates.items())[:20]),
            "order_violations": order[:20],
            "resent": dict(list(resent.items())[:20]),
            "unacked_disallowed": unacked["disallowed"][:20],
            "read_not_in_log": read_not_in_log[:20],
            "commit_regressions": commits[:20],
            "stalls": stalls[:20],
            **(txn["examples"] if txn else {}),
            **(shared["examples"] if shared else {}),
        },
        **({"txn_figures": txn["figures"]} if txn else {}),
        **({"share_figures": shared["figures"]} if shared else {}),
    }


def _by_new_sessions(
    places: list[tuple[int, int]], sessions: dict[tuple[int, int], Session | None] | None
) -> bool:
    """Each later copy (by offset) written by a newer session than the one before it, all
    known: the client's resend. An older epoch of the same producer id after a newer one would
    be a zombie the broker failed to fence, so that counts as a duplicate."""
    if not sessions:
        return False
    owners = [sessions.get(place) for place in sorted(places)]
    known = [owner for owner in owners if owner is not None]
    return len(known) == len(owners) and all(_newer(b, a) for a, b in pairwise(known))


def _newer(later: Session, earlier: Session) -> bool:
    """Another producer id, or a higher epoch of the same one."""
    return later[0] != earlier[0] or later[1] > earlier[1]


def _has_output(final: list[dict]) -> bool:
    return any(ev["ev"] == "out_done" for ev in final)


def judge_transform(
    records: list[dict], final: list[dict], transforms: dict | None
) -> dict[str, Any]:
    """Exactly once through the transform: each input record once in the committed output."""
    inputs = {(r["partition"], r["offset"]): r for r in records}
    outputs = [ev for ev in final if ev["ev"] == "out"]
    copies: dict[tuple[int, int], int] = defaultdict(int)
    mismatch = []
    for out in outputs:
        src = _source(out["src"])
        record = inputs.get(src) if src else None
        if record is None or (out["key"], out["value"]) != (record["key"], f"x:{record['value']}"):
            mismatch.append({"out": out, "input": record})
            continue
        copies[src] += 1
    missing = sorted(place for place in inputs if place not in copies)
    duplicates = {f"{p}:{o}": n for (p, o), n in copies.items() if n > 1}
    committed = next((ev for ev in final if ev["ev"] == "txn_committed"), None)
    if committed is None:  # the output's read-back did not finish: judged from the inputs
        committed = {"offsets": {}, "input_ends": {str(p): 1 for p, _ in inputs}}
    behind = {
        p: {"committed": committed["offsets"].get(p), "end": end}
        for p, end in committed["input_ends"].items()
        if committed["offsets"].get(p) != end and end > 0
    }
    done = next((ev for ev in final if ev["ev"] == "out_done"), {"unfinished": ["all"]})
    events = [ev for evs in (transforms or {}).values() for ev in evs]
    return {
        "counts": {
            "txn_missing": len(missing),
            "txn_duplicates": sum(n - 1 for n in copies.values()),
            "txn_mismatch": len(mismatch),
            "txn_input_uncommitted": len(behind),
        },
        "complete": not done.get("unfinished"),
        "figures": {
            "input_records": len(inputs),
            "output_committed": len(outputs),
            "transactions_committed": sum(ev["ev"] == "txn_commit" for ev in events),
            "errors_by_stage": _count(
                f"{ev['stage']}:{ev['error']}" for ev in events if ev["ev"] == "txn_err"
            ),
            "restarts": sum(ev["ev"] == "txn_restart" for ev in events),
            "stuck_calls": sum(ev["ev"] == "txn_stuck" for ev in events),
        },
        "examples": {
            "txn_missing": [f"{p}:{o}" for p, o in missing[:20]],
            "txn_duplicates": dict(list(duplicates.items())[:20]),
            "txn_mismatch": mismatch[:20],
            "txn_input_uncommitted": behind,
        },
    }


def _source(src: str) -> tuple[int, int] | None:
    partition, _, offset = src.partition(":")
    try:
        return int(partition), int(offset)
    except ValueError:
        return None


def _count(items: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for item in items:
        counts[str(item)] += 1
    return dict(sorted(counts.items()))


def _classify_unacked(where, acks, errors, unknown) -> dict[str, list]:
    allowed, disallowed = [], []
    for value in where:
        if value in acks:
            continue
        error = errors.get(value)
        if value in unknown or (
            error is not None and not error.get("local") and error["error"] not in DEFINITE_FAILURES
        ):
            allowed.append(value)  # ambiguous: the write may have happened
        else:
            reason = "never sent" if error is None else f"definite failure {error['error']}"
            disallowed.append({"value": value, "reason": reason})
    return {"allowed": allowed, "disallowed": disallowed}


def order_violations(records: list[dict]) -> list[dict]:
    """Per (partition, key, producer), the producer's sequence numbers must rise with offsets."""
    last: dict[tuple[int, str, str], tuple[int, int]] = {}
    violations = []
    for r in sorted(records, key=lambda r: (r["partition"], r["offset"])):
        name, seq = producer_name(r["value"])
        slot = (r["partition"], r["key"], name)
        if slot in last and seq <= last[slot][0]:
            violations.append({"partition": r["partition"], "key": r["key"], "value": r["value"],
                               "offset": r["offset"], "after_seq": last[slot][0],
                               "after_offset": last[slot][1]})  # fmt: skip
        last[slot] = (seq, r["offset"])
    return violations


def commit_regressions(consumers: dict[str, list[dict]], final: list[dict]) -> list[dict]:
    commits = sorted(
        (ev["t"], int(p), o, name)
        for name, events in consumers.items() for ev in events if ev["ev"] == "commit"
        for p, o in ev["offsets"].items()
    )  # fmt: skip
    highest: dict[int, tuple[int, str]] = {}
    regressions = []
    for t, partition, offset, name in commits:
        if partition in highest and offset < highest[partition][0]:
            best, best_by = highest[partition]
            regressions.append({"partition": partition, "offset": offset, "by": name, "t": t,
                                "after": best, "after_by": best_by})  # fmt: skip
        if partition not in highest or offset >= highest[partition][0]:
            highest[partition] = (offset, name)
    for ev in final:
        if ev["ev"] != "committed":
            continue
        for p, offset in ev["offsets"].items():
            committed = highest.get(int(p))
            if committed is not None and offset < committed[0]:
                regressions.append({"partition": int(p), "offset": offset, "by": "final",
                                    "after": committed[0], "after_by": committed[1]})  # fmt: skip
    return regressions


def consumer_stalls(reads, acks, last_heal: float, bound: float) -> list[dict]:
    """After `last_heal`: per partition, the longest time with acknowledged records waiting that
    the group did not read anything of that partition; those over `bound`."""
    read_times: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for _, ev in reads:
        read_times[ev["partition"]].append((ev["t"], ev["offset"]))
    ack_times: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for ev in acks.values():
        if ev["offset"] is not None:  # an idempotent retry the broker reported as a duplicate
            ack_times[ev["partition"]].append((ev["t"], ev["offset"]))
    stalls = []
    for partition, acked in ack_times.items():
        acked.sort()
        times = [t for t, _ in acked]
        highest, best = [], -1  # highest acknowledged offset up to each ack time
        for _, offset in acked:
            best = max(best, offset)
            highest.append(best)
        points = sorted(read_times.get(partition, []))
        progress = [(t, o) for t, o in points if t >= last_heal]
        read_before = max((o for t, o in points if t < last_heal), default=-1)
        edges = [(last_heal, read_before), *progress]
        ends = [t for t, _ in edges[1:]] + [times[-1]]
        reached = -1
        for (t0, o0), t1 in zip(edges, ends, strict=True):
            reached = max(reached, o0)
            index = bisect.bisect_right(times, t1) - 1
            waiting = index >= 0 and highest[index] > reached
            if waiting and t1 - t0 > bound:
                stalls.append({"partition": partition, "from": t0, "seconds": round(t1 - t0, 2)})
    return stalls


def recovery_times(faults: list[dict], acks: dict[str, dict]) -> list[dict]:
    """Per fault: seconds from its start (and from its heal) to the first acknowledged write
    that was sent after that moment."""
    by_sent = sorted((ev["sent"], ev["t"]) for ev in acks.values())
    out = []
    for fault in faults:
        entry = dict(fault)
        if fault.get("skipped"):
            out.append(entry)
            continue
        for label, moment in (
            ("recover_s", fault.get("start")),
            ("after_heal_s", fault.get("heal")),
        ):
            if moment is None:
                continue
            first = min((t for sent, t in by_sent if sent >= moment), default=None)
            entry[label] = None if first is None else round(first - moment, 3)
        out.append(entry)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos.checker")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--stall-bound", type=float, default=30.0, help="seconds")
    parser.add_argument("--plot", action="store_true", help="also (re)draw plot.png")
    args = parser.parse_args(argv)
    if not (args.run_dir / "logs").is_dir():
        print(f"chaos.checker: {args.run_dir} is not a chaos run directory", file=sys.stderr)
        return 2
    verdict = check(args.run_dir, args.stall_bound)
    (args.run_dir / "verdict.json").write_text(json.dumps(verdict, indent=2) + "\n")
    if args.plot:
        from chaos.plot import plot_run

        plot_run(args.run_dir)
    print(summary(verdict))
    return 0 if verdict["ok"] else 1


def summary(verdict: dict[str, Any]) -> str:
    keys = [*MUST_BE_ZERO, *(k for k in (*TXN_MUST_BE_ZERO, *SHARE_MUST_BE_ZERO) if k in verdict)]
    figures = verdict["figures"]
    lines = [
        f"verdict: {'OK' if verdict['ok'] else 'FAILED'}",
        "  " + ", ".join(f"{k}={verdict[k]}" for k in keys),
        f"  acked={figures['acked']} failed={figures['failed']} unknown={figures['unknown']}"
        f" in_log={figures['in_log']} read={figures['read_by_consumers']}"
        f" (distinct {figures['distinct_read']})",
        f"  resent by a new producer epoch: copies={figures['resent_copies']}"
        f" out_of_order={figures['resent_out_of_order']}",
    ]
    if "tiered" in verdict:
        lines.append("  tiered: " + json.dumps({k: v for k, v in verdict["tiered"].items()
                                                 if k != "local_start"}))  # fmt: skip
    if "txn_figures" in verdict:
        lines.append("  transform: " + json.dumps(verdict["txn_figures"]))
    if "share_figures" in verdict:
        lines.append("  share group: " + json.dumps(verdict["share_figures"]))
    for fault in verdict["faults"]:
        what = fault.get("skipped") or f"node {fault.get('node', '-')}"
        lines.append(f"  {fault['kind']:<10} {what}: recover {_seconds(fault.get('recover_s'))},"
                     f" after heal {_seconds(fault.get('after_heal_s'))}")  # fmt: skip
    return "\n".join(lines)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value}s"


if __name__ == "__main__":
    sys.exit(main())
