"""`kafkalite consume TOPIC`: print messages with a kcat-style `--format`, or as JSON lines.

Format tokens (kcat -f): %t topic, %p partition, %o offset, %k key, %s value (or rpk's %v),
%K key size, %S value size, %T timestamp (ms), %h headers (k=v,...), %% a percent sign;
\\n \\t \\\\ escapes.
Without `--follow` it stops at the end of the partitions (their ends when it started).
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

from kafkalite.tools.common import (
    Connection,
    ToolError,
    UsageError,
    check_reachable,
    connection,
    error_text,
    new_client,
    positive_int,
    timestamp_ms,
    topic_metadata,
)
from kafkalite.tools.progress import Progress

DEFAULT_FORMAT = "%s\\n"
BATCH = 500  # messages per consume() call
_TOKEN = re.compile(r"%[tpokKsvSTh%]|\\[nt\\]")
_ESCAPES = {"\\n": "\n", "\\t": "\t", "\\\\": "\\"}


def register(commands: Any, parents: dict, parser_class: type) -> None:
    consume = commands.add_parser(
        "consume", parents=[parents["connection"]], help="print a topic's messages"
    )
    consume.add_argument("topic", metavar="TOPIC")
    start = consume.add_mutually_exclusive_group()
    start.add_argument(
        "-o",
        "--offset",
        type=_offset,
        default=None,
        help="beginning (default), end, N (absolute) or -N (N before the end)",
    )
    start.add_argument("--from-beginning", action="store_true", help="same as --offset beginning")
    start.add_argument(
        "--timestamp",
        type=timestamp_ms,
        metavar="ISO|EPOCH-MS",
        help="start at the first message at or after this time",
    )
    consume.add_argument("-p", "--partition", action="append", type=int, metavar="P")
    consume.add_argument("-g", "--group", help="consume as this group and commit what was read")
    consume.add_argument("-c", "--count", type=positive_int, help="stop after N messages")
    consume.add_argument(
        "-f",
        "--format",
        default=DEFAULT_FORMAT,
        help="json (one JSON object per message) or a kcat-style template (default: %%s\\n)",
    )
    consume.add_argument(
        "--follow", action="store_true", help="wait for new messages instead of stopping at the end"
    )
    consume.set_defaults(run=consume_messages)


def _offset(text: str) -> str | int:
    if text in ("beginning", "end"):
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not beginning, end, an offset or -N"
        ) from None


# -- rendering -------------------------------------------------------------------------------


def _text(data: bytes | None) -> str:
    return "" if data is None else data.decode("utf-8", errors="backslashreplace")


def _headers(message: Any) -> list[tuple[str, bytes | None]]:
    return list(message.headers() or [])


def render(template: str, message: Any) -> str:
    key, value = message.key(), message.value()
    values = {
        "%t": message.topic(),
        "%p": str(message.partition()),
        "%o": str(message.offset()),
        "%k": _text(key),
        "%s": _text(value),
        "%v": _text(value),
        "%K": str(-1 if key is None else len(key)),
        "%S": str(-1 if value is None else len(value)),
        "%T": str(message.timestamp()[1]),
        "%h": ",".join(f"{k}={_text(v)}" for k, v in _headers(message)),
        "%%": "%",
    }
    return _TOKEN.sub(lambda m: values.get(m.group(0)) or _ESCAPES.get(m.group(0), ""), template)


def _encoded(data: bytes | None) -> tuple[str | None, str]:
    """(text, encoding): UTF-8 as it is, anything else in base64, so no byte is lost."""
    if data is None:
        return None, "utf-8"
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), "base64"


def _json_header(name: str, value: bytes | None) -> list[str | None]:
    text, encoding = _encoded(value)
    return [name, text] if encoding == "utf-8" else [name, text, encoding]


def as_json(message: Any) -> str:
    """One message as JSON: key and value as text, each with its encoding (utf-8, or base64
    for bytes that are not UTF-8); a header [name, value], or [name, value, "base64"]."""
    key, key_encoding = _encoded(message.key())
    value, value_encoding = _encoded(message.value())
    return json.dumps(
        {
            "topic": message.topic(),
            "partition": message.partition(),
            "offset": message.offset(),
            "timestamp": message.timestamp()[1],
            "key": key,
            "key_encoding": key_encoding,
            "value": value,
            "value_encoding": value_encoding,
            "headers": [_json_header(k, v) for k, v in _headers(message)],
        }
    )


# -- reading ---------------------------------------------------------------------------------


@dataclass
class _Reading:
    """Where each partition stops (its end when we started) and how far we got."""

    stop_at: dict[int, int] = field(default_factory=dict)
    position: dict[int, int] = field(default_factory=dict)
    assigned: bool = False

    def done(self) -> bool:
        return all(self.position.get(p, -1) >= end for p, end in self.stop_at.items())


def _start_offsets(
    consumer: Consumer, conn: Connection, args: argparse.Namespace, partitions: list[int]
) -> tuple[dict[int, int], dict[int, int]]:
    """(start offset, end offset) per partition, the start from --offset/--timestamp."""
    starts, ends = {}, {}
    for p in partitions:
        low, high = consumer.get_watermark_offsets(TopicPartition(args.topic, p), conn.timeout)
        ends[p] = high
        offset = "beginning" if args.from_beginning or args.offset is None else args.offset
        if offset == "beginning":
            starts[p] = low
        elif offset == "end":
            starts[p] = high
        elif offset < 0:
            starts[p] = max(high + offset, low)
        else:
            starts[p] = min(max(offset, low), high)
    if args.timestamp is not None:
        wanted = [TopicPartition(args.topic, p, args.timestamp) for p in partitions]
        for tp in consumer.offsets_for_times(wanted, conn.timeout):
            starts[tp.partition] = ends[tp.partition] if tp.offset < 0 else tp.offset
    return starts, ends


def _partitions(consumer: Consumer, conn: Connection, args: argparse.Namespace) -> list[int]:
    topic = topic_metadata(consumer, conn, args.topic)
    if topic is None:
        raise ToolError(f"cannot consume {args.topic}: it does not exist")
    known = sorted(topic.partitions)
    missing = sorted(set(args.partition or []) - set(known))
    if missing:
        raise ToolError(f"cannot consume {args.topic}: it has no partition {missing[0]}")
    return sorted(set(args.partition)) if args.partition else known


def consume_messages(args: argparse.Namespace) -> int:
    if args.partition and any(p < 0 for p in args.partition):
        raise UsageError("--partition must not be negative")
    if args.group and args.partition:
        raise UsageError("--group and --partition cannot be combined (the group assigns)")
    conn = connection(args)
    consumer = new_client(
        Consumer,
        conn.conf(
            **{
                "group.id": args.group or f"kafkalite-consume-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "enable.partition.eof": False,
                "auto.offset.reset": "latest" if args.offset == "end" else "earliest",
            }
        ),
    )
    try:
        check_reachable(consumer, conn)
        return _consume(consumer, conn, args)
    finally:
        consumer.close()


def _consume(consumer: Consumer, conn: Connection, args: argparse.Namespace) -> int:
    reading = _Reading()
    partitions = _partitions(consumer, conn, args)
    starts, ends = _start_offsets(consumer, conn, args, partitions)
    if args.group:
        _subscribe(consumer, conn, args, starts, ends, reading)
    else:
        consumer.assign([TopicPartition(args.topic, p, starts[p]) for p in partitions])
        reading.stop_at = ends
        reading.position = dict(starts)
        reading.assigned = True
    progress = Progress("msgs", None if args.follow else sum(ends.values()) - sum(starts.values()))
    # A group's first join waits for a rebalance (group.initial.rebalance.delay.ms and more).
    assignment_deadline = time.monotonic() + conn.timeout + 30
    count = 0
    try:
        while args.count is None or count < args.count:
            if reading.assigned and not args.follow and reading.done():
                break
            if not reading.assigned and time.monotonic() > assignment_deadline:
                raise ToolError(f"group {args.group} got no partition of {args.topic} assigned")
            wanted = BATCH if args.count is None else min(BATCH, args.count - count)
            printed = _print(consumer.consume(wanted, 0.2), args, reading)
            count += printed
            progress.advance(printed)
    except KeyboardInterrupt:  # how --follow ends: still commit what was printed
        pass
    sys.stdout.flush()
    progress.close()
    if args.group and count:
        printed_up_to = [TopicPartition(args.topic, p, o) for p, o in reading.position.items()]
        consumer.commit(offsets=printed_up_to, asynchronous=False)
    return 0


def _print(messages: list[Any], args: argparse.Namespace, reading: _Reading) -> int:
    printed = 0
    for message in messages:
        if message.error() is not None:
            _raise_unless_transient(message.error(), args.topic)
            continue
        text = as_json(message) + "\n" if args.format == "json" else render(args.format, message)
        sys.stdout.write(text)
        reading.position[message.partition()] = message.offset() + 1
        printed += 1
    return printed


def _subscribe(
    consumer: Consumer,
    conn: Connection,
    args: argparse.Namespace,
    starts: dict[int, int],
    ends: dict[int, int],
    reading: _Reading,
) -> None:
    """Join as the group; an explicit start (--offset, --timestamp) overrides its commits."""
    explicit = args.offset is not None or args.from_beginning or args.timestamp is not None

    def on_assign(c: Consumer, assigned: list[TopicPartition]) -> None:
        committed = {tp.partition: tp.offset for tp in c.committed(assigned, conn.timeout)}
        for tp in assigned:
            own = committed.get(tp.partition, -1)
            tp.offset = starts[tp.partition] if explicit or own < 0 else own
            reading.position[tp.partition] = tp.offset
            reading.stop_at[tp.partition] = ends[tp.partition]
        c.assign(assigned)
        reading.assigned = True

    consumer.subscribe([args.topic], on_assign=on_assign)


def _raise_unless_transient(error: KafkaError, topic: str) -> None:
    if error.code() == KafkaError._PARTITION_EOF or error.retriable():
        return
    raise ToolError(f"cannot consume {topic}: {error_text(Exception(error))}")
