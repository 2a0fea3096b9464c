"""DescribeCluster (key 60), v0-v2.

Answers with this node as the only broker, the cluster id and the controller id (this node:
it is a combined broker+controller). ``endpoint_type`` (v1+): 1 = brokers, 2 = controllers;
pydmq's one listener serves both roles, so both answer with this node, echoing the type asked
for (Kafka's dedicated listeners would answer a wrong type with UNSUPPORTED_ENDPOINT_TYPE,
which pydmq gives for any other value). ``include_fenced_brokers`` (v2, KIP-1073) changes
nothing: a serving node is never fenced, ``is_fenced`` is false. Cluster authorized
operations are -2147483648 unless requested; without an authorizer (as Kafka without one)
every operation the CLUSTER resource supports is reported.

One body serves both modes, answered from the broker's
:class:`~pydmq.broker.services.MetadataView`. Cluster mode answers from the metadata cache: the
alive brokers with their endpoint on the listener asked on and the controller id as Metadata
gives it (a broker). Controllers are described by the controller listener's own
DescribeCluster; a broker asked for controllers answers UNSUPPORTED_ENDPOINT_TYPE, as Kafka's
brokers do.
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import cluster_authorized_operations
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.describe_cluster import (
    DescribeClusterBroker,
    DescribeClusterRequest,
    DescribeClusterResponse,
)

__all__ = ["HANDLER"]

ENDPOINT_BROKERS = 1
ENDPOINT_CONTROLLERS = 2
_NOT_REQUESTED = -(2**31)


def handle(ctx: BrokerContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    broker = ctx.broker
    metadata = broker.metadata
    endpoint_type = request.endpoint_type if ctx.api_version >= 1 else ENDPOINT_BROKERS
    response = DescribeClusterResponse(
        error_code=ErrorCode.NONE,
        endpoint_type=endpoint_type,
        cluster_id=broker.cluster_id,
        controller_id=metadata.controller_id(),
        cluster_authorized_operations=(
            cluster_authorized_operations(ctx)
            if request.include_cluster_authorized_operations
            else _NOT_REQUESTED
        ),
    )
    if endpoint_type not in (ENDPOINT_BROKERS, ENDPOINT_CONTROLLERS):
        response.error_code = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        response.error_message = f"Unsupported endpoint type {endpoint_type}"
        response.controller_id = -1
        return response
    if endpoint_type == ENDPOINT_CONTROLLERS and not metadata.describes_controllers:
        response.error_code = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        response.error_message = "The broker listener does not describe controllers"
        response.controller_id = -1
        return response
    response.brokers = [
        DescribeClusterBroker(
            broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack, is_fenced=False
        )
        for b in metadata.alive_brokers(ctx.listener)
    ]
    return response


HANDLER = ApiHandlerSpec(60, 0, 2, handle, "DescribeCluster")
