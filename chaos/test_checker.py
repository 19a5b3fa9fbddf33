"""The checker on synthetic histories: a clean one passes; each planted defect is counted
exactly."""

from __future__ import annotations

import json
from pathlib import Path

from chaos import tiered
from chaos.checker import TXN_MUST_BE_ZERO, check, judge
from chaos.producer_sessions import producer_sessions
from tests.storage.batches import make_batch

T0 = 1_000.0


def history(count: int = 6, keys: int = 2):
    """p0 wrote `count` records to partition 0, all acknowledged, all in the log and read by one
    consumer that committed its position twice; one fault healed at T0 + 1."""
    acks = [
        {"t": T0 + 0.1 + i, "ev": "ack", "seq": i, "key": f"k{i % keys}", "sent": T0 + i,
         "partition": 0, "offset": i}
        for i in range(count)
    ]  # fmt: skip
    final = [
        {"t": T0 + 50, "ev": "record", "partition": 0, "offset": i, "key": f"k{i % keys}",
         "value": f"p0:{i}"}
        for i in range(count)
    ]  # fmt: skip
    final += [
        {"t": T0 + 51, "ev": "committed", "offsets": {"0": count}},
        {"t": T0 + 51, "ev": "done", "ends": {"0": count}, "unfinished": []},
    ]
    reads = [
        {"t": T0 + 0.2 + i, "ev": "read", "partition": 0, "offset": i, "value": f"p0:{i}"}
        for i in range(count)
    ]
    reads += [
        {"t": T0 + 3, "ev": "commit", "offsets": {"0": 3}},
        {"t": T0 + count + 1, "ev": "commit", "offsets": {"0": count}},
    ]
    faults = [{"kind": "kill", "node": 1, "start": T0 + 0.5, "heal": T0 + 1.0}]
    return {"p0": acks}, {"consumer-c0": reads}, final, faults


def test_a_clean_history_passes_with_its_figures():
    verdict = judge(*history())
    assert verdict["ok"] is True
    assert verdict["figures"]["acked"] == 6
    assert verdict["figures"]["in_log"] == 6
    assert verdict["figures"]["distinct_read"] == 6
    # The first write sent after the kill started (seq 1, sent T0+1) was acked at T0+1.1.
    assert verdict["faults"][0]["recover_s"] == 0.6
    assert verdict["faults"][0]["after_heal_s"] == 0.1


def test_a_lost_acknowledged_record_is_caught():
    producers, consumers, final, faults = history()
    final = [ev for ev in final if ev.get("value") != "p0:2"]
    verdict = judge(producers, consumers, final, faults)
    assert (verdict["ok"], verdict["acked_lost"]) == (False, 1)
    assert verdict["examples"]["acked_lost"] == ["p0:2"]
    assert verdict["read_not_in_log"] == 1  # the consumer had read it


def test_a_duplicate_is_caught():
    producers, consumers, final, faults = history()
    final.insert(6, {"t": T0, "ev": "record", "partition": 0, "offset": 6, "key": "k1",
                     "value": "p0:5"})  # fmt: skip
    verdict = judge(producers, consumers, final, faults)
    assert (verdict["ok"], verdict["duplicates"]) == (False, 1)
    assert verdict["examples"]["duplicates"] == {"p0:5": 2}


