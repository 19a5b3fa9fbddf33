"""KIP-951: a NOT_LEADER_OR_FOLLOWER (or FENCED_LEADER_EPOCH) answer names the partition's
current leader and epoch, and the response lists that leader's endpoint, so a client moves
to it without a Metadata round trip. Produce v10+ and Fetch v12+ carry the leader (Fetch
lists endpoints from v16)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import RequestContext
from kafkalite.protocol.entities import make

REDIRECTING_ERRORS = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch})


def current_leader(ctx: RequestContext, topic: str, partition: int, error: ErrorCode) -> Any:
    """The `current_leader` value for a partition's answer ({} when there is none to give:
    `make` then leaves the field at its default)."""
    if error not in REDIRECTING_ERRORS or not hasattr(ctx.schema, "LeaderIdAndEpoch"):
        return {}
    state = ctx.broker.metadata.partition_state(topic, partition)
    if state is None or state.leader < 0:
        return {}
    leader = make(
        ctx.schema.LeaderIdAndEpoch, leader_id=state.leader, leader_epoch=state.leader_epoch
    )
    return {"current_leader": leader}


def node_endpoints(ctx: RequestContext, answers: list[Any]) -> tuple[Any, ...]:
    """Endpoints of the leaders the answers name, by id."""
    if not hasattr(ctx.schema, "NodeEndpoint"):
        return ()
    ids = {
        answer.current_leader.leader_id
        for answer in answers
        if getattr(answer, "current_leader", None) is not None
        and answer.current_leader.leader_id >= 0
    }
    endpoints = []
    for broker_id in sorted(ids):
        endpoint = ctx.broker.endpoint_of(broker_id, ctx.listener)
        info = ctx.broker.metadata.broker(broker_id)
        if endpoint is None or info is None:
            continue
        endpoints.append(
            make(
                ctx.schema.NodeEndpoint,
                node_id=broker_id,
                host=endpoint.host,
                port=endpoint.port,
                rack=info.rack,
            )
        )
    return tuple(endpoints)
