"""The controller listener's authorization: the brokers' APIs need CLUSTER_ACTION.

As Kafka's ControllerApis, the requests only brokers and voters send (BrokerRegistration,
BrokerHeartbeat, AlterPartition, AllocateProducerIds, ControlledShutdown and the five Raft
APIs) are answered CLUSTER_AUTHORIZATION_FAILED when the principal may not CLUSTER_ACTION on
the cluster; without an authorizer everything is allowed. The controller runtime's authorizer
follows the ACLs of the image it replays. Called on the event loop.
"""

from __future__ import annotations

from pydmq.api.handler import RequestContext
from pydmq.protocol.acl import CLUSTER_NAME, AclOperation, ResourceType
from pydmq.security.authorizer import Authorizer

__all__ = ["cluster_action_denied"]


def cluster_action_denied(authorizer: Authorizer | None, ctx: RequestContext[object]) -> bool:
    """Whether the request's principal may not CLUSTER_ACTION (a broker's own requests)."""
    if authorizer is None:
        return False
    return not authorizer.authorize(
        ctx.principal,
        ctx.client_host,
        AclOperation.CLUSTER_ACTION,
        ResourceType.CLUSTER,
        CLUSTER_NAME,
    )
