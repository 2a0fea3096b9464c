"""ShareAcknowledge (key 79), v1-v2: acknowledgements of acquired records (KIP-932).

The request belongs to the member's share session, which it never opens (epoch 0:
INVALID_SHARE_SESSION_EPOCH); epoch -1 closes it after the acknowledgements, releasing what
the member still holds on the session's partitions; any other epoch must be the session's
current one (else INVALID_SHARE_SESSION_EPOCH / SHARE_SESSION_NOT_FOUND) and moves it on.
Each acknowledgement batch (first and last offset, one type for all or one per offset:
0 gap, 1 accept, 2 release, 3 reject, v2 4 renew, KIP-1222) applies to records the member
holds, else the partition answers INVALID_RECORD_STATE and nothing of that batch changes.
The answer waits until the changed state is persisted with the share coordinator; a partition
whose write failed answers the write's error.

Authorization (as Kafka): READ on the group (else GROUP_AUTHORIZATION_FAILED), READ on each
topic (else TOPIC_AUTHORIZATION_FAILED on its partitions).
"""

from __future__ import annotations

import uuid

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._groups import GROUP_DENIED, group_denied
from pydmq.broker.handlers._shares import (
    acknowledge,
    leader_epoch,
    once_persisted,
    share_groups,
)
from pydmq.protocol.acl import AclOperation
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.share_acknowledge import (
    LeaderIdAndEpoch,
    PartitionData,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareAcknowledgeTopicResponse,
)
from pydmq.shares.sessions import FINAL_EPOCH, INITIAL_EPOCH

__all__ = ["HANDLER"]


def handle(ctx: BrokerContext, request: ShareAcknowledgeRequest) -> object:
    group_id, member_id = request.group_id or "", request.member_id or ""
    if group_denied(ctx, group_id, AclOperation.READ):
        return ShareAcknowledgeResponse(error_code=GROUP_DENIED)
    if not group_id or not member_id:
        return ShareAcknowledgeResponse(error_code=ErrorCode.INVALID_REQUEST)
    service = share_groups(ctx)
    epoch = request.share_session_epoch
    if epoch == INITIAL_EPOCH:
        return ShareAcknowledgeResponse(error_code=ErrorCode.INVALID_SHARE_SESSION_EPOCH)
    error = service.sessions.check(group_id, member_id, epoch)
    if error:
        return ShareAcknowledgeResponse(error_code=error)
    response = ShareAcknowledgeResponse(
        acquisition_lock_timeout=service.settings.record_lock_duration_ms
    )
    answers: dict[tuple[uuid.UUID, int], PartitionData] = {}
    for topic in request.topics:
        answer = ShareAcknowledgeTopicResponse(topic_id=topic.topic_id)
        response.responses.append(answer)
        for p in topic.partitions:
            answers[(topic.topic_id, p.partition_index)] = data = PartitionData(
                partition_index=p.partition_index,
                error_code=acknowledge(
                    ctx,
                    group_id,
                    member_id,
                    topic.topic_id,
                    p.partition_index,
                    p.acknowledgement_batches,
                ),
                current_leader=LeaderIdAndEpoch(
                    leader_id=ctx.broker.node_id,
                    leader_epoch=leader_epoch(ctx, topic.topic_id, p.partition_index),
                ),
            )
            answer.partitions.append(data)
    session = service.sessions.update(group_id, member_id, epoch, added=(), forgotten=())
    if epoch == FINAL_EPOCH and session is not None:
        service.partitions.release_member(group_id, member_id, session.partitions)
    return once_persisted(ctx, group_id, answers, "error_code", response)


HANDLER = ApiHandlerSpec(79, 1, 2, handle, "ShareAcknowledge")
