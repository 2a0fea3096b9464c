"""CreateAcls (key 30), v2-v3, forwarded by brokers: ACLs as AccessControlEntryRecords.

The broker checks that an authorizer is configured (SECURITY_DISABLED) and that the principal
may ALTER the cluster (CLUSTER_AUTHORIZATION_FAILED) before forwarding; here each binding
becomes an ACL (:func:`~pydmq.controller.operations.acls.create_acls`: INVALID_REQUEST for a
bad binding, success for one that already exists). v3 is flexible.
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller.handlers._common import AdminController, run_operation
from pydmq.controller.operations import create_acls
from pydmq.protocol.acl import (
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    StandardAcl,
)
from pydmq.protocol.messages.create_acls import (
    AclCreation,
    AclCreationResult,
    CreateAclsRequest,
    CreateAclsResponse,
)
from pydmq.security.acl_filter import code_of

__all__ = ["make_handler"]


def binding_of(creation: AclCreation) -> StandardAcl:
    """The ACL a creation asks for (codes Kafka does not define become UNKNOWN)."""
    return StandardAcl(
        code_of(ResourceType, creation.resource_type),
        creation.resource_name,
        code_of(PatternType, creation.resource_pattern_type),
        creation.principal,
        creation.host,
        code_of(AclOperation, creation.operation),
        code_of(AclPermissionType, creation.permission_type),
    )


def make_handler(controller: AdminController) -> ApiHandlerSpec:
    async def handle(ctx: RequestContext[object], request: CreateAclsRequest) -> CreateAclsResponse:
        bindings = [binding_of(c) for c in request.creations]
        results, error, message = await run_operation(
            controller, lambda image: create_acls(image, bindings)
        )
        if results is None:
            return CreateAclsResponse(
                results=[
                    AclCreationResult(error_code=error, error_message=message)
                    for _ in request.creations
                ]
            )
        return CreateAclsResponse(
            results=[
                AclCreationResult(error_code=r.error_code, error_message=r.error_message)
                for r in results
            ]
        )

    return ApiHandlerSpec(30, 2, 3, handle, "CreateAcls")
