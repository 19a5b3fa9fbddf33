"""The harness's own parts: the seeded schedule and the TCP proxy's faults."""

from __future__ import annotations

import os
import random
import socket
import threading

import pytest

from chaos import faults as fault_ops
from chaos.coordinator_kill import (
    AnswerWatch,
    Plan,
    java_string_hash,
    partition_for,
    plan,
)
from chaos.proxy import TcpProxy, peer_process
from chaos.runner import Options, workload_clients
from chaos.schedule import COORDINATOR_ROLES, KINDS, Fault, make_schedule, usable_kinds
from chaos.targets import Target

TIMEOUTS = {"session": 6.0, "replica.lag.time.max": 5.0}
SEED2_FIRST = [("kill", 8.0, 3.08), ("blackhole", 17.42, 2.26), ("latency", 21.1, 5.91)]


def test_the_same_seed_gives_the_same_schedule_and_another_seed_another():
    kinds = ["kill", "pause", "drop", "latency"]
    first = make_schedule(42, 300, kinds, 3, TIMEOUTS)
    assert first == make_schedule(42, 300, kinds, 3, TIMEOUTS)
    assert first != make_schedule(43, 300, kinds, 3, TIMEOUTS)


def test_a_schedule_cycles_through_every_kind_and_leaves_time_to_recover():
    schedule = make_schedule(5, 600, list(KINDS), 3, TIMEOUTS)
    counts = {kind: sum(f.kind == kind for f in schedule) for kind in KINDS}
    assert min(counts.values()) >= 2, counts
    assert max(counts.values()) - min(counts.values()) <= 1, counts
    assert all(f.at + f.hold <= 450 for f in schedule)  # the last quarter is fault-free
    pauses = {f.hold for f in schedule if f.kind == "pause"}
    assert pauses <= {3.0, 9.0}  # half and one and a half times the longest timeout


def test_coordinator_kills_are_scheduled_for_both_coordinators_reproducibly():
    schedule = make_schedule(7, 300, ["coordinator-kill", "kill"], 3, TIMEOUTS)
    assert schedule == make_schedule(7, 300, ["coordinator-kill", "kill"], 3, TIMEOUTS)
    kills = [f for f in schedule if f.kind == "coordinator-kill"]
    assert len(kills) >= 4
    assert {f.role for f in kills} == set(COORDINATOR_ROLES)
    assert all(0.5 <= f.hold <= 4.0 for f in kills)
    assert usable_kinds(["coordinator-kill"], 1) == (["coordinator-kill"], [])


def test_the_coordinator_partition_is_kafkas():
    assert java_string_hash("hello") == 99162322  # Java's "hello".hashCode()
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112  # Java's collision
    assert java_string_hash("polygenelubricants") == -(2**31)  # Utils.abs(MIN_VALUE) is 0
    assert partition_for("polygenelubricants", 50) == 0
    assert java_string_hash("hellohello") < 0
    assert partition_for("hellohello", 50) == abs(java_string_hash("hellohello")) % 50


def test_a_coordinator_kill_watches_the_clients_that_coordinator_answers(tmp_path):
    rng = random.Random(1)
    txn = workload_clients(Options(workload="txn", consumers=2), tmp_path)
    assert txn.transactional_ids == {
        "transform-t0.jsonl": "chaos-chaos-txn-t0", "transform-t1.jsonl": "chaos-chaos-txn-t1",
    }  # fmt: skip
    chosen = plan("txn-coordinator", txn, rng)
    assert chosen is not None and chosen.role == "txn-coordinator"
    assert chosen.files == (next(k for k, v in txn.transactional_ids.items() if v == chosen.key),)
    assert chosen.events == {"txn_commit"}
    group = plan("group-coordinator", txn, rng)
    assert group == Plan("group-coordinator", "chaos-txn", ("transform-*.jsonl",),
                         frozenset({"txn_commit"}))  # fmt: skip
    consumers = workload_clients(Options(workload="produce-consume"), tmp_path)
    assert plan("txn-coordinator", consumers, rng) == Plan(
        "group-coordinator", "chaos", ("consumer-*.jsonl",), frozenset({"commit"}),
        "no transactional workload: the group coordinator",
    )  # fmt: skip
    assert plan("group-coordinator", workload_clients(Options(workload="produce"), tmp_path),
                rng) is None  # fmt: skip


def test_the_answer_watch_sees_only_new_whole_answer_lines(tmp_path):
    old = tmp_path / "consumer-c0.jsonl"
    old.write_text('{"t": 1, "ev": "commit", "offsets": {}}\n')
    watch = AnswerWatch(tmp_path, ("consumer-*.jsonl",))
    with open(old, "a") as out:
        out.write('{"t": 2, "ev": "read", "partition": 0}\n{"t": 3, "ev": "com')
    (tmp_path / "consumer-c1.jsonl").write_text('{"t": 4, "ev": "read"}\n')
    assert watch.next_answer(frozenset({"commit"}), timeout=0.05) is None
    with open(old, "a") as out:
        out.write('mit", "offsets": {"0": 5}}\n{"t": 6, "ev": "commit"}\n')
    answer = watch.next_answer(frozenset({"commit"}), timeout=5)
    assert answer == {"file": "consumer-c0.jsonl", "t": 3, "ev": "commit", "offsets": {"0": 5}}
    assert watch.next_answer(frozenset({"commit"}), timeout=5) == {
        "file": "consumer-c0.jsonl", "t": 6, "ev": "commit",
    }  # fmt: skip


