"""Fetch (key 1), v4-v17.

Long poll: when fewer than ``min_bytes`` are available the request waits up to ``max_wait``
and is woken by appends to any partition it reads. Fetch sessions (KIP-227) from v7: see
:mod:`pydmq.broker.fetch_session`; incremental responses carry only partitions whose data,
error, high watermark, last stable offset or log start offset changed. Topic ids instead of
names from v13 (UNKNOWN_TOPIC_ID). A fetch offset inside a batch returns that whole batch.
``current_leader_epoch`` (v9+) is checked: FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH.
The first partition with data gets at least one whole batch even above the byte limits
(KIP-74). read_committed (isolation_level=1) reads up to the last stable offset and lists
the aborted transactions overlapping the returned range (``aborted_transactions``: producer
id and first offset; an empty list when none, null for read_uncommitted, as Kafka); a long
poll is woken by the appends and high watermark moves that move the last stable offset.
Fetch v18 (KIP-1166) is not advertised: Kafka 4.0/4.1 stop at v17.
A read that meets damaged stored data answers CORRUPT_MESSAGE for that partition (the intact
batches before the damage are served first), never a closed connection: see
:mod:`pydmq.replication.corruption`.

This handler resolves topics, applies the fetch session and maps the request to neutral
:class:`~pydmq.replication.fetch.FetchParams` and targets and the results back to the wire;
the replica manager reads, keeps the followers' state and long-polls
(:meth:`~pydmq.replication.replica_manager.ReplicaManager.fetch_messages`, see
:mod:`pydmq.replication.fetch`).

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

Authorization (with an authorizer, as Kafka's KafkaApis): a fetch claiming a replica id
needs CLUSTER_ACTION on the cluster (a secured cluster lists its brokers' principal in
``super.users``), else every partition is TOPIC_AUTHORIZATION_FAILED; a consumer's needs READ
on each topic, else that topic's partitions are TOPIC_AUTHORIZATION_FAILED (after the session
is applied, so a session's cached partitions are checked on every fetch).

A fetch of more partitions than one slice (:data:`~pydmq.api.slices.SLICE_ELEMENTS`,
up to the decode budget of 110,000 elements) is read in slices between which the event loop
serves other connections, each read of its long poll too; a normal fetch is read at once.

Quotas: a consumer with a ``consumer_byte_rate`` quota (by its user and client id) reads at
most what the quota allows in one window; a fetch that takes it over its rate is answered
empty with ``throttle_time_ms``, and the connection is muted for that time (a client before
v8 gets its response delayed instead). Followers are never throttled; nothing is looked up
when no such quota exists.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Iterable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    CachedPartition,
    FetchSession,
    SessionError,
)
from pydmq.broker.handlers._authorize import authorized_cluster, authorized_names
from pydmq.broker.services import BrokerServices
from pydmq.protocol.acl import AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.fetch import (
    AbortedTransaction,
    FetchableTopicResponse,
    FetchRequest,
    FetchResponse,
    PartitionData,
)
from pydmq.protocol.scatter import RecordsView
from pydmq.replication.fetch import FetchParams, FetchPartitionResult, FetchTarget
from pydmq.replication.stats import BrokerTopicStats
from pydmq.storage.api import TopicPartition

__all__ = ["HANDLER"]

_ZERO_UUID = uuid.UUID(int=0)


def _resolve_topics(
    broker: BrokerServices, request: FetchRequest, version: int
) -> list[FetchTarget]:
    targets: list[FetchTarget] = []
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
                FetchTarget(
                    topic_id,
                    TopicPartition(name, p.partition),
                    p.fetch_offset,
                    p.partition_max_bytes,
                    p.current_leader_epoch,
                    p.log_start_offset,
                    error,
                )
            )
    return targets


def _apply_to_session(
    session: FetchSession,
    targets: Iterable[FetchTarget],
    request: FetchRequest,
    broker: BrokerServices,
    version: int,
) -> tuple[list[FetchTarget], list[CachedPartition]]:
    """The session's partitions after this request, as targets, with their session entries."""
    log_starts: dict[tuple[str, int], int] = {}
    for target in targets:
        tp = target.tp
        key = (tp.topic if version < 13 else str(target.topic_id), tp.partition)
        log_starts[key] = target.log_start_offset
        cached = session.partitions.get(key)
        if cached is None:
            cached = CachedPartition(
                tp.topic,
                target.topic_id,
                tp.partition,
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
    result: list[FetchTarget] = []
    entries: list[CachedPartition] = []
    for key, cached in session.partitions.items():
        error = ErrorCode.NONE
        if version >= 13 and broker.topics.by_id(cached.topic_id) is None:
            error = ErrorCode.UNKNOWN_TOPIC_ID
        result.append(
            FetchTarget(
                cached.topic_id,
                TopicPartition(cached.topic, cached.partition),
                cached.fetch_offset,
                cached.partition_max_bytes,
                cached.current_leader_epoch,
                log_starts.get(key, -1),
                error,
            )
        )
        entries.append(cached)
    return result, entries


class _Answer:
    """How the results of one Fetch become its response: the session's entries (whose last
    reported values decide what an incremental response carries) and the wire details."""

    __slots__ = (
        "follower",
        "incremental",
        "read_committed",
        "session_entries",
        "session_id",
        "stats",
    )

    def __init__(
        self,
        session_id: int,
        incremental: bool,
        session_entries: list[CachedPartition] | None,
        read_committed: bool,
        stats: BrokerTopicStats,
        follower: bool,
    ) -> None:
        self.session_id = session_id
        self.incremental = incremental
        self.session_entries = session_entries
        self.read_committed = read_committed
        self.stats = stats  # bytes out per topic (consumers' or followers')
        self.follower = follower

    def respond(
        self, targets: list[FetchTarget], results: list[FetchPartitionResult]
    ) -> FetchResponse:
        response = FetchResponse(error_code=ErrorCode.NONE, session_id=self.session_id)
        by_topic: dict[tuple[str, uuid.UUID], FetchableTopicResponse] = {}
        entries = self.session_entries
        incremental = self.incremental
        read_committed = self.read_committed
        for i, target in enumerate(targets):
            result = results[i]
            info = result.records
            if entries is not None:
                changed = entries[i].maybe_update_response(
                    result.high_watermark, result.last_stable_offset, result.log_start_offset
                )
                if incremental and not (changed or result.error_code or info is not None):
                    continue
            tp = target.tp
            if info is not None:
                topic_stats = self.stats.topic(tp.topic)
                if self.follower:
                    topic_stats.replication_bytes_out += info.size
                else:
                    topic_stats.bytes_out += info.size
            key = (tp.topic, target.topic_id)
            topic_response = by_topic.get(key)
            if topic_response is None:
                topic_response = FetchableTopicResponse(topic=tp.topic, topic_id=target.topic_id)
                by_topic[key] = topic_response
                response.responses.append(topic_response)
            topic_response.partitions.append(
                PartitionData(
                    partition_index=tp.partition,
                    error_code=result.error_code,
                    high_watermark=result.high_watermark,
                    last_stable_offset=result.last_stable_offset,
                    log_start_offset=result.log_start_offset,
                    preferred_read_replica=-1,
                    aborted_transactions=_aborted(result) if read_committed else None,
                    records=b"" if info is None else RecordsView(info.buffers, info.size),  # type: ignore[arg-type]
                )
            )
        return response

    def throttled(self, broker: BrokerServices, throttle_time_ms: int) -> FetchResponse:
        """Kafka's answer to a throttled fetch: no partitions; a session this request
        created is dropped again (the answer is sessionless), an existing one is kept with
        its last reported state, so the next fetch gets what this one did not."""
        session_id = self.session_id
        if session_id and not self.incremental:
            broker.fetch_sessions.remove(session_id)
            session_id = 0
        return FetchResponse(
            throttle_time=throttle_time_ms, error_code=ErrorCode.NONE, session_id=session_id
        )


def _aborted(result: FetchPartitionResult) -> list[AbortedTransaction]:
    aborted = result.aborted_transactions
    if not aborted:
        return []
    return [
        AbortedTransaction(producer_id=txn.producer_id, first_offset=txn.first_offset)
        for txn in aborted
    ]


def handle(ctx: BrokerContext, request: FetchRequest) -> object:
    broker = ctx.broker
    version = ctx.api_version
    targets = _resolve_topics(broker, request, version)
    session_id = 0
    incremental = False
    session_entries: list[CachedPartition] | None = None
    if version >= 7:
        sid, epoch = request.session_id, request.session_epoch
        if epoch in (FINAL_EPOCH, INITIAL_EPOCH):
            if sid != 0:
                broker.fetch_sessions.remove(sid)
            if epoch == INITIAL_EPOCH:
                session = broker.fetch_sessions.create()
                if session is not None:
                    session_id = session.session_id
                    targets, session_entries = _apply_to_session(
                        session, targets, request, broker, version
                    )
        else:
            try:
                session = broker.fetch_sessions.get(sid, epoch)
            except SessionError as exc:
                return FetchResponse(error_code=exc.error_code, session_id=0)
            session.next_epoch()
            session_id = sid
            incremental = True
            targets, session_entries = _apply_to_session(session, targets, request, broker, version)
    params = _params(ctx, request)
    answer = _Answer(
        session_id,
        incremental,
        session_entries,
        request.isolation_level == 1,
        broker.replica_manager.topic_stats,
        params.replica_id >= 0,
    )
    if broker.authorizer is not None:
        _authorize_targets(ctx, params, targets)
    quota = _FetchQuota.of(ctx, params)
    results = broker.replica_manager.fetch_messages(params, targets)
    if isinstance(results, list):
        return _respond(ctx, answer, quota, targets, results)
    return _respond_later(ctx, answer, quota, targets, results)


class _FetchQuota:
    """The consumer's ``consumer_byte_rate`` quota (Kafka's fetch ClientQuotaManager): the
    response size is capped at what the client may take in one quota window; once read, its
    records' size is recorded, and a client over its rate gets an empty response carrying the
    throttle time (the recorded size taken back, as Kafka does) and is muted for that time."""

    __slots__ = ("client_id", "user")

    def __init__(self, user: str, client_id: str) -> None:
        self.user = user
        self.client_id = client_id

    @classmethod
    def of(cls, ctx: BrokerContext, params: FetchParams) -> _FetchQuota | None:
        """The quota of a consumer's fetch (None: no quota applies; followers have none),
        with ``params`` capped to its window."""
        manager = ctx.broker.quotas.fetch
        if not manager.enabled or params.replica_id >= 0:
            return None
        user, client_id = ctx.principal.name, ctx.client_id or ""
        window_bytes = manager.max_value_in_quota_window(user, client_id)
        if window_bytes is None:
            return None
        limit = int(min(window_bytes, 2**31 - 1))
        params.max_bytes = limit if params.max_bytes <= 0 else min(params.max_bytes, limit)
        params.min_bytes = min(params.min_bytes, params.max_bytes)
        return cls(user, client_id)

    def throttle_time_ms(self, ctx: BrokerContext, results: list[FetchPartitionResult]) -> int:
        manager = ctx.broker.quotas.fetch
        size = sum(r.records.size for r in results if r.records is not None)
        throttle = manager.record_and_get_throttle_time_ms(self.user, self.client_id, size)
        if throttle:
            manager.unrecord(self.user, self.client_id, size)
        return throttle


def _respond(
    ctx: BrokerContext,
    answer: _Answer,
    quota: _FetchQuota | None,
    targets: list[FetchTarget],
    results: list[FetchPartitionResult],
) -> FetchResponse:
    if quota is not None:
        throttle = quota.throttle_time_ms(ctx, results)
        if throttle:
            ctx.throttle_time_ms = throttle
            return answer.throttled(ctx.broker, throttle)
    return answer.respond(targets, results)


def _authorize_targets(ctx: BrokerContext, params: FetchParams, targets: list[FetchTarget]) -> None:
    """TOPIC_AUTHORIZATION_FAILED on the targets the principal may not read (a replica's
    fetch: all of them, unless it may CLUSTER_ACTION)."""
    if params.replica_id >= 0:
        if authorized_cluster(ctx, AclOperation.CLUSTER_ACTION):
            return
        readable: set[str] = set()
    else:
        names = {t.tp.topic for t in targets if t.error == ErrorCode.NONE}
        readable = authorized_names(ctx, AclOperation.READ, ResourceType.TOPIC, names)
    for target in targets:
        if target.error == ErrorCode.NONE and target.tp.topic not in readable:
            target.error = ErrorCode.TOPIC_AUTHORIZATION_FAILED


def _params(ctx: BrokerContext, request: FetchRequest) -> FetchParams:
    """Who fetches and how; whether a follower's claim came the way followers fetch (the
    inter-broker listener, v15+ with the replica's broker epoch) is this layer's to say."""
    version = ctx.api_version
    if version >= 15:
        replica_id = request.replica_state.replica_id
        replica_epoch = request.replica_state.replica_epoch
        inter_broker = ctx.listener == ctx.broker.inter_broker_listener
    else:
        replica_id, replica_epoch, inter_broker = request.replica_id, -1, False
    return FetchParams(
        replica_id,
        replica_epoch,
        inter_broker,
        request.max_wait,
        request.min_bytes,
        request.max_bytes,
        version >= 9,
        request.isolation_level == 1,
    )


async def _respond_later(
    ctx: BrokerContext,
    answer: _Answer,
    quota: _FetchQuota | None,
    targets: list[FetchTarget],
    waiting: Awaitable[list[FetchPartitionResult]],
) -> FetchResponse:
    return _respond(ctx, answer, quota, targets, await waiting)


HANDLER = ApiHandlerSpec(1, 4, 17, handle, "Fetch")
