"""One consumer-group member in its own OS process, for tests and benchmarks.

    python group_member.py BOOTSTRAP GROUP TOPIC[,TOPIC...] [-X key=value]...
        [--commit none|each|end] [--max-messages N] [--commit-metadata TEXT]

A confluent-kafka Consumer subscribes to the topics and polls. Every event is one JSON line on
stdout (flushed at once), with "event", "t" (time.monotonic(): CLOCK_MONOTONIC, comparable
between processes of one machine) and "pid":

- {"event": "ready"}: the consumer exists and subscribe() was called.
- {"event": "assigned" | "revoked" | "lost", "partitions": [[topic, p], ...],
  "assignment": [[topic, p], ...]}: a rebalance callback; "partitions" is what the callback
  got (incremental with cooperative-sticky, the whole assignment otherwise) and "assignment"
  the member's resulting assignment.
- {"event": "message", "topic", "partition", "offset", "key", "value"}: printed before the
  message's offset is committed, so a committed offset was always printed first.
- {"event": "committed", "offsets": [[topic, p, offset, error-name-or-null], ...]}: a
  synchronous commit returned (--commit end; --commit each with -v); with --commit each and
  --max-messages, also the last successful commit of every partition once N is reached.
- {"event": "commit_failed", "error": ...}: a synchronous commit raised.
- {"event": "paused"}: --max-messages reached (after the --commit end commit).
- {"event": "error", "code", "name", "str", "fatal"}: poll() returned an error; a fatal one
  ends the loop.
- {"event": "client_error", ...}: the error callback (transport errors and the like).
- {"event": "stats", "cgrp": {...}}: librdkafka statistics (-X statistics.interval.ms=N).
- {"event": "closed"} / {"event": "close_failed", "error"}: consumer.close() returned/raised.

--commit each: a synchronous commit of the next offset (with --commit-metadata) after every
message (at-least-once).
--commit end: after --max-messages messages, commit the next offset of every partition read
(with --commit-metadata as the offset metadata), then pause the assignment and keep polling.

Stops with consumer.close() on SIGTERM, on a "stop" line on stdin, or at stdin EOF (the test
process went away). Exit code 0, or 3 after a fatal error.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

FATAL_EXIT = 3
_OUT_LOCK = threading.Lock()
_PID = os.getpid()


def emit(event: str, **fields: Any) -> None:
    line = json.dumps({"event": event, "t": time.monotonic(), "pid": _PID, **fields})
    with _OUT_LOCK:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def is_fatal(error: KafkaError) -> bool:
    # poll() hands a fatal consumer error over as code _FATAL with fatal() false; the
    # underlying error (e.g. FENCED_INSTANCE_ID) is in its text.
    return error.fatal() or error.code() == KafkaError._FATAL


def error_fields(error: KafkaError) -> dict[str, Any]:
    return {
        "code": error.code(),
        "name": error.name(),
        "str": error.str(),
        "fatal": is_fatal(error),
        "retriable": error.retriable(),
    }


def _decode(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "replace")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("bootstrap")
    parser.add_argument("group")
    parser.add_argument("topics", help="comma-separated")
    parser.add_argument("-X", dest="conf", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--commit", choices=("none", "each", "end"), default="none")
    parser.add_argument("--max-messages", type=int, default=0)
    parser.add_argument("--commit-metadata", default=None)
    parser.add_argument("-v", "--verbose", action="store_true", help="report every commit")
    return parser.parse_args(argv)


class Member:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        conf: dict[str, Any] = {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": "false",
        }
        for item in args.conf:
            key, sep, value = item.partition("=")
            if not sep:
                raise SystemExit(f"bad -X {item!r}: expected key=value")
            conf[key] = value
        # librdkafka uses the cooperative protocol only when every assignor supports it, and
        # always with the consumer group protocol (KIP-848).
        self.incremental = (
            conf.get("partition.assignment.strategy") == "cooperative-sticky"
            or conf.get("group.protocol") == "consumer"
        )
        conf["error_cb"] = self._on_error
        conf["stats_cb"] = self._on_stats
        self.consumer = Consumer(conf)
        self.owned: set[tuple[str, int]] = set()
        self.next_offsets: dict[tuple[str, int], int] = {}
        self.committed: dict[tuple[str, int], int] = {}
        self.count = 0
        self.paused = False
        self.stop = threading.Event()

    # -- callbacks --

    def _report(self, event: str, partitions: list[TopicPartition]) -> None:
        emit(
            event,
            partitions=sorted([tp.topic, tp.partition] for tp in partitions),
            assignment=sorted([t, p] for t, p in self.owned),
        )

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        got = {(tp.topic, tp.partition) for tp in partitions}
        self.owned = self.owned | got if self.incremental else got
        self._report("assigned", partitions)

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.owned -= {(tp.topic, tp.partition) for tp in partitions}
        self._report("revoked", partitions)

    def on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.owned -= {(tp.topic, tp.partition) for tp in partitions}
        self._report("lost", partitions)

    def _on_error(self, error: KafkaError) -> None:
        emit("client_error", **error_fields(error))

    def _on_stats(self, stats_json: str) -> None:
        stats = json.loads(stats_json)
        cgrp = stats.get("cgrp") or {}
        emit(
            "stats",
            cgrp={
                key: cgrp.get(key)
                for key in (
                    "state",
                    "join_state",
                    "rebalance_cnt",
                    "rebalance_reason",
                    "assignment_size",
                )
            },
        )

    # -- main loop --

    def run(self) -> int:
        topics = [t for t in self.args.topics.split(",") if t]
        self.consumer.subscribe(
            topics, on_assign=self.on_assign, on_revoke=self.on_revoke, on_lost=self.on_lost
        )
        emit("ready")
        fatal = False
        while not self.stop.is_set():
            message = self.consumer.poll(0.1)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                emit("error", **error_fields(error))
                if is_fatal(error):
                    fatal = True
                    break
                continue
            self._handle(message)
        self._close()
        return FATAL_EXIT if fatal else 0

    def _handle(self, message: Message) -> None:
        topic, partition, offset = message.topic(), message.partition(), message.offset()
        emit(
            "message",
            topic=topic,
            partition=partition,
            offset=offset,
            key=_decode(message.key()),
            value=_decode(message.value()),
        )
        self.count += 1
        self.next_offsets[(topic, partition)] = offset + 1
        if self.args.commit == "each":
            self._commit(offsets=[self._position(topic, partition, offset + 1)])
        if self.args.max_messages and self.count >= self.args.max_messages and not self.paused:
            if self.args.commit == "end":
                self._commit(
                    offsets=[
                        self._position(t, p, o) for (t, p), o in sorted(self.next_offsets.items())
                    ],
                    report=True,
                )
            elif self.args.commit == "each":
                # What the per-message commits left behind, partition by partition.
                emit(
                    "committed",
                    offsets=[[t, p, o, None] for (t, p), o in sorted(self.committed.items())],
                )
            self.consumer.pause(self.consumer.assignment())
            self.paused = True
            emit("paused", count=self.count)

    def _position(self, topic: str, partition: int, offset: int) -> TopicPartition:
        if self.args.commit_metadata is None:
            return TopicPartition(topic, partition, offset)
        return TopicPartition(topic, partition, offset, self.args.commit_metadata)

    def _commit(self, report: bool = False, **what: Any) -> None:
        try:
            result = self.consumer.commit(asynchronous=False, **what)
        except KafkaException as exc:
            emit("commit_failed", **error_fields(exc.args[0]))
            return
        for tp in result or ():
            if tp.error is None:
                self.committed[(tp.topic, tp.partition)] = tp.offset
        if report or self.args.verbose:
            emit(
                "committed",
                offsets=[
                    [tp.topic, tp.partition, tp.offset, tp.error.name() if tp.error else None]
                    for tp in result or ()
                ],
            )

    def _close(self) -> None:
        try:
            self.consumer.close()
        except Exception as exc:  # report, exit anyway
            emit("close_failed", error=str(exc))
        else:
            emit("closed")


def _watch_stdin(stop: threading.Event) -> None:
    for line in sys.stdin:
        if line.strip() == "stop":
            break
    stop.set()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    member = Member(args)
    signal.signal(signal.SIGTERM, lambda *_: member.stop.set())
    threading.Thread(target=_watch_stdin, args=(member.stop,), daemon=True).start()
    return member.run()


if __name__ == "__main__":
    sys.exit(main())
