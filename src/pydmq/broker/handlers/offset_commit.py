"""OffsetCommit (key 8), v2-v9.

Stores committed offsets (offset, leader epoch from v6, metadata string kept byte for byte) as
records of ``__consumer_offsets``. Validation as Kafka 4's classic groups: a commit with
generation -1 and no member id is accepted only while the group is Empty (simple consumers,
admin tools), else UNKNOWN_MEMBER_ID; a member commit needs a known member (FENCED_INSTANCE_ID
for a replaced static member, group instance id from v7) and the current generation
(ILLEGAL_GENERATION); REBALANCE_IN_PROGRESS while the group completes a rebalance. A
partition of an unknown topic gets UNKNOWN_TOPIC_OR_PARTITION, a metadata string longer than
``offset.metadata.max.bytes`` OFFSET_METADATA_TOO_LARGE. ``retention_time`` (v2-v4, -1 =
broker default) sets an explicit expiry; v5+ have no such field. v10 (topic ids) is not
advertised. For a KIP-848 consumer group, ``generation_id_or_member_epoch`` is the member
epoch: UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH (older), FENCED_MEMBER_EPOCH (newer), and
UNSUPPORTED_VERSION below v9, as Kafka 4. Cluster mode: NOT_COORDINATOR when the group's
``__consumer_offsets`` partition is led elsewhere, COORDINATOR_LOAD_IN_PROGRESS while it
loads; the response waits until the offsets are committed (acks=-1). The partitions of a
large commit (up to the decode budget, 110,000 elements) are checked in slices
(:mod:`pydmq.broker.handlers._slices`).

Authorization (as Kafka): READ on the group, else every partition is
GROUP_AUTHORIZATION_FAILED; READ on each topic, else its partitions are
TOPIC_AUTHORIZATION_FAILED (before the topic's existence is checked).
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterator

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_names
from pydmq.broker.handlers._groups import GROUP_DENIED, coordinator, group_denied
from pydmq.broker.handlers._slices import in_slices
from pydmq.groups.api import CommitRequest
from pydmq.protocol.acl import AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)

__all__ = ["HANDLER"]


def handle(ctx: BrokerContext, request: OffsetCommitRequest) -> object:
    errors: dict[tuple[str, int], int] = {}
    wanted: dict[tuple[str, int], tuple[int, int, str | None]] = {}
    if group_denied(ctx, request.group_id, AclOperation.READ):
        errors.update(
            ((t.name, p.partition_index), GROUP_DENIED)
            for t in request.topics
            for p in t.partitions
        )
        return _response(request, errors)
    return in_slices(
        _check(ctx, request, errors, wanted), lambda: _commit(ctx, request, errors, wanted)
    )


def _check(
    ctx: BrokerContext,
    request: OffsetCommitRequest,
    errors: dict[tuple[str, int], int],
    wanted: dict[tuple[str, int], tuple[int, int, str | None]],
) -> Iterator[int]:
    """Sort the partitions into ``wanted`` and ``errors``; yields 1 per topic and partition."""
    version = ctx.api_version
    topics = ctx.broker.topics
    readable = authorized_names(ctx, AclOperation.READ, ResourceType.TOPIC, _names(request))
    for topic in request.topics:
        yield 1 + len(topic.partitions)
        info = topics.get(topic.name)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if topic.name not in readable:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif info is None or not 0 <= p.partition_index < len(info.partitions):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                epoch = p.committed_leader_epoch if version >= 6 else -1
                wanted[tp] = (p.committed_offset, epoch, p.committed_metadata)


def _names(request: OffsetCommitRequest) -> list[str]:
    return [topic.name for topic in request.topics]


def _commit(
    ctx: BrokerContext,
    request: OffsetCommitRequest,
    errors: dict[tuple[str, int], int],
    wanted: dict[tuple[str, int], tuple[int, int, str | None]],
) -> object:
    version = ctx.api_version
    group_coordinator = coordinator(ctx)
    mark = group_coordinator.write_mark
    if wanted:
        errors.update(
            group_coordinator.commit_offsets(
                CommitRequest(
                    group_id=request.group_id,
                    member_id=request.member_id,
                    group_instance_id=request.group_instance_id if version >= 7 else None,
                    generation_id=request.generation_id_or_member_epoch,
                    retention_time_ms=request.retention_time if version <= 4 else -1,
                    offsets=wanted,
                    api_version=version,
                )
            )
        )
    if group_coordinator.wrote_since(request.group_id, mark):
        committed = group_coordinator.await_writes(request.group_id, mark, offsets=True)
        return _when_committed(committed, request, errors)
    return _response(request, errors)


async def _when_committed(
    committed: Awaitable[int],
    request: OffsetCommitRequest,
    errors: dict[tuple[str, int], int],
) -> OffsetCommitResponse:
    error = await committed
    if error:
        errors = {tp: e or error for tp, e in errors.items()}
    response = _response(request, errors)
    return response if isinstance(response, OffsetCommitResponse) else await response


def _response(
    request: OffsetCommitRequest, errors: dict[tuple[str, int], int]
) -> OffsetCommitResponse | Awaitable[OffsetCommitResponse]:
    response = OffsetCommitResponse()
    return in_slices(_answer(request, errors, response), lambda: response)


def _answer(
    request: OffsetCommitRequest,
    errors: dict[tuple[str, int], int],
    response: OffsetCommitResponse,
) -> Iterator[int]:
    """Fill ``response`` one topic at a time; yields 1 per topic and partition."""
    for topic in request.topics:
        yield 1 + len(topic.partitions)
        response.topics.append(
            OffsetCommitResponseTopic(
                name=topic.name,
                partitions=[
                    OffsetCommitResponsePartition(
                        partition_index=p.partition_index,
                        error_code=errors[(topic.name, p.partition_index)],
                    )
                    for p in topic.partitions
                ],
            )
        )


HANDLER = ApiHandlerSpec(8, 2, 9, handle, "OffsetCommit")