def test_a_copy_written_again_by_a_new_producer_epoch_is_a_resend_not_a_duplicate(
    tmp_path: Path,
):
    """The CI run of 2026-11-24 17:07 (seed 43, 3 brokers, transactional workload): p0:5 at
    offset 5 by producer 1002 epoch 0, and again at offset 6 by epoch 1 from sequence 0, after
    librdkafka bumped the epoch. Read from the replicas' segment files, as `check` does."""
    producers, consumers, final, faults = history()
    final.insert(6, {"t": T0, "ev": "record", "partition": 0, "offset": 6, "key": "k1",
                     "value": "p0:5"})  # fmt: skip
    for broker in (1, 2):
        log_dir = tmp_path / f"broker-{broker}-data" / "chaos-0"
        log_dir.mkdir(parents=True)
        batches = make_batch(6, producer_id=1002, producer_epoch=0, base_sequence=0)
        batches += make_batch(base_offset=6, producer_id=1002, producer_epoch=1, base_sequence=0)
        (log_dir / f"{0:020d}.log").write_bytes(batches)
    (tmp_path / "broker-1-data" / "chaos-out-0").mkdir()  # another topic's partition
    sessions = producer_sessions(tmp_path, "chaos")
    assert sessions[(0, 5)] == (1002, 0) and sessions[(0, 6)] == (1002, 1)

    verdict = judge(producers, consumers, final, faults, sessions=sessions)
    assert (verdict["ok"], verdict["duplicates"], verdict["order_violations"]) == (True, 0, 0)
    figures = verdict["figures"]
    assert (figures["resent_copies"], figures["resent_out_of_order"]) == (1, 1)
    assert verdict["examples"]["resent"] == {"p0:5": [(0, 5), (0, 6)]}


def test_copies_in_one_producer_session_of_unknown_sessions_or_of_an_older_epoch_are_duplicates():
    producers, consumers, final, faults = history()
    final.insert(6, {"t": T0, "ev": "record", "partition": 0, "offset": 6, "key": "k1",
                     "value": "p0:5"})  # fmt: skip
    one_session = {(0, offset): (1002, 0) for offset in range(7)}
    disagreeing = {**one_session, (0, 6): None}  # replicas that disagree: unknown
    zombie = {**one_session, (0, 5): (1002, 1)}  # epoch 0 written after epoch 1: not fenced
    for sessions in (one_session, disagreeing, zombie, None):
        verdict = judge(producers, consumers, final, faults, sessions=sessions)
        assert (verdict["duplicates"], verdict["order_violations"]) == (1, 1), sessions
        assert verdict["figures"]["resent_copies"] == 0


def test_a_reorder_within_a_key_is_caught():
    producers, consumers, final, faults = history()
    # k0 holds p0:0, p0:2, p0:4 at offsets 0, 2, 4: swap the last two records of k0.
    final[2]["value"], final[4]["value"] = "p0:4", "p0:2"
    verdict = judge(producers, consumers, final, faults)
    assert verdict["order_violations"] == 1
    assert verdict["examples"]["order_violations"][0]["value"] == "p0:2"
    assert verdict["acked_moved"] == 2  # each ack named the other's offset
    assert verdict["ok"] is False


def test_a_committed_offset_going_back_is_caught():
    producers, consumers, final, faults = history()
    consumers["consumer-c1"] = [{"t": T0 + 20, "ev": "commit", "offsets": {"0": 4}}]
    verdict = judge(producers, consumers, final, faults)
    assert (verdict["ok"], verdict["commit_regressions"]) == (False, 1)
    regression = verdict["examples"]["commit_regressions"][0]
    assert (regression["offset"], regression["after"], regression["by"]) == (4, 6, "consumer-c1")


def test_a_final_committed_offset_below_an_acknowledged_commit_is_caught():
    producers, consumers, final, faults = history()
    final[-2]["offsets"] = {"0": 3}
    assert judge(producers, consumers, final, faults)["commit_regressions"] == 1


def test_unacknowledged_records_are_allowed_only_after_an_ambiguous_error():
    producers, consumers, final, faults = history()
    producers["p0"] += [
        {"t": T0 + 9, "ev": "err", "seq": 6, "key": "k0", "sent": T0 + 6,
         "error": "_MSG_TIMED_OUT", "retriable": True, "fatal": False},
        {"t": T0 + 9, "ev": "unknown", "seq": 7, "key": "k1", "sent": T0 + 7},
    ]  # fmt: skip
    for seq in (6, 7, 8):  # 8 was never sent at all
        final.insert(seq, {"t": T0, "ev": "record", "partition": 0, "offset": seq,
                           "key": f"k{seq % 2}", "value": f"p0:{seq}"})  # fmt: skip
    verdict = judge(producers, consumers, final, faults)
    assert verdict["figures"]["unacked_allowed"] == 2
    assert verdict["unacked_disallowed"] == 1
    assert verdict["examples"]["unacked_disallowed"] == [{"value": "p0:8", "reason": "never sent"}]


