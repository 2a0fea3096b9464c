"""ListGroups (key 16), v0-v5.

Every live group (groups that only hold committed offsets included, as Kafka lists them as
Empty). States filter from v4 and types filter from v5, both case-insensitive; an empty filter
matches everything. Group state in the response from v4, group type ("classic", or
"consumer" for KIP-848 groups, whose protocol type is "consumer"; "share" for KIP-932 share
groups, protocol type "share", state Empty or Stable) from v5. Cluster mode: the
groups of the ``__consumer_offsets`` partitions led here; COORDINATOR_LOAD_IN_PROGRESS (with
the groups already loaded) while one of them loads.

Authorization (as Kafka): DESCRIBE on the cluster lists every group; otherwise only the
groups the principal may DESCRIBE.
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_cluster
from pydmq.broker.handlers._groups import coordinator, group_denied
from pydmq.broker.handlers._shares import share_groups
from pydmq.protocol.acl import AclOperation
from pydmq.protocol.messages.list_groups import ListedGroup, ListGroupsRequest, ListGroupsResponse

__all__ = ["HANDLER"]

SHARE = "share"


def handle(ctx: BrokerContext, request: ListGroupsRequest) -> ListGroupsResponse:
    version = ctx.api_version
    states = {s.lower() for s in request.states_filter} if version >= 4 else set()
    types = {t.lower() for t in request.types_filter} if version >= 5 else set()
    group_coordinator = coordinator(ctx)
    response = ListGroupsResponse(error_code=group_coordinator.list_groups_error())
    every_group = authorized_cluster(ctx, AclOperation.DESCRIBE)
    listed = list(group_coordinator.list_groups_with_type())
    shares = share_groups(ctx).groups.groups
    listed += [(g.group_id, SHARE, g.state, SHARE) for g in shares.values()]
    for group_id, protocol_type, state, group_type in listed:
        if not every_group and group_denied(ctx, group_id, AclOperation.DESCRIBE):
            continue
        if states and state.lower() not in states:
            continue
        if types and group_type not in types:
            continue
        response.groups.append(
            ListedGroup(
                group_id=group_id,
                protocol_type=protocol_type,
                group_state=state,
                group_type=group_type,
            )
        )
    return response


HANDLER = ApiHandlerSpec(16, 0, 5, handle, "ListGroups")
