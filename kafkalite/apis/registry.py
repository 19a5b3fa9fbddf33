"""The handler table: one entry per API key, from each API module's `API`.

ApiVersions advertises exactly this table; there is no second list.
"""

from __future__ import annotations

from kafkalite.apis import (
    alter_configs,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_cluster,
    describe_configs,
    describe_groups,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sync_group,
    update_features,
)
from kafkalite.apis.base import ApiHandler

_MODULES = (
    produce,
    fetch,
    list_offsets,
    metadata,
    api_versions,
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
)

HANDLERS: dict[int, ApiHandler] = {module.API.api_key: module.API for module in _MODULES}
