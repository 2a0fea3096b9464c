"""FetchSnapshot (key 59), v0-v1: a voter far behind copies the leader's metadata snapshot."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller import raft_wire
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.fetch_snapshot import FetchSnapshotRequest, FetchSnapshotResponse
from pydmq.raft import messages as rm

if TYPE_CHECKING:
    from pydmq.controller.runtime import ControllerRuntime

__all__ = ["make_handler"]


def make_handler(runtime: ControllerRuntime) -> ApiHandlerSpec:
    async def handle(
        ctx: RequestContext[object], request: FetchSnapshotRequest
    ) -> FetchSnapshotResponse:
        try:
            raft_request = raft_wire.fetch_snapshot_from_wire(request)
        except raft_wire.WireError:
            return FetchSnapshotResponse(error_code=ErrorCode.INVALID_REQUEST)
        response = await runtime.driver.handle_request(raft_request)
        assert isinstance(response, rm.FetchSnapshotResponse)
        return raft_wire.fetch_snapshot_to_wire(response)

    return ApiHandlerSpec(59, 0, 1, handle, "FetchSnapshot")
