"""A tiered run (the `s3` fault kind, or `--tiered`): a real S3 server (gofakes3,
kafkalite/s3_server.py) beside the kafkalite target, the workload topic tiered to it with
small segments and no local retention to speak of, so that by the end most records are only
in the store and the final drain reads them back through the broker.

`figures` shows the run did not pass vacuously: each partition's local log start (the
lowest base offset any replica still has on disk: below it the records are only remote), the
`.log` objects in the bucket and when they were written (uploads after each `s3` fault
healed), and the checker counts the drained records below the local start."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kafkalite.s3_server import S3Server

# Segments roll every 3 s (segment.ms); segment.bytes stays at Kafka's minimum, 1 MiB, above
# the largest batch a producer sends after an outage (a batch larger than a segment is
# refused: RECORD_LIST_TOO_LARGE, seen with 16 KiB segments on 3 brokers).
# local.retention.bytes 0 keeps only the active segment locally once the others are uploaded.
TOPIC_CONFIGS = {
    "remote.storage.enable": "true",
    "segment.bytes": str(1 << 20),
    "segment.ms": "3000",
    "local.retention.bytes": "0",
}
TASK_INTERVAL_MS = 200
FIGURES_FILE = "tiered.json"
TOPIC_ID_SUFFIX = "-" + "x" * 22  # "-<topic id>": Kafka's Uuid string is 22 characters


def start_store(run_dir: Path) -> S3Server:
    """gofakes3 on a free port, its buckets under the run directory (kept for inspection)."""
    return S3Server(run_dir / "s3").start()


def broker_overrides(store: S3Server) -> dict[str, str]:
    return {
        **store.broker_properties(TASK_INTERVAL_MS),
        "log.retention.check.interval.ms": "500",  # local segments deleted soon after upload
    }


def figures(store: S3Server, data_dirs: list[Path], topic: str, partitions: int) -> dict:
    """Per partition: the local log start and the `.log` objects uploaded (base offset and
    write time), read after the drain while the store still runs."""
    uploads = _log_objects(store, topic)
    result: dict[str, Any] = {"partitions": {}}
    for index in range(partitions):
        starts = [_local_start(d / f"{topic}-{index}") for d in data_dirs]
        known = [start for start in starts if start is not None]
        result["partitions"][str(index)] = {
            "local_start": min(known) if known else None,
            "uploads": sorted(uploads.get(index, [])),  # [base offset, unix time]
        }
    return result


def write(run_dir: Path, tier: dict) -> None:
    (run_dir / FIGURES_FILE).write_text(json.dumps(tier, indent=2) + "\n")


def _local_start(partition_dir: Path) -> int | None:
    bases = [int(path.stem) for path in partition_dir.glob("*.log") if path.stem.isdigit()]
    return min(bases) if bases else None


def _log_objects(store: S3Server, topic: str) -> dict[int, list[tuple[int, float]]]:
    """The `.log` objects of `topic` by partition (key layout: kafkalite/storage/remote/keys.py,
    `<topic>-<topic id>/<partition>/<20-digit base offset>-<segment id>.log`)."""
    import boto3  # the broker's S3 client library
    from botocore.config import Config

    settings = store.broker_properties()
    client = boto3.client(
        "s3",
        endpoint_url=store.endpoint_url,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}),
        aws_access_key_id=settings["rsm.config.storage.aws.access.key.id"],
        aws_secret_access_key=settings["rsm.config.storage.aws.secret.access.key"],
    )
    found: dict[int, list[tuple[int, float]]] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=store.bucket):
        for item in page.get("Contents", ()):
            parts = item["Key"].split("/")
            if len(parts) != 3 or not parts[2].endswith(".log"):
                continue
            if parts[0][: -len(TOPIC_ID_SUFFIX)] != topic:  # the topic id may hold a "-"
                continue
            base = int(parts[2].split("-", 1)[0])
            found.setdefault(int(parts[1]), []).append((base, item["LastModified"].timestamp()))
    return found


def judge(tier: dict, final: list[dict], faults: list[dict]) -> dict:
    """The tier figures the checker adds to a tiered run's verdict, and whether it used the
    store for real: records drained from below the local start (read from the store through
    the broker), and uploads after the last `s3` fault healed."""
    below = 0
    for record in final:
        if record.get("ev") != "record":
            continue
        start = tier["partitions"].get(str(record["partition"]), {}).get("local_start")
        if start is not None and record["offset"] < start:
            below += 1
    healed = [f["heal"] for f in faults if f["kind"] == "s3" and not f.get("skipped")]
    uploads = [t for p in tier["partitions"].values() for _, t in p["uploads"]]
    after_heal = sum(1 for t in uploads if healed and t > max(healed))
    used = below > 0 and (not healed or after_heal > 0)
    return {
        "read_below_local_start": below,
        "remote_segments": len(uploads),
        "uploads_after_last_s3_heal": after_heal if healed else None,
        "s3_faults_applied": len(healed),
        "local_start": {p: v["local_start"] for p, v in tier["partitions"].items()},
        "used": used,
    }