def test_a_consumer_stalled_after_the_faults_healed_is_caught():
    producers, consumers, final, faults = history(count=40)
    # Reads stop at offset 9 (T0+9.2) while writes go on being acknowledged to T0+39.1.
    consumers["consumer-c0"] = [ev for ev in consumers["consumer-c0"]
                                if ev["ev"] != "read" or ev["offset"] < 10]  # fmt: skip
    verdict = judge(producers, consumers, final, faults, stall_bound_s=20)
    assert verdict["stalls"] == 1
    assert verdict["examples"]["stalls"][0]["seconds"] == 29.9
    assert judge(producers, consumers, final, faults, stall_bound_s=30)["stalls"] == 0


def test_a_produce_only_history_has_no_consumer_checks():
    producers, _, final, faults = history(count=40)
    verdict = judge(producers, {}, final, faults, stall_bound_s=5)
    assert (verdict["ok"], verdict["stalls"], verdict["figures"]["read_by_consumers"]) == (
        True,
        0,
        0,
    )


def test_check_reads_a_run_directory(tmp_path: Path):
    producers, consumers, final, faults = history()
    (tmp_path / "logs").mkdir()
    write = lambda path, events: path.write_text("".join(json.dumps(e) + "\n" for e in events))  # noqa: E731
    write(tmp_path / "logs" / "producer-p0.jsonl", producers["p0"])
    write(tmp_path / "logs" / "consumer-c0.jsonl", consumers["consumer-c0"])
    write(tmp_path / "final.jsonl", final)
    write(tmp_path / "faults.jsonl", faults)
    with open(tmp_path / "logs" / "producer-p0.jsonl", "a") as out:
        out.write('{"t": 1, "ev": "ack", "se')  # a line cut short by a SIGKILL
    verdict = check(tmp_path)
    assert (verdict["ok"], verdict["figures"]["acked"]) == (True, 6)


def transformed(count: int = 6, keys: int = 2) -> list[dict]:
    """The transform's committed output of history(): each input record once, and the transform
    group's committed offsets at the input's end."""
    out = [
        {"t": T0 + 52, "ev": "out", "partition": i % 2, "offset": i // 2, "key": f"k{i % keys}",
         "value": f"x:p0:{i}", "src": f"0:{i}"}
        for i in range(count)
    ]  # fmt: skip
    return out + [
        {"t": T0 + 53, "ev": "txn_committed", "offsets": {"0": count}, "input_ends": {"0": count}},
        {"t": T0 + 53, "ev": "out_done", "ends": {"0": 3, "1": 3}, "unfinished": []},
    ]


def judge_txn(final_out: list[dict]) -> dict:
    producers, _, final, faults = history()
    transforms = {"transform-t0": [{"t": T0 + 5, "ev": "txn_commit", "n": 6, "offsets": {}}]}
    return judge(producers, {}, final + final_out, faults, transforms=transforms)


def test_a_clean_transform_passes_with_its_figures():
    verdict = judge_txn(transformed())
    assert verdict["ok"] is True
    assert [verdict[k] for k in TXN_MUST_BE_ZERO] == [0, 0, 0, 0]
    assert verdict["txn_figures"]["input_records"] == 6
    assert verdict["txn_figures"]["output_committed"] == 6
    assert verdict["txn_figures"]["transactions_committed"] == 1


