"""DescribeLogDirs (key 35), versions 1-5 (`kafka-log-dirs --describe`; Kafka 4 removed v0).

One result per directory of `log.dirs` (its absolute path, as Kafka reports it): the requested
partitions it holds (all of them when `topics` is null), each with its size in bytes and its
offset lag, max(high watermark - log end offset, 0) as Kafka's getLogEndOffsetLag computes it
for a current replica (0 on a single node, where the leader's log end is the watermark once
acknowledged), and from v4 the file system's total and usable bytes. No future replicas: a
move (AlterReplicaLogDirs) completes within its request. No directory is cordoned (v5).
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation
from kafkalite.storage.log_manager import LogManager


def _disk_space(path: Path) -> tuple[int, int]:
    """(total, usable) bytes of the file system holding `path`, -1 each when unknown."""
    try:
        stats = os.statvfs(path)
    except OSError:
        return -1, -1
    return stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize


def _wanted(request: Any) -> dict[str, set[int]] | None:
    if request.topics is None:
        return None
    wanted: dict[str, set[int]] = defaultdict(set)
    for topic in request.topics:
        wanted[topic.topic].update(topic.partitions)
    return wanted


def _result(ctx: RequestContext, manager: LogManager, wanted: dict[str, set[int]] | None) -> Any:
    schema = ctx.schema
    replicas = ctx.broker.replica_manager
    by_topic: dict[str, list[Any]] = defaultdict(list)
    for (topic, index), log in sorted(manager.logs.items()):
        if wanted is not None and index not in wanted.get(topic, ()):
            continue
        partition = replicas.partition(topic, index)
        lag = 0 if partition is None else max(partition.high_watermark - log.log_end_offset, 0)
        by_topic[topic].append(
            make(
                schema.DescribeLogDirsPartition,
                partition_index=index,
                partition_size=log.size_in_bytes,
                offset_lag=lag,
                is_future_key=False,
            )
        )
    topics = tuple(
        make(schema.DescribeLogDirsTopic, name=name, partitions=tuple(partitions))
        for name, partitions in by_topic.items()
    )
    total, usable = _disk_space(manager.log_dir)
    return make(
        schema.DescribeLogDirsResult,
        error_code=ErrorCode.none,
        log_dir=str(manager.log_dir.absolute()),
        topics=topics,
        total_bytes=total,
        usable_bytes=usable,
        is_cordoned=False,
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    wanted = _wanted(request)
    managers = ctx.broker.replica_manager.log_manager.managers
    if not ctx.authorized_cluster(AclOperation.DESCRIBE):
        return make(
            ctx.schema.DescribeLogDirsResponse,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.cluster_authorization_failed,
            results=(),
        )
    return make(
        ctx.schema.DescribeLogDirsResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        results=tuple(_result(ctx, manager, wanted) for manager in managers),
    )


API = ApiHandler(api_key=35, min_version=1, max_version=5, handle=handle)
