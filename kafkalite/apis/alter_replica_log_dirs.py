"""AlterReplicaLogDirs (key 34), versions 1-2 (`kafka-reassign-partitions --reassignment-json-file`
with log dirs; Kafka 4 removed v0).

Moves each named partition to the named directory of `log.dirs` (compared as absolute paths),
as Kafka's ReplicaManager.alterReplicaLogDirs answers: a directory not in `log.dirs` is
LOG_DIR_NOT_FOUND, a partition this broker does not host REPLICA_NOT_AVAILABLE, a failed copy
KAFKA_STORAGE_ERROR. The move itself is storage/log_dirs.py's `move_log` and completes before
the answer (Kafka's completes in the background).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation
from kafkalite.storage.errors import StorageError
from kafkalite.storage.log_manager import LogManager


def _move(ctx: RequestContext, destination: LogManager | None, topic: str, index: int) -> ErrorCode:
    if destination is None:
        return ErrorCode.log_dir_not_found
    replicas = ctx.broker.replica_manager
    partition = replicas.partition(topic, index)
    if partition is None:
        return ErrorCode.replica_not_available
    # The partition's delay store lives in its directory: closed for the copy, reopened
    # where the partition is after it (moved or not).
    had_store = replicas.delayed_delivery.close_store((topic, index))
    try:
        partition.log = replicas.log_manager.move_log(
            (topic, index), destination, ctx.broker.clock_ms()
        )
    except StorageError as exc:
        return exc.error_code
    finally:
        if had_store:
            replicas.delayed_delivery.open_store(partition, ctx.broker.clock_ms())
    return ErrorCode.none


def handle(ctx: RequestContext, request: Any) -> Any:
    schema = ctx.schema
    log_dirs = ctx.broker.replica_manager.log_manager
    allowed = ctx.authorized_cluster(AclOperation.ALTER)
    results = []
    for wanted in request.dirs:
        destination = log_dirs.manager_for_dir(wanted.path)
        for topic in wanted.topics:
            partitions = tuple(
                make(
                    schema.AlterReplicaLogDirPartitionResult,
                    partition_index=index,
                    error_code=_move(ctx, destination, topic.name, index)
                    if allowed
                    else ErrorCode.cluster_authorization_failed,
                )
                for index in topic.partitions
            )
            results.append(
                make(
                    schema.AlterReplicaLogDirTopicResult,
                    topic_name=topic.name,
                    partitions=partitions,
                )
            )
    return make(
        schema.AlterReplicaLogDirsResponse, throttle_time=NO_THROTTLE, results=tuple(results)
    )


API = ApiHandler(api_key=34, min_version=1, max_version=2, handle=handle)
