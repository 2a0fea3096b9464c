"""DescribeQuorum (key 55), v0-v2: the leader's view of the voters (``kafka-metadata-quorum``).

Any voter answers; only the leader answers NONE with replica states (others answer
NOT_LEADER_OR_FOLLOWER in the partition, as Kafka). A topic other than
``__cluster_metadata`` gets UNKNOWN_TOPIC_OR_PARTITION. v2 also lists every voter's
controller endpoint in ``nodes``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller import raft_wire
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.describe_quorum import (
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    Listener,
    Node,
)

if TYPE_CHECKING:
    from pydmq.controller.runtime import ControllerRuntime

__all__ = ["make_handler"]


def make_handler(runtime: ControllerRuntime) -> ApiHandlerSpec:
    def handle(
        ctx: RequestContext[object], request: DescribeQuorumRequest
    ) -> DescribeQuorumResponse:
        names = [t.topic_name for t in request.topics]
        partitions = [p.partition_index for t in request.topics for p in t.partitions]
        if names != [raft_wire.METADATA_TOPIC] or partitions != [0]:
            return DescribeQuorumResponse(
                error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                error_message="only __cluster_metadata-0 is described",
            )
        response = raft_wire.describe_quorum_to_wire(runtime.driver.describe_quorum())
        if ctx.api_version >= 2:
            listener = runtime.controller_listener_name
            response.nodes = [
                Node(node_id=voter, listeners=[Listener(name=listener, host=host, port=port)])
                for voter, (host, port) in sorted(runtime.voters.items())
            ]
        return response

    return ApiHandlerSpec(55, 0, 2, handle, "DescribeQuorum")
