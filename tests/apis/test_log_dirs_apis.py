"""DescribeLogDirs and AlterReplicaLogDirs over several log directories (JBOD)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kafkalite.apis import alter_replica_log_dirs, describe_log_dirs
from kafkalite.broker.broker import Broker
from kafkalite.config import build_config
from kafkalite.protocol.entities import make

from .harness import call, record_batch


@pytest.fixture
def dirs(tmp_path: Path) -> list[Path]:
    return [tmp_path / "d1", tmp_path / "d2"]


def open_jbod(dirs: list[Path]) -> Broker:
    return Broker.open(build_config({"log.dirs": ",".join(str(d) for d in dirs)}))


@pytest.fixture
def jbod(dirs: list[Path]) -> Any:
    broker = open_jbod(dirs)
    assert broker.admin_manager.create_topic("t", 4)[0].ok
    for index in range(4):
        batch = record_batch([b"v"] * (index + 1))
        results, _ = broker.replica_manager.append_records({("t", index): batch}, 1)
        assert results[("t", index)].error is ErrorCode.none
    yield broker
    broker.shutdown()


def describe(broker: Broker, version: int, topics: dict[str, list[int]] | None = None) -> Any:
    def build(m: Any) -> Any:
        wanted = None
        if topics is not None:
            wanted = tuple(
                make(m.DescribableLogDirTopic, topic=name, partitions=tuple(parts))
                for name, parts in topics.items()
            )
        return make(m.DescribeLogDirsRequest, topics=wanted)

    return call(broker, describe_log_dirs.API, version, build)


def layout(response: Any) -> dict[str, dict[int, tuple[int, int]]]:
    """log dir -> partition -> (size, offset lag)."""
    return {
        Path(result.log_dir).name: {
            p.partition_index: (p.partition_size, p.offset_lag)
            for topic in result.topics
            for p in topic.partitions
        }
        for result in response.results
    }


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
def test_partitions_spread_over_the_dirs(jbod: Broker, dirs: list[Path], version: int) -> None:
    response = describe(jbod, version)
    sizes = {i: jbod.replica_manager.partition("t", i).log.size_in_bytes for i in range(4)}
    assert layout(response) == {
        "d1": {0: (sizes[0], 0), 2: (sizes[2], 0)},
        "d2": {1: (sizes[1], 0), 3: (sizes[3], 0)},
    }
    assert [r.log_dir for r in response.results] == [str(d.absolute()) for d in dirs]
    assert all(r.error_code == ErrorCode.none for r in response.results)
    if version >= 4:
        assert all(r.total_bytes >= r.usable_bytes > 0 for r in response.results)


def test_describe_only_the_requested_partitions(jbod: Broker) -> None:
    response = describe(jbod, 4, {"t": [1, 2], "missing": [0]})
    assert {d: sorted(p) for d, p in layout(response).items()} == {"d1": [2], "d2": [1]}


def alter(broker: Broker, version: int, path: str, topic: str, *partitions: int) -> list[Any]:
    def build(m: Any) -> Any:
        moved = make(m.AlterReplicaLogDirTopic, name=topic, partitions=partitions)
        return make(
            m.AlterReplicaLogDirsRequest,
            dirs=(make(m.AlterReplicaLogDir, path=path, topics=(moved,)),),
        )

    (result,) = call(broker, alter_replica_log_dirs.API, version, build).results
    return [(p.partition_index, p.error_code) for p in result.partitions]


@pytest.mark.parametrize("version", [1, 2])
def test_a_partition_moves_and_is_found_there_after_a_restart(
    jbod: Broker, dirs: list[Path], version: int
) -> None:
    size = jbod.replica_manager.partition("t", 0).log.size_in_bytes
    assert alter(jbod, version, str(dirs[1]), "t", 0, 1) == [
        (0, ErrorCode.none),
        (1, ErrorCode.none),  # already there
    ]
    assert not (dirs[0] / "t-0").exists() and (dirs[1] / "t-0").is_dir()
    assert layout(describe(jbod, 4))["d2"][0] == (size, 0)
    results, _ = jbod.replica_manager.append_records({("t", 0): record_batch([b"after"])}, 1)
    assert (results[("t", 0)].error, results[("t", 0)].base_offset) == (ErrorCode.none, 1)
    jbod.shutdown()
    again = open_jbod(dirs)
    try:
        log = again.replica_manager.partition("t", 0).log
        assert (log.dir.parent, log.log_end_offset) == (dirs[1], 2)
    finally:
        again.shutdown()


def test_unknown_dirs_and_partitions(jbod: Broker, tmp_path: Path) -> None:
    assert alter(jbod, 2, str(tmp_path / "elsewhere"), "t", 0) == [(0, ErrorCode.log_dir_not_found)]
    assert alter(jbod, 2, str(tmp_path / "d2"), "t", 9) == [(9, ErrorCode.replica_not_available)]
    assert alter(jbod, 2, str(tmp_path / "d2"), "nope", 0) == [(0, ErrorCode.replica_not_available)]