def test_no_kinds_give_a_fault_free_baseline_run():  # --faults ""
    assert make_schedule(43, 90, [], 3, TIMEOUTS) == []


def test_cluster_only_faults_are_dropped_with_a_note_for_one_broker():
    kept, notes = usable_kinds(["kill", "partition", "zookeeper"], 1)
    assert kept == ["kill"]
    assert notes == [
        "partition: skipped, needs a cluster (--brokers > 1)",
        "zookeeper: skipped, needs a cluster (--brokers > 1)",
    ]
    with pytest.raises(ValueError, match="unknown fault kind 'flood'"):
        usable_kinds(["flood"], 3)


@pytest.fixture
def echo_server():
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=_echo, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


def _echo(conn: socket.socket) -> None:
    with conn:
        while data := conn.recv(65536):
            conn.sendall(data)


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def test_the_proxy_forwards_and_a_blackhole_delays_bytes_without_losing_them(echo_server):
    proxy = TcpProxy("test", echo_server).start()
    try:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as client:
            client.sendall(b"hello")
            assert _recv_exactly(client, 5) == b"hello"
            proxy.faults.blackhole = "downstream"
            client.sendall(b"held back")
            client.settimeout(0.3)
            with pytest.raises(TimeoutError):
                client.recv(100)
            proxy.heal()
            client.settimeout(10)
            assert _recv_exactly(client, 9) == b"held back"
    finally:
        proxy.stop()


def test_a_dropped_link_closes_connections_and_refuses_new_ones_until_healed(echo_server):
    proxy = TcpProxy("test", echo_server).start()
    try:
        client = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        client.sendall(b"x")
        assert _recv_exactly(client, 1) == b"x"
        proxy.set_down(True)
        assert client.recv(1) == b""  # closed by the proxy
        client.close()
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as again:
            assert again.recv(1) == b""  # accepted and closed at once
        proxy.set_down(False)
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as healed:
            healed.sendall(b"y")
            assert _recv_exactly(healed, 1) == b"y"
    finally:
        proxy.stop()


def test_a_partition_refuses_only_the_named_processes(echo_server):
    proxy = TcpProxy("test", echo_server).start()
    try:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as client:
            client.sendall(b"z")
            assert _recv_exactly(client, 1) == b"z"
            assert peer_process(client.getsockname()[1]) == os.getpid()
            proxy.refuse(frozenset({os.getpid() + 1_000_000}))  # someone else: kept
            client.sendall(b"w")
            assert _recv_exactly(client, 1) == b"w"
            proxy.refuse(frozenset({os.getpid()}))  # this process: cut off
            assert client.recv(1) == b""
    finally:
        proxy.stop()


def test_s3_faults_are_scheduled_for_the_store_in_both_modes_without_moving_other_seeds():
    schedule = make_schedule(7, 300, ["s3", "kill"], 1, TIMEOUTS)
    assert schedule == make_schedule(7, 300, ["s3", "kill"], 1, TIMEOUTS)
    stores = [f for f in schedule if f.kind == "s3"]
    assert len(stores) >= 4 and {f.role for f in stores} == {"s3"}
    assert {f.params["mode"] for f in stores} == {"down", "stall"}
    assert all(2.0 <= f.hold <= 10.0 for f in stores)
    assert usable_kinds(["s3"], 1) == (["s3"], []) and usable_kinds(["s3"], 3) == (["s3"], [])
    # The CI's seeds draw nothing for a kind they do not use: seed 2's run is unchanged.
    seed2 = make_schedule(2, 120, ["kill", "pause", "term", "drop", "latency", "blackhole"], 1,
                          TIMEOUTS)  # fmt: skip
    assert [(f.kind, f.at, f.hold) for f in seed2[:3]] == SEED2_FIRST


def test_an_s3_fault_is_skipped_where_nothing_is_tiered_to_a_store_of_the_harness():
    fault = Fault(8.0, "s3", 2.0, "s3", {"mode": "down"})
    on_kafka = fault_ops.apply(fault, Target("kafka", {}, {}), "chaos", random.Random(1), {})
    assert on_kafka["skipped"] == "Kafka tiers through a plugin RSM"
    assert Options(target="kafka", faults=["s3"]).is_tiered() is False
    assert Options(faults=["kill", "s3"]).is_tiered() and Options(tiered=True).is_tiered()
    assert not Options(faults=["kill"]).is_tiered()
