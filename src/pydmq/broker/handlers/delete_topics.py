"""DeleteTopics (key 20), v1-v6.

By name (all versions) or by topic id (v6+; UNKNOWN_TOPIC_ID). Unknown names get
UNKNOWN_TOPIC_OR_PARTITION; ``delete.topic.enable=false`` gives TOPIC_DELETION_DISABLED.
Deleting removes the partitions' logs and their fetch-session entries. One operation of the
controller, one metadata log entry, for the whole request (up to the decode budget, 110,000
names).

The request is forwarded to the controller at the same version and its response returned
(:mod:`pydmq.broker.controller_channel`: the active controller in cluster mode,
REQUEST_TIMED_OUT per item when none answers; a single node's own, in process).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._forward import forward_to_controller
from pydmq.protocol.messages.delete_topics import (
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)

__all__ = ["HANDLER"]

_ZERO_UUID = uuid.UUID(int=0)


def handle(ctx: BrokerContext, request: DeleteTopicsRequest) -> Awaitable[DeleteTopicsResponse]:
    def unavailable(code: int, message: str) -> DeleteTopicsResponse:
        if ctx.api_version >= 6:
            wanted = [(t.name, t.topic_id) for t in request.topics]
        else:
            wanted = [(name, _ZERO_UUID) for name in request.topic_names]
        return DeleteTopicsResponse(
            responses=[
                DeletableTopicResult(
                    name=name, topic_id=topic_id, error_code=code, error_message=message
                )
                for name, topic_id in wanted
            ]
        )

    return forward_to_controller(ctx, request, unavailable, request.timeout)


HANDLER = ApiHandlerSpec(20, 1, 6, handle, "DeleteTopics")
