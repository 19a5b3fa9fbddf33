"""What the log cleaner knows about transactions while it walks a log in offset order
(Kafka's CleanedTransactionMetadata), sans-IO.

* Records of aborted transactions are removed: a transactional batch of a producer whose
  aborted transaction (from the aborted-transaction index) has begun by then is aborted.
  They never enter the offset map either, so an aborted value never hides a committed one.
* An abort marker stays while this pass still saw batches of its transaction (they are
  removed now; its `.txnindex` entry is kept with it); then it may go.
* A commit marker may go once no batch of its transaction was seen in this pass (the
  transaction's records are compacted like any other by then).
Markers that may go are removed only once their segment is older than delete.retention.ms,
as tombstones are, so a reader that was behind still sees where each transaction ended.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from kafkalite.storage.batch import BatchHeader
from kafkalite.storage.control_batch import decode_marker
from kafkalite.storage.txn_index import AbortedTxn


@dataclass(slots=True)
class _OngoingAbort:
    txn: AbortedTxn
    seen_batches: bool = False


@dataclass(eq=False)
class CleanedTransactions:
    aborted: deque[AbortedTxn]  # not yet begun, by first offset
    ongoing_aborted: dict[int, _OngoingAbort] = field(default_factory=dict)
    ongoing_committed: set[int] = field(default_factory=set)
    kept_index: list[AbortedTxn] = field(default_factory=list)  # for the cleaned segment

    @classmethod
    def over(cls, aborted: Iterable[AbortedTxn], start: int, end: int) -> CleanedTransactions:
        """For a walk over [start, end): the aborted transactions overlapping it (Kafka's
        collectAbortedTransactions; one that ended before would wrongly abort its producer's
        later batches)."""
        overlapping = [t for t in aborted if t.last_offset >= start and t.first_offset < end]
        return cls(deque(sorted(overlapping, key=lambda txn: txn.first_offset)))

    def _begin_aborted_up_to(self, offset: int) -> None:
        while self.aborted and self.aborted[0].first_offset <= offset:
            txn = self.aborted.popleft()
            self.ongoing_aborted.setdefault(txn.producer_id, _OngoingAbort(txn))

    def on_batch(self, header: BatchHeader) -> bool:
        """A data batch: True when it belongs to an aborted transaction (drop its records)."""
        self._begin_aborted_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        ongoing = self.ongoing_aborted.get(header.producer_id)
        if ongoing is not None:
            ongoing.seen_batches = True
            return True
        self.ongoing_committed.add(header.producer_id)
        return False

    def on_control_batch(self, header: BatchHeader, batch: bytes | memoryview) -> bool:
        """A control batch: True when it may be removed (after delete.retention.ms)."""
        self._begin_aborted_up_to(header.last_offset)
        marker = decode_marker(batch)
        if marker is None:
            return header.records_count == 0  # an emptied control batch; others stay
        if marker.commit:
            if header.producer_id in self.ongoing_committed:
                self.ongoing_committed.discard(header.producer_id)
                return False
            return True
        ongoing = self.ongoing_aborted.pop(header.producer_id, None)
        if ongoing is not None and ongoing.seen_batches:
            self.kept_index.append(ongoing.txn)
            return False
        return True

    def take_index(self) -> list[AbortedTxn]:
        """The index entries kept since the last call (one cleaned segment's)."""
        kept, self.kept_index = self.kept_index, []
        return kept
