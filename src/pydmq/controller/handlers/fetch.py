"""Fetch (key 1), v12-v17, on the controller listener: a voter replicates ``__cluster_metadata``.

Only the metadata partition is served here (client fetches go to broker listeners). v12 names
the topic, v13+ uses Kafka's fixed metadata topic id; v15+ carries the fetching replica in
``replica_state``. The core may park the fetch (long poll) until entries arrive, the high
watermark moves, or ``max_wait`` passes; the driver completes it. Entries travel as
RecordBatch v2 (see :mod:`pydmq.controller.raft_wire`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller import raft_wire
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.fetch import FetchRequest, FetchResponse
from pydmq.raft import messages as rm

if TYPE_CHECKING:
    from pydmq.controller.runtime import ControllerRuntime

__all__ = ["make_handler"]


def make_handler(runtime: ControllerRuntime) -> ApiHandlerSpec:
    async def handle(ctx: RequestContext[object], request: FetchRequest) -> FetchResponse:
        try:
            raft_request = raft_wire.fetch_from_wire(request, ctx.api_version)
        except raft_wire.WireError:
            return FetchResponse(error_code=ErrorCode.INVALID_REQUEST)
        response = await runtime.driver.handle_request(raft_request)
        assert isinstance(response, rm.FetchResponse)
        return raft_wire.fetch_to_wire(response)

    return ApiHandlerSpec(1, 12, 17, handle, "Fetch")
