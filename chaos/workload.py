"""Client processes of a chaos run, each its own process (`python -m chaos.workload ROLE ...`) so a
fault in the harness cannot stall them. Stock confluent-kafka clients. Every line they write is
a JSON object with the wall-clock time `t` (all processes share the clock), flushed at once:

producer  idempotent, acks=all; record i has key k<i % keys> and value "<name>:<i>"; each is
          sent once (no application retries, so a duplicate can only come from the client's
          own retries, which idempotence must absorb). Lines: {"ev": "ack", "seq", "key",
          "sent", "t", "partition", "offset"} or {"ev": "err", "seq", "key", "sent", "t",
          "error", "retriable", "fatal"}; records still pending at exit: {"ev": "unknown"}.
consumer  a member of group `--group`, committing offsets itself every `--commit-every` s:
          {"ev": "read", "partition", "offset", "value"}, {"ev": "commit", "offsets": {p: o}},
          {"ev": "commit_err", "error"}.
transform the transactional consume-transform-produce loop: a member of group `--group`
          (read_committed) with its own transactional.id, writing each record it reads to
          `--out-topic` as key unchanged, value "x:<value>", header src "<partition>:<offset>",
          in one transaction per batch with the batch's offsets (send_offsets_to_transaction).
          Lines: {"ev": "txn_commit", "n", "offsets"}, {"ev": "txn_err", "stage", "error",
          "retriable", "abortable", "fatal"}, {"ev": "txn_restart"}, {"ev": "txn_caught_up"}.
          On an error it aborts (when it can), and starts again with a new producer (whose
          init_transactions fences the old one) and a new consumer, from the committed offsets.
          A transactional call stuck past `--stuck-after` s (librdkafka #5456:
          send_offsets_to_transaction ignores its timeout when the group coordinator goes
          away) logs {"ev": "txn_stuck", "stage"} and the process execs itself afresh.
share-consumer  a confluent-kafka ShareConsumer of share group `--group`, ACCEPTing every record
          (explicit mode, commit_sync per poll): chaos/share.py.
drain     after the faults healed: every partition from offset 0 to its high watermark
          ({"ev": "record", "partition", "offset", "key", "value"}), then the group's
          committed offsets ({"ev": "committed", "offsets"}) and {"ev": "done"}.
drain-output  the transform's output as a read_committed consumer sees it ({"ev": "out",
          "partition", "offset", "key", "value", "src"}), the transform group's committed
          offsets ({"ev": "txn_committed", "offsets", "input_ends"}) and {"ev": "out_done"}.

The producer and consumer run until `--stop-file` exists; the transform runs until it exists
and the transform group's committed offsets reached the input's ends (or `--finish-timeout`).
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition


def _emit(out: TextIO, **fields: Any) -> None:
    out.write(json.dumps({"t": round(time.time(), 6), **fields}) + "\n")
    out.flush()


def run_producer(args: argparse.Namespace, out: TextIO) -> int:
    producer = Producer(
        {
            **connection(args),
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": args.message_timeout_ms,
            "request.timeout.ms": 10000,
            "socket.connection.setup.timeout.ms": 5000,
            "reconnect.backoff.max.ms": 1000,
            "topic.metadata.refresh.interval.ms": 5000,
            "log_level": 4,
        }
    )
    pending: dict[int, float] = {}

    def delivered(err: KafkaError | None, msg: Any, seq: int, key: str) -> None:
        sent = pending.pop(seq, 0.0)
        if err is None:
            _emit(
                out,
                ev="ack",
                seq=seq,
                key=key,
                sent=sent,
                partition=msg.partition(),
                offset=msg.offset(),
            )
        else:
            _emit(
                out,
                ev="err",
                seq=seq,
                key=key,
                sent=sent,
                error=err.name(),
                retriable=err.retriable(),
                fatal=err.fatal(),
            )

    interval = 1.0 / args.rate
    seq = 0
    next_send = time.monotonic()
    while not os.path.exists(args.stop_file):
        now = time.monotonic()
        if now < next_send:
            producer.poll(min(next_send - now, 0.05))
            continue
        key = f"k{seq % args.keys}"
        value = f"{args.name}:{seq}"
        pending[seq] = time.time()
        try:
            producer.produce(
                args.topic,
                value.encode(),
                key.encode(),
                on_delivery=lambda e, m, s=seq, k=key: delivered(e, m, s, k),
            )
        except (BufferError, KafkaException) as exc:
            pending.pop(seq, None)
            _emit(
                out,
                ev="err",
                seq=seq,
                key=key,
                sent=time.time(),
                error=str(exc),
                retriable=True,
                fatal=False,
                local=True,
            )
            producer.poll(0.1)
        seq += 1
        next_send += interval
        producer.poll(0)
    producer.flush(args.flush_timeout)
    for seq in sorted(pending):
        _emit(out, ev="unknown", seq=seq, key=f"k{seq % args.keys}", sent=pending[seq])
    return 0


def run_consumer(args: argparse.Namespace, out: TextIO) -> int:
    consumer = Consumer(
        {
            **connection(args),
            "group.id": args.group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": args.session_timeout_ms,
            "heartbeat.interval.ms": max(args.session_timeout_ms // 6, 100),
            "socket.connection.setup.timeout.ms": 5000,
            "reconnect.backoff.max.ms": 1000,
            "log_level": 4,
        }
    )
    positions: dict[int, int] = {}

    def revoked(consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Commit what was read before giving the partitions away, then forget them: a later
        # commit of a partition another member owns now would move its offset back.
        gone = {tp.partition for tp in partitions}
        mine = {p: o for p, o in positions.items() if p in gone}
        if mine:
            _commit(consumer, mine, args.topic, out)
        for p in gone:
            positions.pop(p, None)

    def lost(consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            positions.pop(tp.partition, None)

    consumer.subscribe([args.topic], on_revoke=revoked, on_lost=lost)
    last_commit = time.monotonic()
    try:
        while not os.path.exists(args.stop_file):
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                value = (msg.value() or b"").decode()
                _emit(out, ev="read", partition=msg.partition(), offset=msg.offset(), value=value)
                positions[msg.partition()] = msg.offset() + 1
            elif msg is not None and msg.error().code() != KafkaError._PARTITION_EOF:
                _emit(out, ev="consume_err", error=msg.error().name())
            if positions and time.monotonic() - last_commit >= args.commit_every:
                last_commit = time.monotonic()
                _commit(consumer, positions, args.topic, out)
    finally:
        consumer.close()
    return 0


def _commit(consumer: Consumer, positions: dict[int, int], topic: str, out: TextIO) -> None:
    offsets = [TopicPartition(topic, p, o) for p, o in sorted(positions.items())]
    try:
        answered = consumer.commit(offsets=offsets, asynchronous=False) or []
    except KafkaException as exc:
        _emit(out, ev="commit_err", error=exc.args[0].name())
        return
    done = {tp.partition: tp.offset for tp in answered if tp.error is None}
    failed = {tp.partition: tp.error.name() for tp in answered if tp.error is not None}
    if done:
        _emit(out, ev="commit", offsets=done)
    if failed:
        _emit(out, ev="commit_err", error=failed)
    positions.clear()  # only partitions read since this commit are committed next time


def run_drain(args: argparse.Namespace, out: TextIO) -> int:
    consumer = Consumer(
        {
            **connection(args),
            "group.id": args.group,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "log_level": 4,
        }
    )
    metadata = consumer.list_topics(args.topic, timeout=30)
    partitions = sorted(metadata.topics[args.topic].partitions)
    ends = {
        p: consumer.get_watermark_offsets(TopicPartition(args.topic, p), timeout=30)[1]
        for p in partitions
    }
    consumer.assign([TopicPartition(args.topic, p, 0) for p in partitions])
    remaining = {p for p in partitions if ends[p] > 0}
    deadline = time.monotonic() + args.drain_timeout
    while remaining and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error() is not None:
            if (
                msg.error().code() == KafkaError._PARTITION_EOF
                and msg.offset() >= ends[msg.partition()]
            ):
                remaining.discard(msg.partition())
            continue
        _emit(
            out,
            ev="record",
            partition=msg.partition(),
            offset=msg.offset(),
            key=(msg.key() or b"").decode(),
            value=(msg.value() or b"").decode(),
        )
        if msg.offset() + 1 >= ends[msg.partition()]:
            remaining.discard(msg.partition())
    committed = consumer.committed([TopicPartition(args.topic, p) for p in partitions], timeout=30)
    _emit(out, ev="committed", offsets={tp.partition: tp.offset for tp in committed})
    _emit(out, ev="done", ends=ends, unfinished=sorted(remaining))
    consumer.close()
    return 0 if not remaining else 1


class _Restart(Exception):
    """The transform starts again with a new producer and consumer."""


class _Watchdog:
    """Execs the process afresh when a transactional call outlives `stuck_after` s."""

    def __init__(self, out: TextIO, stuck_after: float) -> None:
        self.out, self.stuck_after = out, stuck_after
        self.stage: str | None = None
        self.since = 0.0
        threading.Thread(target=self._watch, daemon=True).start()

    @contextlib.contextmanager
    def call(self, stage: str):
        self.stage, self.since = stage, time.monotonic()
        try:
            yield
        finally:
            self.stage = None

    def _watch(self) -> None:
        while True:
            time.sleep(1.0)
            stage = self.stage
            if stage is not None and time.monotonic() - self.since > self.stuck_after:
                _emit(self.out, ev="txn_stuck", stage=stage)
                os.execv(sys.executable, [sys.executable, "-m", "chaos.workload", *sys.argv[1:]])


def run_transform(args: argparse.Namespace, out: TextIO) -> int:
    args.watchdog = _Watchdog(out, args.stuck_after)
    finish_by: float | None = None
    while True:
        producer, consumer = _transform_clients(args, out)
        try:
            if _transform_loop(args, out, producer, consumer, finish_by):
                return 0
        except _Restart:
            _emit(out, ev="txn_restart")
        finally:
            _close_quietly(consumer)
        if os.path.exists(args.stop_file) and finish_by is None:
            finish_by = time.monotonic() + args.finish_timeout
        time.sleep(0.5)


def connection(args: argparse.Namespace) -> dict:
    """bootstrap.servers and, with --client-config (a run with --secure), the login."""
    settings = json.loads(Path(args.client_config).read_text()) if args.client_config else {}
    return {"bootstrap.servers": args.bootstrap, **settings}


def transactional_id(group: str, name: str) -> str:
    return f"chaos-{group}-{name}"


def _transform_clients(args: argparse.Namespace, out: TextIO) -> tuple[Producer, Consumer]:
    common = {
        **connection(args),
        "socket.connection.setup.timeout.ms": 5000,
        "reconnect.backoff.max.ms": 1000,
        "log_level": 4,
    }
    while True:
        producer = Producer({
            **common, "transactional.id": transactional_id(args.group, args.name), "linger.ms": 5,
            "transaction.timeout.ms": args.transaction_timeout_ms, "request.timeout.ms": 10000,
        })  # fmt: skip
        try:
            with args.watchdog.call("init"):  # fences and aborts a predecessor's
                producer.init_transactions(args.txn_timeout)
            break
        except KafkaException as exc:
            _txn_error(out, "init", exc)
            time.sleep(1.0)
    consumer = Consumer({
        **common, "group.id": args.group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "isolation.level": "read_committed",
        "session.timeout.ms": args.session_timeout_ms,
        "heartbeat.interval.ms": max(args.session_timeout_ms // 6, 100),
    })  # fmt: skip
    consumer.subscribe([args.topic])
    return producer, consumer


def _transform_loop(args, out, producer: Producer, consumer: Consumer, finish_by) -> bool:
    """Batches until stopped and caught up (True); raises _Restart after an error."""
    ends: dict[int, int] | None = None
    while True:
        stopping = os.path.exists(args.stop_file)
        if stopping and finish_by is None:
            finish_by = time.monotonic() + args.finish_timeout
        messages = [m for m in consumer.consume(args.batch, 0.5) if m.error() is None]
        if messages:
            _transaction(args, out, producer, consumer, messages)
        elif stopping:
            ends = ends or _input_ends(consumer, args.topic)
            if _caught_up(consumer, args.topic, ends) or time.monotonic() > finish_by:
                _emit(out, ev="txn_caught_up", ends=ends, timed_out=time.monotonic() > finish_by)
                return True


def _transaction(args, out, producer: Producer, consumer: Consumer, messages: list) -> None:
    offsets: dict[int, int] = {}
    try:
        producer.begin_transaction()
        for m in messages:
            producer.produce(
                args.out_topic, b"x:" + (m.value() or b""), key=m.key(),
                headers=[("src", f"{m.partition()}:{m.offset()}".encode())],
            )  # fmt: skip
            offsets[m.partition()] = max(offsets.get(m.partition(), 0), m.offset() + 1)
        tps = [TopicPartition(args.topic, p, o) for p, o in sorted(offsets.items())]
        with args.watchdog.call("send"):
            producer.send_offsets_to_transaction(
                tps, consumer.consumer_group_metadata(), args.txn_timeout
            )
    except KafkaException as exc:
        _txn_error(out, "send", exc)
        _txn_abort(args, out, producer)
    _txn_commit(args, out, producer)
    _emit(out, ev="txn_commit", n=len(messages), offsets=offsets)


def _txn_commit(args, out, producer: Producer) -> None:
    for _ in range(5):  # a retriable error leaves the outcome open: commit again
        try:
            with args.watchdog.call("commit"):
                producer.commit_transaction(args.txn_timeout)
            return
        except KafkaException as exc:
            error = _txn_error(out, "commit", exc)
            if not error.retriable() or error.txn_requires_abort():
                _txn_abort(args, out, producer)
    _txn_abort(args, out, producer)


def _txn_abort(args, out, producer: Producer) -> None:
    """Abort the open transaction (when the producer still can) and start again."""
    try:
        with args.watchdog.call("abort"):
            producer.abort_transaction(args.txn_timeout)
    except KafkaException as exc:
        _txn_error(out, "abort", exc)
    raise _Restart


def _txn_error(out: TextIO, stage: str, exc: KafkaException) -> KafkaError:
    error = exc.args[0]
    _emit(out, ev="txn_err", stage=stage, error=error.name(), retriable=error.retriable(),
          abortable=error.txn_requires_abort(), fatal=error.fatal())  # fmt: skip
    return error


def _input_ends(consumer: Consumer, topic: str) -> dict[int, int]:
    partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
    return {
        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
        for p in sorted(partitions)
    }


def _caught_up(consumer: Consumer, topic: str, ends: dict[int, int]) -> bool:
    try:
        committed = consumer.committed([TopicPartition(topic, p) for p in ends], timeout=10)
    except KafkaException:
        return False
    return all(tp.error is None and tp.offset >= ends[tp.partition] for tp in committed)


def _close_quietly(consumer: Consumer) -> None:
    try:
        consumer.close()
    except (KafkaException, RuntimeError):
        pass


def run_drain_output(args: argparse.Namespace, out: TextIO) -> int:
    """The transform's committed output (read_committed) and the transform group's offsets."""
    consumer = Consumer({
        **connection(args), "group.id": args.group,
        "enable.auto.commit": False, "isolation.level": "read_committed", "log_level": 4,
    })  # fmt: skip
    partitions = sorted(consumer.list_topics(args.out_topic, timeout=30)
                        .topics[args.out_topic].partitions)  # fmt: skip
    tps = [TopicPartition(args.out_topic, p) for p in partitions]
    # The high watermarks; markers take offsets, so the end is where the position gets to.
    ends = {tp.partition: consumer.get_watermark_offsets(tp, 30, False)[1] for tp in tps}
    consumer.assign([TopicPartition(args.out_topic, p, 0) for p in partitions])
    deadline = time.monotonic() + args.drain_timeout
    remaining = set(partitions)
    while remaining and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            src = dict(msg.headers() or []).get("src", b"").decode()
            _emit(out, ev="out", partition=msg.partition(), offset=msg.offset(),
                  key=(msg.key() or b"").decode(), value=(msg.value() or b"").decode(),
                  src=src)  # fmt: skip
        positions = consumer.position(tps)
        remaining = {tp.partition for tp in positions if ends[tp.partition] > max(tp.offset, 0)}
    inputs = sorted(consumer.list_topics(args.topic, timeout=30).topics[args.topic].partitions)
    committed = consumer.committed([TopicPartition(args.topic, p) for p in inputs], timeout=30)
    input_ends = {
        p: consumer.get_watermark_offsets(TopicPartition(args.topic, p), 30, False)[1]
        for p in inputs
    }
    _emit(out, ev="txn_committed", offsets={tp.partition: tp.offset for tp in committed},
          input_ends=input_ends)  # fmt: skip
    _emit(out, ev="out_done", ends=ends, unfinished=sorted(remaining))
    consumer.close()
    return 0 if not remaining else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos.workload")
    parser.add_argument(
        "role",
        choices=("producer", "consumer", "transform", "drain", "drain-output", "share-consumer"),
    )
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--client-config", default="", help="JSON: librdkafka security settings")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--name", default="p0")
    parser.add_argument("--group", default="chaos")
    parser.add_argument("--stop-file", default="")
    parser.add_argument("--rate", type=float, default=100.0, help="records/s")
    parser.add_argument("--keys", type=int, default=16)
    parser.add_argument("--message-timeout-ms", type=int, default=120000)
    parser.add_argument("--flush-timeout", type=float, default=150.0)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--commit-every", type=float, default=1.0)
    parser.add_argument("--drain-timeout", type=float, default=120.0)
    parser.add_argument("--out-topic", default="chaos-out")
    parser.add_argument("--batch", type=int, default=20, help="records per transaction")
    parser.add_argument("--txn-timeout", type=float, default=30.0, help="client calls, s")
    parser.add_argument("--transaction-timeout-ms", type=int, default=20000)
    parser.add_argument("--finish-timeout", type=float, default=150.0)
    parser.add_argument("--stuck-after", type=float, default=60.0, help="seconds")
    args = parser.parse_args(argv)
    # SIGUSR1 prints every thread's stack to stderr (the client's .log): the harness sends it
    # to a client that does not stop in time, before SIGKILL.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    with open(args.out, "a") as out:
        if args.role == "share-consumer":  # chaos/share.py (imports this module)
            from chaos.share import run_share_consumer

            return run_share_consumer(args, out)
        run = {"producer": run_producer, "consumer": run_consumer, "transform": run_transform,
               "drain": run_drain, "drain-output": run_drain_output}[args.role]  # fmt: skip
        return run(args, out)


if __name__ == "__main__":
    sys.exit(main())
