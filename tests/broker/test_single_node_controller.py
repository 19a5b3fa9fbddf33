"""The controller seam on a single node (broker/single_node_controller.py): a one-broker Kafka's
answers to ElectLeaders and the reassignment APIs, and dynamic broker configs kept in a file
and handed to the broker at once; DynamicBrokerConfig.apply takes only what concerns it."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path

import trio
from kio.schema.errors import ErrorCode

from kafkalite.broker.broker import DYNAMIC_CONFIGS_FILE, Broker, local_broker_info
from kafkalite.broker.cluster_metadata import TopicMetadata
from kafkalite.broker.controller_api import (
    ELECTION_NOT_NEEDED,
    NONE,
    PREFERRED,
    UNCLEAN,
    UNKNOWN_PARTITION,
    ApiError,
)
from kafkalite.broker.dynamic_config import DynamicBrokerConfig, FileDynamicConfigStore
from kafkalite.broker.metadata_store import SingleNodeMetadata
from kafkalite.broker.single_node_controller import SingleNodeController
from kafkalite.config import build_config

INVALID = ErrorCode.invalid_replica_assignment


class Recorder:
    def __init__(self) -> None:
        self.changes: list[tuple[str, dict[str, str]]] = []

    def on_broker_configs_changed(self, entity: str, configs: Mapping[str, str]) -> None:
        self.changes.append((entity, dict(configs)))


def controller(tmp_path: Path) -> SingleNodeController:
    config = build_config({"log.dirs": str(tmp_path)})
    metadata = SingleNodeMetadata(tmp_path, local_broker_info(config))
    metadata.load(0, None)
    metadata.create_topic(TopicMetadata("t", uuid.uuid4(), 2), [[0], [0]])
    return SingleNodeController(metadata, FileDynamicConfigStore(tmp_path / "dynamic.json"))


def test_elections_are_never_needed_and_unknown_partitions_are_named(tmp_path: Path) -> None:
    seam = controller(tmp_path)
    named = [("t", 1), ("t", 7), ("nope", 0)]
    for election_type in (PREFERRED, UNCLEAN):
        results = trio.run(seam.elect_leaders, election_type, named, 1.0)
        assert results == {
            ("t", 1): ELECTION_NOT_NEEDED,
            ("t", 7): ApiError(ErrorCode.unknown_topic_or_partition, "No such partition as t-7"),
            ("nope", 0): ApiError(ErrorCode.unknown_topic_or_partition, "No such topic as nope"),
        }
    every = trio.run(seam.elect_leaders, PREFERRED, None, 1.0)
    assert every == {("t", 0): ELECTION_NOT_NEEDED, ("t", 1): ELECTION_NOT_NEEDED}


def test_only_the_current_assignment_is_a_valid_reassignment(tmp_path: Path) -> None:
    seam = controller(tmp_path)
    targets = {0: (0,), 1: (1,)}
    results = trio.run(seam.alter_partition_reassignments, {"t": targets, "u": {0: (0,)}}, True)
    assert results == {
        "t": {
            0: NONE,
            1: ApiError(
                INVALID,
                "Replica assignment has brokers that are not alive. Replica list: [1], "
                "live broker list: [0]",
            ),
        },
        "u": {0: UNKNOWN_PARTITION},
    }
    refusals = trio.run(seam.alter_partition_reassignments, {"t": {0: None, 1: (0, 0)}}, False)
    assert refusals["t"] == {
        0: ApiError(ErrorCode.no_reassignment_in_progress, None),
        1: ApiError(
            INVALID, "Duplicate replica ids in partition reassignment replica list: [0, 0]"
        ),
    }
    grown = trio.run(seam.alter_partition_reassignments, {"t": {0: (0, 1)}}, False)
    assert grown["t"][0] == ApiError(
        ErrorCode.invalid_replication_factor, "The replication factor is changed from 1 to 2"
    )
    assert trio.run(seam.list_partition_reassignments) == {}


def test_broker_configs_are_stored_in_a_file_and_handed_over_at_once(tmp_path: Path) -> None:
    seam = controller(tmp_path)
    recorder = Recorder()
    seam.subscribe(recorder)
    assert seam.stored_broker_configs() == {}
    assert trio.run(seam.alter_broker_configs, "<default>", {"log.retention.ms": "5"}) == NONE
    assert trio.run(seam.alter_broker_configs, "0", {"message.max.bytes": "6"}) == NONE
    assert recorder.changes == [
        ("<default>", {"log.retention.ms": "5"}),
        ("0", {"message.max.bytes": "6"}),
    ]
    reopened = SingleNodeController(seam.metadata, FileDynamicConfigStore(seam.store.path))
    assert reopened.stored_broker_configs() == {
        "<default>": {"log.retention.ms": "5"},
        "0": {"message.max.bytes": "6"},
    }


def test_the_broker_applies_changes_through_the_seam_and_reads_them_at_start(
    tmp_path: Path,
) -> None:
    config = build_config({"log.dirs": str(tmp_path)})
    broker = Broker.open(config)
    assert isinstance(broker.controller, SingleNodeController)
    trio.run(broker.controller.alter_broker_configs, "<default>", {"log.retention.ms": "777"})
    assert broker.config.int("log.retention.ms") == 777
    assert broker.replica_manager.config.int("log.retention.ms") == 777
    broker.shutdown()
    assert (tmp_path / DYNAMIC_CONFIGS_FILE).exists()
    reopened = Broker.open(config)
    assert reopened.config.int("log.retention.ms") == 777
    reopened.shutdown()


def test_dynamic_config_applies_only_what_concerns_this_broker() -> None:
    dynamic = DynamicBrokerConfig(build_config({"broker.id": "3"}))
    dynamic.load({"<default>": {"log.retention.ms": "1"}, "4": {"log.retention.ms": "4"}})
    assert dynamic.effective().int("log.retention.ms") == 1
    assert not dynamic.apply("4", {"log.retention.ms": "44"})  # another broker's override
    assert not dynamic.apply("<default>", {"log.retention.ms": "1"})  # no change
    assert not dynamic.apply("<default>", {"log.retention.ms": "soon"})  # invalid: skipped
    assert dynamic.apply("3", {"log.retention.ms": "3"})
    assert dynamic.effective().int("log.retention.ms") == 3
    assert dynamic.configs("<default>") == {"log.retention.ms": "1"}
