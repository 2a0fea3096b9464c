"""BeginQuorumEpoch (key 53), v0-v1: a newly elected leader announces its epoch to this voter."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller import raft_wire
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.begin_quorum_epoch import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
)
from pydmq.raft import messages as rm

if TYPE_CHECKING:
    from pydmq.controller.runtime import ControllerRuntime

__all__ = ["make_handler"]


def make_handler(runtime: ControllerRuntime) -> ApiHandlerSpec:
    async def handle(
        ctx: RequestContext[object], request: BeginQuorumEpochRequest
    ) -> BeginQuorumEpochResponse:
        try:
            raft_request = raft_wire.begin_from_wire(request)
        except raft_wire.WireError:
            return BeginQuorumEpochResponse(error_code=ErrorCode.INVALID_REQUEST)
        response = await runtime.driver.handle_request(raft_request)
        assert isinstance(response, rm.BeginQuorumEpochResponse)
        return raft_wire.begin_to_wire(response)

    return ApiHandlerSpec(53, 0, 1, handle, "BeginQuorumEpoch")
