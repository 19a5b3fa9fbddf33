"""ShareAcknowledge (key 79), versions 1-2 (v2: RENEW, KIP-1222): acknowledgements within
the member's share session (epoch 0 is refused: a session is opened by ShareFetch; -1
closes it, releasing what the member still holds there). Answered once the new states are
committed in `__share_group_state`."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.apis.share_acks import (
    acknowledge,
    batches_of,
    leader_of,
    lock_timeout,
    redirect_endpoints,
)
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation, ResourceType
from kafkalite.share.share_session import FINAL_EPOCH, INITIAL_EPOCH


def _response(ctx: RequestContext, error: ErrorCode, responses: tuple[Any, ...] = ()) -> Any:
    answers = [p for topic in responses for p in topic.partitions]
    return make(
        ctx.schema.ShareAcknowledgeResponse,
        throttle_time=NO_THROTTLE,
        error_code=error,
        acquisition_lock_timeout=lock_timeout(ctx),
        responses=responses,
        node_endpoints=redirect_endpoints(ctx, answers),
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    service = ctx.broker.share_groups
    if service is None:
        return _response(ctx, ErrorCode.unsupported_version)
    if not request.group_id or not request.member_id:
        return _response(ctx, ErrorCode.invalid_request)
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _response(ctx, ErrorCode.group_authorization_failed)
    manager = service.partitions
    key = (request.group_id, request.member_id)
    epoch = request.share_session_epoch
    if epoch == INITIAL_EPOCH:
        return _response(ctx, ErrorCode.invalid_share_session_epoch)
    if epoch == FINAL_EPOCH:
        session = manager.sessions.close(key)
        error = ErrorCode.none if session is not None else ErrorCode.share_session_not_found
    else:
        error, session = manager.sessions.advance(key, epoch)
    if session is None:
        return _response(ctx, error)
    acks = {
        (t.topic_id, p.partition_index): batches_of(p) for t in request.topics for p in t.partitions
    }
    errors = await acknowledge(ctx, request.group_id, request.member_id, acks)
    if epoch == FINAL_EPOCH:
        for held in manager.release_member(request.group_id, request.member_id, session.partitions):
            await manager.persist(held)
    by_topic: dict = defaultdict(list)
    for (topic_id, index), ack_error in sorted(errors.items()):
        by_topic[topic_id].append(
            make(
                ctx.schema.PartitionData,
                partition_index=index,
                error_code=ack_error,
                current_leader=leader_of(ctx, topic_id, index),
            )
        )
    responses = tuple(
        make(ctx.schema.ShareAcknowledgeTopicResponse, topic_id=topic_id, partitions=tuple(parts))
        for topic_id, parts in by_topic.items()
    )
    return _response(ctx, ErrorCode.none, responses)


API = ApiHandler(api_key=79, min_version=1, max_version=2, handle=handle, is_async=True)
