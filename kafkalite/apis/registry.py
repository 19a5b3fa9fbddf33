"""The handler table: one entry per API key, from each API module's `API`.

ApiVersions advertises exactly this table; there is no second list.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafkalite.apis import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    alter_partition_reassignments,
    alter_replica_log_dirs,
    alter_share_group_offsets,
    alter_user_scram_credentials,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_share_group_offsets,
    delete_topics,
    describe_acls,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_share_group_offsets,
    describe_topic_partitions,
    describe_transactions,
    describe_user_scram_credentials,
    elect_leaders,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_config_resources,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sasl_authenticate,
    sasl_handshake,
    share_acknowledge,
    share_fetch,
    share_group_describe,
    share_group_heartbeat,
    share_group_state,
    sync_group,
    txn_offset_commit,
    update_features,
    write_txn_markers,
)
from kafkalite.apis.base import ApiHandler

_MODULES = (
    produce,
    fetch,
    list_offsets,
    metadata,
    init_producer_id,
    offset_for_leader_epoch,
    create_topics,
    delete_topics,
    delete_records,
    describe_configs,
    create_partitions,
    incremental_alter_configs,
    alter_configs,
    describe_cluster,
    find_coordinator,
    offset_commit,
    offset_fetch,
    join_group,
    heartbeat,
    leave_group,
    sync_group,
    describe_groups,
    list_groups,
    delete_groups,
    offset_delete,
    consumer_group_heartbeat,
    consumer_group_describe,
    describe_acls,
    create_acls,
    delete_acls,
    update_features,
    list_config_resources,
    describe_topic_partitions,
    describe_log_dirs,
    alter_replica_log_dirs,
    write_txn_markers,
    add_partitions_to_txn,
    add_offsets_to_txn,
    end_txn,
    txn_offset_commit,
    describe_transactions,
    list_transactions,
    describe_producers,
    elect_leaders,
    alter_partition_reassignments,
    list_partition_reassignments,
    sasl_handshake,
    sasl_authenticate,
    describe_user_scram_credentials,
    alter_user_scram_credentials,
    share_group_heartbeat,
    share_group_describe,
    share_fetch,
    share_acknowledge,
    describe_share_group_offsets,
    alter_share_group_offsets,
    delete_share_group_offsets,
)

HANDLERS: dict[int, ApiHandler] = {module.API.api_key: module.API for module in _MODULES}
for _state_api in (  # the inter-broker share-state RPCs (KIP-932)
    share_group_state.INITIALIZE_API,
    share_group_state.READ_API,
    share_group_state.WRITE_API,
    share_group_state.DELETE_API,
    share_group_state.SUMMARY_API,
):
    HANDLERS[_state_api.api_key] = _state_api
HANDLERS[api_versions.API_KEY] = api_versions.api(HANDLERS)  # advertises this table


def api_names(handlers: Mapping[int, ApiHandler]) -> dict[int, str]:
    """Kafka's ApiKeys names (the metrics' `request` label), from the handlers' modules."""
    return {key: _camel_case(handler.handle.__module__) for key, handler in handlers.items()}


def _camel_case(module: str) -> str:
    return "".join(part.capitalize() for part in module.rsplit(".", 1)[-1].split("_"))
