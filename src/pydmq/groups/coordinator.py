"""GroupCoordinator: the classic group protocol and committed offsets, owned by the event loop.

A group is coordinated by the leader of its ``__consumer_offsets`` partition
(:func:`pydmq.groups.log.partition_for`). Each partition led here is a
:class:`~pydmq.groups.shard.GroupCoordinatorShard` of a
:class:`~pydmq.coordinator.runtime.CoordinatorRuntime`, which loads it by replay, serializes its
writes and replays them into it once committed; the committed offsets live in the shard
(:class:`~pydmq.groups.offsets.OffsetMetadataManager`), classic and consumer groups still
here. Single-node mode: every partition is led here and :meth:`GroupCoordinator.load` loads
them all at start-up. Cluster mode: the broker calls :meth:`GroupCoordinator.on_elected` when
it becomes leader of a partition (loaded in the background, yielding to the loop; meanwhile its
groups answer COORDINATOR_LOAD_IN_PROGRESS) and :meth:`GroupCoordinator.on_resigned` when it
stops being leader (its groups are unloaded: pending JoinGroup/SyncGroup answered
NOT_COORDINATOR, timers cancelled); groups of partitions not led here answer NOT_COORDINATOR.
A write to ``__consumer_offsets`` is answered once committed (acks=-1): requests that wrote
await :meth:`GroupCoordinator.await_writes`, and a SyncGroup's assignment is handed out only
after the group's record is committed. Flows follow Kafka's classic coordinator:

- JoinGroup: a new member (empty member id) gets an id ``<client id>-<uuid>``; from JoinGroup
  v4 (``require_known_member_id``) it is first answered MEMBER_ID_REQUIRED and kept pending
  (expires after its session timeout); v0-v3 join in one round trip. A join (or a changed
  subscription, or the leader rejoining) moves the group to PreparingRebalance; the rebalance
  completes when every known member has rejoined or after the largest rebalance timeout
  (dynamic members that did not rejoin are removed). An Empty group's first rebalance waits
  ``group.initial.rebalance.delay.ms``, extended while members keep joining, up to the
  rebalance timeout. Completion bumps the generation, selects the protocol by votes and
  answers every pending join (the leader gets the members' metadata).
- SyncGroup: the leader's assignments are stored (``__consumer_offsets``) and handed to every
  member; the group becomes Stable. Members that do not sync within the rebalance timeout are
  removed and the group rebalances.
- Heartbeat/session timeout: every member has a ``loop.call_later`` timer reset by heartbeats,
  syncs and commits; expiry removes the member and rebalances (members waiting in a join or
  sync are bounded by the rebalance timers instead).
- Static membership (``group.instance.id``, JoinGroup v5+): a known instance id joining with an
  empty member id replaces the old member id; in a Stable group whose selected protocol and
  subscribed topics do not change, no rebalance happens and the member gets its assignment back
  through SyncGroup. The replaced member id is answered FENCED_INSTANCE_ID.
- Offsets: commits validated like Kafka 4 (simple commits with generation -1 and no member only
  for Empty groups), written as records through the runtime and visible once committed; Empty
  groups' offsets expire ``offsets.retention.minutes`` after the group became Empty (simple
  groups: after the commit), checked every ``offsets.retention.check.interval.ms`` by a timer
  of each shard; an Empty group without offsets is then removed (Dead).
- Loading (``load`` or ``on_elected``) replays the partition: offsets, and groups as Empty
  with their generation and protocol type (members are not restored).
- Consumer groups (KIP-848) live in :attr:`GroupCoordinator.consumer`
  (:mod:`pydmq.groups.consumer`); they share the offsets store and ``__consumer_offsets``. A
  group id is either classic or consumer: JoinGroup on a consumer group with members (and a
  ConsumerGroupHeartbeat join on a classic group with members) is answered
  INCONSISTENT_GROUP_PROTOCOL; an empty group of the other type is converted.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pydmq.coordinator.api import (
    CoordinatorError,
    CoordinatorLog,
    CoordinatorRecord,
    CoordinatorResult,
)
from pydmq.coordinator.runtime import CoordinatorRuntime, WriteOperation
from pydmq.coordinator.timer import CoordinatorTimer
from pydmq.groups.consumer.coordinator import (
    ConsumerGroupConfig,
    ConsumerGroupCoordinator,
    ConsumerGroupLoad,
    HeartbeatRequest,
    HeartbeatResult,
    TopicView,
)
from pydmq.groups.consumer.embedded import encode_assignment, encode_subscription
from pydmq.groups.group import (
    ClassicGroup,
    GroupState,
    JoinResult,
    MemberMetadata,
    SyncResult,
    subscribed_topics,
)
from pydmq.groups.log import OFFSETS_TOPIC
from pydmq.groups.offsets import OffsetAndMetadata, TopicPartitionKey
from pydmq.groups.records import GroupMetadataKey, GroupMetadataValue, MemberMetadataValue
from pydmq.groups.shard import CommittedOffsets, GroupCoordinatorShard, GroupLoad
from pydmq.protocol.errors import ErrorCode
from pydmq.storage.api import TopicPartition

if TYPE_CHECKING:
    from pydmq.assignment.api import GroupAssignorSpec

__all__ = [
    "CommitRequest",
    "GroupConfig",
    "GroupCoordinator",
    "GroupSummary",
    "JoinRequest",
    "MemberSummary",
    "OffsetsLog",
    "coordinator_error",
    "offsets_leadership_listener",
]

log = logging.getLogger(__name__)

R = TypeVar("R")

_RETENTION_TIMER = "offsets-retention"


class OffsetsLog(CoordinatorLog, Protocol):
    """``__consumer_offsets`` as the group coordinator uses it: the runtime's log port (append
    to a partition, replay a partition) and the group -> partition mapping."""

    @property
    def num_partitions(self) -> int: ...

    def partition_for(self, group_id: str) -> int: ...


class _HostedReplicas(Protocol):
    """The replica manager as :func:`offsets_leadership_listener` reads it."""

    def get(self, tp: TopicPartition) -> _LedReplica | None: ...


class _LedReplica(Protocol):
    @property
    def leader_epoch(self) -> int: ...


def offsets_leadership_listener(
    coordinator: GroupCoordinator, replicas: _HostedReplicas
) -> Callable[[TopicPartition, bool], None]:
    """A leadership listener (``BrokerCluster.leadership_listeners``: called with
    ``(partition, is_leader)`` after LeaderAndIsr or StopReplica changed a partition here)
    that elects or resigns the coordinator for ``__consumer_offsets`` partitions, with the
    leader epoch the replica now has (None when the replica is gone)."""

    def listener(tp: TopicPartition, is_leader: bool) -> None:
        if tp.topic != OFFSETS_TOPIC:
            return
        replica = replicas.get(tp)
        if is_leader and replica is not None:
            coordinator.on_elected(tp.partition, replica.leader_epoch)
        else:
            coordinator.on_resigned(tp.partition, None if replica is None else replica.leader_epoch)

    return listener


def coordinator_error(code: int, *, offsets: bool = False) -> int:
    """A produce error of a ``__consumer_offsets`` append as a group API answers it (Kafka's
    mapping): unavailable partition or replicas -> COORDINATOR_NOT_AVAILABLE, leadership lost
    -> NOT_COORDINATOR, too large -> INVALID_COMMIT_OFFSET_SIZE (offsets) or
    UNKNOWN_SERVER_ERROR."""
    match code:
        case (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            | ErrorCode.NOT_ENOUGH_REPLICAS
            | ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            | ErrorCode.REQUEST_TIMED_OUT
        ):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        case ErrorCode.NOT_LEADER_OR_FOLLOWER | ErrorCode.KAFKA_STORAGE_ERROR:
            return ErrorCode.NOT_COORDINATOR
        case (
            ErrorCode.MESSAGE_TOO_LARGE
            | ErrorCode.RECORD_LIST_TOO_LARGE
            | ErrorCode.INVALID_FETCH_SIZE
        ):
            return (
                ErrorCode.INVALID_COMMIT_OFFSET_SIZE if offsets else ErrorCode.UNKNOWN_SERVER_ERROR
            )
        case _:
            return code


async def _committed() -> int:
    return ErrorCode.NONE


def _log_failure(write: asyncio.Future[Any]) -> None:
    if not write.cancelled() and write.exception() is not None:
        log.warning("offsets retention failed: %s", write.exception())


def _retrieve_failure(write: asyncio.Future[Any]) -> None:
    """A write's failure is answered by :meth:`GroupCoordinator.await_writes` when a request
    waits for it; retrieved here so that none is reported as never retrieved."""
    if not write.cancelled():
        write.exception()


@dataclass(frozen=True, slots=True)
class GroupConfig:
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_size: int = 2**31 - 1
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    consumer: ConsumerGroupConfig = field(default_factory=ConsumerGroupConfig)

    @staticmethod
    def from_broker_config(config: object) -> GroupConfig:
        get_int: Callable[[str], int] = config.get_int  # type: ignore[attr-defined]
        return GroupConfig(
            initial_rebalance_delay_ms=get_int("group.initial.rebalance.delay.ms"),
            min_session_timeout_ms=get_int("group.min.session.timeout.ms"),
            max_session_timeout_ms=get_int("group.max.session.timeout.ms"),
            max_size=get_int("group.max.size"),
            offsets_retention_ms=get_int("offsets.retention.minutes") * 60_000,
            retention_check_interval_ms=get_int("offsets.retention.check.interval.ms"),
            offset_metadata_max_bytes=get_int("offset.metadata.max.bytes"),
            consumer=ConsumerGroupConfig(
                heartbeat_interval_ms=get_int("group.consumer.heartbeat.interval.ms"),
                session_timeout_ms=get_int("group.consumer.session.timeout.ms"),
                max_size=get_int("group.consumer.max.size"),
                assignors=tuple(config.get_list("group.consumer.assignors")),  # type: ignore[attr-defined]
            ),
        )


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    require_known_member_id: bool
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]


@dataclass(frozen=True, slots=True)
class CommitRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    generation_id: int
    retention_time_ms: int
    offsets: dict[TopicPartitionKey, tuple[int, int, str | None]]  # offset, epoch, metadata
    api_version: int = 9


@dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberSummary] = field(default_factory=list)


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
        self.groups: dict[str, ClassicGroup] = {}
        self._runtime: CoordinatorRuntime[GroupCoordinatorShard] = CoordinatorRuntime(
            OFFSETS_TOPIC, offsets_log, self._build_shard
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
        self._write_seq = 0
        self._pending_writes: dict[str, tuple[int, asyncio.Future[Any]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._sync_timers: dict[str, asyncio.TimerHandle] = {}
        if assignors is None:
            from pydmq.assignment.plugin import builtin_assignors

            assignors = {spec.name: spec for spec in builtin_assignors()}
        self.consumer = ConsumerGroupCoordinator(
            config.consumer, self._append, self._delete_all_offsets, assignors, topics
        )

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
        and Empty groups) synchronously, before serving. Cluster mode: nothing (see
        :meth:`on_elected`)."""
        if not self._owns_all:
            return
        for partition in range(self._log.num_partitions):
            self._runtime.load_now(partition)

    def _build_shard(
        self, partition: int, timer: CoordinatorTimer[GroupCoordinatorShard]
    ) -> GroupCoordinatorShard:
        return GroupCoordinatorShard(partition, timer, self)

    def replay_consumer_record(
        self, key: bytes, value: bytes | None, into: ConsumerGroupLoad
    ) -> None:
        self.consumer.replay(key, value, into)

    def shard_loaded(self, shard: GroupCoordinatorShard, load: GroupLoad) -> None:
        """A partition finished loading: its groups come to life (consumer groups' session
        timers start at once for an election or a load after :meth:`start`, else with it)
        and its retention timer starts (after :meth:`start`)."""
        start_timers = self._started or not self._owns_all
        self.consumer.finish_load(load.consumer, start_timers=start_timers)
        now = self._clock()
        count = 0
        for group_id in set(load.metadata) | set(shard.offsets.groups()):
            if group_id in self.consumer.groups:
                continue
            group = ClassicGroup(group_id, now)
            stored = load.metadata.get(group_id)
            if stored is not None:
                group.generation_id = stored.generation
                group.protocol_type = stored.protocol_type or None
                if not stored.members and stored.current_state_timestamp > 0:
                    group.state_timestamp_ms = stored.current_state_timestamp
            self.groups[group_id] = group
            count += 1
        if count:
            log.info("%s-%d: %d classic groups", OFFSETS_TOPIC, shard.partition, count)
        if self._started:
            self._schedule_retention(shard)

    def shard_unloaded(self, shard: GroupCoordinatorShard) -> None:
        """A partition's leadership moved away: forget its groups (no tombstones)."""
        index = shard.partition
        partition_for = self._partition_for
        classic, consumer = self._unload(lambda g: partition_for(g) == index)
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

    def _unload(self, owned_elsewhere: Callable[[str], bool]) -> tuple[int, int]:
        doomed = [g for g in self.groups.values() if owned_elsewhere(g.group_id)]
        for group in doomed:
            self._shutdown_group(group, ErrorCode.NOT_COORDINATOR)
            group.transition_to(GroupState.DEAD, self._clock())
            del self.groups[group.group_id]
        consumer = self.consumer.unload(owned_elsewhere)
        for group_id in [g for g in self._pending_writes if owned_elsewhere(g)]:
            del self._pending_writes[group_id]
        return len(doomed), len(consumer)

    def _shutdown_group(self, group: ClassicGroup, error: int) -> None:
        """Cancel a group's timers and answer its waiting JoinGroup/SyncGroup with ``error``."""
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        for pending in group.pending_members.values():
            if pending is not None:
                pending.cancel()
        group.pending_members.clear()
        handle = self._sync_timers.pop(group.group_id, None)
        if handle is not None:
            handle.cancel()
        for member in group.members.values():
            self._cancel_heartbeat(member)
            if member.awaiting_join:
                assert member.join_future is not None
                member.join_future.set_result(JoinResult(error, member.member_id))
            if member.awaiting_sync:
                assert member.sync_future is not None
                member.sync_future.set_result(SyncResult(error))

    # -- writes ----------------------------------------------------------------------
    def _write(
        self, group_id: str, operation: WriteOperation[GroupCoordinatorShard, R]
    ) -> asyncio.Future[R]:
        """Run the write ``operation`` on the group's shard. Raises :class:`CoordinatorError`
        when it failed at once (nothing appended); a write not committed yet is remembered
        for :meth:`await_writes`."""
        future = self._runtime.schedule_write(self._partition_for(group_id), operation)
        if future.done():
            error = future.exception()
            if error is not None:
                raise error
            return future
        self._write_seq += 1
        self._pending_writes[group_id] = (self._write_seq, future)
        future.add_done_callback(_retrieve_failure)
        return future

    def _append(self, group_id: str, records: Sequence[CoordinatorRecord]) -> None:
        """Write records of a classic or consumer group (changed in place already)."""
        batch = list(records)
        self._write(group_id, lambda shard: CoordinatorResult(batch, None))

    @property
    def write_mark(self) -> int:
        """Taken before serving a request; :meth:`await_writes` then waits for what the
        request wrote."""
        return self._write_seq

    def wrote_since(self, group_id: str, mark: int) -> bool:
        """True when records of ``group_id`` written since ``mark`` may be uncommitted (never
        in single-node mode: handlers then answer without awaiting)."""
        entry = self._pending_writes.get(group_id)
        return entry is not None and entry[0] > mark

    def await_writes(
        self, group_id: str, mark: int, *, offsets: bool = False
    ) -> Coroutine[Any, Any, int]:
        """An awaitable of the commit of what was written for ``group_id`` since ``mark``:
        NONE, or the error a group API answers (NOT_COORDINATOR on a resignation meanwhile).
        Call it right after serving the request (it picks the write to wait for then)."""
        entry = self._pending_writes.get(group_id)
        if entry is None or entry[0] <= mark:
            return _committed()
        return self._await_commit(group_id, entry[1], offsets=offsets)

    @staticmethod
    async def _await_commit(
        group_id: str, write: asyncio.Future[Any], *, offsets: bool = False
    ) -> int:
        try:
            await asyncio.shield(write)
        except CoordinatorError as exc:
            return coordinator_error(exc.error_code, offsets=offsets)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("waiting for the commit of group %s records failed", group_id)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NONE

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = self._loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def start(self) -> None:
        """Start the session timers of the consumer groups loaded so far and the retention
        timer of every partition loaded (later loads start theirs); needs the running loop."""
        self._started = True
        self.consumer.start()
        for partition in self._runtime.active_partitions():
            self._runtime.schedule_write(partition, self._start_retention)

    def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        self._runtime.close()
        self.consumer.stop()
        for group in self.groups.values():
            self._shutdown_group(group, ErrorCode.NOT_COORDINATOR)
        for handle in self._sync_timers.values():
            handle.cancel()
        self._sync_timers.clear()

    @staticmethod
    def _loop() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    # -- JoinGroup -------------------------------------------------------------------
    async def join_group(self, request: JoinRequest) -> JoinResult:
        mark = self._write_seq
        outcome = self._join(request)
        if isinstance(outcome, JoinResult):
            if outcome.error_code == ErrorCode.NONE:
                # a static member replaced in a Stable group: answered once stored
                error = await self.await_writes(request.group_id, mark)
                if error:
                    return JoinResult(error, outcome.member_id)
            return outcome
        return await outcome

    def _join(self, req: JoinRequest) -> JoinResult | asyncio.Future[JoinResult]:
        if not req.group_id:
            return JoinResult(ErrorCode.INVALID_GROUP_ID, req.member_id)
        error = self.ownership_error(req.group_id)
        if error:
            return JoinResult(error, req.member_id)
        cfg = self.config
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, req.member_id)
        consumer_group = self.consumer.groups.get(req.group_id)
        if consumer_group is not None:
            if consumer_group.members:
                return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
            self.consumer.drop_group(req.group_id)  # an empty consumer group becomes classic
        is_unknown = req.member_id == ""
        group = self.groups.get(req.group_id)
        created = False
        if group is None:
            if not is_unknown:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id)
            group = ClassicGroup(req.group_id, self._clock())
            self.groups[req.group_id] = group
            created = True
        outcome: JoinResult | asyncio.Future[JoinResult]
        if group.state is GroupState.DEAD:
            outcome = JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, req.member_id)
        elif not self._accept_joining_member(group, req.member_id):
            outcome = JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, req.member_id)
        elif is_unknown:
            outcome = self._join_new_member(group, req)
        else:
            outcome = self._join_existing_member(group, req)
        if (
            created
            and isinstance(outcome, JoinResult)
            and outcome.error_code
            and not group.members
            and not group.pending_members
        ):
            del self.groups[req.group_id]
        return outcome

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        max_size = self.config.max_size
        match group.state:
            case GroupState.EMPTY | GroupState.DEAD:
                return True
            case GroupState.PREPARING_REBALANCE:
                member = group.members.get(member_id)
                return (
                    member is not None and member.awaiting_join
                ) or group.awaiting_join_count() < max_size
            case _:
                return member_id in group.members or len(group) < max_size

    def _join_new_member(
        self, group: ClassicGroup, req: JoinRequest
    ) -> JoinResult | asyncio.Future[JoinResult]:
        if not group.supports_protocols(req.protocol_type, req.protocols):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
        new_id = f"{req.client_id}-{uuid.uuid4()}"
        if req.group_instance_id is not None:
            old_id = group.static_member_id(req.group_instance_id)
            if old_id is not None and old_id in group.members:
                return self._replace_static_member(group, req, old_id, new_id)
            return self._add_member_and_rebalance(group, new_id, req)
        if req.require_known_member_id:
            group.pending_members[new_id] = self._loop().call_later(
                req.session_timeout_ms / 1000, self._expire_pending_member, group, new_id
            )
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, new_id)
        return self._add_member_and_rebalance(group, new_id, req)

    def _join_existing_member(
        self, group: ClassicGroup, req: JoinRequest
    ) -> JoinResult | asyncio.Future[JoinResult]:
        member_id = req.member_id
        if member_id in group.pending_members:
            if not group.supports_protocols(req.protocol_type, req.protocols):
                return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
            handle = group.pending_members.pop(member_id)
            if handle is not None:
                handle.cancel()
            return self._add_member_and_rebalance(group, member_id, req)
        error = self._validate_member(group, member_id, req.group_instance_id)
        if error:
            return JoinResult(error, member_id)
        if not group.supports_protocols(req.protocol_type, req.protocols):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        member = group.members[member_id]
        match group.state:
            case GroupState.PREPARING_REBALANCE:
                return self._update_member_and_rebalance(group, member, req)
            case GroupState.COMPLETING_REBALANCE:
                if member.matches(req.protocols):
                    return self._current_join_result(group, member)
                return self._update_member_and_rebalance(group, member, req)
            case GroupState.STABLE:
                if group.is_leader(member_id) or not member.matches(req.protocols):
                    return self._update_member_and_rebalance(group, member, req)
                return self._current_join_result(group, member)
            case _:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)

    def _current_join_result(self, group: ClassicGroup, member: MemberMetadata) -> JoinResult:
        is_leader = group.is_leader(member.member_id)
        self._schedule_heartbeat(group, member)
        return JoinResult(
            ErrorCode.NONE,
            member.member_id,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            group.current_member_metadata() if is_leader else [],
        )

    def _replace_static_member(
        self, group: ClassicGroup, req: JoinRequest, old_id: str, new_id: str
    ) -> JoinResult | asyncio.Future[JoinResult]:
        assert req.group_instance_id is not None
        member = group.members[old_id]
        old_protocols = member.protocols
        current_leader = group.leader_id or ""
        if member.awaiting_join:
            assert member.join_future is not None
            member.join_future.set_result(JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_id))
            member.join_future = None
        if member.awaiting_sync:
            assert member.sync_future is not None
            member.sync_future.set_result(SyncResult(ErrorCode.FENCED_INSTANCE_ID))
            member.sync_future = None
        group.replace_static_member(req.group_instance_id, old_id, new_id)
        group_pending_sync = self._pending_sync(group)
        if old_id in group_pending_sync:
            group_pending_sync.discard(old_id)
            group_pending_sync.add(new_id)
        member.client_id = req.client_id
        member.client_host = req.client_host
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.protocols = list(req.protocols)
        self._schedule_heartbeat(group, member)
        match group.state:
            case GroupState.STABLE:
                selected = group.protocol_name
                if (
                    selected is not None
                    and group.select_protocol() == selected
                    and not self._subscription_changed(group, old_protocols, member.protocols)
                ):
                    self._store_group(group)
                    return JoinResult(
                        ErrorCode.NONE,
                        new_id,
                        group.generation_id,
                        group.protocol_type,
                        group.protocol_name,
                        current_leader,
                        [],
                    )
                return self._await_join(group, member, rebalance=True)
            case GroupState.COMPLETING_REBALANCE:
                return self._await_join(group, member, rebalance=True)
            case GroupState.PREPARING_REBALANCE:
                return self._await_join(group, member, rebalance=False)
            case _:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, new_id)

    @staticmethod
    def _subscription_changed(
        group: ClassicGroup, old: list[tuple[str, bytes]], new: list[tuple[str, bytes]]
    ) -> bool:
        protocol = group.protocol_name
        old_meta = dict(old).get(protocol or "")
        new_meta = dict(new).get(protocol or "")
        if old_meta is None or new_meta is None:
            return True
        if group.protocol_type == "consumer":
            old_topics = subscribed_topics(old_meta)
            new_topics = subscribed_topics(new_meta)
            if old_topics is not None and new_topics is not None:
                return old_topics != new_topics
        return old_meta != new_meta

    def _await_join(
        self, group: ClassicGroup, member: MemberMetadata, *, rebalance: bool
    ) -> asyncio.Future[JoinResult]:
        future: asyncio.Future[JoinResult] = self._loop().create_future()
        member.join_future = future
        if rebalance:
            self._prepare_rebalance(group)
        else:
            self._maybe_complete_join(group)
        return future

    def _add_member_and_rebalance(
        self, group: ClassicGroup, member_id: str, req: JoinRequest
    ) -> asyncio.Future[JoinResult]:
        member = MemberMetadata(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=list(req.protocols),
            is_new=True,
        )
        future: asyncio.Future[JoinResult] = self._loop().create_future()
        member.join_future = future
        group.add(member)
        group.new_member_added = True
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)
        else:
            self._prepare_rebalance(group)
        return future

    def _update_member_and_rebalance(
        self, group: ClassicGroup, member: MemberMetadata, req: JoinRequest
    ) -> asyncio.Future[JoinResult]:
        member.protocols = list(req.protocols)
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.client_id = req.client_id
        member.client_host = req.client_host
        if member.awaiting_join:
            # a duplicate join replaces the earlier one (the client gave up on it)
            assert member.join_future is not None
            member.join_future.set_result(
                JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id)
            )
        return self._await_join(
            group, member, rebalance=not group.is_in(GroupState.PREPARING_REBALANCE)
        )

    # -- rebalance -------------------------------------------------------------------
    @staticmethod
    def _rebalance_timeout_ms(group: ClassicGroup) -> int:
        return max((m.rebalance_timeout_ms for m in group.members.values()), default=0)

    def _prepare_rebalance(self, group: ClassicGroup) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._cancel_sync_timer(group)
        if group.join_timer is not None:
            group.join_timer.cancel()
        loop = self._loop()
        rebalance_ms = self._rebalance_timeout_ms(group)
        initial = group.is_in(GroupState.EMPTY)
        group.transition_to(GroupState.PREPARING_REBALANCE, self._clock())
        log.info(
            "preparing to rebalance group %s (generation %d)", group.group_id, group.generation_id
        )
        if initial:
            delay = min(self.config.initial_rebalance_delay_ms, rebalance_ms)
            group.initial_delay_remaining_ms = max(rebalance_ms - delay, 0)
            group.join_timer = loop.call_later(delay / 1000, self._on_initial_delay, group)
            group.join_is_initial = True
        else:
            group.join_is_initial = False
            group.join_timer = loop.call_later(rebalance_ms / 1000, self._complete_join, group)
            self._maybe_complete_join(group)

    def _on_initial_delay(self, group: ClassicGroup) -> None:
        group.join_timer = None
        if group.new_member_added and group.initial_delay_remaining_ms > 0:
            group.new_member_added = False
            initial = self.config.initial_rebalance_delay_ms
            delay = min(initial, group.initial_delay_remaining_ms)
            group.initial_delay_remaining_ms = max(group.initial_delay_remaining_ms - initial, 0)
            group.join_timer = self._loop().call_later(delay / 1000, self._on_initial_delay, group)
            return
        self._complete_join(group)

    def _maybe_complete_join(self, group: ClassicGroup) -> None:
        if (
            group.is_in(GroupState.PREPARING_REBALANCE)
            and not group.join_is_initial
            and group.has_all_members_joined()
        ):
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        if not group.is_in(GroupState.PREPARING_REBALANCE):
            return
        for member in group.not_yet_rejoined():
            if not member.is_static:
                log.info(
                    "removing member %s of group %s: did not rejoin",
                    member.member_id,
                    group.group_id,
                )
                self._cancel_heartbeat(member)
                group.remove(member.member_id)
        if not group.maybe_elect_joined_leader() and group.members:
            # nobody rejoined (static members only): wait for them or their session expiry
            group.join_is_initial = False
            group.join_timer = self._loop().call_later(
                self._rebalance_timeout_ms(group) / 1000, self._complete_join, group
            )
            return
        now = self._clock()
        group.init_next_generation(now)
        group.new_member_added = False
        if group.is_in(GroupState.EMPTY):
            log.info("group %s is empty (generation %d)", group.group_id, group.generation_id)
            self._store_group(group)
            return
        log.info(
            "group %s: generation %d with %d members, protocol %s",
            group.group_id,
            group.generation_id,
            len(group),
            group.protocol_name,
        )
        members = group.current_member_metadata()
        pending_sync = self._pending_sync(group)
        pending_sync.clear()
        for member in group.members.values():
            pending_sync.add(member.member_id)
            future = member.join_future
            member.join_future = None
            member.is_new = False
            if future is not None and not future.done():
                future.set_result(
                    JoinResult(
                        ErrorCode.NONE,
                        member.member_id,
                        group.generation_id,
                        group.protocol_type,
                        group.protocol_name,
                        group.leader_id or "",
                        members if group.is_leader(member.member_id) else [],
                    )
                )
            self._schedule_heartbeat(group, member)
        self._sync_timers[group.group_id] = self._loop().call_later(
            self._rebalance_timeout_ms(group) / 1000,
            self._expire_pending_sync,
            group,
            group.generation_id,
        )

    @staticmethod
    def _pending_sync(group: ClassicGroup) -> set[str]:
        return group.pending_sync

    def _cancel_sync_timer(self, group: ClassicGroup) -> None:
        handle = self._sync_timers.pop(group.group_id, None)
        if handle is not None:
            handle.cancel()
        self._pending_sync(group).clear()

    def _expire_pending_sync(self, group: ClassicGroup, generation: int) -> None:
        self._sync_timers.pop(group.group_id, None)
        if generation != group.generation_id or self.groups.get(group.group_id) is not group:
            return
        if not group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        laggards = [group.members[m] for m in self._pending_sync(group) if m in group.members]
        self._pending_sync(group).clear()
        if not laggards:
            return
        for member in laggards:
            log.info(
                "removing member %s of group %s: no SyncGroup", member.member_id, group.group_id
            )
            self._cancel_heartbeat(member)
            group.remove(member.member_id)
        self._prepare_rebalance(group)

    def _reset_and_propagate_assignment_error(self, group: ClassicGroup, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.awaiting_sync:
                assert member.sync_future is not None
                member.sync_future.set_result(SyncResult(error))
            member.sync_future = None

    # -- member liveness -------------------------------------------------------------
    def _schedule_heartbeat(self, group: ClassicGroup, member: MemberMetadata) -> None:
        self._cancel_heartbeat(member)
        member.heartbeat_handle = self._loop().call_later(
            member.session_timeout_ms / 1000, self._expire_member, group, member
        )

    @staticmethod
    def _cancel_heartbeat(member: MemberMetadata) -> None:
        if member.heartbeat_handle is not None:
            member.heartbeat_handle.cancel()
            member.heartbeat_handle = None

    def _expire_member(self, group: ClassicGroup, member: MemberMetadata) -> None:
        member.heartbeat_handle = None
        if group.members.get(member.member_id) is not member:
            return
        if member.awaiting_join or member.awaiting_sync:
            self._schedule_heartbeat(group, member)  # bounded by the rebalance timers instead
            return
        log.info(
            "member %s of group %s expired (session timeout %d ms)",
            member.member_id,
            group.group_id,
            member.session_timeout_ms,
        )
        self._remove_member_and_update_group(group, member)

    def _expire_pending_member(self, group: ClassicGroup, member_id: str) -> None:
        if group.pending_members.pop(member_id, "gone") == "gone":
            return
        self._maybe_complete_join(group)
        self._maybe_drop(group)

    def _remove_member_and_update_group(self, group: ClassicGroup, member: MemberMetadata) -> None:
        self._cancel_heartbeat(member)
        if member.awaiting_join:
            assert member.join_future is not None
            member.join_future.set_result(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id))
        if member.awaiting_sync:
            assert member.sync_future is not None
            member.sync_future.set_result(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        self._pending_sync(group).discard(member.member_id)
        match group.state:
            case GroupState.STABLE | GroupState.COMPLETING_REBALANCE:
                self._prepare_rebalance(group)
            case GroupState.PREPARING_REBALANCE:
                self._maybe_complete_join(group)
            case GroupState.EMPTY | GroupState.DEAD:
                pass

    def _maybe_drop(self, group: ClassicGroup) -> None:
        """Forget a group that never had a generation, members or offsets."""
        if (
            group.is_in(GroupState.EMPTY)
            and not group.members
            and not group.pending_members
            and group.generation_id == 0
            and not self.offsets.has_offsets(group.group_id)
            and self.groups.get(group.group_id) is group
        ):
            del self.groups[group.group_id]

    def _validate_member(
        self, group: ClassicGroup, member_id: str, group_instance_id: str | None
    ) -> int:
        if group_instance_id is not None:
            existing = group.static_member_id(group_instance_id)
            if existing is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
            return ErrorCode.NONE
        if not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    # -- SyncGroup -------------------------------------------------------------------
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
        outcome = self._sync(
            group_id,
            generation_id,
            member_id,
            group_instance_id,
            protocol_type,
            protocol_name,
            assignments,
        )
        if isinstance(outcome, SyncResult):
            return outcome
        return await outcome

    def _sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult | asyncio.Future[SyncResult]:
        if not group_id:
            return SyncResult(ErrorCode.INVALID_GROUP_ID)
        error = self.ownership_error(group_id)
        if error:
            return SyncResult(error)
        group = self.groups.get(group_id)
        if group is None:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_in(GroupState.DEAD):
            return SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        error = self._validate_member(group, member_id, group_instance_id)
        if error:
            return SyncResult(error)
        if generation_id != group.generation_id:
            return SyncResult(ErrorCode.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        member = group.members[member_id]
        match group.state:
            case GroupState.EMPTY:
                return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
            case GroupState.PREPARING_REBALANCE:
                return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
            case GroupState.COMPLETING_REBALANCE:
                future: asyncio.Future[SyncResult] = self._loop().create_future()
                if member.awaiting_sync:
                    assert member.sync_future is not None
                    member.sync_future.set_result(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
                member.sync_future = future
                self._pending_sync(group).discard(member_id)
                self._schedule_heartbeat(group, member)
                if group.is_leader(member_id):
                    self._complete_sync(group, assignments)
                return future
            case GroupState.STABLE:
                self._pending_sync(group).discard(member_id)
                self._schedule_heartbeat(group, member)
                return SyncResult(
                    ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name
                )
            case _:
                return SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)

    def _complete_sync(self, group: ClassicGroup, assignments: dict[str, bytes]) -> None:
        for member in group.members.values():
            member.assignment = assignments.get(member.member_id, b"")
        mark = self._write_seq
        try:
            self._store_group(group)
        except Exception as exc:
            if isinstance(exc, CoordinatorError):
                log.warning("storing group %s failed: %s", group.group_id, exc)
                error = coordinator_error(exc.error_code)
            else:
                log.exception("storing group %s failed", group.group_id)
                error = ErrorCode.COORDINATOR_NOT_AVAILABLE
            self._assignment_not_stored(group, error)
            return
        if self.wrote_since(group.group_id, mark):
            # cluster mode: hand the assignment out once the record is committed
            committed = self.await_writes(group.group_id, mark)
            self._spawn(self._complete_sync_when_committed(group, group.generation_id, committed))
            return
        self._propagate_assignment(group)

    async def _complete_sync_when_committed(
        self, group: ClassicGroup, generation_id: int, committed: Coroutine[Any, Any, int]
    ) -> None:
        error = await committed
        if (
            self.groups.get(group.group_id) is not group
            or group.generation_id != generation_id
            or not group.is_in(GroupState.COMPLETING_REBALANCE)
        ):
            return  # unloaded, or the group moved on while the record was replicated
        if error:
            log.warning(
                "group %s: assignment of generation %d not committed (error %d)",
                group.group_id,
                generation_id,
                error,
            )
            self._assignment_not_stored(group, error)
            return
        self._propagate_assignment(group)

    def _assignment_not_stored(self, group: ClassicGroup, error: int) -> None:
        self._reset_and_propagate_assignment_error(group, error)
        self._prepare_rebalance(group)

    def _propagate_assignment(self, group: ClassicGroup) -> None:
        group.transition_to(GroupState.STABLE, self._clock())
        for member in group.members.values():
            if member.awaiting_sync:
                assert member.sync_future is not None
                member.sync_future.set_result(
                    SyncResult(
                        ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name
                    )
                )
            member.sync_future = None
        log.info("group %s stable at generation %d", group.group_id, group.generation_id)

    # -- Heartbeat -------------------------------------------------------------------
    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> int:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        error = self.ownership_error(group_id)
        if error:
            return error
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_member(group, member_id, group_instance_id)
        if error:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        member = group.members[member_id]
        match group.state:
            case GroupState.EMPTY:
                return ErrorCode.UNKNOWN_MEMBER_ID
            case GroupState.PREPARING_REBALANCE:
                self._schedule_heartbeat(group, member)
                return ErrorCode.REBALANCE_IN_PROGRESS
            case GroupState.COMPLETING_REBALANCE | GroupState.STABLE:
                self._schedule_heartbeat(group, member)
                return ErrorCode.NONE
            case _:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE

    # -- ConsumerGroupHeartbeat (KIP-848) --------------------------------------------
    def consumer_group_heartbeat(self, req: HeartbeatRequest) -> HeartbeatResult:
        if req.group_id:
            error = self.ownership_error(req.group_id)
            if error:
                return HeartbeatResult(error)
        return self.consumer.heartbeat(req, self._classic_guard)

    def _classic_guard(self, group_id: str) -> int:
        """A consumer-protocol member joins ``group_id``: refuse a classic group in use,
        convert an empty one (its offsets stay)."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE
        if group.members or group.pending_members or not group.is_in(GroupState.EMPTY):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        self._append(group_id, [(GroupMetadataKey(group_id).encode(), None)])
        group.transition_to(GroupState.DEAD, self._clock())
        del self.groups[group_id]
        return ErrorCode.NONE

    # -- LeaveGroup ------------------------------------------------------------------
    def leave_group(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> tuple[int, list[int]]:
        """Returns (top-level error, one error per leaving member)."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, []
        error = self.ownership_error(group_id)
        if error:
            return error, []
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, []
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        errors: list[int] = []
        for member_id, instance_id in members:
            if member_id == "":
                existing = group.static_member_id(instance_id)
                if existing is None or existing not in group.members:
                    errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                member_id = existing
            elif member_id in group.pending_members:
                handle = group.pending_members.pop(member_id)
                if handle is not None:
                    handle.cancel()
                self._maybe_complete_join(group)
                errors.append(ErrorCode.NONE)
                continue
            else:
                error = self._validate_member(group, member_id, instance_id)
                if error:
                    errors.append(error)
                    continue
            log.info("member %s leaves group %s", member_id, group_id)
            self._remove_member_and_update_group(group, group.members[member_id])
            errors.append(ErrorCode.NONE)
        return ErrorCode.NONE, errors

    # -- offsets ---------------------------------------------------------------------
    def commit_offsets(self, req: CommitRequest) -> dict[TopicPartitionKey, int]:
        """Validate and store; returns an error code per partition."""

        def all_fail(code: int) -> dict[TopicPartitionKey, int]:
            return dict.fromkeys(req.offsets, code)

        if not req.group_id:
            return all_fail(ErrorCode.INVALID_GROUP_ID)
        error = self.ownership_error(req.group_id)
        if error:
            return all_fail(error)
        if req.group_id in self.consumer.groups:
            error = self.consumer.validate_offset_commit(
                req.group_id, req.member_id, req.generation_id, req.api_version
            )
            if error:
                return all_fail(error)
            return self._store_offsets(req, None)
        group = self.groups.get(req.group_id)
        if group is None:
            if req.generation_id >= 0 or req.member_id or req.group_instance_id is not None:
                return all_fail(ErrorCode.ILLEGAL_GENERATION)
            group = ClassicGroup(req.group_id, self._clock())
            self.groups[req.group_id] = group
        error = self._validate_offset_commit(group, req)
        if error:
            return all_fail(error)
        member = group.members.get(req.member_id)
        if member is not None:
            self._schedule_heartbeat(group, member)
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
            self._write(
                group_id,
                lambda shard: CoordinatorResult(
                    shard.offsets.commit_records(group_id, accepted), None
                ),
            )
        except CoordinatorError as exc:
            code = coordinator_error(exc.error_code, offsets=True)
            log.warning("storing offsets of group %s failed: %s", group_id, exc)
            for tp in accepted:
                results[tp] = code
            if group is not None:
                self._maybe_drop(group)
        return results

    def _validate_offset_commit(self, group: ClassicGroup, req: CommitRequest) -> int:
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if req.generation_id < 0 and group.is_in(GroupState.EMPTY):
            return ErrorCode.NONE  # admin client or a consumer not using group management
        if req.generation_id >= 0 or req.member_id or req.group_instance_id is not None:
            error = self._validate_member(group, req.member_id, req.group_instance_id)
            if error:
                return error
            if req.generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif not group.is_in(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def fetch_offsets(
        self,
        group_id: str,
        topics: Sequence[tuple[str, Sequence[int]]] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> tuple[int, list[tuple[str, int, OffsetAndMetadata | None]]]:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, []
        error = self.ownership_error(group_id)
        if error:
            return error, []
        if group_id in self.consumer.groups:
            error = self.consumer.validate_offset_fetch(group_id, member_id, member_epoch)
            if error:
                return error, []
        if topics is None:
            stored = self.offsets.all(group_id)
            return ErrorCode.NONE, [(t, p, o) for (t, p), o in sorted(stored.items())]
        out: list[tuple[str, int, OffsetAndMetadata | None]] = []
        for topic, partitions in topics:
            for p in partitions:
                out.append((topic, p, self.offsets.get(group_id, topic, p)))
        return ErrorCode.NONE, out

    def delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartitionKey]
    ) -> tuple[int, dict[TopicPartitionKey, int]]:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, {}
        error = self.ownership_error(group_id)
        if error:
            return error, {}
        if group_id in self.consumer.groups:
            consumer_results: dict[TopicPartitionKey, int] = {
                tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                if self.consumer.is_subscribed_to(group_id, tp[0])
                else ErrorCode.NONE
                for tp in partitions
            }
            deletable = [tp for tp, e in consumer_results.items() if not e]
            return self._delete_offsets(group_id, deletable, consumer_results)
        group = self.groups.get(group_id)
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
        self,
        group_id: str,
        partitions: Sequence[TopicPartitionKey],
        more: Sequence[CoordinatorRecord] = (),
    ) -> None:
        """Write the tombstones of ``group_id``'s committed offsets among ``partitions``
        (nothing when none is committed), then the ``more`` records."""
        stored = self.offsets.all(group_id)
        if not more and not any(tp in stored for tp in partitions):
            return

        def delete(shard: GroupCoordinatorShard) -> CoordinatorResult[None]:
            records = shard.offsets.delete_records(group_id, partitions)
            return CoordinatorResult([*records, *more], None)

        self._write(group_id, delete)

    def _delete_all_offsets(self, group_id: str) -> None:
        self._delete_offset_records(group_id, list(self.offsets.all(group_id)))

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
        if group_id in self.consumer.groups:
            return self.consumer.delete_group(group_id)
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        match group.state:
            case GroupState.DEAD:
                return ErrorCode.GROUP_ID_NOT_FOUND
            case GroupState.EMPTY:
                self._delete_group(group)
                return ErrorCode.NONE
            case _:
                return ErrorCode.NON_EMPTY_GROUP

    def _delete_group(self, group: ClassicGroup) -> None:
        for handle in group.pending_members.values():
            if handle is not None:
                handle.cancel()
        group.pending_members.clear()
        group_id = group.group_id
        tombstone = (GroupMetadataKey(group_id).encode(), None)
        self._delete_offset_records(group_id, list(self.offsets.all(group_id)), [tombstone])
        group.transition_to(GroupState.DEAD, self._clock())
        self.groups.pop(group.group_id, None)

    # -- describe / list -------------------------------------------------------------
    def describe_group(self, group_id: str) -> tuple[int, GroupSummary]:
        error = self.ownership_error(group_id)
        if error:
            return error, GroupSummary(group_id, "", "", "")
        group = self.groups.get(group_id)
        if group_id in self.consumer.groups:
            return ErrorCode.NONE, self._describe_consumer_group(group_id)
        if group is None:
            return ErrorCode.NONE, GroupSummary(group_id, GroupState.DEAD.value, "", "")
        if group.is_in(GroupState.STABLE) and group.protocol_name is not None:
            protocol = group.protocol_name
            members = [
                MemberSummary(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    dict(m.protocols).get(protocol, b""),
                    m.assignment,
                )
                for m in group.members.values()
            ]
        else:
            protocol = ""
            members = [
                MemberSummary(
                    m.member_id, m.group_instance_id, m.client_id, m.client_host, b"", b""
                )
                for m in group.members.values()
            ]
        return ErrorCode.NONE, GroupSummary(
            group_id, group.state.value, group.protocol_type or "", protocol, members
        )

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
        ] + self.consumer.list_rows()

    def list_groups_with_type(self) -> list[tuple[str, str, str, str]]:
        """(group id, protocol type, state, group type "classic" or "consumer")."""
        classic = [
            (g.group_id, g.protocol_type or "", g.state.value, "classic")
            for g in self.groups.values()
            if not g.is_in(GroupState.DEAD)
        ]
        return classic + [(g, p, s, "consumer") for g, p, s in self.consumer.list_rows()]

    def _describe_consumer_group(self, group_id: str) -> GroupSummary:
        """DescribeGroups of a consumer group, as Kafka 4 answers it: protocol type
        "consumer", the group's assignor as protocol, each member's subscription and current
        assignment in the embedded consumer protocol format."""
        consumer = self.consumer
        group = consumer.groups[group_id]
        members = []
        for m in group.members.values():
            assigned = consumer.topic_names(m.assigned)
            topics = sorted(
                name for name in group.subscription_metadata if m.subscribes_to(name)
            ) or sorted(m.subscribed_topic_names)
            members.append(
                MemberSummary(
                    m.member_id,
                    m.instance_id,
                    m.client_id,
                    m.client_host,
                    encode_subscription(topics),
                    encode_assignment([(name, ps) for _, name, ps in assigned if name]),
                )
            )
        return GroupSummary(
            group_id, group.state.value, "consumer", consumer.assignor_for(group), members
        )

    # -- persistence -----------------------------------------------------------------
    def _store_group(self, group: ClassicGroup) -> None:
        protocol = group.protocol_name
        value = GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=protocol,
            leader=group.leader_id if group.members else None,
            current_state_timestamp=group.state_timestamp_ms,
            members=tuple(
                MemberMetadataValue(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    dict(m.protocols).get(protocol or "", b""),
                    m.assignment,
                )
                for m in group.members.values()
            ),
        )
        self._append(group.group_id, [(GroupMetadataKey(group.group_id).encode(), value.encode())])

    # -- retention -------------------------------------------------------------------
    def _schedule_retention(self, shard: GroupCoordinatorShard) -> None:
        shard.timer.schedule(
            _RETENTION_TIMER, self.config.retention_check_interval_ms, self._retention_tick
        )

    def _start_retention(self, shard: GroupCoordinatorShard) -> CoordinatorResult[None]:
        self._schedule_retention(shard)
        return CoordinatorResult((), None)

    def _retention_tick(self, shard: GroupCoordinatorShard) -> CoordinatorResult[None]:
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

    def expire_offsets(self, now_ms: int | None = None) -> int:
        """Tombstone expired offsets of Empty groups in every partition loaded here; drop
        Empty groups left without any. Returns how many offsets were tombstoned."""
        now = self._clock() if now_ms is None else now_ms
        expired = 0

        def expire(shard: GroupCoordinatorShard) -> CoordinatorResult[int]:
            nonlocal expired
            result = self._expire(shard, now)
            expired += result.response
            return result

        for partition in self._runtime.active_partitions():
            self._runtime.schedule_write(partition, expire).add_done_callback(_log_failure)
        if expired:
            log.info("expired %d committed offsets", expired)
        return expired

    def _expire(self, shard: GroupCoordinatorShard, now: int) -> CoordinatorResult[int]:
        """The tombstones of ``shard``'s expired offsets and of its Empty classic groups left
        without offsets (dropped here at once, as they were when the tombstone was written
        straight away); the response counts the offsets."""
        retention = self.config.offsets_retention_ms
        offsets = shard.offsets
        records: list[CoordinatorRecord] = []
        expired = 0
        for group in list(self.groups.values()):
            group_id = group.group_id
            if not group.is_in(GroupState.EMPTY) or self._in_other_partition(group_id, shard):
                continue
            base = group.state_timestamp_ms if group.protocol_type else None
            doomed = offsets.expired(group_id, now, retention, base)
            records += offsets.delete_records(group_id, doomed)
            expired += len(doomed)
            if len(doomed) < offsets.count(group_id) or group.members:
                continue
            if base is not None and base + retention > now:
                continue
            records.append((GroupMetadataKey(group_id).encode(), None))
            group.transition_to(GroupState.DEAD, now)
            del self.groups[group_id]
        for group_id, consumer_group in list(self.consumer.groups.items()):
            if consumer_group.members or self._in_other_partition(group_id, shard):
                continue
            doomed = offsets.expired(group_id, now, retention, None)
            records += offsets.delete_records(group_id, doomed)
            expired += len(doomed)
        return CoordinatorResult(records, expired)

    def _in_other_partition(self, group_id: str, shard: GroupCoordinatorShard) -> bool:
        return self._log.partition_for(group_id) != shard.partition

    # -- helpers for handlers ----------------------------------------------------------
    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and group.has(member_id)
