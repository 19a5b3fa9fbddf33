"""Which partitions of a coordinator's internal topic this broker serves, and in which epoch
(Kafka's CoordinatorRuntime contexts: LOADING, then ACTIVE, then gone on resignation).

A coordinator owns a partition of `__consumer_offsets` / `__transaction_state` while it leads
it. `elect` starts a load for the leader epoch, `complete_load` installs it only if that
election is still current (a load that leadership or a newer epoch overtook installs
nothing), `resign` drops it. `error` is what a request for a key of the partition gets.
Sans-IO: the services (broker/group_coordinator_service.py, txn_coordinator_service.py) do
the reading and the waiting.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode


class LoadState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"


@dataclass(slots=True)
class Owned:
    epoch: int
    state: LoadState = LoadState.LOADING


@dataclass(eq=False)
class CoordinatorPartitions:
    owned: dict[int, Owned] = field(default_factory=dict)

    def elect(self, index: int, epoch: int) -> bool:
        """This broker leads `index` in `epoch`: True when a load must start. As Kafka, only
        for a broker that becomes leader: one that stays leader in a newer epoch keeps the
        coordinator epoch it loaded in (its state is current; in-flight markers stay valid)."""
        if index in self.owned:
            return False
        self.owned[index] = Owned(epoch)
        return True

    def resign(self, index: int, epoch: int | None = None) -> bool:
        """This broker no longer leads `index` (in `epoch`; None: whatever the epoch, e.g.
        the replica was removed). True when something loaded or loading was dropped."""
        current = self.owned.get(index)
        if current is None or (epoch is not None and current.epoch >= epoch):
            return False
        del self.owned[index]
        return True

    def is_loading(self, index: int, epoch: int) -> bool:
        """The load of (`index`, `epoch`) is still wanted."""
        current = self.owned.get(index)
        return current is not None and current.epoch == epoch and current.state is LoadState.LOADING

    def complete_load(self, index: int, epoch: int) -> bool:
        """The load of (`index`, `epoch`) finished: True when it may be installed."""
        if not self.is_loading(index, epoch):
            return False
        self.owned[index].state = LoadState.ACTIVE
        return True

    def error(self, index: int) -> ErrorCode:
        """NONE while active; COORDINATOR_LOAD_IN_PROGRESS while loading; NOT_COORDINATOR
        for a partition this broker does not lead."""
        current = self.owned.get(index)
        if current is None:
            return ErrorCode.not_coordinator
        if current.state is LoadState.LOADING:
            return ErrorCode.coordinator_load_in_progress
        return ErrorCode.none

    def epoch(self, index: int) -> int:
        """The leader epoch `index` is served in (-1: not served)."""
        current = self.owned.get(index)
        return -1 if current is None else current.epoch
