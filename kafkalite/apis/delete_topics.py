"""DeleteTopics (key 20), versions 1-6.

Topics by name (v1-v5 `topic_names`) or, from v6, by name or topic id, resolved as Kafka's
ControllerApis.deleteTopics does: duplicates and malformed entries are refused, unknown names
answer UNKNOWN_TOPIC_OR_PARTITION and unknown ids UNKNOWN_TOPIC_ID. With
`delete.topic.enable=false` every entry answers TOPIC_DELETION_DISABLED (INVALID_REQUEST
before v3, which lacks that code); a timeout of 0 or less answers REQUEST_TIMED_OUT, as
Kafka's controller does.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from kafkalite.apis.base import ApiHandler, RequestContext
from kafkalite.apis.quota_throttle import mutation_quota
from kafkalite.apis.topic_admin import DUPLICATE_NAME, deadline_passed
from kafkalite.broker.admin_manager import Outcome
from kafkalite.protocol.entities import NO_THROTTLE, make
from kafkalite.security.acl import AclOperation, ResourceType

# Kafka's ApiError(error) carries the error's default message.
UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."
UNKNOWN_TOPIC_ID_MESSAGE = "This server does not host this topic ID."

T = TypeVar("T")
log = logging.getLogger(__name__)


@dataclass
class _Deletion:
    """The request sorted the way Kafka sorts it: valid names, valid ids, early answers."""

    names: list[str] = field(default_factory=list)
    duplicate_names: list[str] = field(default_factory=list)
    ids: list[uuid.UUID] = field(default_factory=list)
    duplicate_ids: list[uuid.UUID] = field(default_factory=list)
    answers: list[tuple[str | None, uuid.UUID | None, Outcome]] = field(default_factory=list)

    def answer(self, name: str | None, topic_id: uuid.UUID | None, outcome: Outcome) -> None:
        self.answers.append((name, topic_id, outcome))


DENIED = Outcome(ErrorCode.topic_authorization_failed)


def _requested(request: Any) -> Iterable[tuple[str | None, uuid.UUID | None]]:
    """(name, id) of every entry, whichever field this version uses."""
    for name in getattr(request, "topic_names", ()):
        yield name, None
    for state in getattr(request, "topics", ()):
        yield state.name, state.topic_id  # kio reads the zero UUID as None


def _add_once(item: T, once: list[T], repeated: list[T]) -> None:
    """Keep an entry in `once` until it is named again, then only in `repeated`."""
    if item in repeated:
        return
    if item in once:
        once.remove(item)
        repeated.append(item)
    else:
        once.append(item)


def _sort(request: Any) -> _Deletion:
    deletion = _Deletion()
    for name, topic_id in _requested(request):
        if name is None and topic_id is None:
            deletion.answer(
                None,
                None,
                Outcome(ErrorCode.invalid_request, "Neither topic name nor id were specified."),
            )
        elif name is not None and topic_id is not None:
            deletion.answer(
                name,
                topic_id,
                Outcome(
                    ErrorCode.invalid_request, "You may not specify both topic name and topic id."
                ),
            )
        elif name is not None:
            _add_once(name, deletion.names, deletion.duplicate_names)
        else:
            _add_once(topic_id, deletion.ids, deletion.duplicate_ids)  # type: ignore[misc]
    for name in deletion.duplicate_names:
        deletion.answer(name, None, DUPLICATE_NAME)
    for topic_id in deletion.duplicate_ids:
        deletion.answer(None, topic_id, Outcome(ErrorCode.invalid_request, "Duplicate topic id."))
    return deletion


def _resolve(ctx: RequestContext, deletion: _Deletion) -> dict[uuid.UUID, str]:
    """Topic id -> name of everything to delete; answers unknown names and ids."""
    metadata = ctx.broker.metadata  # the cluster's topics, not only those with a replica here
    to_delete: dict[uuid.UUID, str] = {}
    for topic_id in deletion.ids:
        topic = metadata.topic_by_id(topic_id)
        if topic is None:
            unknown = Outcome(ErrorCode.unknown_topic_id, UNKNOWN_TOPIC_ID_MESSAGE)
            deletion.answer(None, topic_id, unknown)
        elif not ctx.authorized(AclOperation.DELETE, ResourceType.TOPIC, topic.name):
            deletion.answer(None, topic_id, DENIED)
        else:
            to_delete[topic_id] = topic.name
    for name in deletion.names:
        topic = metadata.topics.get(name)
        if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            deletion.answer(name, None, DENIED)  # ControllerApis: DESCRIBE, then DELETE
        elif topic is None:
            unknown = Outcome(ErrorCode.unknown_topic_or_partition, UNKNOWN_TOPIC_MESSAGE)
            deletion.answer(name, None, unknown)
        elif topic.topic_id in to_delete or topic.topic_id in deletion.duplicate_ids:
            # Named twice, once by id and once by name: Kafka deletes neither.
            to_delete.pop(topic.topic_id, None)
            deletion.answer(
                name,
                topic.topic_id,
                Outcome(
                    ErrorCode.invalid_request,
                    "The provided topic name maps to an ID that was already supplied.",
                ),
            )
        elif not ctx.authorized(AclOperation.DELETE, ResourceType.TOPIC, name):
            deletion.answer(name, None, DENIED)
        else:
            to_delete[topic.topic_id] = name
    return to_delete


def _result(
    ctx: RequestContext, name: str | None, topic_id: uuid.UUID | None, outcome: Outcome
) -> Any:
    return make(
        ctx.schema.DeletableTopicResult,
        name=name,
        topic_id=topic_id,
        error_code=outcome.error,
        error_message=outcome.message,
    )


def _fail_all(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """Kafka fails the whole request, and its error response carries no message."""
    results = tuple(
        _result(ctx, name, topic_id, Outcome(error)) for name, topic_id in _requested(request)
    )
    return make(ctx.schema.DeleteTopicsResponse, throttle_time=NO_THROTTLE, responses=results)


def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.broker.config.bool("delete.topic.enable"):
        # Before v3 there is no TOPIC_DELETION_DISABLED.
        if ctx.api_version < 3:
            return _fail_all(ctx, request, ErrorCode.invalid_request)
        return _fail_all(ctx, request, ErrorCode.topic_deletion_disabled)
    if deadline_passed(request.timeout):
        return _fail_all(ctx, request, ErrorCode.request_timed_out)
    deletion = _sort(request)
    to_delete = _resolve(ctx, deletion)
    quota = mutation_quota(ctx, strict_since=5)
    for topic_id, name in to_delete.items():
        partitions = ctx.broker.metadata.topics[name].num_partitions
        outcome = quota.record(partitions) or ctx.broker.admin_manager.delete_topic(name)
        if outcome.ok:
            log.info("deleted topic %s (id %s)", name, topic_id)
        deletion.answer(name, topic_id, outcome)
    quota.throttle()
    results = tuple(_result(ctx, *answer) for answer in deletion.answers)
    return make(ctx.schema.DeleteTopicsResponse, throttle_time=NO_THROTTLE, responses=results)


API = ApiHandler(api_key=20, min_version=1, max_version=6, handle=handle)
