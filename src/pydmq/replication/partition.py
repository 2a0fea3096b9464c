"""Partition: one replica of a partition on this broker (leader state, ISR, high watermark).

The leader appends produced batches, tracks every follower's fetch position, advances the high
watermark once the (maximal) ISR holds a record, and asks for ISR changes: a follower whose
fetch offset reaches the high watermark (and the start of the current leader epoch) joins, one
that has not caught up for ``replica.lag.time.max.ms`` leaves. ISR changes are proposals the
controller commits (AlterPartition); while one is in flight the leader counts the larger of the
committed and proposed ISR, as Kafka's PendingExpandIsr/PendingShrinkIsr states do, so a
write is never called committed on fewer replicas than the controller may elect from.

A follower appends the leader's batches as they are, takes ``min(leader HW, own LEO)`` as its
high watermark and the leader's log start offset (never above its own log end, never back) as
its log start, and truncates a diverging tail found with OffsetForLeaderEpoch.

The leader also keeps the log start offset each follower reports in its fetches: the low
watermark (Kafka's ``lowWatermarkIfLeader``) is the smallest log start offset over the leader
and its followers, and a DeleteRecords is answered once it reached the requested offset, so a
new leader never has the deleted records back.

Single-node mode is the special case replicas == ISR == [this broker]: the high watermark
follows the log end offset after each append.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from pydmq.config.topic import TopicConfig
from pydmq.protocol.errors import ErrorCode
from pydmq.replication.strategy import ISR_STRATEGY, ReplicationStrategy
from pydmq.storage.api import FetchDataInfo, TopicPartition
from pydmq.storage.log import (
    AppendOrigin,
    AppendPolicy,
    LogAppendError,
    LogAppendInfo,
    UnifiedLog,
)

__all__ = [
    "NotEnoughReplicasError",
    "NotLeaderOrFollowerError",
    "Partition",
    "ReplicaState",
    "append_policy",
]


_CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
_NO_LIMIT = 2**63 - 1


def append_policy(config: TopicConfig) -> AppendPolicy:
    return AppendPolicy(
        target_compression=_CODECS.get(config.get_str("compression.type")),
        max_message_bytes=config.get_int("max.message.bytes"),
        log_append_time=config.get_str("message.timestamp.type") == "LogAppendTime",
        timestamp_before_max_ms=config.get_int("message.timestamp.before.max.ms"),
        timestamp_after_max_ms=config.get_int("message.timestamp.after.max.ms"),
        flush_messages=config.get_int("flush.messages"),
    )


class NotEnoughReplicasError(LogAppendError):
    """An ``acks=all`` produce refused before appending: the ISR is below the minimum."""

    def __init__(self, isr: list[int], min_isr: int) -> None:
        super().__init__(
            ErrorCode.NOT_ENOUGH_REPLICAS,
            f"ISR {isr} is smaller than the minimum in-sync replicas {min_isr}",
        )


class NotLeaderOrFollowerError(LogAppendError):
    """A produce to a replica that does not lead the partition."""

    def __init__(self, tp: TopicPartition, leader_id: int) -> None:
        super().__init__(
            ErrorCode.NOT_LEADER_OR_FOLLOWER, f"this broker does not lead {tp} (leader {leader_id})"
        )


@dataclass(slots=True)
class ReplicaState:
    """What the leader knows of one follower, from its fetch requests (Kafka's Replica).

    ``log_end_offset`` is the follower's last fetch offset (-1 until it fetches from this
    leader). ``last_caught_up_time_ms`` is the last time the follower was known to hold
    everything the leader had: when it fetched at the leader's log end offset, or when it
    fetched at least the leader's log end offset as of its previous fetch (it then was caught
    up at that previous fetch time). ``log_start_offset`` is the log start offset the follower
    reported in its fetches (-1 until it reports one to this leader); it never exceeds the
    follower's log end offset and never moves back.
    """

    replica_id: int
    log_end_offset: int = -1
    log_start_offset: int = -1
    last_caught_up_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = -1
    last_fetch_time_ms: int = 0
    broker_epoch: int = -1

    def update_fetch_state(
        self, fetch_offset: int, leader_log_end_offset: int, now_ms: int, log_start_offset: int = -1
    ) -> None:
        if log_start_offset >= 0:
            self.log_start_offset = max(self.log_start_offset, min(log_start_offset, fetch_offset))
        if fetch_offset >= leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = leader_log_end_offset
        self.last_fetch_time_ms = now_ms

    def is_caught_up(self, leader_log_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
        return (
            self.log_end_offset == leader_log_end_offset
            or now_ms - self.last_caught_up_time_ms <= max_lag_ms
        )


@dataclass(slots=True, eq=False)
class Partition:
    """One replica of a partition hosted here. Owned by the event loop.

    Built with ``local_broker_id`` left out, the partition is led by ``leader_id`` and that is
    this broker (single-node mode). In cluster mode build it with ``local_broker_id`` and
    ``leader_id=-1``, then apply LeaderAndIsr with :meth:`make_leader` / :meth:`make_follower`.
    ``policy`` and ``min_insync_replicas`` (the topic's configured value) are refreshed when the
    topic config changes; ``strategy`` is resolved once from the topic's
    ``pydmq.replication.strategy``.
    """

    tp: TopicPartition
    topic_id: uuid.UUID
    log: UnifiedLog
    leader_id: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    policy: AppendPolicy
    min_insync_replicas: int
    strategy: ReplicationStrategy = ISR_STRATEGY
    replica_lag_time_max_ms: int = 30000
    partition_epoch: int = 0
    local_broker_id: int | None = None
    # -- leader state (empty on a follower) --
    remote_replicas: dict[int, ReplicaState] = field(default_factory=dict, init=False)
    pending_isr: list[int] | None = field(default=None, init=False)
    _resend_pending: bool = field(default=False, init=False)
    leader_epoch_start_offset: int = field(default=-1, init=False)
    _maximal_isr: list[int] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        if self.local_broker_id is None:
            self.local_broker_id = self.leader_id
        self.replicas = list(self.replicas)
        self.isr = list(self.isr)
        if self.is_leader:
            self.leader_epoch_start_offset = self.log.log_end_offset
            self._reset_remote_replicas(0, new_leader=True)
        self._maximal_isr = self.isr

    # -- state ------------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def maximal_isr(self) -> list[int]:
        """The committed ISR joined with an in-flight proposal: what the leader counts."""
        return self._maximal_isr

    @property
    def effective_min_insync_replicas(self) -> int:
        return self.strategy.min_insync_replicas(self.replicas, self.min_insync_replicas)

    # -- leadership -------------------------------------------------------------------
    def make_leader(
        self,
        leader_epoch: int,
        partition_epoch: int,
        replicas: list[int],
        isr: list[int],
        now_ms: int,
    ) -> bool:
        """Apply a LeaderAndIsr naming this broker leader; returns True if it was not leader.

        A state not newer than the one applied is ignored (see :meth:`_is_newer`). A
        new leader epoch starts at the log end offset (recorded in the epoch cache, the bar a
        follower must reach to join the ISR) and resets what is known of the followers:
        positions unknown, ISR members considered caught up now, others never.
        """
        if not self._is_newer(leader_epoch, partition_epoch):
            return False
        was_leader = self.is_leader
        new_epoch = leader_epoch > self.leader_epoch or not was_leader
        self.leader_id = self.local_broker_id if self.local_broker_id is not None else -1
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self._set_assignment(replicas, isr)
        if new_epoch:
            end = self.log.log_end_offset
            self.leader_epoch_start_offset = end
            self.log.maybe_assign_epoch_start_offset(leader_epoch, end)
            self._reset_remote_replicas(now_ms, new_leader=not was_leader)
        self.maybe_increment_high_watermark()  # the ISR may be down to the leader alone
        return not was_leader

    def make_follower(
        self,
        leader_id: int,
        leader_epoch: int,
        partition_epoch: int,
        replicas: list[int],
        isr: list[int],
    ) -> bool:
        """Apply a LeaderAndIsr naming another leader (or none, ``-1``).

        Returns True when the leader epoch is new: the replica fetcher must then truncate with
        OffsetForLeaderEpoch against the new leader before fetching, and the caller completes
        this broker's delayed produces with NOT_LEADER_OR_FOLLOWER (as Kafka does), since
        records they wait for may be truncated. A state not newer than the one applied is
        ignored (False).
        """
        if not self._is_newer(leader_epoch, partition_epoch):
            return False
        new_epoch = leader_epoch > self.leader_epoch or self.is_leader
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self._set_assignment(replicas, isr)
        self.remote_replicas = {}
        self.leader_epoch_start_offset = -1
        return new_epoch

    def _is_newer(self, leader_epoch: int, partition_epoch: int) -> bool:
        """Whether a LeaderAndIsr state is newer than the applied one.

        The partition epoch grows with every change the controller commits, so an equal one is
        the state already applied (a resend): applying it again would drop an in-flight ISR
        proposal the controller may still commit, and the leader would then count too small an
        ISR. A leader epoch never goes back.
        """
        if leader_epoch < self.leader_epoch:
            return False
        return leader_epoch > self.leader_epoch or partition_epoch > self.partition_epoch

    def _set_assignment(self, replicas: list[int], isr: list[int]) -> None:
        self.replicas = list(replicas)
        self.isr = list(isr)
        self.pending_isr = None
        self._resend_pending = False
        self._maximal_isr = self.isr
        if self.is_leader:
            remote = self.remote_replicas
            for replica_id in [r for r in remote if r not in self.replicas]:
                del remote[replica_id]
            for replica_id in self.replicas:
                if replica_id != self.local_broker_id and replica_id not in remote:
                    remote[replica_id] = ReplicaState(replica_id)

    def _reset_remote_replicas(self, now_ms: int, new_leader: bool) -> None:
        """Kafka's resetReplicaState: an ISR member gets ``lag`` to show it keeps up."""
        if new_leader:
            self.remote_replicas = {}
        for replica_id in self.replicas:
            if replica_id == self.local_broker_id:
                continue
            caught_up = now_ms if replica_id in self.isr else 0
            state = self.remote_replicas.get(replica_id)
            if state is None or new_leader:
                self.remote_replicas[replica_id] = ReplicaState(
                    replica_id, last_caught_up_time_ms=caught_up
                )
            else:
                state.last_caught_up_time_ms = caught_up

    # -- leader: produce --------------------------------------------------------------
    def append_records_to_leader(
        self,
        records: memoryview,
        required_acks: int = 1,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> LogAppendInfo:
        """Validate, assign offsets and append one produced record set.

        ``acks=all`` (``required_acks == -1``) is refused with :class:`NotEnoughReplicasError`
        before anything is written when the committed ISR is below the strategy's minimum.
        Raises :class:`NotLeaderOrFollowerError` on a follower and
        :class:`~pydmq.storage.log.LogAppendError` for invalid records.
        """
        if self.leader_id != self.local_broker_id:
            raise NotLeaderOrFollowerError(self.tp, self.leader_id)
        if required_acks == -1:
            min_isr = self.strategy.min_insync_replicas(self.replicas, self.min_insync_replicas)
            if len(self.isr) < min_isr:
                raise NotEnoughReplicasError(self.isr, min_isr)
        info = self.log.append_as_leader(records, self.leader_epoch, self.policy, origin)
        self.maybe_increment_high_watermark()
        return info

    def append_marker_to_leader(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        transaction_version: int = 0,
    ) -> LogAppendInfo:
        """Append a COMMIT/ABORT marker (WriteTxnMarkers, of the coordinator's
        ``transaction_version``) as leader with ``acks=all``'s refusal
        (:class:`NotEnoughReplicasError` before anything is written when the committed ISR is
        below the minimum); raises as :meth:`append_records_to_leader`."""
        if self.leader_id != self.local_broker_id:
            raise NotLeaderOrFollowerError(self.tp, self.leader_id)
        min_isr = self.strategy.min_insync_replicas(self.replicas, self.min_insync_replicas)
        if len(self.isr) < min_isr:
            raise NotEnoughReplicasError(self.isr, min_isr)
        info = self.log.append_marker_as_leader(
            producer_id,
            producer_epoch,
            coordinator_epoch,
            commit,
            self.leader_epoch,
            self.policy.flush_messages,
            transaction_version,
        )
        self.maybe_increment_high_watermark()
        return info

    def acks_all_satisfied(self, required_offset: int) -> tuple[bool, int]:
        """Whether a delayed ``acks=all`` produce ending before ``required_offset`` may answer.

        ``(False, 0)`` while the high watermark is below ``required_offset``; then ``(True,
        NONE)``, or ``(True, NOT_ENOUGH_REPLICAS_AFTER_APPEND)`` when the ISR shrank below
        the minimum meanwhile (the records are committed, but on fewer replicas than asked:
        Kafka's answer). ``(True, NOT_LEADER_OR_FOLLOWER)`` once this broker stopped leading.
        """
        if self.leader_id != self.local_broker_id:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark < required_offset:
            return False, ErrorCode.NONE
        if len(self.isr) < self.strategy.min_insync_replicas(
            self.replicas, self.min_insync_replicas
        ):
            return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return True, ErrorCode.NONE

    def maybe_increment_high_watermark(self) -> bool:
        """Move the leader's high watermark forward to what the maximal ISR holds.

        On the produce path: one small mapping (the ISR) and one strategy call, nothing per
        record. The high watermark never moves back, even when a new leader does not know its
        followers' positions yet.
        """
        log = self.log
        leader_leo = log.log_end_offset
        local = self.local_broker_id
        remote = self.remote_replicas
        isr_leos: dict[int, int] = {}
        for replica_id in self._maximal_isr:
            if replica_id == local:
                isr_leos[replica_id] = leader_leo
            else:
                state = remote.get(replica_id)
                # an ISR member outside the replicas cannot hold the data
                isr_leos[replica_id] = -1 if state is None else state.log_end_offset
        new_hw = self.strategy.high_watermark(leader_leo, isr_leos, self.replicas)
        if new_hw > log.high_watermark:
            return log.update_high_watermark(new_hw)
        return False

    # -- leader: followers ------------------------------------------------------------
    def is_follower_replica(self, replica_id: int) -> bool:
        """True when this broker leads and ``replica_id`` is one of the partition's current
        other replicas: only such a replica's Fetch reads past the high watermark and counts
        as a follower's (a fetch naming any other replica id is refused)."""
        return self.leader_id == self.local_broker_id and replica_id in self.remote_replicas

    def update_follower_fetch_state(
        self,
        replica_id: int,
        fetch_offset: int,
        now_ms: int,
        broker_epoch: int = -1,
        log_start_offset: int = -1,
    ) -> bool:
        """Record a follower's fetch at ``fetch_offset``; True when the high watermark advanced.

        ``log_start_offset`` is the follower's log start offset from the fetch (-1: not sent);
        it is kept for :meth:`low_watermark`, capped at ``fetch_offset`` (the follower's log
        end) and never moved back.

        Ignored (False) unless this broker leads and ``replica_id`` is one of its followers, and
        when ``broker_epoch`` (the fetch's ``replica_epoch``, -1 if unknown) is older than one
        already seen: a request delayed from before the follower restarted says nothing of its
        log now (KIP-903). The epoch is kept in :attr:`remote_replicas` so that an ISR expansion
        can carry it to the controller, which refuses members with a stale one. Call
        :meth:`isr_change_proposal` afterwards to learn whether the ISR should change.
        """
        if self.leader_id != self.local_broker_id:
            return False
        state = self.remote_replicas.get(replica_id)
        if state is None or broker_epoch < state.broker_epoch:
            return False
        state.broker_epoch = broker_epoch
        previous = state.log_end_offset
        state.update_fetch_state(fetch_offset, self.log.log_end_offset, now_ms, log_start_offset)
        if fetch_offset != previous and replica_id in self._maximal_isr:
            return self.maybe_increment_high_watermark()
        return False

    def low_watermark(self, is_alive: Callable[[int], bool] | None = None) -> int:
        """The smallest log start offset over the leader and its followers (leader only).

        A follower counts when it is in the maximal ISR (the controller may elect it) or when
        ``is_alive(follower)`` is true (Kafka's ``lowWatermarkIfLeader`` counts the replicas on
        alive brokers). A counted follower that has not reported a log start to this leader
        yet makes it -1. On one node this is the log start offset.
        """
        low = self.log.log_start_offset
        isr = self._maximal_isr
        for replica_id, state in self.remote_replicas.items():
            if (
                replica_id in isr or (is_alive is not None and is_alive(replica_id))
            ) and state.log_start_offset < low:
                low = state.log_start_offset
        return low

    def delete_records_satisfied(
        self, required_offset: int, is_alive: Callable[[int], bool] | None = None
    ) -> tuple[bool, int, int]:
        """Whether a delayed DeleteRecords up to ``required_offset`` may answer.

        ``(done, error code, low watermark)``: ``(False, NONE, lw)`` while the low watermark is
        below ``required_offset``, then ``(True, NONE, lw)``; ``(True, NOT_LEADER_OR_FOLLOWER,
        -1)`` once this broker stopped leading (Kafka's DelayedDeleteRecords).
        """
        if self.leader_id != self.local_broker_id:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
        low = self.low_watermark(is_alive)
        return low >= required_offset, ErrorCode.NONE, low

    def isr_change_proposal(self, now_ms: int) -> list[int] | None:
        """The ISR this leader wants, or None (no change wanted, or one already in flight).

        After :meth:`isr_change_failed` with an unknown outcome, the in-flight proposal is
        returned again, to be resent as it was.

        Shrink first: ISR followers that are not caught up and have not been for
        ``replica_lag_time_max_ms`` leave, if the strategy allows the smaller ISR. Otherwise
        followers outside the ISR whose fetch offset reached both the high watermark and the
        start of this leader epoch join (they then hold every committed record and every
        record of this epoch's predecessors the leader kept).
        """
        if self.leader_id != self.local_broker_id:
            return None
        remote = self.remote_replicas
        if self.pending_isr is not None:
            if not self._resend_pending:
                return None
            # Never (re)send an expansion for a follower that is not caught up now: it may have
            # restarted and lost its unflushed tail since the proposal was made, and a
            # controller that accepted it would make it electable without every committed
            # record. Ask for the committed ISR instead: that settles the unknown outcome
            # (INVALID_UPDATE_VERSION if the expansion was applied after all) while the
            # maximal ISR keeps counting the joiner for the high watermark.
            stale = [
                r
                for r in self.pending_isr
                if r not in self.isr and not self._caught_up_to_join(remote.get(r))
            ]
            return list(self.isr) if stale else list(self.pending_isr)
        leader_leo = self.log.log_end_offset
        lag = self.replica_lag_time_max_ms
        out_of_sync = [
            r
            for r in self.isr
            if r != self.local_broker_id
            and (r not in remote or not remote[r].is_caught_up(leader_leo, now_ms, lag))
        ]
        if out_of_sync:
            shrunk = [r for r in self.isr if r not in out_of_sync]
            if shrunk and self.strategy.may_shrink_isr_to(shrunk, self.replicas):
                return shrunk
        joining = [
            r for r in self.replicas if r not in self.isr and self._caught_up_to_join(remote.get(r))
        ]
        if joining:
            return [*self.isr, *joining]
        return None

    def _caught_up_to_join(self, state: ReplicaState | None) -> bool:
        """A follower may join the ISR once its fetch offset reached both the high watermark
        and the start of this leader epoch."""
        return (
            state is not None
            and state.log_end_offset >= self.log.high_watermark
            and state.log_end_offset >= self.leader_epoch_start_offset
        )

    def isr_change_sent(self, proposed: list[int]) -> None:
        """An AlterPartition carrying ``proposed`` is in flight: count the larger ISR until the
        controller answers (a shrink keeps counting the leaving members, an expansion already
        counts the joining ones)."""
        counted = self._maximal_isr if self.pending_isr is not None else self.isr
        self.pending_isr = list(proposed)
        self._resend_pending = False
        self._maximal_isr = [*counted, *(r for r in proposed if r not in counted)]

    def isr_change_committed(self, isr: list[int], partition_epoch: int) -> bool:
        """The controller committed ``isr`` at ``partition_epoch`` (AlterPartition response).

        A response not newer than the state applied is ignored (a LeaderAndIsr brought it
        already). Returns True when the high watermark advanced (a shrink may unblock it:
        complete delayed produces and fetches).
        """
        if partition_epoch <= self.partition_epoch:
            return False
        self.partition_epoch = partition_epoch
        self.isr = list(isr)
        self.pending_isr = None
        self._resend_pending = False
        self._maximal_isr = self.isr
        if self.leader_id != self.local_broker_id:
            return False
        return self.maybe_increment_high_watermark()

    def isr_change_failed(self, maybe_applied: bool = True) -> None:
        """The AlterPartition got no successful answer.

        ``maybe_applied=False`` when the controller cannot have applied it (it was never sent,
        or the answer is OPERATION_NOT_ATTEMPTED or INELIGIBLE_REPLICA): back to the committed
        ISR, and the next proposal is computed afresh. Otherwise (timeout, lost answer, another
        error) the controller may hold either ISR, so the leader keeps counting both, as
        Kafka does, and :meth:`isr_change_proposal` returns the same proposal to resend until
        an answer or a newer LeaderAndIsr settles it.
        """
        if self.pending_isr is None:
            return
        if maybe_applied:
            self._resend_pending = True
        else:
            self.pending_isr = None
            self._resend_pending = False
            self._maximal_isr = self.isr

    # -- follower ---------------------------------------------------------------------
    def append_records_as_follower(self, records: memoryview) -> LogAppendInfo | None:
        """Append batches fetched from the leader, offsets and leader epochs as it wrote them."""
        flush = self.policy.flush_messages
        return self.log.append_as_follower(records, flush if flush < _NO_LIMIT else None)

    def update_follower_high_watermark(self, leader_high_watermark: int) -> bool:
        """Take ``min(leader HW, own LEO)`` as the high watermark; it never moves backwards
        (a new leader may still report a lower one). True when it moved."""
        if self.leader_id == self.local_broker_id:
            return False
        new_hw = min(leader_high_watermark, self.log.log_end_offset)
        if new_hw > self.log.high_watermark:
            return self.log.update_high_watermark(new_hw)
        return False

    def update_follower_log_start_offset(self, leader_log_start_offset: int) -> bool:
        """Take the leader's log start offset (a DeleteRecords or retention on the leader) as
        this follower's, capped at the own log end offset and never moving back; the next
        fetch reports it to the leader. True when it moved."""
        if self.leader_id == self.local_broker_id:
            return False
        log = self.log
        new_start = min(leader_log_start_offset, log.log_end_offset)
        if new_start <= log.log_start_offset:
            return False
        return log.maybe_increment_log_start_offset(new_start)

    def truncate_to(self, offset: int) -> bool:
        """Remove the log from ``offset`` on (a diverging tail); True when the log changed."""
        return self.log.truncate_to(offset)

    def last_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) answered to OffsetForLeaderEpoch (see UnifiedLog)."""
        return self.log.end_offset_for_epoch(epoch)

    # -- reads ------------------------------------------------------------------------
    def read(
        self,
        offset: int,
        max_bytes: int,
        min_one_batch: bool,
        to_high_watermark: bool = True,
        read_committed: bool = False,
    ) -> FetchDataInfo:
        """Whole batches from ``offset``: up to the log end offset for a follower (not
        ``to_high_watermark``), else the high watermark, or the last stable offset for
        ``read_committed`` (isolation_level=1)."""
        log = self.log
        if not to_high_watermark:
            upper = log.log_end_offset
        elif read_committed:
            upper = log.last_stable_offset
        else:
            upper = log.high_watermark
        return log.read(offset, max_bytes, upper, min_one_batch)
