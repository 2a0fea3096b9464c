"""DescribeAcls (key 29), v1-v3 (Kafka 4 removed v0).

Answered by the broker from its authorizer's ACLs (the metadata it follows), as Kafka's
AclApis: SECURITY_DISABLED without an authorizer, CLUSTER_AUTHORIZATION_FAILED for a
principal not allowed DESCRIBE on the cluster, INVALID_REQUEST for a filter with an UNKNOWN
code; else the ACLs the filter matches (ANY, MATCH, LITERAL, PREFIXED; null name, principal
and host match all), grouped by resource pattern. v2 is flexible, v3 is v2.
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_cluster
from pydmq.broker.handlers.create_acls import NO_AUTHORIZER
from pydmq.protocol.acl import (
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.describe_acls import (
    AclDescription,
    DescribeAclsRequest,
    DescribeAclsResource,
    DescribeAclsResponse,
)
from pydmq.security.acl_filter import AclBindingFilter, code_of, filter_problem

__all__ = ["HANDLER"]


def _filter(request: DescribeAclsRequest) -> AclBindingFilter:
    return AclBindingFilter(
        code_of(ResourceType, request.resource_type_filter),
        request.resource_name_filter,
        code_of(PatternType, request.pattern_type_filter),
        request.principal_filter,
        request.host_filter,
        code_of(AclOperation, request.operation),
        code_of(AclPermissionType, request.permission_type),
    )


def handle(ctx: BrokerContext, request: DescribeAclsRequest) -> DescribeAclsResponse:
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return DescribeAclsResponse(
            error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER
        )
    if not authorized_cluster(ctx, AclOperation.DESCRIBE):
        return DescribeAclsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    flt = _filter(request)
    problem = filter_problem(flt)
    if problem is not None:
        return DescribeAclsResponse(error_code=ErrorCode.INVALID_REQUEST, error_message=problem)
    resources: dict[tuple[int, str, int], DescribeAclsResource] = {}
    for acl in authorizer.acls().values():
        if not flt.matches(acl):
            continue
        key = (acl.resource_type, acl.resource_name, acl.pattern_type)
        resource = resources.get(key)
        if resource is None:
            resource = resources[key] = DescribeAclsResource(
                resource_type=acl.resource_type,
                resource_name=acl.resource_name,
                pattern_type=acl.pattern_type,
            )
        resource.acls.append(
            AclDescription(
                principal=acl.principal,
                host=acl.host,
                operation=acl.operation,
                permission_type=acl.permission_type,
            )
        )
    return DescribeAclsResponse(resources=list(resources.values()))


HANDLER = ApiHandlerSpec(29, 1, 3, handle, "DescribeAcls")
