"""DeleteGroups (key 42), v0-v2.

Deletes Empty groups with their committed offsets (tombstones in ``__consumer_offsets``).
Per group: INVALID_GROUP_ID (empty id), GROUP_ID_NOT_FOUND (unknown or Dead), NON_EMPTY_GROUP
(members present). No differences between versions besides flexible encoding (v2).
"""

from __future__ import annotations

from pydmq.broker.handler import ApiHandlerSpec, RequestContext
from pydmq.broker.handlers._groups import coordinator
from pydmq.protocol.messages.delete_groups import (
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
)

__all__ = ["HANDLER"]


def handle(ctx: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    results = coordinator(ctx).delete_groups(request.groups_names)
    return DeleteGroupsResponse(
        results=[
            DeletableGroupResult(group_id=g, error_code=results[g]) for g in request.groups_names
        ]
    )


HANDLER = ApiHandlerSpec(42, 0, 2, handle, "DeleteGroups")
