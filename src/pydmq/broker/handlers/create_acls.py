"""CreateAcls (key 30), v2-v3 (Kafka 4 removed v0-v1).

Without an authorizer every creation gets SECURITY_DISABLED ("No Authorizer is configured"),
as Kafka. A principal not allowed ALTER on the cluster gets CLUSTER_AUTHORIZATION_FAILED for
every creation. Otherwise the request is forwarded to the controller
(:mod:`pydmq.controller.handlers.create_acls`: one AccessControlEntryRecord per new ACL,
INVALID_REQUEST for a bad binding), REQUEST_TIMED_OUT per creation when none answers.
The new ACLs reach every broker's authorizer with the metadata (a single node's next image;
a cluster's UpdateMetadata).
"""

from __future__ import annotations

from collections.abc import Awaitable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_cluster
from pydmq.broker.handlers._forward import forward_to_controller
from pydmq.protocol.acl import AclOperation
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.create_acls import (
    AclCreationResult,
    CreateAclsRequest,
    CreateAclsResponse,
)

__all__ = ["HANDLER", "NO_AUTHORIZER"]

NO_AUTHORIZER = "No Authorizer is configured."


def handle(
    ctx: BrokerContext, request: CreateAclsRequest
) -> CreateAclsResponse | Awaitable[CreateAclsResponse]:
    def every(code: int, message: str | None) -> CreateAclsResponse:
        return CreateAclsResponse(
            results=[
                AclCreationResult(error_code=code, error_message=message) for _ in request.creations
            ]
        )

    if ctx.broker.authorizer is None:
        return every(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    if not authorized_cluster(ctx, AclOperation.ALTER):
        return every(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    return forward_to_controller(ctx, request, every)


HANDLER = ApiHandlerSpec(30, 2, 3, handle, "CreateAcls")
