"""The handler table: one entry per API key, from each API module's `API`.

ApiVersions advertises exactly this table; there is no second list.
"""

from __future__ import annotations

from kafkalite.apis import (
    api_versions,
    create_partitions,
    create_topics,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    fetch,
    find_coordinator,
    incremental_alter_configs,
    init_producer_id,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    produce,
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
    describe_cluster,
    find_coordinator,
)

HANDLERS: dict[int, ApiHandler] = {module.API.api_key: module.API for module in _MODULES}
