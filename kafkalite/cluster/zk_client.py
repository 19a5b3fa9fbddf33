"""The one module that talks to ZooKeeper: kazoo behind async methods for trio.

kazoo runs its own threads (connection and callbacks). Nothing here blocks trio: every request
goes out with kazoo's `*_async` call, and its completion, each watch firing and each session
state change come back through the trio token (`run_sync_soon`, thread-safe and non-blocking),
so trio code sees plain awaitables and memory channels. No other module imports kazoo.

- Requests: `create`, `get`, `exists`, `children`, `set` (conditional on a version), `delete`,
  `multi` (an atomic transaction of `CreateOp`/`CheckOp`/`SetDataOp`/`DeleteOp`), `ensure_path`.
- Watches: `get_watch`, `exists_watch`, `children_watch` also return a one-shot `ZkWatch`
  whose `wait()` gives the `WatchEvent`. kazoo drops every watch when the connection drops
  (it does not re-send them on reconnect), so `wait()` then raises `ConnectionLost`: read and
  watch again once connected.
- Session: `state` (CONNECTED, SUSPENDED: connection lost but the session may survive, LOST:
  the session expired, its ephemeral nodes are gone), `session_id`, `state_changes()` (a channel
  of every later change), `wait_connected()`. After LOST kazoo opens a new session by itself;
  ephemeral nodes are re-created by their owners (see kafka_zk.BrokerRegistration).
- Errors: kazoo's exceptions become `ZkError` subclasses (`NoNode`, `NodeExists`, `BadVersion`,
  `NotEmpty`, `ConnectionLost`, `SessionExpired`, ...) carrying the path, and for `multi` the
  index of the operation that failed.

A request cancelled in trio still completes in ZooKeeper (there is no way to take it back).
"""

from __future__ import annotations

import contextlib
import enum
import logging
import math
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import trio
from kazoo import exceptions as kz
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.interfaces import IAsyncResult
from kazoo.protocol.states import EventType, WatchedEvent

log = logging.getLogger(__name__)
ANY_VERSION = -1  # ZooKeeper's "match any version" for set/delete


class SessionState(enum.Enum):
    CONNECTED = "CONNECTED"
    SUSPENDED = "SUSPENDED"  # connection lost; the session may still be alive
    LOST = "LOST"  # session expired or closed: its ephemeral nodes and watches are gone


@dataclass(frozen=True, slots=True)
class ZnodeStat:
    version: int  # data version: the condition of set/delete/CheckOp
    cversion: int  # children version
    ephemeral_owner: int  # session id of an ephemeral node's owner, 0 if persistent
    czxid: int
    mzxid: int
    ctime_ms: int
    mtime_ms: int
    data_length: int
    num_children: int


@dataclass(frozen=True, slots=True)
class WatchEvent:
    kind: str  # "created", "deleted", "changed" or "child"
    path: str


# -- errors --------------------------------------------------------------------------------


class ZkError(Exception):
    def __init__(self, message: str, path: str | None = None, op_index: int | None = None):
        super().__init__(message)
        self.path = path
        self.op_index = op_index  # for multi: which operation failed


class NoNode(ZkError):
    pass


class NodeExists(ZkError):
    pass


class BadVersion(ZkError):
    """A conditional write or CheckOp saw another version: someone else wrote first."""


class NotEmpty(ZkError):
    pass


class NoChildrenForEphemerals(ZkError):
    pass


class ConnectionLost(ZkError):
    """The connection dropped (or was closed) before the answer: the outcome is unknown."""


class SessionExpired(ZkError):
    pass


class RolledBack(ZkError):
    """In a failed multi, an operation that was fine but undone with the failing one."""


_ERRORS: tuple[tuple[type[Exception], type[ZkError]], ...] = (
    (kz.NoNodeError, NoNode),
    (kz.NodeExistsError, NodeExists),
    (kz.BadVersionError, BadVersion),
    (kz.NotEmptyError, NotEmpty),
    (kz.NoChildrenForEphemeralsError, NoChildrenForEphemerals),
    (kz.SessionExpiredError, SessionExpired),
    (kz.RolledBackError, RolledBack),
    (kz.ConnectionLoss, ConnectionLost),
    (kz.ConnectionClosedError, ConnectionLost),
    (kz.OperationTimeoutError, ConnectionLost),
)


