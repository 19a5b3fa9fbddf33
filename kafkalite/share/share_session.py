"""Share sessions (KIP-932; Kafka's ShareSessionCache), sans-IO.

A member opens its session with a ShareFetch at epoch 0 (listing its partitions), then
numbers each ShareFetch/ShareAcknowledge with the next epoch; -1 closes it. A session keeps
the partitions the member fetches from, so an incremental fetch names only what changed
(new partitions, acknowledgements; `forgotten_topics_data` drops partitions). At most
`group.share.max.share.sessions` are open on a broker. A session ends with the connection
that opened it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
SessionKey = tuple[str, str]  # (group id, member id)
TopicIdPartition = tuple[uuid.UUID, int]


def next_epoch(epoch: int) -> int:
    """Kafka's ShareRequestMetadata.nextEpoch: wraps past Integer.MAX_VALUE to 1."""
    return 1 if epoch >= 2**31 - 1 else epoch + 1


@dataclass(slots=True)
class ShareSession:
    key: SessionKey
    epoch: int  # the epoch the next request must carry
    connection_id: str = ""  # the session ends with its connection
    partitions: dict[TopicIdPartition, None] = field(default_factory=dict)  # ordered set


@dataclass(eq=False)
class ShareSessionCache:
    max_sessions: int = 2000  # group.share.max.share.sessions
    sessions: dict[SessionKey, ShareSession] = field(default_factory=dict)

    def open(
        self, key: SessionKey, partitions: Iterable[TopicIdPartition], connection_id: str = ""
    ) -> tuple[ErrorCode, ShareSession | None]:
        """A request at epoch 0: a new session (replacing the member's old one)."""
        if key not in self.sessions and len(self.sessions) >= self.max_sessions:
            return ErrorCode.share_session_limit_reached, None
        session = ShareSession(key, next_epoch(INITIAL_EPOCH), connection_id)
        self.sessions[key] = session
        session.partitions.update(dict.fromkeys(partitions))
        return ErrorCode.none, session

    def advance(
        self,
        key: SessionKey,
        epoch: int,
        added: Iterable[TopicIdPartition] = (),
        forgotten: Iterable[TopicIdPartition] = (),
    ) -> tuple[ErrorCode, ShareSession | None]:
        """A request within a session: SHARE_SESSION_NOT_FOUND without one,
        INVALID_SHARE_SESSION_EPOCH when `epoch` is not the next one."""
        session = self.sessions.get(key)
        if session is None:
            return ErrorCode.share_session_not_found, None
        if epoch != session.epoch:
            return ErrorCode.invalid_share_session_epoch, None
        session.epoch = next_epoch(epoch)
        session.partitions.update(dict.fromkeys(added))
        for tp in forgotten:
            session.partitions.pop(tp, None)
        return ErrorCode.none, session

    def close(self, key: SessionKey) -> ShareSession | None:
        return self.sessions.pop(key, None)

    def close_connection(self, connection_id: str) -> list[ShareSession]:
        """The connection closed: its sessions end (Kafka's ShareSessionCache does the same
        when the client disconnects)."""
        closed = [s for s in self.sessions.values() if s.connection_id == connection_id]
        for session in closed:
            del self.sessions[session.key]
        return closed
