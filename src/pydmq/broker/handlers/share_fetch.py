"""ShareFetch (key 78), v1-v2: records of share-partitions, acquired for one member (KIP-932).

The request names the member's share session (see :mod:`pydmq.shares.sessions`: epoch 0
opens it, -1 closes it, any other must be the session's current epoch, else
INVALID_SHARE_SESSION_EPOCH / SHARE_SESSION_NOT_FOUND as a top-level error). Acknowledgement
batches piggybacked on a partition are applied first (the partition's
``acknowledge_error_code``); then every partition of the session is read: lock expiries are
applied, and records are acquired from the lowest available offset, up to ``max_records`` in
all and ``max_bytes`` (whole batches, at least one), each answered with its acquired offset
runs and their delivery counts, and ``acquisition_lock_timeout`` =
``group.share.record.lock.duration.ms``. A request with the final epoch only acknowledges and
releases what the member still holds on the session's partitions. When nothing was acquired
the request parks up to ``max_wait`` (as a Fetch does, in the fetch purgatory) and reads
again when one of the session's partitions is notified (an append, a high-watermark move, or
records of it released by another member) or the earliest acquisition lock of those
partitions runs out.

v2 (KIP-1222): ``is_renew_ack`` requests carry RENEW acknowledgements and fetch nothing.
``share_acquire_mode`` (KIP-1206): 0, batch_optimized (the default, and v1's behaviour),
treats ``max_records`` as soft: acquisition ends at the end of the batch holding the
``max_records``-th record, so whole batches are handed out (a batch holding more than
``max_records`` records alone is split at ``max_records`` when other members' sessions read
the partition here); 1, record_limit, acquires at most
``max_records`` records. ``batch_size`` is accepted and not used. The answer carries the
batches that hold acquired records, as they are read (not copied).

A share-partition is read once its state is loaded from its share coordinator (the first
fetch of a group on a partition this node leads waits for it, up to ``max_wait`` and at
least half a second); piggybacked acknowledgements are answered once persisted there.

Authorization (as Kafka): READ on the group (else GROUP_AUTHORIZATION_FAILED), READ on each
topic (else TOPIC_AUTHORIZATION_FAILED on its partitions).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized
from pydmq.broker.handlers._groups import GROUP_DENIED, group_denied
from pydmq.broker.handlers._shares import (
    acknowledge,
    leader_epoch,
    once_persisted,
    share_groups,
)
from pydmq.protocol.acl import AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.share_fetch import (
    AcquiredRecords,
    LeaderIdAndEpoch,
    PartitionData,
    ShareFetchableTopicResponse,
    ShareFetchRequest,
    ShareFetchResponse,
)
from pydmq.protocol.scatter import RecordsView
from pydmq.replication.purgatory import wait_for_notification
from pydmq.shares.sessions import FINAL_EPOCH, INITIAL_EPOCH
from pydmq.storage.api import TopicPartition

__all__ = ["HANDLER"]

RECORD_LIMIT = 1  # share_acquire_mode: max_records is a hard limit (KIP-1206)
_LOAD_WAIT_MS = 500  # the least a fetch waits for its share-partitions' state to load


def handle(ctx: BrokerContext, request: ShareFetchRequest) -> object:
    group_id, member_id = request.group_id or "", request.member_id or ""
    if group_denied(ctx, group_id, AclOperation.READ):
        return ShareFetchResponse(error_code=GROUP_DENIED)
    if not group_id or not member_id:
        return ShareFetchResponse(error_code=ErrorCode.INVALID_REQUEST)
    service = share_groups(ctx)
    epoch = request.share_session_epoch
    error = service.sessions.check(group_id, member_id, epoch)
    if error:
        return ShareFetchResponse(error_code=error)
    answers: dict[tuple[uuid.UUID, int], PartitionData] = {}
    for topic in request.topics:
        for p in topic.partitions:
            data = _partition_data(ctx, topic.topic_id, p.partition_index)
            answers[(topic.topic_id, p.partition_index)] = data
            if p.acknowledgement_batches:
                data.acknowledge_error_code = acknowledge(
                    ctx,
                    group_id,
                    member_id,
                    topic.topic_id,
                    p.partition_index,
                    p.acknowledgement_batches,
                )
    session = service.sessions.update(
        group_id,
        member_id,
        epoch,
        added=answers,
        forgotten=[(t.topic_id, p) for t in request.forgotten_topics_data for p in t.partitions],
    )
    if epoch == FINAL_EPOCH:
        if session is not None:
            service.partitions.release_member(group_id, member_id, session.partitions)
        return _persisted(ctx, group_id, answers, _response(ctx, answers))
    if request.is_renew_ack or session is None:
        return _persisted(ctx, group_id, answers, _response(ctx, answers))
    keys = sorted(session.partitions)
    # A new share session reloads what may have been altered while no session read it.
    refresh = epoch == INITIAL_EPOCH
    loads = service.partitions.prepare(group_id, _named(ctx, keys), refresh=refresh)
    persisted = once_persisted(ctx, group_id, answers, "acknowledge_error_code", None)
    if loads or persisted is not None:
        return _after_loads(ctx, request, keys, answers, loads, persisted)
    if _read(ctx, request, keys, answers) or request.max_wait <= 0:
        return _response(ctx, answers)
    return _long_poll(ctx, request, keys, answers)


def _persisted(
    ctx: BrokerContext,
    group_id: str,
    answers: dict[tuple[uuid.UUID, int], PartitionData],
    response: ShareFetchResponse,
) -> object:
    return once_persisted(ctx, group_id, answers, "acknowledge_error_code", response)


async def _after_loads(
    ctx: BrokerContext,
    request: ShareFetchRequest,
    keys: list[tuple[uuid.UUID, int]],
    answers: dict[tuple[uuid.UUID, int], PartitionData],
    loads: list[asyncio.Task[None]],
    persisted: Awaitable[None] | None,
) -> ShareFetchResponse:
    """The fetch once the share-partitions it reads are loaded (up to ``max_wait``, at least
    half a second), answered once its acknowledgements are persisted (records are acquired
    meanwhile)."""
    if loads:
        await asyncio.wait(loads, timeout=max(request.max_wait, _LOAD_WAIT_MS) / 1000)
    found = _read(ctx, request, keys, answers)
    if persisted is not None:
        await persisted
    if found or request.max_wait <= 0:
        return _response(ctx, answers)
    return await _long_poll(ctx, request, keys, answers)


def _named(
    ctx: BrokerContext, keys: list[tuple[uuid.UUID, int]]
) -> list[tuple[uuid.UUID, str, int]]:
    named = []
    for topic_id, index in keys:
        info = ctx.broker.topics.by_id(topic_id)
        if info is not None:
            named.append((topic_id, info.name, index))
    return named


async def _long_poll(
    ctx: BrokerContext,
    request: ShareFetchRequest,
    keys: list[tuple[uuid.UUID, int]],
    answers: dict[tuple[uuid.UUID, int], PartitionData],
) -> ShareFetchResponse:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + request.max_wait / 1000
    group_id, member_id = request.group_id or "", request.member_id or ""
    service = share_groups(ctx)
    purgatory = ctx.broker.replica_manager.fetch_purgatory
    while True:
        timeout = deadline - loop.time()
        lock_expiry = service.partitions.next_lock_deadline(group_id, keys)
        if lock_expiry is not None:
            timeout = min(timeout, (lock_expiry - service.partitions.clock_ms()) / 1000)
        if deadline - loop.time() <= 0:
            break
        await wait_for_notification(purgatory, _watched(ctx, keys), max(0.0, timeout))
        session = service.sessions.get(group_id, member_id)
        if session is None:
            break
        keys = sorted(session.partitions)
        service.partitions.prepare(group_id, _named(ctx, keys))  # a load wakes this wait
        if _read(ctx, request, keys, answers):
            break
    return _response(ctx, answers)


def _watched(ctx: BrokerContext, keys: list[tuple[uuid.UUID, int]]) -> list[TopicPartition]:
    watched = []
    for topic_id, index in keys:
        info = ctx.broker.topics.by_id(topic_id)
        if info is not None:
            watched.append(TopicPartition(info.name, index))
    return watched


def _read(
    ctx: BrokerContext,
    request: ShareFetchRequest,
    keys: list[tuple[uuid.UUID, int]],
    answers: dict[tuple[uuid.UUID, int], PartitionData],
) -> bool:
    """Acquire and read the session's partitions into ``answers``; whether any record was
    acquired (or an error is to be answered)."""
    service = share_groups(ctx)
    max_records = request.max_records if request.max_records > 0 else 500
    max_bytes = request.max_bytes if request.max_bytes > 0 else 2**31 - 1
    found = False
    for topic_id, index in keys:
        if max_records <= 0 or max_bytes <= 0:
            break
        info = ctx.broker.topics.by_id(topic_id)
        data = answers.get((topic_id, index))
        if info is None or not authorized(ctx, AclOperation.READ, ResourceType.TOPIC, info.name):
            data = data or _partition_data(ctx, topic_id, index)
            data.error_code = (
                ErrorCode.UNKNOWN_TOPIC_ID if info is None else ErrorCode.TOPIC_AUTHORIZATION_FAILED
            )
            answers[(topic_id, index)] = data
            found = True
            continue
        result = service.partitions.fetch(
            request.group_id or "",
            request.member_id or "",
            topic_id,
            TopicPartition(info.name, index),
            max_bytes,
            max_records,
            whole_batches=request.share_acquire_mode != RECORD_LIMIT,
            shared=service.sessions.readers(request.group_id or "", (topic_id, index)) > 1,
        )
        if result.error_code or result.acquired:
            data = data or _partition_data(ctx, topic_id, index)
            answers[(topic_id, index)] = data
            data.error_code = result.error_code
            found = True
        if result.records is not None and result.acquired:
            assert data is not None
            records = RecordsView(result.records.buffers, result.records.size)
            data.records = records  # type: ignore[assignment]  # written as they are
            data.acquired_records = [
                AcquiredRecords(
                    first_offset=a.first_offset,
                    last_offset=a.last_offset,
                    delivery_count=a.delivery_count,
                )
                for a in result.acquired
            ]
            max_records -= sum(a.last_offset - a.first_offset + 1 for a in result.acquired)
            max_bytes -= result.records.size
    return found


def _partition_data(ctx: BrokerContext, topic_id: uuid.UUID, index: int) -> PartitionData:
    return PartitionData(
        partition_index=index,
        records=b"",
        current_leader=LeaderIdAndEpoch(
            leader_id=ctx.broker.node_id, leader_epoch=leader_epoch(ctx, topic_id, index)
        ),
    )


def _response(
    ctx: BrokerContext, answers: dict[tuple[uuid.UUID, int], PartitionData]
) -> ShareFetchResponse:
    by_topic: dict[uuid.UUID, ShareFetchableTopicResponse] = {}
    for (topic_id, _), data in sorted(answers.items()):
        topic = by_topic.get(topic_id)
        if topic is None:
            topic = by_topic[topic_id] = ShareFetchableTopicResponse(topic_id=topic_id)
        topic.partitions.append(data)
    return ShareFetchResponse(
        acquisition_lock_timeout=share_groups(ctx).settings.record_lock_duration_ms,
        responses=list(by_topic.values()),
    )


HANDLER = ApiHandlerSpec(78, 1, 2, handle, "ShareFetch")
