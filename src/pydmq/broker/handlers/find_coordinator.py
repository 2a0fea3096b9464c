"""FindCoordinator (key 10), v0-v6.

Key type 0 (group): every group is coordinated by this node, answered with the advertised
host/port of the listener the request came in on; ``__consumer_offsets`` is created (internal,
compacted) on first use. Key type 1 (transaction): COORDINATOR_NOT_AVAILABLE until the
transaction coordinator exists. Any other key type: INVALID_REQUEST.
v0-v3 carry one key and answer in the top-level fields (error message from v1); v4+ batch
``coordinator_keys`` and answer in ``coordinators``.
"""

from __future__ import annotations

import logging

from pydmq.broker.handler import ApiHandlerSpec, RequestContext
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.find_coordinator import (
    Coordinator,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)

__all__ = ["HANDLER"]

log = logging.getLogger(__name__)

_GROUP = 0
_TRANSACTION = 1


def _find(ctx: RequestContext, key: str, key_type: int) -> Coordinator:
    if key_type == _GROUP:
        try:
            ctx.broker.group_coordinator_log.ensure_created()
        except Exception:
            log.exception("creating __consumer_offsets failed")
            return Coordinator(
                key=key,
                node_id=-1,
                host="",
                port=-1,
                error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                error_message="The coordinator is not available.",
            )
        host, port = ctx.broker.advertised_endpoint(ctx.listener)
        return Coordinator(key=key, node_id=ctx.broker.node_id, host=host, port=port)
    if key_type == _TRANSACTION:
        return Coordinator(
            key=key,
            node_id=-1,
            host="",
            port=-1,
            error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
            error_message="The coordinator is not available.",
        )
    return Coordinator(
        key=key,
        node_id=-1,
        host="",
        port=-1,
        error_code=ErrorCode.INVALID_REQUEST,
        error_message=f"Unknown coordinator type {key_type}",
    )


def handle(ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    if ctx.api_version >= 4:
        return FindCoordinatorResponse(
            coordinators=[_find(ctx, key, request.key_type) for key in request.coordinator_keys]
        )
    found = _find(ctx, request.key, request.key_type if ctx.api_version >= 1 else _GROUP)
    return FindCoordinatorResponse(
        error_code=found.error_code,
        error_message=found.error_message,
        node_id=found.node_id,
        host=found.host,
        port=found.port,
    )


HANDLER = ApiHandlerSpec(10, 0, 6, handle, "FindCoordinator")
