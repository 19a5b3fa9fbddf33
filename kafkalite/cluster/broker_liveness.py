"""Noticing a dead broker before its ZooKeeper session expires (fast failover).

ZooKeeper alone tells the controller a broker died when its ephemeral `/brokers/ids/<id>`
goes: zookeeper.session.timeout.ms (18 s by default) after a kill -9. Every broker therefore
also keeps one probe connection to each other registered broker and sends it ApiVersions every
`kafkalite.liveness.probe.interval.ms`. A broker that answered once is declared dead when

* its connection is lost and reconnecting is refused twice in a row: the kernel resets a
  killed process's connections and refuses connections on its closed listener, so this is
  proof the process is gone (~ one probe interval after a SIGKILL); or
* a probe (or a connect) stays unanswered for `kafkalite.liveness.probe.timeout.ms`: a
  paused (SIGSTOP) or wedged process still accepts connections into its backlog but answers
  nothing.

It is alive again as soon as it answers. The controller treats a dead broker as if its
registration were gone (controller.py): leaders it held are elected from the rest of the ISR
with a bumped leader epoch, and it leaves the ISRs. A broker waiting for `/controller` that sees
the controller declared dead deposes it (`depose_dead_controller`) and runs for election.

Why this is safe even when the broker is only slow or paused and comes back (the detector may
be wrong; it decides availability, never what is acknowledged):

* Every decision is a conditional ZooKeeper write carrying a new leader epoch (and the
  controller epoch): the old leader's own ISR changes are conditional on the state znode's
  version and fail once the controller wrote, so it can neither shrink the ISR to itself nor
  take a follower back in.
* The old leader's high watermark is the minimum log end of its (unchanged) ISR, and the new
  leader stopped fetching from it when it took over: whatever the old leader may still
  acknowledge with acks=all or expose to consumers lies below a position the new leader had
  already fetched, and a leader never truncates. The followers send the new epoch, which the
  old leader refuses, and it becomes a follower (truncating by leader epoch) when its watch on
  the state znode fires after it resumes.
* A broker declared dead is left out of the ISR, so it can be elected leader again only after it
  answered probes, followed the new leader and was taken back into the ISR by that leader.
* Deposing a controller deletes `/controller` in one transaction with a check of the
  `/controller_epoch` version read with it: only the controller judged dead can be removed,
  and its later writes fail on the epoch that the next controller bumps.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import trio
from kio.schema.api_versions.v0.request import ApiVersionsRequest

from kafkalite.broker.broker_connection import BrokerConnection, ConnectionLost
from kafkalite.broker.cluster_metadata import Endpoint
from kafkalite.cluster import zk_data as zd
from kafkalite.cluster.zk_client import BadVersion, CheckOp, DeleteOp, NoNode, ZkClient
from kafkalite.security.inter_broker import InterBrokerSecurity

log = logging.getLogger(__name__)
REFUSALS_TO_DECLARE_DEAD = 2  # a lone refusal could be a listener's backlog overflowing


@dataclass(frozen=True, slots=True)
class LivenessSettings:
    probe_interval_ms: int = 200  # 0: no probes, ZooKeeper sessions only (as Kafka)
    probe_timeout_ms: int = 6000  # an unanswered probe: the broker is paused or wedged
    security: InterBrokerSecurity | None = None  # TLS, SASL login to the other brokers

    @property
    def enabled(self) -> bool:
        return self.probe_interval_ms > 0


@dataclass(slots=True)
class ProbeState:
    """What the probes tell of one broker (sans-IO); each method answers whether `dead`
    changed."""

    answered_once: bool = False
    dead: bool = False
    refusals: int = 0

    def on_answer(self) -> bool:
        changed = self.dead
        self.answered_once, self.dead, self.refusals = True, False, 0
        return changed

    def on_refused(self) -> bool:
        """A connect refused: nothing listens on the broker's port."""
        self.refusals += 1
        return self._declare(self.refusals >= REFUSALS_TO_DECLARE_DEAD)

    def on_unanswered(self) -> bool:
        """A probe or connect that timed out: the process is paused or wedged."""
        return self._declare(True)

    def _declare(self, evidence: bool) -> bool:
        # A broker never heard from may still be starting (registered, not yet listening):
        # only ZooKeeper's session decides for it.
        if not evidence or not self.answered_once or self.dead:
            return False
        self.dead = True
        return True


