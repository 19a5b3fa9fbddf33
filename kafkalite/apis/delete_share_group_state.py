"""DeleteShareGroupState (key 86), version 0:
an inter-broker share-state RPC (KIP-932), served by the share coordinator
(apis/share_group_state.py)."""

from __future__ import annotations

from typing import Any

from kafkalite.apis import share_group_state
from kafkalite.apis.base import ApiHandler, RequestContext


async def handle(ctx: RequestContext, request: Any) -> Any:
    return await share_group_state.delete(ctx, request)


API = ApiHandler(api_key=86, min_version=0, max_version=0, handle=handle, is_async=True)