def test_a_transform_missing_duplicating_or_altering_records_is_counted_exactly():
    out = transformed()
    out = [ev for ev in out if ev.get("src") != "0:1"]  # missing
    out.insert(0, {**out[0], "offset": 9})  # 0:0 twice
    out[3] = {**out[3], "value": "x:p0:999"}  # 0:3 altered: a mismatch, and so also missing
    verdict = judge_txn(out)
    assert verdict["ok"] is False
    assert verdict["txn_missing"] == 2
    assert verdict["examples"]["txn_missing"] == ["0:1", "0:3"]
    assert verdict["txn_duplicates"] == 1
    assert verdict["txn_mismatch"] == 1
    assert verdict["txn_input_uncommitted"] == 0


def test_input_the_transform_group_never_committed_is_counted():
    out = transformed()
    out[-2] = {**out[-2], "offsets": {"0": 4}}
    verdict = judge_txn(out)
    assert (verdict["ok"], verdict["txn_input_uncommitted"]) == (False, 1)
    assert verdict["examples"]["txn_input_uncommitted"] == {"0": {"committed": 4, "end": 6}}


def test_a_transform_whose_output_was_never_read_back_fails_with_every_record_missing():
    producers, _, final, faults = history()
    transforms = {"transform-t0": [{"t": T0 + 5, "ev": "txn_commit", "n": 6, "offsets": {}}]}
    verdict = judge(producers, {}, final, faults, transforms=transforms)
    assert verdict["ok"] is False
    assert (verdict["txn_missing"], verdict["txn_input_uncommitted"]) == (6, 1)


def test_a_tiered_run_is_judged_on_its_use_of_the_store():
    tier = {"partitions": {"0": {"local_start": 2, "uploads": [[0, 100.0], [2, 200.0]]}}}
    final = [{"ev": "record", "partition": 0, "offset": offset} for offset in range(4)]
    healed = [{"kind": "s3", "heal": 150.0}, {"kind": "kill", "heal": 300.0}]
    judged = tiered.judge(tier, final, healed)
    assert (judged["read_below_local_start"], judged["remote_segments"]) == (2, 2)
    assert (judged["uploads_after_last_s3_heal"], judged["used"]) == (1, True)
    assert tiered.judge(tier, final, [{"kind": "s3", "heal": 250.0}])["used"] is False
    assert tiered.judge(tier, final[2:], [])["used"] is False  # nothing read from the store
    assert tiered.judge(tier, final, [])["uploads_after_last_s3_heal"] is None


def test_a_tiered_runs_sessions_are_also_read_from_the_segments_uploaded_to_the_store(tmp_path):
    """Local segments below the local log start are deleted; gofakes3 keeps each object as a
    file under its key, so the uploaded `.log` objects still name their batches' sessions."""
    bucket = tmp_path / "s3" / "buckets" / "kafkalite-tiered"
    uploaded = bucket / "chaos-AAAAAAAAAAAAAAAAAAA-AA" / "1" / f"{0:020d}-{'B' * 22}.log"
    uploaded.parent.mkdir(parents=True)
    uploaded.write_bytes(make_batch(6, producer_id=1002, producer_epoch=0, base_sequence=0))
    local = tmp_path / "broker-1-data" / "chaos-1"
    local.mkdir(parents=True)
    (local / f"{6:020d}.log").write_bytes(
        make_batch(base_offset=6, producer_id=1002, producer_epoch=1, base_sequence=0)
    )
    other = bucket / "chaos-out-AAAAAAAAAAAAAAAAAAA-AA" / "1" / f"{0:020d}-{'C' * 22}.log"
    other.parent.mkdir(parents=True)  # another topic's object
    other.write_bytes(make_batch(9, producer_id=7, producer_epoch=0, base_sequence=0))
    sessions = producer_sessions(tmp_path, "chaos")
    assert sessions == {(1, o): (1002, 0) for o in range(6)} | {(1, 6): (1002, 1)}