@dataclass
class BrokerLiveness:
    """The probes of one broker to every other registered broker."""

    local_broker_id: int
    settings: LivenessSettings
    registered: Callable[[], list[int]]  # the ids under /brokers/ids, as this broker knows them
    endpoint_of: Callable[[int], Endpoint | None]
    states: dict[int, ProbeState] = field(default_factory=dict)
    _changed: trio.Event = field(default_factory=trio.Event)
    _scopes: dict[int, trio.CancelScope] = field(default_factory=dict)

    def snapshot(self) -> tuple[frozenset[int], trio.Event]:
        """The brokers declared dead, and an event set at the next change of verdict."""
        return frozenset(b for b, s in self.states.items() if s.dead), self._changed

    def _note(self, broker_id: int, changed: bool) -> None:
        if not changed:
            return
        verdict = "dead" if self.states[broker_id].dead else "alive again"
        log.warning("broker %d is %s (liveness probe)", broker_id, verdict)
        self._changed.set()
        self._changed = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        if not self.settings.enabled:
            return
        async with trio.open_nursery() as nursery:
            while True:
                self._track(nursery, set(self.registered()) - {self.local_broker_id})
                await trio.sleep(self.settings.probe_interval_ms / 1000)

    def _track(self, nursery: trio.Nursery, targets: set[int]) -> None:
        for broker_id in set(self._scopes) - targets:  # unregistered: ZooKeeper has decided
            self._scopes.pop(broker_id).cancel()
            self.states.pop(broker_id, None)
        for broker_id in targets - set(self._scopes):
            self.states[broker_id] = ProbeState()
            self._scopes[broker_id] = scope = trio.CancelScope()
            nursery.start_soon(self._probe, broker_id, scope)

    async def _probe(self, broker_id: int, scope: trio.CancelScope) -> None:
        interval = self.settings.probe_interval_ms / 1000
        with scope:
            while True:
                endpoint = self.endpoint_of(broker_id)
                if endpoint is not None:
                    await self._probe_connection(broker_id, endpoint, interval)
                await trio.sleep(interval)

    async def _probe_connection(self, broker_id: int, endpoint: Endpoint, interval: float) -> None:
        """Probe over one connection until it fails."""
        state = self.states[broker_id]
        timeout = self.settings.probe_timeout_ms / 1000
        connection = None
        try:
            with trio.move_on_after(timeout) as connecting:
                connection = await _connect(endpoint, self.settings.security)
            if connecting.cancelled_caught:
                self._note(broker_id, state.on_unanswered())
                return
            if connection is None:
                self._note(broker_id, state.on_refused())
                return
            while True:
                with trio.move_on_after(timeout) as probing:
                    await connection.request(ApiVersionsRequest())
                if probing.cancelled_caught:
                    self._note(broker_id, state.on_unanswered())
                    return
                self._note(broker_id, state.on_answer())
                await trio.sleep(interval)
        except ConnectionLost:
            return  # reset or closed: the reconnect tells a dead process from a blip
        finally:
            if connection is not None:
                with trio.CancelScope(shield=True):
                    await connection.aclose()


async def _connect(
    endpoint: Endpoint, security: InterBrokerSecurity | None
) -> BrokerConnection | None:
    """A probe connection (logged in on a SASL inter-broker listener, where a second
    ApiVersions before authentication closes it), or None when the broker's port refuses it."""
    try:
        stream = await trio.open_tcp_stream(endpoint.host, endpoint.port)
    except OSError as exc:
        if _refused(exc):
            return None
        raise ConnectionLost(str(exc)) from exc
    return await BrokerConnection.over(stream, "kafkalite-liveness", security, endpoint.host)


def _refused(exc: BaseException) -> bool:
    """Every address refused (trio wraps one error per address tried in a group)."""
    cause = exc.__cause__
    if isinstance(cause, BaseExceptionGroup):
        return all(_refused(e) for e in cause.exceptions)
    return isinstance(exc, ConnectionRefusedError) or isinstance(cause, ConnectionRefusedError)


async def depose_dead_controller(zk: ZkClient, local_broker_id: int, dead: frozenset[int]) -> bool:
    """Delete `/controller` if a broker in `dead` holds it: in one transaction with a check of
    the `/controller_epoch` version read before it, so a controller elected meanwhile (which
    bumps that version) is never removed. True when deposed."""
    try:
        _, epoch_stat = await zk.get(zd.CONTROLLER_EPOCH)
        data, _ = await zk.get(zd.CONTROLLER)
    except NoNode:
        return False
    controller_id = zd.ControllerInfo.decode(data).broker_id
    if controller_id == local_broker_id or controller_id not in dead:
        return False
    try:
        await zk.multi([CheckOp(zd.CONTROLLER_EPOCH, epoch_stat.version), DeleteOp(zd.CONTROLLER)])
    except (BadVersion, NoNode):
        return False
    log.warning("deposed controller %d (declared dead by the liveness probe)", controller_id)
    return True