def _translate(exc: Exception, path: str | None, op_index: int | None = None) -> ZkError:
    for kazoo_type, ours in _ERRORS:
        if isinstance(exc, kazoo_type):
            return ours(f"{ours.__name__} {path or ''}".strip(), path, op_index)
    return ZkError(f"{type(exc).__name__} {path or ''}: {exc}".strip(), path, op_index)


# -- transaction operations (sans-IO) ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreateOp:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequence: bool = False


@dataclass(frozen=True, slots=True)
class CheckOp:
    path: str
    version: int


@dataclass(frozen=True, slots=True)
class SetDataOp:
    path: str
    data: bytes
    version: int = ANY_VERSION


@dataclass(frozen=True, slots=True)
class DeleteOp:
    path: str
    version: int = ANY_VERSION


Op = CreateOp | CheckOp | SetDataOp | DeleteOp
# multi's result per operation: the created path, the new stat, or True (check, delete).
OpResult = str | ZnodeStat | bool


# -- watches ---------------------------------------------------------------------------------


class ZkWatch:
    """A one-shot watch: `await wait()` for the event (bound it with trio.fail_after)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fired = trio.Event()
        self._event: WatchEvent | None = None

    @property
    def fired(self) -> bool:
        return self._fired.is_set()

    async def wait(self) -> WatchEvent:
        await self._fired.wait()
        if self._event is None:
            raise ConnectionLost(f"watch on {self.path} dropped with the connection", self.path)
        return self._event

    def _fire(self, event: WatchEvent | None) -> None:
        if not self._fired.is_set():
            self._event = event
            self._fired.set()


_EVENT_KINDS = {
    EventType.CREATED: "created",
    EventType.DELETED: "deleted",
    EventType.CHANGED: "changed",
    EventType.CHILD: "child",
}


# -- the client ------------------------------------------------------------------------------


class ZkClient:
    """One ZooKeeper session (renewed by kazoo after expiry) for one trio run."""

    def __init__(
        self,
        hosts: str,
        session_timeout_ms: int = 18_000,
        connection_timeout_ms: int | None = None,
    ) -> None:
        self.hosts = hosts  # "host:port[,host:port...][/chroot]" as in zookeeper.connect
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        self._kazoo = KazooClient(
            hosts=hosts,
            timeout=session_timeout_ms / 1000,
            # Reconnect forever, quickly: ZooKeeper restarting must not leave us waiting.
            connection_retry={"max_tries": -1, "delay": 0.05, "backoff": 2, "max_delay": 1.0},
            logger=logging.getLogger("kafkalite.zookeeper"),
        )
        self._token: trio.lowlevel.TrioToken | None = None
        self._state = SessionState.LOST
        self._state_changed = trio.Event()
        self._subscribers: list[trio.MemorySendChannel[SessionState]] = []

    # -- lifecycle --

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls, hosts: str, session_timeout_ms: int = 18_000, connection_timeout_ms: int | None = None
    ) -> AsyncIterator[ZkClient]:
        """A connected client, closed (session ended, ephemerals removed) on exit."""
        client = cls(hosts, session_timeout_ms, connection_timeout_ms)
        await client.start()
        try:
            yield client
        finally:
            with trio.CancelScope(shield=True):
                await client.close()

    async def start(self) -> None:
        """Connect and open a session, within zookeeper.connection.timeout.ms."""
        self._token = trio.lowlevel.current_trio_token()
        servers, _, chroot = self.hosts.partition("/")
        if chroot.strip("/"):
            await trio.to_thread.run_sync(self._create_chroot, servers, f"/{chroot}")
        self._kazoo.add_listener(self._on_kazoo_state)
        await trio.to_thread.run_sync(self._start_kazoo, self._kazoo)
        await self.wait_connected()

    def _start_kazoo(self, kazoo: KazooClient) -> None:  # a worker thread
        try:
            kazoo.start(self.connection_timeout_ms / 1000)
        except KazooTimeoutError:
            kazoo.stop()
            kazoo.close()
            raise ConnectionLost(
                f"no ZooKeeper session with {self.hosts} within {self.connection_timeout_ms} ms"
            ) from None

    def _create_chroot(self, servers: str, chroot: str) -> None:  # a worker thread
        """A chroot must exist before a session uses it: create it, as Kafka does, from a
        short session at the real root."""
        kazoo = KazooClient(hosts=servers, timeout=self.session_timeout_ms / 1000)
        self._start_kazoo(kazoo)
        try:
            kazoo.ensure_path(chroot.rstrip("/"))
        finally:
            kazoo.stop()
            kazoo.close()

    async def close(self) -> None:
        """End the session: ZooKeeper removes its ephemeral nodes at once."""
        await trio.to_thread.run_sync(self._kazoo.stop)
        await trio.to_thread.run_sync(self._kazoo.close)
        for channel in self._subscribers:
            channel.close()
        self._subscribers.clear()

    # -- session state --

    @property
    def state(self) -> SessionState:
        return self._state

    @property
    def session_id(self) -> int | None:
        """The current session's id (the ephemeral_owner of the nodes it creates)."""
        client_id = self._kazoo.client_id
        return client_id[0] if client_id else None

    async def expire_session(self) -> None:
        """Make ZooKeeper expire this session now (for failure tests): a second connection
        takes the session over with its id and password, then closes it, as ZooKeeper's own
        tests do. This client then sees LOST, and kazoo opens a new session."""
        session_id, password = self._kazoo.client_id
        servers = self.hosts.partition("/")[0]

        def take_over_and_close() -> None:  # a worker thread
            kazoo = KazooClient(
                hosts=servers,
                timeout=self.session_timeout_ms / 1000,
                client_id=(session_id, password),
            )
            self._start_kazoo(kazoo)
            kazoo.stop()
            kazoo.close()

        await trio.to_thread.run_sync(take_over_and_close)

    def state_changes(self) -> trio.MemoryReceiveChannel[SessionState]:
        """Every session state change from now on, in order (unbounded: never blocks kazoo)."""
        send, receive = trio.open_memory_channel[SessionState](math.inf)
        self._subscribers.append(send)
        return receive

    async def wait_connected(self) -> None:
        while self._state is not SessionState.CONNECTED:
            await self._state_changed.wait()

    def _on_kazoo_state(self, state: str) -> None:  # kazoo's thread
        self._deliver(self._set_state, SessionState(state))

    def _set_state(self, state: SessionState) -> None:  # trio's thread
        if state is self._state:
            return
        log.info("ZooKeeper session %s -> %s (%s)", self._state.value, state.value, self.hosts)
        self._state = state
        self._state_changed.set()
        self._state_changed = trio.Event()
        for channel in list(self._subscribers):
            try:
                channel.send_nowait(state)
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                self._subscribers.remove(channel)

    def _deliver(self, fn: Callable[..., object], *args: object) -> None:
        """From a kazoo thread: run `fn(*args)` in trio's thread, soon, without blocking."""
        assert self._token is not None
        with contextlib.suppress(trio.RunFinishedError):
            self._token.run_sync_soon(fn, *args)

    # -- requests --

    async def _call(
        self, path: str | None, start: Callable[[], IAsyncResult], op_index: int | None = None
    ) -> Any:
        done = trio.Event()
        try:
            result = start()
        except Exception as exc:  # kazoo refuses before sending (closed client, bad args)
            raise _translate(exc, path, op_index) from None
        result.rawlink(lambda _: self._deliver(done.set))
        await done.wait()
        try:
            return result.get_nowait()
        except Exception as exc:
            raise _translate(exc, path, op_index) from None

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        make_parents: bool = False,
    ) -> str:
        """Create a znode; returns its path (with the sequence suffix if `sequence`)."""
        return await self._call(
            path,
            lambda: self._kazoo.create_async(
                path, data, ephemeral=ephemeral, sequence=sequence, makepath=make_parents
            ),
        )

    async def ensure_path(self, path: str) -> None:
        """Create `path` and its parents as empty persistent znodes where missing."""
        with contextlib.suppress(NodeExists):
            await self.create(path, make_parents=True)

    async def get(self, path: str) -> tuple[bytes, ZnodeStat]:
        data, stat = await self._call(path, lambda: self._kazoo.get_async(path))
        return data or b"", _stat(stat)

    async def exists(self, path: str) -> ZnodeStat | None:
        stat = await self._call(path, lambda: self._kazoo.exists_async(path))
        return None if stat is None else _stat(stat)

    async def sync(self, path: str) -> None:
        """Bring this session's view of `path` up to the ensemble leader's, so the reads that
        follow see every write committed before (ZooKeeper's sync)."""
        await self._call(path, lambda: self._kazoo.sync_async(path))

    async def children(self, path: str) -> list[str]:
        return sorted(await self._call(path, lambda: self._kazoo.get_children_async(path)))

    async def set(self, path: str, data: bytes, version: int = ANY_VERSION) -> ZnodeStat:
        """Write a znode; with `version`, only if it is still at that version (BadVersion)."""
        stat = await self._call(path, lambda: self._kazoo.set_async(path, data, version))
        return _stat(stat)

    async def delete(self, path: str, version: int = ANY_VERSION) -> None:
        await self._call(path, lambda: self._kazoo.delete_async(path, version))

    async def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        """All operations or none (ZooKeeper's multi); raises the first failure's error,
        with `op_index` set to the operation that failed."""
        transaction = self._kazoo.transaction()
        for op in ops:
            _add_op(transaction, op)
        results = await self._call(None, transaction.commit_async)
        for index, (op, result) in enumerate(zip(ops, results, strict=True)):
            if isinstance(result, Exception) and not isinstance(result, kz.RolledBackError):
                raise _translate(result, op.path, index)
        if any(isinstance(result, Exception) for result in results):
            raise RolledBack("multi rolled back", None)
        return [_stat(r) if isinstance(r, tuple) else r for r in results]

    # -- reads that leave a watch --

    def _watch(self, path: str) -> tuple[ZkWatch, Callable[[WatchedEvent], None]]:
        watch = ZkWatch(path)

        def on_event(event: WatchedEvent) -> None:  # kazoo's thread
            kind = _EVENT_KINDS.get(event.type)
            fired = None if kind is None else WatchEvent(kind, event.path or path)
            self._deliver(watch._fire, fired)

        return watch, on_event

    async def get_watch(self, path: str) -> tuple[bytes, ZnodeStat, ZkWatch]:
        """`get` plus a watch for the node's next change or deletion."""
        watch, on_event = self._watch(path)
        data, stat = await self._call(path, lambda: self._kazoo.get_async(path, on_event))
        return data or b"", _stat(stat), watch

    async def exists_watch(self, path: str) -> tuple[ZnodeStat | None, ZkWatch]:
        """`exists` plus a watch for the node's creation, change or deletion."""
        watch, on_event = self._watch(path)
        stat = await self._call(path, lambda: self._kazoo.exists_async(path, on_event))
        return (None if stat is None else _stat(stat)), watch

    async def children_watch(self, path: str) -> tuple[list[str], ZkWatch]:
        """`children` plus a watch for the next child added or removed (or the node deleted)."""
        watch, on_event = self._watch(path)
        names = await self._call(path, lambda: self._kazoo.get_children_async(path, on_event))
        return sorted(names), watch


def _stat(stat: Any) -> ZnodeStat:
    return ZnodeStat(
        version=stat.version,
        cversion=stat.cversion,
        ephemeral_owner=stat.ephemeralOwner,
        czxid=stat.czxid,
        mzxid=stat.mzxid,
        ctime_ms=stat.ctime,
        mtime_ms=stat.mtime,
        data_length=stat.dataLength,
        num_children=stat.numChildren,
    )


def _add_op(transaction: Any, op: Op) -> None:
    match op:
        case CreateOp(path, data, ephemeral, sequence):
            transaction.create(path, data, ephemeral=ephemeral, sequence=sequence)
        case CheckOp(path, version):
            transaction.check(path, version)
        case SetDataOp(path, data, version):
            transaction.set_data(path, data, version)
        case DeleteOp(path, version):
            transaction.delete(path, version)
