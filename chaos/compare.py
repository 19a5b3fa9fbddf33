"""Side by side: label each finding of a kafkalite run and an Apache Kafka run of the same
schedule "kafkalite only", "kafka only" or "both" (`python -m chaos.compare RUN_A RUN_B`).
Writes comparison.json next to the runs (in the first run's parent directory)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from chaos.checker import MUST_BE_ZERO, TXN_MUST_BE_ZERO


def compare(kafkalite: dict, kafka: dict) -> dict:
    findings = {}
    for key in (*MUST_BE_ZERO, *TXN_MUST_BE_ZERO):
        ours, theirs = kafkalite.get(key, 0), kafka.get(key, 0)
        if ours and theirs:
            label = "both"
        elif ours:
            label = "kafkalite only"
        elif theirs:
            label = "kafka only"
        else:
            continue
        findings[key] = {"label": label, "kafkalite": ours, "kafka": theirs}
    recover = {
        name: [(f["kind"], f.get("recover_s")) for f in verdict.get("faults", [])]
        for name, verdict in (("kafkalite", kafkalite), ("kafka", kafka))
    }
    figures = {"kafkalite": kafkalite.get("figures"), "kafka": kafka.get("figures")}
    return {"findings": findings, "recover_s": recover, "figures": figures}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos.compare")
    parser.add_argument("kafkalite_run", type=Path)
    parser.add_argument("kafka_run", type=Path)
    args = parser.parse_args(argv)
    verdicts = [json.loads((run / "verdict.json").read_text()) for run in
                (args.kafkalite_run, args.kafka_run)]  # fmt: skip
    result = compare(*verdicts)
    out = args.kafkalite_run.parent / f"comparison-{args.kafkalite_run.name}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["findings"] or "no findings on either side"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
