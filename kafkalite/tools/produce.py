"""`kafkalite produce TOPIC`: one message per input line (stdin or --file), split by -K or
read by an input template (-f, rpk's format: kafkalite/tools/input_template.py)."""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any, BinaryIO

from confluent_kafka import KafkaError, KafkaException, Producer

from kafkalite.tools.common import (
    ToolError,
    UsageError,
    check_reachable,
    connection,
    error_text,
    key_value,
    new_client,
    topic_metadata,
)
from kafkalite.tools.input_template import InputTemplate, TemplateError, compile_template
from kafkalite.tools.output import emit
from kafkalite.tools.progress import Progress

COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")


def register(commands: Any, parents: dict, parser_class: type) -> None:
    produce = commands.add_parser(
        "produce",
        parents=[parents["connection"], parents["output"]],
        help="produce lines of stdin or a file as messages",
    )
    produce.add_argument("topic", metavar="TOPIC")
    produce.add_argument("--file", type=Path, help="read lines from this file, not stdin")
    source = produce.add_mutually_exclusive_group()
    source.add_argument(
        "-K", "--key-delimiter", help="split each line into key and value at the first DELIM"
    )
    source.add_argument(
        "-f",
        "--input-format",
        metavar="TEMPLATE",
        help="read each line as rpk does: %%k key, %%v value, %%p partition, "
        "%%h headers (a=1,b=2), e.g. '%%k %%v'",
    )
    produce.add_argument(
        "-H",
        "--header",
        action="append",
        type=key_value,
        default=[],
        metavar="KEY=VALUE",
        help="a header on every message (repeatable)",
    )
    produce.add_argument(
        "-Z",
        "--null-empty",
        action="store_true",
        help="an empty value or key is sent as null (kcat's -Z): `key:` makes a tombstone",
    )
    produce.add_argument("-p", "--partition", type=int, help="this partition (default: by key)")
    produce.add_argument("-z", "--compression", choices=COMPRESSIONS, default="none")
    produce.add_argument("--acks", choices=["0", "1", "all", "-1"], default="all")
    produce.set_defaults(run=produce_lines)


def _input(args: argparse.Namespace) -> tuple[BinaryIO, int | None]:
    """The byte stream to read and its size when known (for the progress ETA)."""
    if args.file is None:
        stream = sys.stdin.buffer
    else:
        try:
            stream = args.file.open("rb")
        except OSError as exc:
            raise UsageError(f"cannot read {args.file}: {exc.strerror}") from None
    try:
        stat = os.fstat(stream.fileno())
        size = stat.st_size if stat.st_size and os.path.stat.S_ISREG(stat.st_mode) else None
    except (OSError, ValueError):
        size = None
    return stream, size


def _split(line: bytes, delimiter: bytes | None) -> tuple[bytes | None, bytes]:
    if delimiter is None:
        return None, line
    key, sep, value = line.partition(delimiter)
    return (key, value) if sep else (None, line)


class _Deliveries:
    def __init__(self) -> None:
        self.partitions: Counter[int] = Counter()
        self.errors: list[str] = []

    def __call__(self, error: Any, message: Any) -> None:
        if error is not None:
            self.errors.append(error.str())
        else:
            self.partitions[message.partition()] += 1


def _require_topic(producer: Producer, conn: Any, topic: str) -> None:
    """Fail at once when the topic does not exist and the broker will not create it (the
    producer would otherwise retry until its message timeout)."""
    if topic_metadata(producer, conn, topic) is not None:
        return
    # Asking for it by name creates it where auto.create.topics.enable allows.
    answer = producer.list_topics(topic=topic, timeout=conn.timeout).topics.get(topic)
    if answer is not None and answer.error is not None:
        if answer.error.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.TOPIC_EXCEPTION):
            raise ToolError(f"cannot produce to {topic}: {answer.error.str()}")


def produce_lines(args: argparse.Namespace) -> int:
    if args.partition is not None and args.partition < 0:
        raise UsageError(f"--partition {args.partition} must not be negative")
    if args.key_delimiter == "":
        raise UsageError("--key-delimiter must not be empty")
    template = _template(args.input_format)
    stream, size = _input(args)
    conn = connection(args)
    producer = new_client(
        Producer,
        conn.conf(
            **{
                "acks": args.acks,
                "compression.type": args.compression,
                "linger.ms": 5,
                "message.timeout.ms": int(max(conn.timeout, 1) * 3000),
            }
        ),
    )
    check_reachable(producer, conn)
    _require_topic(producer, conn, args.topic)
    deliveries = _Deliveries()
    progress = Progress("bytes", size)
    if args.file is None and sys.stdin.isatty():
        progress.enabled = False  # someone typing lines: no progress line between them
    delimiter = args.key_delimiter.encode() if args.key_delimiter is not None else None
    headers = [(k, v.encode()) for k, v in args.header]
    sent = 0
    with stream:
        for raw in stream:
            line = (raw[:-1] if raw.endswith(b"\n") else raw).removesuffix(b"\r")
            if template is None:
                key, value = _split(line, delimiter)
                extra_headers, partition = [], args.partition
            else:
                try:
                    message = template.parse(line)
                except TemplateError as exc:
                    producer.flush(conn.timeout * 3)  # what came before it is still sent
                    raise ToolError(f"{exc} (after {sent} message(s))") from None
                key, value, extra_headers = message.key, message.value, message.headers
                partition = args.partition if message.partition is None else message.partition
            if args.null_empty:
                key, value = key or None, value or None
            extra = {"partition": partition} if partition is not None else {}
            _send(producer, args.topic, key, value, headers + extra_headers, deliveries, extra)
            sent += 1
            progress.advance(len(raw))
    left = producer.flush(conn.timeout * 3)
    progress.close()
    if left or deliveries.errors:
        reason = deliveries.errors[0] if deliveries.errors else "timed out"
        failed = left + len(deliveries.errors)
        raise ToolError(f"{failed} of {sent} message(s) not delivered to {args.topic}: {reason}")
    by_partition = dict(sorted(deliveries.partitions.items()))
    result = {"topic": args.topic, "produced": sent, "partitions": by_partition}
    rows = [[args.topic, p, n] for p, n in by_partition.items()]
    emit(args.format, result, [(None, ["TOPIC", "PARTITION", "MESSAGES"], rows)])
    return 0


def _template(text: str | None) -> InputTemplate | None:
    if text is None:
        return None
    try:
        return compile_template(text)
    except TemplateError as exc:
        raise UsageError(str(exc)) from None


def _send(
    producer: Producer,
    topic: str,
    key: bytes | None,
    value: bytes | None,
    headers: list,
    callback: Any,
    extra: dict,
) -> None:
    while True:
        try:
            producer.produce(
                topic, value, key, headers=headers or None, on_delivery=callback, **extra
            )
            producer.poll(0)
            return
        except BufferError:
            producer.poll(0.1)  # the local queue is full: let deliveries drain it
        except KafkaException as exc:
            raise ToolError(f"cannot produce to {topic}: {error_text(exc)}") from None
