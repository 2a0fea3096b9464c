"""The cluster under ``/v1/admin/cluster``: its brokers (DescribeCluster), its active
controller and its controller quorum (DescribeQuorum at the active controller; a single node
is its own quorum of one)."""

from __future__ import annotations

from typing import Any

from pydmq.http.messages import HttpRequest, HttpResponse, json_response
from pydmq.protocol.acl import CLUSTER_NAME, AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.describe_cluster import DescribeClusterRequest
from pydmq.protocol.messages.describe_quorum import (
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    PartitionData,
    TopicData,
)
from pydmq.rest.calls import BrokerCalls
from pydmq.rest.errors import RestError, kafka_error

__all__ = ["ClusterResource"]

DESCRIBE_CLUSTER, DESCRIBE_QUORUM = 60, 55
METADATA_TOPIC = "__cluster_metadata"
_QUORUM_TIMEOUT_S = 10.0


def _not_leader(response: Any) -> bool:
    """A voter that is not the Raft leader answers NOT_LEADER_OR_FOLLOWER: ask the next."""
    return any(
        p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        for t in response.topics
        for p in t.partitions
    )


class ClusterResource:
    """The cluster routes' handlers. Owned by the node's HTTP service, on its event loop."""

    def __init__(self, calls: BrokerCalls) -> None:
        self.calls = calls

    async def brokers(self, request: HttpRequest) -> HttpResponse:
        response = await self.calls.call(
            request,
            DESCRIBE_CLUSTER,
            1,
            DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=1),
        )
        if response.error_code != ErrorCode.NONE:
            raise kafka_error(response.error_code, response.error_message)
        return json_response(
            200,
            {
                "cluster_id": response.cluster_id,
                "brokers": [
                    {"id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack}
                    for b in sorted(response.brokers, key=lambda b: b.broker_id)
                ],
            },
        )

    async def _quorum(self, request: HttpRequest) -> dict[str, Any]:
        if not self.calls.authorized(
            request, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME
        ):
            raise RestError(
                "FORBIDDEN",
                "not authorized to describe the cluster",
                {"kafka_error": "CLUSTER_AUTHORIZATION_FAILED"},
            )
        cluster = self.calls.broker.cluster
        if cluster is None:  # a single node: its own controller, a quorum of one
            node = self.calls.node_id
            return {
                "leader_id": node,
                "leader_epoch": 0,
                "high_watermark": None,
                "voters": [{"id": node, "log_end_offset": None}],
                "observers": [],
                "controllers": [{"id": node, "endpoints": []}],
            }
        from pydmq.broker.cluster.controller_client import ControllerUnavailableError

        try:
            response: DescribeQuorumResponse = await cluster.controller_client.send(
                DESCRIBE_QUORUM,
                2,
                DescribeQuorumRequest(
                    topics=[
                        TopicData(
                            topic_name=METADATA_TOPIC, partitions=[PartitionData(partition_index=0)]
                        )
                    ]
                ),
                _QUORUM_TIMEOUT_S,
                not_controller=_not_leader,
            )
        except ControllerUnavailableError as exc:
            raise RestError("SERVICE_UNAVAILABLE", f"no active controller: {exc}") from None
        if response.error_code != ErrorCode.NONE:
            raise kafka_error(response.error_code, response.error_message)
        partition = response.topics[0].partitions[0]
        if partition.error_code != ErrorCode.NONE:
            raise kafka_error(partition.error_code, partition.error_message)

        def replicas(states: Any) -> list[dict[str, Any]]:
            return [
                {
                    "id": r.replica_id,
                    "log_end_offset": r.log_end_offset,
                    "last_caught_up_timestamp": r.last_caught_up_timestamp,
                }
                for r in states
            ]

        return {
            "leader_id": partition.leader_id,
            "leader_epoch": partition.leader_epoch,
            "high_watermark": partition.high_watermark,
            "voters": replicas(partition.current_voters),
            "observers": replicas(partition.observers),
            "controllers": [
                {
                    "id": n.node_id,
                    "endpoints": [
                        {"listener": e.name, "host": e.host, "port": e.port} for e in n.listeners
                    ],
                }
                for n in response.nodes
            ],
        }

    async def controller(self, request: HttpRequest) -> HttpResponse:
        quorum = await self._quorum(request)
        leader = quorum["leader_id"]
        endpoints: list[Any] = next(
            (c["endpoints"] for c in quorum["controllers"] if c["id"] == leader), []
        )
        return json_response(
            200, {"id": leader, "epoch": quorum["leader_epoch"], "endpoints": endpoints}
        )

    async def quorum(self, request: HttpRequest) -> HttpResponse:
        return json_response(200, await self._quorum(request))
