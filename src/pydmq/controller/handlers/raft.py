"""The Raft requests of the controller listener: Vote (52, v0-v2), BeginQuorumEpoch (53,
v0-v1), EndQuorumEpoch (54, v0-v1), Fetch (1, v12-v17) and FetchSnapshot (59, v0-v1).

Each is one exchange with the Raft core: the wire request is decoded into the core's value
(:mod:`pydmq.controller.raft_wire`), the core answers through the driver (which persists
what it must first: a granted vote before its answer leaves), and the answer is encoded
back. A request that does not name ``__cluster_metadata``-0 is answered INVALID_REQUEST.
DescribeQuorum is answered without the core's request path (``describe_quorum.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller import raft_wire
from pydmq.controller.handlers._authorize import cluster_action_denied
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.begin_quorum_epoch import BeginQuorumEpochResponse
from pydmq.protocol.messages.end_quorum_epoch import EndQuorumEpochResponse
from pydmq.protocol.messages.fetch import FetchResponse
from pydmq.protocol.messages.fetch_snapshot import FetchSnapshotResponse
from pydmq.protocol.messages.vote import VoteResponse
from pydmq.raft import messages as rm

if TYPE_CHECKING:
    from pydmq.controller.runtime import ControllerRuntime

__all__ = ["raft_handler_specs"]

CoreResponseT = TypeVar("CoreResponseT", bound=rm.RaftResponse)
WireResponseT = TypeVar("WireResponseT")


def raft_handler_specs(runtime: ControllerRuntime) -> list[ApiHandlerSpec]:
    """The five Raft request handlers, bound to ``runtime``'s driver."""
    vote = _exchange(
        runtime,
        lambda request, _version: raft_wire.vote_from_wire(request),
        rm.VoteResponse,
        raft_wire.vote_to_wire,
        VoteResponse,
    )
    begin = _exchange(
        runtime,
        lambda request, _version: raft_wire.begin_from_wire(request),
        rm.BeginQuorumEpochResponse,
        raft_wire.begin_to_wire,
        BeginQuorumEpochResponse,
    )
    end = _exchange(
        runtime,
        raft_wire.end_from_wire,
        rm.EndQuorumEpochResponse,
        raft_wire.end_to_wire,
        EndQuorumEpochResponse,
    )
    fetch = _exchange(
        runtime, raft_wire.fetch_from_wire, rm.FetchResponse, raft_wire.fetch_to_wire, FetchResponse
    )
    fetch_snapshot = _exchange(
        runtime,
        lambda request, _version: raft_wire.fetch_snapshot_from_wire(request),
        rm.FetchSnapshotResponse,
        raft_wire.fetch_snapshot_to_wire,
        FetchSnapshotResponse,
    )
    return [
        ApiHandlerSpec(52, 0, 2, vote, "Vote"),
        ApiHandlerSpec(53, 0, 1, begin, "BeginQuorumEpoch"),
        ApiHandlerSpec(54, 0, 1, end, "EndQuorumEpoch"),
        ApiHandlerSpec(1, 12, 17, fetch, "Fetch"),
        ApiHandlerSpec(59, 0, 1, fetch_snapshot, "FetchSnapshot"),
    ]


def _exchange(
    runtime: ControllerRuntime,
    from_wire: Callable[[Any, int], rm.RaftRequest],
    answer: type[CoreResponseT],
    to_wire: Callable[[CoreResponseT], WireResponseT],
    refused: Callable[..., WireResponseT],
) -> Callable[[RequestContext[object], Any], Awaitable[WireResponseT]]:
    """A handler taking a wire request through the core: ``from_wire(request, version)``,
    the core's ``answer`` back through ``to_wire``; a request naming no
    ``__cluster_metadata``-0 gets ``refused(error_code=INVALID_REQUEST)``."""

    async def handle(ctx: RequestContext[object], request: Any) -> WireResponseT:
        if cluster_action_denied(runtime.authorizer, ctx):
            return refused(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        try:
            raft_request = from_wire(request, ctx.api_version)
        except raft_wire.WireError:
            return refused(error_code=ErrorCode.INVALID_REQUEST)
        response = await runtime.driver.handle_request(raft_request)
        assert isinstance(response, answer)
        return to_wire(response)

    return handle
