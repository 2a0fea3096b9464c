"""DeleteAcls (key 31), v2-v3, forwarded by brokers: RemoveAccessControlEntryRecords.

The broker checks the authorizer (SECURITY_DISABLED) and ALTER on the cluster
(CLUSTER_AUTHORIZATION_FAILED) before forwarding; here every filter deletes the ACLs it
matches (:func:`~pydmq.controller.operations.acls.delete_acls`: INVALID_REQUEST for an
UNKNOWN code), each listed in that filter's result. v3 is flexible.
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller.handlers._common import AdminController, run_operation
from pydmq.controller.operations import delete_acls
from pydmq.protocol.acl import (
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    StandardAcl,
)
from pydmq.protocol.messages.delete_acls import (
    DeleteAclsFilter,
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsRequest,
    DeleteAclsResponse,
)
from pydmq.security.acl_filter import AclBindingFilter, code_of

__all__ = ["make_handler"]


def filter_of(flt: DeleteAclsFilter) -> AclBindingFilter:
    return AclBindingFilter(
        code_of(ResourceType, flt.resource_type_filter),
        flt.resource_name_filter,
        code_of(PatternType, flt.pattern_type_filter),
        flt.principal_filter,
        flt.host_filter,
        code_of(AclOperation, flt.operation),
        code_of(AclPermissionType, flt.permission_type),
    )


def _matching(acl: StandardAcl) -> DeleteAclsMatchingAcl:
    return DeleteAclsMatchingAcl(
        resource_type=acl.resource_type,
        resource_name=acl.resource_name,
        pattern_type=acl.pattern_type,
        principal=acl.principal,
        host=acl.host,
        operation=acl.operation,
        permission_type=acl.permission_type,
    )


def make_handler(controller: AdminController) -> ApiHandlerSpec:
    async def handle(ctx: RequestContext[object], request: DeleteAclsRequest) -> DeleteAclsResponse:
        filters = [filter_of(f) for f in request.filters]
        results, error, message = await run_operation(
            controller, lambda image: delete_acls(image, filters)
        )
        if results is None:
            return DeleteAclsResponse(
                filter_results=[
                    DeleteAclsFilterResult(error_code=error, error_message=message)
                    for _ in request.filters
                ]
            )
        return DeleteAclsResponse(
            filter_results=[
                DeleteAclsFilterResult(
                    error_code=r.error_code,
                    error_message=r.error_message,
                    matching_acls=[_matching(acl) for acl in r.deleted],
                )
                for r in results
            ]
        )

    return ApiHandlerSpec(31, 2, 3, handle, "DeleteAcls")
