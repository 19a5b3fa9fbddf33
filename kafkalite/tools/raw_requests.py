"""Requests confluent-kafka's AdminClient does not offer (OffsetDelete, DescribeLogDirs,
ListOffsets with the tiered storage specials librdkafka refuses, DescribeClientQuotas and
AlterClientQuotas), sent
as kio entities on kafkalite's own client connection (kafkalite/broker/broker_connection.py).

That client speaks the plain protocol only: these commands need a PLAINTEXT listener (the
other commands take TLS and SASL from librdkafka through `-X`).
"""

from __future__ import annotations

from typing import Any

import trio
from kio.schema.alter_client_quotas.v1 import request as alter_quotas
from kio.schema.describe_client_quotas.v1 import request as describe_quotas
from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.list_offsets.v9.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.offset_delete.v0.request import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import f64, i8, i32, i64

from kafkalite.broker.broker_connection import BrokerConnection, ConnectionLost
from kafkalite.tools.common import Connection, ToolError, UsageError

CLIENT_ID = "kafkalite-cli"


def require_plaintext(conn: Connection, what: str) -> None:
    protocol = conn.client.get("security.protocol", "plaintext").lower()
    if protocol != "plaintext":
        raise UsageError(
            f"{what} needs a PLAINTEXT listener: confluent-kafka does not offer it, and "
            f"kafkalite's own client does not speak {protocol.upper()}"
        )


def ask(conn: Connection, address: str, request: Any) -> Any:
    """Send one request to `address` (host:port) and return its response."""
    host, _, port = address.rpartition(":")

    async def exchange() -> Any:
        with trio.fail_after(conn.timeout):
            connection = await BrokerConnection.open(host, int(port), CLIENT_ID)
            try:
                return await connection.request(request)
            finally:
                await connection.aclose()

    try:
        return trio.run(exchange)
    except ConnectionLost as exc:
        raise ToolError(f"{address}: {exc}") from None
    except trio.TooSlowError:
        raise ToolError(f"{address} did not answer within {conn.timeout:g}s") from None


def group_coordinator(conn: Connection, address: str, group: str) -> str:
    """host:port of `group`'s coordinator, asked of the broker at `address`."""
    answer = ask(conn, address, FindCoordinatorRequest(key_type=0, coordinator_keys=(group,)))
    (found,) = answer.coordinators
    if found.error_code != ErrorCode.none:
        raise ToolError(
            f"cannot find the coordinator of group {group}: {found.error_code.name.upper()}"
        )
    return f"{found.host}:{found.port}"


def delete_offsets(
    conn: Connection, address: str, group: str, partitions: dict[str, list[int]]
) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
    """OffsetDelete at the group's coordinator: the group's error and each partition's."""
    request = OffsetDeleteRequest(
        group_id=group,
        topics=tuple(
            OffsetDeleteRequestTopic(
                name=topic,
                partitions=tuple(OffsetDeleteRequestPartition(partition_index=p) for p in parts),
            )
            for topic, parts in partitions.items()
        ),
    )
    answer = ask(conn, group_coordinator(conn, address, group), request)
    errors = {
        (topic.name, partition.partition_index): partition.error_code
        for topic in answer.topics
        for partition in topic.partitions
    }
    return answer.error_code, errors


def log_dirs(conn: Connection, address: str) -> list[Any]:
    """DescribeLogDirs of every partition the broker at `address` holds."""
    answer = ask(conn, address, DescribeLogDirsRequest(topics=None))
    if answer.error_code != ErrorCode.none:
        raise ToolError(f"{address}: DescribeLogDirs: {answer.error_code.name.upper()}")
    return list(answer.results)


def list_offsets(
    conn: Connection, address: str, topic: str, partitions: list[int], timestamp: int
) -> dict[int, int]:
    """ListOffsets (v9: the tiered specials) of `partitions` at the broker at `address`, their
    leader: offset by partition (-1 where it answers none or an error)."""
    request = ListOffsetsRequest(
        replica_id=BrokerId(-1),
        isolation_level=i8(0),
        topics=(
            ListOffsetsTopic(
                name=TopicName(topic),
                partitions=tuple(
                    ListOffsetsPartition(
                        partition_index=i32(p),
                        current_leader_epoch=i32(-1),
                        timestamp=i64(timestamp),
                    )
                    for p in partitions
                ),
            ),
        ),
    )
    answer = ask(conn, address, request)
    return {
        p.partition_index: p.offset if p.error_code == ErrorCode.none else -1
        for t in answer.topics
        for p in t.partitions
    }


QuotaEntity = tuple[tuple[str, str | None], ...]  # (entity type, name; None: the default)


def describe_client_quotas(
    conn: Connection, address: str, components: list[tuple[str, int, str | None]], strict: bool
) -> list[tuple[QuotaEntity, dict[str, float]]]:
    """DescribeClientQuotas: each matching entity and its quotas."""
    request = describe_quotas.DescribeClientQuotasRequest(
        components=tuple(
            describe_quotas.ComponentData(entity_type=kind, match_type=i8(match_type), match=match)
            for kind, match_type, match in components
        ),
        strict=strict,
    )
    answer = ask(conn, address, request)
    if answer.error_code != ErrorCode.none:
        raise ToolError(
            f"cannot list quotas: {answer.error_code.name.upper()}: {answer.error_message}"
        )
    return [
        (
            tuple((e.entity_type, e.entity_name) for e in entry.entity),
            {v.key: float(v.value) for v in entry.values},
        )
        for entry in answer.entries or ()
    ]


def alter_client_quotas(
    conn: Connection,
    address: str,
    entity: QuotaEntity,
    ops: dict[str, float | None],
    validate_only: bool,
) -> tuple[ErrorCode, str | None]:
    """AlterClientQuotas of one entity (a None value removes the key): its error."""
    request = alter_quotas.AlterClientQuotasRequest(
        entries=(
            alter_quotas.EntryData(
                entity=tuple(
                    alter_quotas.EntityData(entity_type=kind, entity_name=name)
                    for kind, name in entity
                ),
                ops=tuple(
                    alter_quotas.OpData(key=key, value=f64(value or 0.0), remove=value is None)
                    for key, value in ops.items()
                ),
            ),
        ),
        validate_only=validate_only,
    )
    (entry,) = ask(conn, address, request).entries
    return entry.error_code, entry.error_message
