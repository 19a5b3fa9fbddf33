"""Property test: random appends, rolls, reopens, crashes and truncations vs a simple model."""

from __future__ import annotations

from batches import make_batch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalite.storage.batch import iter_batches
from kafkalite.storage.log import LogConfig, UnifiedLog

CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=120)

operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 4), st.integers(1, 120), st.integers(0, 99)),
        st.tuples(st.just("roll")),
        st.tuples(st.just("reopen")),
        st.tuples(st.just("crash")),
        st.tuples(st.just("garbage"), st.binary(min_size=1, max_size=80)),
        st.tuples(st.just("truncate"), st.floats(0, 1)),
        st.tuples(st.just("delete_before"), st.floats(0, 1)),
    ),
    max_size=40,
)


def drop_fds(log: UnifiedLog) -> None:
    for segment in log.segments:
        segment.close_files()


def read_all(log: UnifiedLog) -> list[tuple[int, int]]:
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        ranges = [
            (h.base_offset, h.last_offset) for _, h in iter_batches(log.read(offset, 700, 10**9))
        ]
        assert ranges, offset
        out += ranges
        offset = ranges[-1][1] + 1
    return out


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=operations, target=st.integers(0, 100))
def test_log_matches_model(tmp_path_factory, ops, target) -> None:
    path = tmp_path_factory.mktemp("model") / "t-0"
    log = UnifiedLog.open(path, CONFIG, now_ms=0)
    model: list[tuple[int, int]] = []  # batch offset ranges still in the log
    stamps: dict[int, int] = {}  # batch base offset -> timestamp of all its records
    start = 0
    for op in ops:
        leo = model[-1][1] + 1 if model else start
        if op[0] == "append":
            batch = make_batch(op[1], value_size=op[2], base_timestamp=op[3])
            result = log.append_as_leader(batch, 0, now_ms=0)
            assert result.first_offset == leo
            model.append((leo, leo + op[1] - 1))
            stamps[leo] = op[3]
        elif op[0] == "roll":
            log.roll(0)
        elif op[0] in ("reopen", "crash", "garbage"):
            if op[0] == "reopen":
                log.close()
            else:  # kill -9: the OS closes the fds, nothing is flushed or snapshotted
                drop_fds(log)
            if op[0] == "garbage":  # a torn write after the last acknowledged append
                active = path / f"{log.active_segment.base_offset:020d}.log"
                with active.open("ab") as f:
                    f.write(op[1])
            point = log.recovery_point
            log = UnifiedLog.open(
                path, CONFIG, now_ms=0, recovery_point=point, log_start_offset=start
            )
        elif op[0] == "truncate" and model:
            keep = int(op[1] * len(model))
            cut = model[keep][0] if keep < len(model) else leo
            if cut >= start:
                log.truncate_to(cut)
                model = model[:keep]
        elif op[0] == "delete_before" and model:
            target = int(start + op[1] * (leo - start))
            start = max(start, log.delete_records_before(target))
            assert start == max(target, start)
        leo = model[-1][1] + 1 if model else start
        assert log.log_end_offset == leo
        assert log.log_start_offset == start
        assert read_all(log) == [r for r in model if r[1] >= start]
        hits = [
            (max(b, start), stamps[b]) for b, last in model if last >= start and stamps[b] >= target
        ]
        found = log.fetch_offset_by_timestamp(target)
        assert (found[:2] if found else None) == (hits[0] if hits else None)
    log.close()
