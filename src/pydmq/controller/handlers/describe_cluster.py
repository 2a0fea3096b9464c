"""DescribeCluster (key 60), v0-v2, on the controller listener (``pydmq cluster status``).

``endpoint_type`` 2 (controllers) lists the voters with their controller endpoints and
``controller_id`` = the active controller (-1 while there is none); 1 (brokers, and v0) lists
the registered brokers with their inter-broker endpoints from the metadata image, fenced ones
only when ``include_fenced_brokers`` (v2) asks. Any other type: UNSUPPORTED_ENDPOINT_TYPE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.protocol.acl import CLUSTER_OPERATIONS
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.describe_cluster import (
    DescribeClusterBroker,
    DescribeClusterRequest,
    DescribeClusterResponse,
)

if TYPE_CHECKING:
    from pydmq.controller.runtime import ControllerRuntime

__all__ = ["make_handler"]

ENDPOINT_BROKERS = 1
ENDPOINT_CONTROLLERS = 2
_NOT_REQUESTED = -(2**31)


def make_handler(runtime: ControllerRuntime) -> ApiHandlerSpec:
    def handle(
        ctx: RequestContext[object], request: DescribeClusterRequest
    ) -> DescribeClusterResponse:
        endpoint_type = request.endpoint_type if ctx.api_version >= 1 else ENDPOINT_BROKERS
        response = DescribeClusterResponse(
            error_code=ErrorCode.NONE,
            endpoint_type=endpoint_type,
            cluster_id=runtime.cluster_id,
            controller_id=runtime.active_controller_id,
            cluster_authorized_operations=(
                CLUSTER_OPERATIONS
                if request.include_cluster_authorized_operations
                else _NOT_REQUESTED
            ),
        )
        if endpoint_type == ENDPOINT_CONTROLLERS:
            response.brokers = [
                DescribeClusterBroker(broker_id=voter, host=host, port=port, rack=None)
                for voter, (host, port) in sorted(runtime.voters.items())
            ]
        elif endpoint_type == ENDPOINT_BROKERS:
            listener = runtime.inter_broker_listener_name
            include_fenced = ctx.api_version >= 2 and request.include_fenced_brokers
            for broker_id, reg in sorted(runtime.image.brokers.items()):
                if reg.fenced and not include_fenced:
                    continue
                endpoint = reg.endpoint(listener) or (reg.endpoints[0] if reg.endpoints else None)
                if endpoint is None:
                    continue
                response.brokers.append(
                    DescribeClusterBroker(
                        broker_id=broker_id,
                        host=endpoint.host,
                        port=endpoint.port,
                        rack=reg.rack,
                        is_fenced=reg.fenced,
                    )
                )
        else:
            response.error_code = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
            response.error_message = f"Unsupported endpoint type {endpoint_type}"
            response.controller_id = -1
        return response

    return ApiHandlerSpec(60, 0, 2, handle, "DescribeCluster")
