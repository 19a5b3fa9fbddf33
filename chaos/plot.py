"""plot.png of a run: acknowledged writes per second and produce latency (p50, p99) over time,
consumer reads per second, with each fault marked as a shaded span."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from chaos.checker import read_jsonl

COLORS = {"kill": "red", "pause": "orange", "term": "purple", "rolling": "purple",
          "zookeeper": "brown", "drop": "blue", "latency": "cyan", "blackhole": "navy",
          "partition": "green", "disk": "gray", "s3": "olive"}  # fmt: skip


def plot_run(run_dir: Path, title: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    acks = [ev for p in sorted((run_dir / "logs").glob("producer-*.jsonl"))
            for ev in read_jsonl(p) if ev["ev"] == "ack"]  # fmt: skip
    reads = [ev for p in sorted((run_dir / "logs").glob("consumer-*.jsonl"))
             for ev in read_jsonl(p) if ev["ev"] == "read"]  # fmt: skip
    faults = read_jsonl(run_dir / "faults.jsonl") if (run_dir / "faults.jsonl").exists() else []
    origin = min([ev["sent"] for ev in acks] + [ev["t"] for ev in reads] or [0.0])
    per_second: dict[int, list[float]] = defaultdict(list)
    for ev in acks:
        per_second[int(ev["t"] - origin)].append(ev["t"] - ev["sent"])
    read_rate: dict[int, int] = defaultdict(int)
    for ev in reads:
        read_rate[int(ev["t"] - origin)] += 1
    last = max([*per_second, *read_rate, 0])
    seconds = list(range(last + 1))

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(12, 7), sharex=True)
    top.plot(seconds, [len(per_second.get(s, [])) for s in seconds], label="acked writes/s")
    top.plot(seconds, [read_rate.get(s, 0) for s in seconds], label="consumer reads/s", alpha=0.7)
    top.set_ylabel("records/s")
    bottom.plot(seconds, [_pct(per_second.get(s), 50) for s in seconds], label="p50")
    bottom.plot(seconds, [_pct(per_second.get(s), 99) for s in seconds], label="p99")
    bottom.set_ylabel("produce latency (s)")
    bottom.set_yscale("log")
    bottom.set_xlabel("seconds since the workload started")
    for axis in (top, bottom):
        for fault in faults:
            if fault.get("skipped"):
                continue
            start, heal = (
                fault["start"] - origin,
                max(fault["heal"] - origin, fault["start"] - origin + 0.3),
            )
            axis.axvspan(start, heal, color=COLORS.get(fault["kind"], "gray"), alpha=0.2)
            if axis is top:
                axis.text(start, 0.98, f"{fault['kind']} {fault.get('node', '')}", rotation=90,
                          va="top", fontsize=7, transform=axis.get_xaxis_transform())  # fmt: skip
        axis.legend(loc="upper right")
        axis.grid(alpha=0.3)
    top.set_title(title or run_dir.name)
    fig.tight_layout()
    path = run_dir / "plot.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _pct(values: list[float] | None, pct: int) -> Any:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * pct / 100))]
