"""DeleteAcls (key 31), v2-v3 (Kafka 4 removed v0-v1).

Without an authorizer every filter gets SECURITY_DISABLED, as Kafka. A principal not allowed
ALTER on the cluster gets CLUSTER_AUTHORIZATION_FAILED for every filter. Otherwise the
request is forwarded to the controller (:mod:`pydmq.controller.handlers.delete_acls`: every
ACL a filter matches is deleted and listed; INVALID_REQUEST for a filter with an UNKNOWN
code), REQUEST_TIMED_OUT per filter when none answers.
"""

from __future__ import annotations

from collections.abc import Awaitable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_cluster
from pydmq.broker.handlers._forward import forward_to_controller
from pydmq.broker.handlers.create_acls import NO_AUTHORIZER
from pydmq.protocol.acl import AclOperation
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.delete_acls import (
    DeleteAclsFilterResult,
    DeleteAclsRequest,
    DeleteAclsResponse,
)

__all__ = ["HANDLER"]


def handle(
    ctx: BrokerContext, request: DeleteAclsRequest
) -> DeleteAclsResponse | Awaitable[DeleteAclsResponse]:
    def every(code: int, message: str | None) -> DeleteAclsResponse:
        return DeleteAclsResponse(
            filter_results=[
                DeleteAclsFilterResult(error_code=code, error_message=message)
                for _ in request.filters
            ]
        )

    if ctx.broker.authorizer is None:
        return every(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    if not authorized_cluster(ctx, AclOperation.ALTER):
        return every(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    return forward_to_controller(ctx, request, every)


HANDLER = ApiHandlerSpec(31, 2, 3, handle, "DeleteAcls")
