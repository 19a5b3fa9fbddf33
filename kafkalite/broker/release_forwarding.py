"""Forwarded releases (issue 17, retry topics): a retry partition's due records go to
another topic's partition, which may be led by another broker. Sans-IO.

Each store forwards with a producer of its own (an id from the cluster's producer id
blocks, as InitProducerId's, taken anew each time the store is opened: the sequences of an
earlier one may be known only to intents trimmed since), epoch 0, and a sequence per
target partition. The intent names the producer and base sequence before anything is sent
(broker/delayed_delivery_store.py), and a replicated store sends only once the intent is
below its high watermark: every broker that may lead the retry partition next has it, and
resends it, unanswered, with the same producer and sequence. The target's producer state
answers a resend of an appended batch as a duplicate (its offsets, no error), so each record
is appended once. A zombie leader never gets a later intent replicated (the new leader does
not fetch from it), so it never sends one. One forwarded release at a time per store: the
resent one is then its producer's last batch at its target, which the target remembers.
"""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from kafkalite.broker.delayed_delivery import Intent

# Answers after which the records are dropped (logged): a resend cannot cure them.
DROP_ERRORS = frozenset(
    {
        ErrorCode.invalid_record,
        ErrorCode.invalid_timestamp,
        ErrorCode.corrupt_message,
        ErrorCode.message_too_large,
        ErrorCode.record_list_too_large,
        ErrorCode.invalid_topic_exception,
        ErrorCode.topic_authorization_failed,
        ErrorCode.cluster_authorization_failed,
    }
)


# Answers that a resend does not cure either, but after which the records may be in the
# target (its producer state lost them: an unclean election, producer.id.expiration.ms):
# the release waits, logged, rather than risk a duplicate.
STUCK_ERRORS = frozenset(
    {
        ErrorCode.out_of_order_sequence_number,
        ErrorCode.unknown_producer_id,
        ErrorCode.invalid_producer_epoch,
    }
)


@dataclass(eq=False)
class PendingForward:
    """A forwarded release being appended."""

    intent: Intent
    batch: bytes  # its records, as one idempotent batch of its producer
    dues: list[int]  # the records' due times (for the lateness histogram; [] if resumed)
    local_end: int | None = None  # appended here, done once the target's HW reaches it
    sending: bool = False  # with the sender (broker/release_forward_sender.py) now
    warned: bool = False  # a STUCK_ERRORS answer was logged


def answer_outcome(error: ErrorCode) -> str | None:
    """What the target's answer means for the release: done ("", also for a duplicate,
    answered without an error), dropped (why), or None: send it again later (not leader,
    no leader yet, not enough replicas, a timeout, ...)."""
    if error is ErrorCode.none or error is ErrorCode.duplicate_sequence_number:
        return ""
    if error in DROP_ERRORS:
        return f"the target refused them: {error.name.upper()}"
    return None
