"""DeleteGroups (key 42), v0-v2.

Deletes Empty groups with their committed offsets (tombstones in ``__consumer_offsets``); an
Empty share group (KIP-932) with its share-partitions' state.
Per group: INVALID_GROUP_ID (empty id), GROUP_ID_NOT_FOUND (unknown or Dead), NON_EMPTY_GROUP
(members present), NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when the group is not
coordinated here / still loading. Cluster mode: answered once the tombstones are committed.
No differences between versions besides flexible encoding (v2).

Authorization (as Kafka): DELETE on each group, else that group is
GROUP_AUTHORIZATION_FAILED and left alone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._groups import GROUP_DENIED, coordinator, group_denied
from pydmq.broker.handlers._shares import share_groups
from pydmq.protocol.acl import AclOperation
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.delete_groups import (
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
)
from pydmq.shares.offsets import ShareGroupOffsets

__all__ = ["HANDLER"]


def handle(ctx: BrokerContext, request: DeleteGroupsRequest) -> object:
    group_coordinator = coordinator(ctx)
    mark = group_coordinator.write_mark
    denied = [g for g in request.groups_names if group_denied(ctx, g, AclOperation.DELETE)]
    shares = share_groups(ctx)
    allowed = [g for g in request.groups_names if g not in denied]
    share_ids = [g for g in allowed if g in shares.groups.groups]
    allowed = [g for g in allowed if g not in share_ids]
    results = group_coordinator.delete_groups(allowed) if allowed else {}
    results.update((g, shares.delete_group(g)) for g in share_ids)
    results.update((g, GROUP_DENIED) for g in denied)
    committed: dict[str, Awaitable[int]] = {
        g: group_coordinator.await_writes(g, mark)
        for g, code in results.items()
        if code == 0 and group_coordinator.wrote_since(g, mark)
    }
    offsets = shares.offsets
    if offsets is not None:
        committed.update(
            (g, _state_deleted(offsets, g)) for g in share_ids if results[g] == ErrorCode.NONE
        )
    if committed:
        return _when_committed(committed, request, results)
    return _response(request, results)


async def _state_deleted(offsets: ShareGroupOffsets, group_id: str) -> int:
    """A deleted share group's share-partitions' state deleted; the first error."""
    codes = await offsets.delete(offsets.candidates(group_id))
    return next((c for c in codes.values() if c), ErrorCode.NONE)


async def _when_committed(
    committed: Mapping[str, Awaitable[int]],
    request: DeleteGroupsRequest,
    results: dict[str, int],
) -> DeleteGroupsResponse:
    for group_id, waiter in committed.items():
        results[group_id] = await waiter
    return _response(request, results)


def _response(request: DeleteGroupsRequest, results: dict[str, int]) -> DeleteGroupsResponse:
    return DeleteGroupsResponse(
        results=[
            DeletableGroupResult(group_id=g, error_code=results[g]) for g in request.groups_names
        ]
    )


HANDLER = ApiHandlerSpec(42, 0, 2, handle, "DeleteGroups")
