"""GroupCoordinator: the group APIs routed to the shards of the coordinator runtime.

A group is coordinated by the leader of its ``__consumer_offsets`` partition
(:func:`pydmq.groups.log.partition_for`). Each partition led here is a
:class:`~pydmq.groups.shard.GroupCoordinatorShard` of a
:class:`~pydmq.coordinator.runtime.CoordinatorRuntime`, which loads it by replay, serializes its
writes and replays them into it once committed. A shard holds the partition's committed
offsets (:class:`~pydmq.groups.offsets.OffsetMetadataManager`), its classic groups
(:class:`~pydmq.groups.classic.manager.ClassicGroupManager`, the classic protocol's flows) and
its KIP-848 consumer groups (:class:`~pydmq.groups.consumer.manager.ConsumerGroupManager`).
This class checks the group id and the ownership of its partition, routes each request to its
shard, serves the offset APIs, deletions and listings across shards, and keeps a group id
either classic or consumer: JoinGroup on a consumer group with members (and a
ConsumerGroupHeartbeat join on a classic group with members) is answered
INCONSISTENT_GROUP_PROTOCOL; an empty group of the other type is converted. JoinGroup, a
ConsumerGroupHeartbeat and a deletion are writes keyed by the group id, so each decides on the
group's committed state, after the group's earlier writes (no id ever has both group types,
and no member joins a group whose tombstone is in flight).

Single-node mode: every partition is led here and :meth:`GroupCoordinator.load` loads them all
at start-up. Cluster mode: the broker calls :meth:`GroupCoordinator.on_elected` when it becomes
leader of a partition (loaded in the background, yielding to the loop; meanwhile its groups
answer COORDINATOR_LOAD_IN_PROGRESS) and :meth:`GroupCoordinator.on_resigned` when it stops
being leader (its groups are unloaded: pending JoinGroup/SyncGroup answered NOT_COORDINATOR,
timers cancelled); groups of partitions not led here answer NOT_COORDINATOR. A write to
``__consumer_offsets`` is answered once committed (acks=-1): requests that wrote await
:meth:`GroupCoordinator.await_writes` (:class:`~pydmq.groups.writes.GroupWrites`).

Offsets: commits are validated like Kafka 4 (simple commits with generation -1 and no member
only for Empty groups; a consumer group's member epoch), written as records through the
runtime and visible once committed; retention (:mod:`pydmq.groups.retention`) is a timer of
each shard, every ``offsets.retention.check.interval.ms``. Loading (``load`` or
``on_elected``) replays the partition: offsets, consumer groups as they were, and classic
groups as Kafka restores them (generation, protocol, leader and members, whose session timers
start once loaded).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pydmq.coordinator.api import (
    CoordinatorError,
    CoordinatorLog,
    CoordinatorResult,
    TransactionResult,
)
from pydmq.coordinator.runtime import CoordinatorRuntime, WriteOperation
from pydmq.coordinator.timer import CoordinatorTimer
from pydmq.groups import retention
from pydmq.groups.api import CommitRequest, GroupConfig, GroupSummary, JoinRequest
from pydmq.groups.classic.group import (
    ClassicGroup,
    GroupState,
    JoinResult,
    SyncResult,
)
from pydmq.groups.classic.manager import ClassicGroupManager
from pydmq.groups.consumer.api import (
    ConsumerGroupServices,
    HeartbeatRequest,
    HeartbeatResult,
    TopicView,
)
from pydmq.groups.consumer.group import ConsumerGroup
from pydmq.groups.consumer.heartbeat import validate
from pydmq.groups.consumer.manager import ConsumerGroupManager
from pydmq.groups.errors import coordinator_error
from pydmq.groups.log import OFFSETS_TOPIC
from pydmq.groups.offsets import OffsetAndMetadata, OffsetMetadataManager, TopicPartitionKey
from pydmq.groups.records import GroupMetadataRecord
from pydmq.groups.shard import (
    CommittedOffsets,
    GroupCoordinatorShard,
    GroupRecord,
    GroupRecordSerde,
)
from pydmq.groups.writes import GroupWrites
from pydmq.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from pydmq.assignment.api import GroupAssignorSpec

__all__ = [
    "GroupCoordinator",
    "OffsetsLog",
]

log = logging.getLogger(__name__)

R = TypeVar("R")

_JoinStart = tuple[ClassicGroupManager, int, JoinResult | asyncio.Future[JoinResult]]
"""A JoinGroup served on its group's shard: the shard's classic groups, the write mark taken
before, and the outcome."""

_RETENTION_TIMER = "offsets-retention"


class OffsetsLog(CoordinatorLog, Protocol):
    """``__consumer_offsets`` as the group coordinator uses it: the runtime's log port (append
    to a partition, replay a partition) and the group -> partition mapping."""

    @property
    def num_partitions(self) -> int: ...

    def partition_for(self, group_id: str) -> int: ...


def _classic_delete_error(group: ClassicGroup | None) -> int:
    """Why a classic group cannot be deleted (NONE: it can, being Empty)."""
    if group is None or group.is_in(GroupState.DEAD):
        return ErrorCode.GROUP_ID_NOT_FOUND
    return ErrorCode.NONE if group.is_in(GroupState.EMPTY) else ErrorCode.NON_EMPTY_GROUP


def _log_failure(write: asyncio.Future[Any]) -> None:
    if not write.cancelled() and write.exception() is not None:
        log.warning("offsets retention failed: %s", write.exception())


def _marker_error(code: int) -> int:
    """A failed completion's error as WriteTxnMarkers answers it (Kafka's mapping): the
    coordinator errors become NOT_LEADER_OR_FOLLOWER, the append's errors stay."""
    if code in (
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ):
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return code


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class GroupCoordinator:
    """Classic and consumer groups of this node over the shards of its ``__consumer_offsets``
    partitions. Event-loop owned, no locks: each shard's writes are serialized by its runtime
    event queue."""

    def __init__(
        self,
        config: GroupConfig,
        offsets_log: OffsetsLog,
        clock: Callable[[], int] = _now_ms,
        *,
        assignors: Mapping[str, GroupAssignorSpec] | None = None,
        topics: TopicView | None = None,
        owns_all_partitions: bool | None = None,
    ) -> None:
        self.config = config
        self._log = offsets_log
        self._clock = clock
        self._runtime: CoordinatorRuntime[GroupCoordinatorShard, GroupRecord] = CoordinatorRuntime(
            OFFSETS_TOPIC, offsets_log, GroupRecordSerde(), self._build_shard
        )
        self.offsets = CommittedOffsets(self._runtime, self._partition_for)
        # Single-node mode: every partition is led here. Cluster mode (the offsets log says
        # so, unless told): only the partitions elected through on_elected.
        self._owns_all = (
            not getattr(offsets_log, "cluster_mode", False)
            if owns_all_partitions is None
            else owns_all_partitions
        )
        self._started = False
        self._writes = GroupWrites(self._runtime, self._partition_for)
        self._tasks: set[asyncio.Task[None]] = set()
        if assignors is None:
            from pydmq.assignment.plugin import builtin_assignors

            assignors = {spec.name: spec for spec in builtin_assignors()}
        self.consumer = ConsumerGroupServices(config.consumer, assignors, topics)

    @property
    def groups(self) -> dict[str, ClassicGroup]:
        """The classic groups of every partition loaded here, by group id (a new dict)."""
        return {g: group for c in self._classic_managers() for g, group in c.groups.items()}

    def has_classic_group(self, group_id: str) -> bool:
        """True when ``group_id`` is a classic group of a partition loaded here."""
        if self._runtime.status(self._log.partition_for(group_id)):
            return False
        return group_id in self._classic(group_id).groups

    def _classic_managers(self) -> list[ClassicGroupManager]:
        read = self._runtime.read
        return [read(p, lambda shard: shard.classic) for p in self._runtime.active_partitions()]

    def _classic(self, group_id: str) -> ClassicGroupManager:
        """The classic groups of ``group_id``'s partition (its ownership checked before)."""
        return self._runtime.read(self._partition_for(group_id), lambda shard: shard.classic)

    @property
    def consumer_groups(self) -> dict[str, ConsumerGroup]:
        """The consumer groups of every partition loaded here, by group id (a new dict)."""
        read = self._runtime.read
        return {
            group_id: group
            for p in self._runtime.active_partitions()
            for group_id, group in read(p, lambda shard: shard.consumer.groups).items()
        }

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        """The consumer group ``group_id`` (its ownership checked before); None if none."""
        return self._consumer(group_id).groups.get(group_id)

    def _consumer(self, group_id: str) -> ConsumerGroupManager:
        """The consumer groups of ``group_id``'s partition (its ownership checked before)."""
        return self._runtime.read(self._partition_for(group_id), lambda shard: shard.consumer)

    # -- lifecycle -------------------------------------------------------------------
    @property
    def loading(self) -> bool:
        """True while any partition load is in progress."""
        return self._runtime.loading

    @property
    def owns_all_partitions(self) -> bool:
        return self._owns_all

    def load(self) -> None:
        """Single-node mode: load every partition of ``__consumer_offsets`` (committed offsets
        and groups) synchronously, before serving. Cluster mode: nothing (see
        :meth:`on_elected`)."""
        if not self._owns_all:
            return
        for partition in range(self._log.num_partitions):
            self._runtime.load_now(partition)

    def _build_shard(
        self, partition: int, timer: CoordinatorTimer[GroupCoordinatorShard]
    ) -> GroupCoordinatorShard:
        offsets = OffsetMetadataManager()
        classic = ClassicGroupManager(self.config, self._clock, self, timer, offsets)
        consumer = ConsumerGroupManager(self.consumer, timer)
        return GroupCoordinatorShard(partition, timer, self, offsets, classic, consumer)

    def shard_loaded(self, shard: GroupCoordinatorShard) -> None:
        """A partition finished loading: its groups come to life (consumer groups' session
        timers start at once for an election or a load after :meth:`start`, else with it)
        and its retention timer starts (after :meth:`start`)."""
        consumer = shard.consumer.groups
        if consumer:
            log.info("%s-%d: %d consumer groups", OFFSETS_TOPIC, shard.partition, len(consumer))
        count = shard.classic.finish_load(shard.offsets.groups(), consumer.__contains__)
        if count:
            log.info("%s-%d: %d classic groups", OFFSETS_TOPIC, shard.partition, count)
        if self._started or not self._owns_all:
            shard.consumer.start_timers()
            shard.classic.start_timers()
        if self._started:
            self._schedule_retention(shard)

    def shard_unloaded(self, shard: GroupCoordinatorShard) -> None:
        """A partition's leadership moved away: forget its groups (no tombstones)."""
        index = shard.partition

        def owned_elsewhere(group_id: str) -> bool:
            return self._log.partition_for(group_id) == index

        classic = shard.classic.unload()
        consumer = len(shard.consumer.groups)
        self._writes.forget(owned_elsewhere)
        log.info(
            "unloaded %s-%d: %d classic and %d consumer groups",
            OFFSETS_TOPIC,
            index,
            classic,
            consumer,
        )

    # -- partition ownership (cluster mode) --------------------------------------------
    def on_elected(self, partition_index: int, leader_epoch: int) -> asyncio.Task[None] | None:
        """This broker became leader of ``__consumer_offsets`` partition ``partition_index``
        at ``leader_epoch``: load its groups in the background (returns the load task; None
        when nothing is to load: already led here, or single-node mode). Needs the running
        loop."""
        if self._owns_all:
            return None
        return self._runtime.schedule_load(partition_index, leader_epoch)

    def on_resigned(self, partition_index: int, leader_epoch: int | None = None) -> None:
        """This broker is no longer leader of ``__consumer_offsets`` partition
        ``partition_index`` (became follower at ``leader_epoch``, or the replica was stopped or
        deleted: None): unload its groups. A resignation older than the election is ignored."""
        if not self._owns_all:
            self._runtime.schedule_unload(partition_index, leader_epoch)

    def owned_partitions(self) -> dict[int, tuple[int, bool]]:
        """Cluster mode: partition -> (leader epoch, loading) of the partitions led here."""
        return self._runtime.partitions()

    def ownership_error(self, group_id: str) -> int:
        """NONE when ``group_id`` is coordinated here and loaded; COORDINATOR_LOAD_IN_PROGRESS
        while its partition loads; NOT_COORDINATOR when its partition is led elsewhere."""
        return self._runtime.status(self._partition_for(group_id))

    def _partition_for(self, group_id: str) -> int:
        """The group's partition; a node leading every partition loads it on first use."""
        partition = self._log.partition_for(group_id)
        if self._owns_all:
            self._runtime.load_now(partition)
        return partition

    # -- writes ----------------------------------------------------------------------
    def write_records(self, group_id: str, records: Sequence[GroupMetadataRecord]) -> None:
        """Write records of a classic group (replayed into it once committed)."""
        batch: list[GroupRecord] = list(records)
        self._writes.write(group_id, lambda shard: CoordinatorResult(batch, None))

    @property
    def write_mark(self) -> int:
        """See :attr:`GroupWrites.write_mark`."""
        return self._writes.write_mark

    def wrote_since(self, group_id: str, mark: int) -> bool:
        """See :meth:`GroupWrites.wrote_since`."""
        return self._writes.wrote_since(group_id, mark)

    def await_writes(
        self, group_id: str, mark: int, *, offsets: bool = False
    ) -> Coroutine[Any, Any, int]:
        """See :meth:`GroupWrites.await_writes`."""
        return self._writes.await_writes(group_id, mark, offsets=offsets)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` as a task of the coordinator (cancelled by :meth:`stop`)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def start(self) -> None:
        """Start the session timers of the consumer groups loaded so far and the retention
        timer of every partition loaded (later loads start theirs); needs the running loop."""
        self._started = True
        for partition in self._runtime.active_partitions():
            self._runtime.schedule_write(partition, self._start_shard)

    def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        self._runtime.close()

    # -- classic groups --------------------------------------------------------------
    async def join_group(self, request: JoinRequest) -> JoinResult:
        if not request.group_id:
            return JoinResult(ErrorCode.INVALID_GROUP_ID, request.member_id)
        error = self.ownership_error(request.group_id)
        if error:
            return JoinResult(error, request.member_id)
        loop = asyncio.get_running_loop()
        while True:
            started: asyncio.Future[_JoinStart] = loop.create_future()
            write = self._writes.schedule(
                request.group_id, self._join_operation(request, started), key=request.group_id
            )
            if not started.done():
                await asyncio.wait((started, write), return_when=asyncio.FIRST_COMPLETED)
            if started.done():
                classic, mark, outcome = started.result()
                return await classic.joined(request, mark, outcome)
            failure = None if write.cancelled() else write.exception()
            if isinstance(failure, CoordinatorError):
                return JoinResult(coordinator_error(failure.error_code), request.member_id)
            if write.cancelled() or failure is not None:
                return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, request.member_id)
            # an empty consumer group was converted: join the group id again

    def _join_operation(
        self, request: JoinRequest, started: asyncio.Future[_JoinStart]
    ) -> WriteOperation[GroupCoordinatorShard, None]:
        """JoinGroup as an operation keyed by the group id, so it decides on the group's
        committed state, after the writes before it (a ConsumerGroupHeartbeat's, a
        deletion's): a consumer group with members refuses the join; an empty one is
        converted (its records are tombstoned, its committed offsets stay) and the join runs
        again once that is committed; else the classic join is served and ``started`` set."""
        group_id = request.group_id

        def operation(shard: GroupCoordinatorShard) -> CoordinatorResult[GroupRecord, None]:
            consumer = shard.consumer
            if group_id in consumer.groups:
                if consumer.delete_error(group_id):
                    refused = JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, request.member_id)
                    started.set_result((shard.classic, self.write_mark, refused))
                    return CoordinatorResult((), None)
                return CoordinatorResult(consumer.delete_records(group_id), None)
            mark = self.write_mark
            started.set_result((shard.classic, mark, shard.classic.join(request)))
            return CoordinatorResult((), None)

        return operation

    async def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult:
        if not group_id:
            return SyncResult(ErrorCode.INVALID_GROUP_ID)
        error = self.ownership_error(group_id)
        if error:
            return SyncResult(error)
        return await self._classic(group_id).sync_group(
            group_id,
            generation_id,
            member_id,
            group_instance_id,
            protocol_type,
            protocol_name,
            assignments,
        )

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> int:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        error = self.ownership_error(group_id)
        if error:
            return error
        return self._classic(group_id).heartbeat(
            group_id, generation_id, member_id, group_instance_id
        )

    def leave_group(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> tuple[int, list[int]]:
        """Returns (top-level error, one error per leaving member)."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, []
        error = self.ownership_error(group_id)
        if error:
            return error, []
        return self._classic(group_id).leave_group(group_id, members)

    # -- ConsumerGroupHeartbeat (KIP-848) --------------------------------------------
    def consumer_group_heartbeat(self, req: HeartbeatRequest) -> asyncio.Future[HeartbeatResult]:
        """Serve one ConsumerGroupHeartbeat: a write of the group's shard, keyed by the group
        (it runs once the group's earlier writes are committed). The future resolves with the
        answer once the heartbeat's records are committed and replayed (at once when the log
        commits at append time, a single node); a failed write answers its error."""
        answer: asyncio.Future[HeartbeatResult] = asyncio.get_running_loop().create_future()
        error = self.ownership_error(req.group_id) if req.group_id else ErrorCode.NONE
        invalid = HeartbeatResult(error) if error else validate(self.consumer, req)
        if invalid is not None:
            answer.set_result(invalid)
            return answer
        group_id = req.group_id

        def operation(
            shard: GroupCoordinatorShard,
        ) -> CoordinatorResult[GroupRecord, HeartbeatResult]:
            return shard.consumer.heartbeat(req, shard.classic.convert_to_consumer)

        def settle(write: asyncio.Future[HeartbeatResult]) -> None:
            if answer.done():
                return
            exc = None if write.cancelled() else write.exception()
            if isinstance(exc, CoordinatorError):
                answer.set_result(HeartbeatResult(coordinator_error(exc.error_code)))
            elif write.cancelled() or exc is not None:
                answer.set_result(HeartbeatResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            else:
                answer.set_result(write.result())

        write = self._writes.schedule(group_id, operation, key=group_id)
        if not write.done():
            write.add_done_callback(settle)
        elif write.cancelled() or write.exception() is not None:
            settle(write)
        else:
            return write  # answered already (a single node): no second future
        return answer

    # -- offsets ---------------------------------------------------------------------
    def commit_offsets(self, req: CommitRequest) -> dict[TopicPartitionKey, int]:
        """Validate and store; returns an error code per partition. A TxnOffsetCommit's
        (``req.producer`` set) is written as a transactional batch of that producer: pending,
        invisible to OffsetFetch, until :meth:`complete_transaction` commits it."""

        def all_fail(code: int) -> dict[TopicPartitionKey, int]:
            return dict.fromkeys(req.offsets, code)

        if not req.group_id:
            return all_fail(ErrorCode.INVALID_GROUP_ID)
        error = self.ownership_error(req.group_id)
        if error:
            return all_fail(error)
        consumer = self._consumer(req.group_id)
        if req.group_id in consumer.groups:
            error = consumer.validate_offset_commit(
                req.group_id,
                req.member_id,
                req.generation_id,
                req.api_version,
                transactional=req.transactional,
            )
            if error:
                return all_fail(error)
            return self._store_offsets(req, None)
        error, group = self._classic(req.group_id).prepare_offset_commit(req)
        if error:
            return all_fail(error)
        return self._store_offsets(req, group)

    def _store_offsets(
        self, req: CommitRequest, group: ClassicGroup | None
    ) -> dict[TopicPartitionKey, int]:
        now = self._clock()
        expire = now + req.retention_time_ms if req.retention_time_ms >= 0 else -1
        limit = self.config.offset_metadata_max_bytes
        results: dict[TopicPartitionKey, int] = {}
        accepted: dict[TopicPartitionKey, OffsetAndMetadata] = {}
        for tp, (offset, epoch, metadata) in req.offsets.items():
            text = metadata or ""
            if len(text.encode("utf-8")) > min(limit, 0x7FFF):
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            accepted[tp] = OffsetAndMetadata(offset, epoch, text, now, expire)
            results[tp] = ErrorCode.NONE
        if not accepted:
            return results
        group_id = req.group_id
        try:
            self._writes.write(
                group_id,
                lambda shard: CoordinatorResult(
                    shard.offsets.commit_records(group_id, accepted), None
                ),
                producer=req.producer,
            )
        except CoordinatorError as exc:
            code = coordinator_error(exc.error_code, offsets=True)
            log.warning("storing offsets of group %s failed: %s", group_id, exc)
            for tp in accepted:
                results[tp] = code
            if group is not None:
                self._classic(group_id).maybe_drop(group)
        return results

    def complete_transaction(
        self,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        committed: bool,
        transaction_version: int = 0,
    ) -> asyncio.Future[int]:
        """End ``producer_id``'s transaction on ``__consumer_offsets`` partition
        ``partition`` (the WriteTxnMarkers of the transaction coordinator): append the COMMIT
        (``committed``) or ABORT marker through the partition's shard, after the writes queued
        before it, and once it is committed replay it (COMMIT makes the producer's pending
        offsets committed, ABORT drops them). Resolves with the error code WriteTxnMarkers
        answers for the partition: NONE; NOT_LEADER_OR_FOLLOWER when the partition is not led
        or not loaded here, or leadership moved (Kafka maps the coordinator errors so, for
        the transaction coordinator retries them); else the append's error
        (INVALID_PRODUCER_EPOCH, also for a late marker of transactions v2,
        ``transaction_version`` 2; TRANSACTION_COORDINATOR_FENCED, NOT_ENOUGH_REPLICAS,
        KAFKA_STORAGE_ERROR...). Needs the running loop."""
        result = TransactionResult.COMMIT if committed else TransactionResult.ABORT
        if self._owns_all and 0 <= partition < self._log.num_partitions:
            self._runtime.load_now(partition)
        write = self._runtime.schedule_transaction_completion(
            partition, producer_id, producer_epoch, coordinator_epoch, result, transaction_version
        )
        answer: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def settle(done: asyncio.Future[None]) -> None:
            if answer.done():
                return
            failure = None if done.cancelled() else done.exception()
            if failure is None and not done.cancelled():
                answer.set_result(ErrorCode.NONE)
            elif isinstance(failure, CoordinatorError):
                answer.set_result(_marker_error(failure.error_code))
            else:
                log.warning(
                    "ending a transaction on %s-%d failed: %s", OFFSETS_TOPIC, partition, failure
                )
                answer.set_result(ErrorCode.UNKNOWN_SERVER_ERROR)

        if write.done():
            settle(write)
        else:
            write.add_done_callback(settle)
        return answer

    def fetch_offsets(
        self,
        group_id: str,
        topics: Sequence[tuple[str, Sequence[int]]] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
        *,
        require_stable: bool = False,
    ) -> tuple[int, list[tuple[str, int, OffsetAndMetadata | int | None]]]:
        """The group's committed offsets of ``topics`` (None: every committed partition);
        with ``require_stable``, a partition with pending transactional offsets answers
        UNSTABLE_OFFSET_COMMIT (an int in place of its offset) instead."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, []
        error = self.ownership_error(group_id)
        if error:
            return error, []
        consumer = self._consumer(group_id)
        if group_id in consumer.groups:
            error = consumer.validate_offset_fetch(group_id, member_id, member_epoch)
            if error:
                return error, []
        return ErrorCode.NONE, self._runtime.read(
            self._log.partition_for(group_id),
            lambda shard: shard.offsets.rows(group_id, topics, require_stable=require_stable),
        )

    def delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartitionKey]
    ) -> tuple[int, dict[TopicPartitionKey, int]]:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, {}
        error = self.ownership_error(group_id)
        if error:
            return error, {}
        consumer = self._consumer(group_id)
        if group_id in consumer.groups:
            consumer_results: dict[TopicPartitionKey, int] = {
                tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                if consumer.is_subscribed_to(group_id, tp[0])
                else ErrorCode.NONE
                for tp in partitions
            }
            deletable = [tp for tp, e in consumer_results.items() if not e]
            return self._delete_offsets(group_id, deletable, consumer_results)
        group = self._classic(group_id).groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        results: dict[TopicPartitionKey, int] = {}
        deletable = []
        for tp in partitions:
            if not group.is_in(GroupState.EMPTY) and group.is_subscribed_to(tp[0]):
                results[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                results[tp] = ErrorCode.NONE
                deletable.append(tp)
        return self._delete_offsets(group_id, deletable, results)

    def _delete_offsets(
        self,
        group_id: str,
        deletable: list[TopicPartitionKey],
        results: dict[TopicPartitionKey, int],
    ) -> tuple[int, dict[TopicPartitionKey, int]]:
        try:
            self._delete_offset_records(group_id, deletable)
        except CoordinatorError as exc:
            log.warning("deleting offsets of group %s failed: %s", group_id, exc)
            return coordinator_error(exc.error_code), {}
        return ErrorCode.NONE, results

    def _delete_offset_records(
        self, group_id: str, partitions: Sequence[TopicPartitionKey]
    ) -> None:
        """Write the tombstones of ``group_id``'s committed or pending transactional offsets
        among ``partitions`` (nothing when there is none)."""
        stored = set(self.offsets.all_partitions(group_id))
        if not any(tp in stored for tp in partitions):
            return

        def delete(shard: GroupCoordinatorShard) -> CoordinatorResult[GroupRecord, None]:
            return CoordinatorResult(shard.offsets.delete_records(group_id, partitions), None)

        self._writes.write(group_id, delete)

    def delete_groups(self, group_ids: Sequence[str]) -> dict[str, int]:
        results: dict[str, int] = {}
        for group_id in group_ids:
            if not group_id:
                results[group_id] = ErrorCode.INVALID_GROUP_ID
                continue
            error = self.ownership_error(group_id)
            if error:
                results[group_id] = error
                continue
            try:
                results[group_id] = self._delete_group_by_id(group_id)
            except CoordinatorError as exc:
                log.warning("deleting group %s failed: %s", group_id, exc)
                results[group_id] = coordinator_error(exc.error_code)
        return results

    def _delete_group_by_id(self, group_id: str) -> int:
        consumer = self._consumer(group_id)
        if group_id in consumer.groups:
            error = consumer.delete_error(group_id)
            if not error:
                self._delete_consumer_group(group_id)
            return error
        error = _classic_delete_error(self._classic(group_id).groups.get(group_id))
        if not error:
            self._delete_classic_group(group_id)
        return error

    def _delete_consumer_group(self, group_id: str) -> None:
        """Tombstone an empty consumer group and its committed offsets (one write, keyed by
        the group: it fails with NON_EMPTY_GROUP if a member joined meanwhile)."""

        def delete(shard: GroupCoordinatorShard) -> CoordinatorResult[GroupRecord, None]:
            offsets = shard.offsets
            records: list[GroupRecord] = [
                *offsets.delete_records(group_id, offsets.all_partitions(group_id)),
                *shard.consumer.delete_records(group_id),
            ]
            return CoordinatorResult(records, None)

        self._writes.write(group_id, delete, key=group_id)

    def _delete_classic_group(self, group_id: str) -> None:
        """Tombstone an Empty classic group and its committed offsets: one write keyed by the
        group, as JoinGroup is, so no member joins while the tombstone is in flight (the
        write fails with NON_EMPTY_GROUP or GROUP_ID_NOT_FOUND if the group changed before it
        ran)."""

        def delete(shard: GroupCoordinatorShard) -> CoordinatorResult[GroupRecord, None]:
            group = shard.classic.groups.get(group_id)
            error = _classic_delete_error(group)
            if error:
                raise CoordinatorError(error)
            assert group is not None
            shard.classic.forget_pending_members(group)
            offsets = shard.offsets
            records: list[GroupRecord] = [
                *offsets.delete_records(group_id, offsets.all_partitions(group_id)),
                GroupMetadataRecord(group_id, None),  # its replay deletes the group
            ]
            return CoordinatorResult(records, None)

        self._writes.write(group_id, delete, key=group_id)

    # -- describe / list -------------------------------------------------------------
    def describe_group(self, group_id: str) -> tuple[int, GroupSummary]:
        error = self.ownership_error(group_id)
        if error:
            return error, GroupSummary(group_id, "", "", "")
        consumer = self._consumer(group_id)
        if group_id in consumer.groups:
            return ErrorCode.NONE, consumer.describe(group_id)
        return ErrorCode.NONE, self._classic(group_id).describe(group_id)

    def list_groups_error(self) -> int:
        """COORDINATOR_LOAD_IN_PROGRESS while a partition loads (the listing lacks its
        groups), else NONE."""
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.loading else ErrorCode.NONE

    def list_groups(self) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of every live group."""
        return [
            (g.group_id, g.protocol_type or "", g.state.value)
            for g in self.groups.values()
            if not g.is_in(GroupState.DEAD)
        ] + self._consumer_rows()

    def list_groups_with_type(self) -> list[tuple[str, str, str, str]]:
        """(group id, protocol type, state, group type "classic" or "consumer")."""
        classic = [
            (g.group_id, g.protocol_type or "", g.state.value, "classic")
            for g in self.groups.values()
            if not g.is_in(GroupState.DEAD)
        ]
        return classic + [(g, p, s, "consumer") for g, p, s in self._consumer_rows()]

    def _consumer_rows(self) -> list[tuple[str, str, str]]:
        read = self._runtime.read
        return [
            row
            for p in self._runtime.active_partitions()
            for row in read(p, lambda shard: shard.consumer.list_rows())
        ]

    # -- retention -------------------------------------------------------------------
    def _schedule_retention(self, shard: GroupCoordinatorShard) -> None:
        shard.timer.schedule(
            _RETENTION_TIMER, self.config.retention_check_interval_ms, self._retention_tick
        )

    def _start_shard(self, shard: GroupCoordinatorShard) -> CoordinatorResult[GroupRecord, None]:
        shard.consumer.start_timers()
        shard.classic.start_timers()
        self._schedule_retention(shard)
        return CoordinatorResult((), None)

    def _retention_tick(self, shard: GroupCoordinatorShard) -> CoordinatorResult[GroupRecord, None]:
        self._schedule_retention(shard)
        result = self._expire(shard, self._clock())
        if result.response:
            log.info(
                "expiring %d committed offsets of %s-%d",
                result.response,
                OFFSETS_TOPIC,
                shard.partition,
            )
        return CoordinatorResult(result.records, None)

    def _expire(
        self, shard: GroupCoordinatorShard, now: int
    ) -> CoordinatorResult[GroupRecord, int]:
        """The retention write of ``shard`` at ``now``; the KIP-848 groups it leaves empty
        and without offsets are deleted by writes keyed by each group, queued behind it."""
        retention_ms = self.config.offsets_retention_ms
        for group_id in retention.expiring_consumer_groups(shard, now, retention_ms):

            def delete(
                shard: GroupCoordinatorShard, group_id: str = group_id
            ) -> CoordinatorResult[GroupRecord, None]:
                log.info("deleting consumer group %s: empty, its offsets expired", group_id)
                return retention.expire_consumer_group(shard, group_id, now, retention_ms)

            self._writes.schedule(group_id, delete, key=group_id).add_done_callback(_log_failure)
        return retention.expire(shard, now, retention_ms)

    def expire_offsets(self, now_ms: int | None = None) -> int:
        """Tombstone expired offsets of Empty groups in every partition loaded here; drop
        Empty groups left without any (KIP-848 groups: by writes queued behind). Returns how
        many offsets were tombstoned."""
        now = self._clock() if now_ms is None else now_ms
        expired = 0

        def expire(shard: GroupCoordinatorShard) -> CoordinatorResult[GroupRecord, int]:
            nonlocal expired
            result = self._expire(shard, now)
            expired += result.response
            return result

        for partition in self._runtime.active_partitions():
            self._runtime.schedule_write(partition, expire).add_done_callback(_log_failure)
        if expired:
            log.info("expired %d committed offsets", expired)
        return expired

    # -- helpers for handlers ----------------------------------------------------------
    def is_member(self, group_id: str, member_id: str) -> bool:
        if self.ownership_error(group_id):
            return False
        return self._classic(group_id).is_member(group_id, member_id)
