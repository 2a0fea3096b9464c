"""Fetch (key 1), v4-v17.

Long poll: when fewer than ``min_bytes`` are available the request waits up to ``max_wait``
and is woken by appends to any partition it reads. Fetch sessions (KIP-227) from v7: see
:mod:`pydmq.broker.fetch_session`; incremental responses carry only partitions whose data,
error, high watermark, last stable offset or log start offset changed. Topic ids instead of
names from v13 (UNKNOWN_TOPIC_ID). A fetch offset inside a batch returns that whole batch.
``current_leader_epoch`` (v9+) is checked: FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH.
The first partition with data gets at least one whole batch even above the byte limits
(KIP-74). read_committed reads up to the last stable offset (= high watermark until
transactions exist). Fetch v18 (KIP-1166) is not advertised: Kafka 4.0/4.1 stop at v17.
A read that meets damaged stored data answers CORRUPT_MESSAGE for that partition (the intact
batches before the damage are served first), never a closed connection: see
:mod:`pydmq.broker.handlers._corruption`.

Replication: only the leader serves a partition (NOT_LEADER_OR_FOLLOWER otherwise, also for a
partition hosted elsewhere in the cluster). A fetch with ``replica_id >= 0`` (in the body up to
v14, ``replica_state`` from v15) claims to come from a follower. Nothing authenticates it, so
the claim is believed only when it arrives on the ``inter.broker.listener.name`` listener of a
cluster-mode broker, is v15+ and its ``replica_state.replica_epoch`` equals the registration
epoch of that broker in the metadata cache, and, per partition, when ``replica_id`` is a
current replica of a partition this broker leads; otherwise the partition gets
NOT_LEADER_OR_FOLLOWER (what Kafka answers a fetch from a replica it does not recognise; our
replica fetchers back off and retry on it) with no records, and no follower state changes.
A believed follower fetch passes the ``current_leader_epoch`` check, then reads up to the
log end offset, not the high watermark, and its fetch offset tells the leader how far that
follower got
(``Partition.update_follower_fetch_state``), which may move the high watermark (waking
parked acks=-1 produces and consumer long polls) or make the follower eligible for the ISR
(the AlterPartition manager is woken). Its ``log_start_offset`` is recorded too and wakes
DeleteRecords waiting for the followers' log starts; a parked follower fetch completes when
the log start offset of a partition it reads moved (a DeleteRecords on the leader), so the
follower learns it without waiting out ``max_wait``.

A fetch of more partitions than one slice (:data:`~pydmq.broker.handlers._slices.SLICE_ELEMENTS`,
up to the decode budget of 110,000 elements) is read in slices between which the event loop
serves other connections, each read of its long poll too; a normal fetch is read at once.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Generator, Iterable
from dataclasses import dataclass

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    CachedPartition,
    FetchSession,
    SessionError,
)
from pydmq.broker.handlers._corruption import corrupt_read_error
from pydmq.broker.handlers._slices import SLICE_ELEMENTS, SLICE_SECONDS
from pydmq.broker.server import Broker
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.fetch import (
    FetchableTopicResponse,
    FetchRequest,
    FetchResponse,
    PartitionData,
)
from pydmq.protocol.scatter import RecordsView
from pydmq.replication.partition import Partition
from pydmq.replication.purgatory import wait_for_notification
from pydmq.storage.api import OffsetOutOfRangeError, StorageCorruptionError, TopicPartition

__all__ = ["HANDLER"]

_ZERO_UUID = uuid.UUID(int=0)


@dataclass(slots=True)
class _Target:
    """One partition to read in this fetch, with the session entry that tracks it (if any)."""

    topic: str
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    cached: CachedPartition | None
    unknown_error: int = ErrorCode.NONE
    log_start_offset: int = -1  # the follower's, from the request (-1: not sent)


def _resolve_topics(broker: Broker, request: FetchRequest, version: int) -> list[_Target]:
    targets: list[_Target] = []
    for topic in request.topics:
        if version >= 13:
            info = broker.topics.by_id(topic.topic_id)
            name = info.name if info is not None else ""
            error = ErrorCode.NONE if info is not None else ErrorCode.UNKNOWN_TOPIC_ID
            topic_id = topic.topic_id
        else:
            info = broker.topics.get(topic.topic)
            name = topic.topic
            error = ErrorCode.NONE
            topic_id = info.topic_id if info is not None else _ZERO_UUID
        for p in topic.partitions:
            targets.append(
                _Target(
                    name,
                    topic_id,
                    p.partition,
                    p.fetch_offset,
                    p.partition_max_bytes,
                    p.current_leader_epoch,
                    None,
                    error,
                    p.log_start_offset,
                )
            )
    return targets


def _apply_to_session(
    session: FetchSession,
    targets: Iterable[_Target],
    request: FetchRequest,
    broker: Broker,
    version: int,
) -> list[_Target]:
    log_starts: dict[tuple[str, int], int] = {}
    for target in targets:
        key = (target.topic if version < 13 else str(target.topic_id), target.partition)
        log_starts[key] = target.log_start_offset
        cached = session.partitions.get(key)
        if cached is None:
            cached = CachedPartition(
                target.topic,
                target.topic_id,
                target.partition,
                target.fetch_offset,
                target.partition_max_bytes,
                target.current_leader_epoch,
                -1,
                -1,
            )
            session.partitions[key] = cached
        else:
            cached.fetch_offset = target.fetch_offset
            cached.partition_max_bytes = target.partition_max_bytes
            cached.current_leader_epoch = target.current_leader_epoch
    for forgotten in request.forgotten_topics_data:
        name = str(forgotten.topic_id) if version >= 13 else forgotten.topic
        for index in forgotten.partitions:
            session.partitions.pop((name, index), None)
    result: list[_Target] = []
    for key, cached in session.partitions.items():
        error = ErrorCode.NONE
        if version >= 13 and broker.topics.by_id(cached.topic_id) is None:
            error = ErrorCode.UNKNOWN_TOPIC_ID
        result.append(
            _Target(
                cached.topic,
                cached.topic_id,
                cached.partition,
                cached.fetch_offset,
                cached.partition_max_bytes,
                cached.current_leader_epoch,
                cached,
                error,
                log_starts.get(key, -1),
            )
        )
    return result


# What one read of a plan gives: each target's answer, the bytes read, whether any erred.
_ReadResult = tuple[list[tuple["_Target", PartitionData]], int, bool]


class _FetchPlan:
    """What one Fetch request reads; ``read()`` may run again after a long-poll wake-up."""

    def __init__(
        self,
        ctx: BrokerContext,
        request: FetchRequest,
        targets: list[_Target],
        session_id: int,
        incremental: bool,
    ) -> None:
        self.ctx = ctx
        self.request = request
        self.targets = targets
        self.session_id = session_id
        self.incremental = incremental
        version = ctx.api_version
        self.replica_id = request.replica_id if version < 15 else request.replica_state.replica_id
        # A claimed follower that fails the identity checks gets no partition at all.
        self.follower_refused = self.replica_id >= 0 and not self._is_known_follower()
        self._follower_state_recorded = False
        # Log start offset of each target at the first read (follower fetches only); a later
        # read that finds one moved completes the long poll.
        self._log_starts: list[int] | None = None
        self.log_start_moved = False

    def _is_known_follower(self) -> bool:
        """The per-request checks of a follower fetch's identity (see the module docstring)."""
        ctx = self.ctx
        cluster = ctx.broker.cluster
        if cluster is None or ctx.api_version < 15 or ctx.listener != cluster.inter_broker_listener:
            return False
        replica_epoch = self.request.replica_state.replica_epoch
        return (
            self.replica_id != cluster.node_id
            and replica_epoch >= 0
            and replica_epoch == cluster.metadata_cache.broker_epoch(self.replica_id)
        )

    def partitions(self) -> list[TopicPartition]:
        return [TopicPartition(t.topic, t.partition) for t in self.targets if t.topic]

    @property
    def large(self) -> bool:
        """More partitions than one slice of handler work: read in slices (see
        :mod:`pydmq.broker.handlers._slices`), so other connections are served in between."""
        return len(self.targets) > SLICE_ELEMENTS

    def read(self) -> _ReadResult:
        """Read every target now."""
        steps = self.read_steps()
        while True:
            try:
                next(steps)
            except StopIteration as done:
                result: _ReadResult = done.value
                return result

    async def read_sliced(self) -> _ReadResult:
        """Read every target, giving the loop back every :data:`SLICE_ELEMENTS` partitions or
        :data:`SLICE_SECONDS` (a request of 100,000 partitions held it ~1.5 s)."""
        steps = self.read_steps()
        clock = time.monotonic
        deadline = clock() + SLICE_SECONDS
        done = 0
        while True:
            try:
                done += next(steps)
            except StopIteration as finished:
                result: _ReadResult = finished.value
                return result
            if done >= SLICE_ELEMENTS or clock() >= deadline:
                await asyncio.sleep(0)
                done = 0
                deadline = clock() + SLICE_SECONDS

    def read_steps(self) -> Generator[int, None, _ReadResult]:
        """The read, one step per target (yields 1); returns (results, bytes, has_error)."""
        broker = self.ctx.broker
        version = self.ctx.api_version
        request = self.request
        remaining = request.max_bytes if request.max_bytes > 0 else 2**31 - 1
        total = 0
        has_error = False
        results: list[tuple[_Target, PartitionData]] = []
        read_committed = request.isolation_level == 1
        follower = self.replica_id >= 0
        record_follower = follower and not self._follower_state_recorded
        self._follower_state_recorded = True
        now_ms = int(time.time() * 1000) if record_follower else 0
        log_starts: list[int] = []
        for target in self.targets:
            yield 1
            data = PartitionData(
                partition_index=target.partition,
                error_code=ErrorCode.NONE,
                high_watermark=-1,
                last_stable_offset=-1,
                log_start_offset=-1,
                preferred_read_replica=-1,
                aborted_transactions=[] if read_committed else None,
                records=b"",
            )
            results.append((target, data))
            log_starts.append(-1)
            if target.unknown_error:
                data.error_code = target.unknown_error
                has_error = True
                continue
            tp = TopicPartition(target.topic, target.partition)
            partition = broker.replica_manager.get(tp)
            if partition is None:
                cluster = broker.cluster
                data.error_code = (
                    ErrorCode.NOT_LEADER_OR_FOLLOWER
                    if cluster is not None and cluster.metadata_cache.partition(tp) is not None
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
                has_error = True
                continue
            if follower and (
                self.follower_refused or not partition.is_follower_replica(self.replica_id)
            ):
                data.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                has_error = True
                continue
            log = partition.log
            data.high_watermark = log.high_watermark
            data.last_stable_offset = log.high_watermark
            data.log_start_offset = log_starts[-1] = log.log_start_offset
            epoch = target.current_leader_epoch
            if version >= 9 and epoch >= 0 and epoch != partition.leader_epoch:
                data.error_code = (
                    ErrorCode.FENCED_LEADER_EPOCH
                    if epoch < partition.leader_epoch
                    else ErrorCode.UNKNOWN_LEADER_EPOCH
                )
                has_error = True
                continue
            if not partition.is_leader:
                data.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                has_error = True
                continue
            if record_follower:
                self._record_follower_fetch(
                    partition, target.fetch_offset, now_ms, target.log_start_offset
                )
            limit = min(target.partition_max_bytes, remaining)
            try:
                info = partition.read(
                    target.fetch_offset,
                    limit,
                    min_one_batch=total == 0,
                    to_high_watermark=not follower,
                )
            except OffsetOutOfRangeError:
                data.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                has_error = True
                continue
            except StorageCorruptionError as exc:
                data.error_code = corrupt_read_error(tp, exc)
                has_error = True
                continue
            if info.size:
                data.records = RecordsView(info.buffers, info.size)  # type: ignore[assignment]
                total += info.size
                remaining = max(0, remaining - info.size)
            else:
                data.records = b""
        if follower:
            if self._log_starts is None:
                self._log_starts = log_starts
            elif log_starts != self._log_starts:
                self.log_start_moved = True
        return results, total, has_error

    def _record_follower_fetch(
        self, partition: Partition, fetch_offset: int, now_ms: int, log_start_offset: int
    ) -> None:
        """A follower fetching at ``fetch_offset`` holds everything before it, and nothing
        below ``log_start_offset``."""
        broker = self.ctx.broker
        replica_manager = broker.replica_manager
        if partition.update_follower_fetch_state(
            self.replica_id,
            fetch_offset,
            now_ms,
            self.request.replica_state.replica_epoch,
            log_start_offset=log_start_offset,
        ):
            replica_manager.notify_high_watermark(partition.tp)
        else:
            # A DeleteRecords may wait for this follower's log start (a no-op without one).
            replica_manager.delete_records_purgatory.notify(partition.tp)
        cluster = broker.cluster
        if (
            cluster is not None
            and self.replica_id not in partition.isr
            and fetch_offset >= partition.high_watermark
        ):
            cluster.alter_partition.wake()

    def respond(self, results: list[tuple[_Target, PartitionData]]) -> FetchResponse:
        response = FetchResponse(error_code=ErrorCode.NONE, session_id=self.session_id)
        by_topic: dict[tuple[str, uuid.UUID], FetchableTopicResponse] = {}
        for target, data in results:
            cached = target.cached
            if cached is not None:
                changed = cached.maybe_update_response(
                    data.high_watermark, data.last_stable_offset, data.log_start_offset
                )
                if self.incremental and not (
                    changed or data.error_code or (data.records is not None and len(data.records))
                ):
                    continue
            key = (target.topic, target.topic_id)
            topic_response = by_topic.get(key)
            if topic_response is None:
                topic_response = FetchableTopicResponse(
                    topic=target.topic, topic_id=target.topic_id
                )
                by_topic[key] = topic_response
                response.responses.append(topic_response)
            topic_response.partitions.append(data)
        return response


def handle(ctx: BrokerContext, request: FetchRequest) -> object:
    broker = ctx.broker
    version = ctx.api_version
    targets = _resolve_topics(broker, request, version)
    session_id = 0
    incremental = False
    if version >= 7:
        sid, epoch = request.session_id, request.session_epoch
        if epoch in (FINAL_EPOCH, INITIAL_EPOCH):
            if sid != 0:
                broker.fetch_sessions.remove(sid)
            if epoch == INITIAL_EPOCH:
                session = broker.fetch_sessions.create()
                if session is not None:
                    session_id = session.session_id
                    targets = _apply_to_session(session, targets, request, broker, version)
        else:
            try:
                session = broker.fetch_sessions.get(sid, epoch)
            except SessionError as exc:
                return FetchResponse(error_code=exc.error_code, session_id=0)
            session.next_epoch()
            session_id = sid
            incremental = True
            targets = _apply_to_session(session, targets, request, broker, version)
    plan = _FetchPlan(ctx, request, targets, session_id, incremental)
    if plan.large:
        return _sliced(plan)
    results, total, has_error = plan.read()
    if total >= request.min_bytes or request.max_wait <= 0 or has_error or not targets:
        return plan.respond(results)
    return _long_poll(plan, request.max_wait / 1000.0)


async def _sliced(plan: _FetchPlan) -> FetchResponse:
    """A fetch of more partitions than one slice: read in slices, then as :func:`handle`."""
    request = plan.request
    results, total, has_error = await plan.read_sliced()
    if total >= request.min_bytes or request.max_wait <= 0 or has_error:
        return plan.respond(results)
    return await _long_poll(plan, request.max_wait / 1000.0)


async def _long_poll(plan: _FetchPlan, max_wait_s: float) -> FetchResponse:
    purgatory = plan.ctx.broker.replica_manager.fetch_purgatory
    deadline = time.monotonic() + max_wait_s
    watched = plan.partitions()
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        if not await wait_for_notification(purgatory, watched, remaining):
            break
        results, total, has_error = await plan.read_sliced() if plan.large else plan.read()
        if total >= plan.request.min_bytes or has_error or plan.log_start_moved:
            return plan.respond(results)
    results, _, _ = await plan.read_sliced() if plan.large else plan.read()
    return plan.respond(results)


HANDLER = ApiHandlerSpec(1, 4, 17, handle, "Fetch")
