"""The KRaft state machine of one voter of ``__cluster_metadata``-0, without any I/O.

A driver owns a :class:`RaftCore` and feeds it time and messages:

* ``poll(now_ms)`` fires timers and returns the requests to send (:class:`Outbound`);
  call it again at ``next_deadline_ms()`` or after any other call into the core.
* ``handle_request(now_ms, src, request)`` returns the response to send back, or
  :data:`PARKED` for a Fetch that long-polls; ``complete_parked(now_ms)`` later returns
  ``(src, response)`` pairs for parked fetches (in the order they were parked, per source).
* ``handle_response(now_ms, src, response, correlation_id)`` consumes an answer to one of the
  core's requests.
* ``append(payloads)`` (leader only) adds entries; ``high_watermark`` tells what committed.

Roles follow Kafka's KRaft (KIP-595) with pre-vote (KIP-996): Unattached -> Prospective
(pre-vote, no epoch bump) -> Candidate (epoch + 1, votes for itself) -> Leader; a voter that
hears from a leader is its Follower; a leader that steps down is Resigned for the rest of its
epoch. The durable quorum state (epoch, vote, leader) is written through the
:class:`~pydmq.raft.state.QuorumStateStore` before any message that depends on it leaves.

Durability of the log: the leader's own entries count towards the high watermark only once
flushed (``poll`` flushes, so many ``append`` calls share one fsync); a follower flushes what it
fetched before it fetches again, since its next fetch offset tells the leader it has them.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from pydmq.protocol.errors import ErrorCode
from pydmq.raft.log import (
    Entry,
    PositionOutOfRangeError,
    RaftLog,
    SnapshotId,
    SnapshotNotFoundError,
)
from pydmq.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumResult,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftRequest,
    RaftResponse,
    ReplicaState,
    VoteRequest,
    VoteResponse,
)
from pydmq.raft.progress import LeaderProgress, majority
from pydmq.raft.state import QuorumState, QuorumStateStore

__all__ = [
    "PARKED",
    "NotLeaderError",
    "Outbound",
    "Parked",
    "RaftConfig",
    "RaftCore",
    "RaftStateError",
    "Role",
]

_NONE: Final = int(ErrorCode.NONE)
_FAR_FUTURE: Final = 1 << 62


class Role(enum.Enum):
    """The Raft role of a voter (Kafka's QuorumState states)."""

    UNATTACHED = "unattached"
    PROSPECTIVE = "prospective"
    CANDIDATE = "candidate"
    LEADER = "leader"
    FOLLOWER = "follower"
    RESIGNED = "resigned"


@dataclass(frozen=True, slots=True)
class RaftConfig:
    """Timing and sizing of the quorum (``controller.quorum.*`` and friends)."""

    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    fetch_max_wait_ms: int = 500
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    fetch_max_bytes: int = 1 << 20
    snapshot_chunk_bytes: int = 1 << 20
    snapshot_interval_records: int = 10000


@dataclass(frozen=True, slots=True)
class Outbound:
    """A request for the driver to send to voter ``dest``.

    Pass ``correlation_id`` back to :meth:`RaftCore.handle_response` with the answer, so a
    late answer to an abandoned request is never taken for the answer to a newer one.
    """

    dest: int
    message: RaftRequest
    correlation_id: int


class Parked:
    """Type of :data:`PARKED`: the Fetch was kept; its answer comes from complete_parked."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "PARKED"


PARKED: Final = Parked()


class NotLeaderError(Exception):
    """``append`` on a voter that is not the leader; carries who the leader is, if known."""

    def __init__(self, leader_id: int | None, epoch: int) -> None:
        super().__init__(f"not the leader (leader {leader_id}, epoch {epoch})")
        self.leader_id = leader_id
        self.epoch = epoch


class RaftStateError(RuntimeError):
    """A Raft safety rule would be broken (e.g. truncating committed entries): a bug."""


@dataclass(slots=True)
class _InFlight:
    correlation_id: int
    request: RaftRequest
    deadline_ms: int


@dataclass(slots=True)
class _ParkedFetch:
    src: int
    request: FetchRequest
    epoch: int
    deadline_ms: int
    high_watermark: int
    superseded: bool = False


class RaftCore:
    """One voter's Raft state machine; owned by the single task that drives it."""

    def __init__(
        self,
        node_id: int,
        voters: Sequence[int],
        log: RaftLog,
        store: QuorumStateStore,
        rng: random.Random,
        config: RaftConfig | None = None,
        cluster_id: str | None = None,
        leader_change_payload: bytes = b"",
    ) -> None:
        if node_id not in voters:
            raise ValueError(f"node {node_id} is not one of the voters {list(voters)}")
        if len(set(voters)) != len(voters):
            raise ValueError(f"duplicate voters in {list(voters)}")
        self.node_id = node_id
        self.voters: tuple[int, ...] = tuple(sorted(voters))
        self.cluster_id = cluster_id
        self.config = config or RaftConfig()
        self.leader_change_payload = leader_change_payload
        self._log = log
        self._store = store
        self._rng = rng
        self._majority = majority(len(self.voters))

        state = store.read()
        self._epoch = state.epoch
        self._voted_id = state.voted_id
        self._leader_id: int | None = None
        self._last_leader_id: int | None = state.leader_id  # leader of this epoch, if known
        self._role = Role.UNATTACHED
        self._high_watermark = log.log_start_offset
        self._flushed_end = log.log_end_offset  # everything recovered is durable
        self._now = 0
        self._started = False
        self._wakeup = True

        self._election_deadline = _FAR_FUTURE
        self._fetch_deadline = _FAR_FUTURE
        self._backoff_until: int | None = None  # set once an election is lost
        self._last_leader_contact: int | None = None
        self._granted: set[int] = set()
        self._rejected: set[int] = set()
        self._progress: LeaderProgress | None = None
        self._successors: tuple[int, ...] = ()
        self._end_acked: set[int] = set()
        self._snapshot_fetch: tuple[SnapshotId, bytearray] | None = None

        self._next_correlation = 0
        self._inflight: dict[int, _InFlight] = {}
        self._retry_at: dict[int, int] = {}
        self._parked: list[_ParkedFetch] = []

    # -- public state -------------------------------------------------------------------

    @property
    def role(self) -> Role:
        return self._role

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def voted_id(self) -> int | None:
        return self._voted_id

    @property
    def leader_id(self) -> int | None:
        """The leader of the current epoch as far as this voter knows (itself if leader)."""
        return self._leader_id

    @property
    def is_leader(self) -> bool:
        return self._role is Role.LEADER

    def quorum_contact_ms(self, now_ms: int) -> int | None:
        """Leader only: when a majority last showed it still hears this leader (``now_ms`` for
        a lone voter). None when not the leader."""
        if self._role is not Role.LEADER or self._progress is None:
            return None
        contact = self._progress.quorum_contact_ms()
        return now_ms if contact is None else contact

    @property
    def high_watermark(self) -> int:
        """Entries below this offset are committed. Never decreases while the core lives."""
        return self._high_watermark

    @property
    def log(self) -> RaftLog:
        return self._log

    @property
    def log_end_offset(self) -> int:
        return self._log.log_end_offset

    # -- time ---------------------------------------------------------------------------

    def _start(self, now_ms: int) -> None:
        self._now = max(self._now, now_ms)
        if self._started:
            return
        self._started = True
        state = self._store.read()
        if state.leader_id == self.node_id:
            # A leader that restarts cannot lead its epoch again: its unflushed entries may be
            # gone while followers hold them.
            self._become_resigned(self._now, successors=())
        elif state.leader_id is not None:
            self._become_follower(self._now, self._epoch, state.leader_id, heard=False)
        else:
            self._become_unattached(self._now, self._epoch)
        if len(self.voters) == 1:
            self._become_prospective(self._now)

    def _random_election_timeout(self) -> int:
        t = self.config.election_timeout_ms
        return t + self._rng.randrange(max(1, t))

    def next_deadline_ms(self) -> int:
        """When :meth:`poll` (or :meth:`complete_parked`) should next run."""
        if not self._started or self._wakeup:
            return self._now
        deadlines = [d.deadline_ms for d in self._inflight.values()]
        match self._role:
            case Role.UNATTACHED | Role.RESIGNED:
                deadlines.append(self._election_deadline)
            case Role.PROSPECTIVE | Role.CANDIDATE:
                deadlines.append(self._election_deadline)
                if self._backoff_until is not None:
                    deadlines.append(self._backoff_until)
            case Role.FOLLOWER:
                deadlines.append(self._fetch_deadline)
            case Role.LEADER:
                assert self._progress is not None
                if self._flushed_end < self._log.log_end_offset:
                    return self._now
                lost = self._progress.quorum_lost_at(self.config.fetch_timeout_ms)
                if lost is not None:
                    deadlines.append(lost)
        for dest in self._wanted_destinations():
            if dest not in self._inflight:
                deadlines.append(max(self._now, self._retry_at.get(dest, 0)))
        for parked in self._parked:
            if self._parked_ready(parked):
                return self._now
            deadlines.append(parked.deadline_ms)
        return min(deadlines, default=self._now + self.config.election_timeout_ms)

    def poll(self, now_ms: int) -> list[Outbound]:
        """Fire due timers; return the requests to send now."""
        self._start(now_ms)
        now = self._now
        self._wakeup = False
        if self._role is Role.LEADER:
            self._maybe_flush_leader()
        for dest, inflight in list(self._inflight.items()):
            if inflight.deadline_ms <= now:
                del self._inflight[dest]
        self._fire_timers(now)
        return self._send_requests(now)

    def _fire_timers(self, now: int) -> None:
        for _ in range(8):  # a lone voter goes unattached -> prospective -> candidate -> leader
            role = self._role
            match role:
                case Role.UNATTACHED | Role.RESIGNED:
                    if now >= self._election_deadline:
                        self._become_prospective(now)
                case Role.PROSPECTIVE:
                    if (self._backoff_until is not None and now >= self._backoff_until) or (
                        now >= self._election_deadline
                    ):
                        self._end_prospective(now)
                case Role.CANDIDATE:
                    if (self._backoff_until is not None and now >= self._backoff_until) or (
                        now >= self._election_deadline
                    ):
                        self._become_prospective(now)
                case Role.FOLLOWER:
                    if now >= self._fetch_deadline:
                        self._become_prospective(now)
                case Role.LEADER:
                    assert self._progress is not None
                    lost = self._progress.quorum_lost_at(self.config.fetch_timeout_ms)
                    if lost is not None and now >= lost:
                        # Check-quorum: a leader cut off from a majority steps down so that it
                        # stops serving stale reads and the others can elect a leader.
                        self._become_resigned(now, self._progress.successors())
            if self._role is role:
                return

    # -- sending ------------------------------------------------------------------------

    def _wanted_destinations(self) -> list[int]:
        """Voters this role still has something to ask (ignoring what is in flight)."""
        match self._role:
            case Role.PROSPECTIVE | Role.CANDIDATE:
                if self._backoff_until is not None:
                    return []
                answered = self._granted | self._rejected
                return [v for v in self.voters if v not in answered]
            case Role.LEADER:
                assert self._progress is not None
                acked = self._progress.begin_acked
                return [v for v in self.voters if v != self.node_id and v not in acked]
            case Role.RESIGNED:
                return [v for v in self.voters if v != self.node_id and v not in self._end_acked]
            case Role.FOLLOWER:
                assert self._leader_id is not None
                return [self._leader_id]
            case _:
                return []

    def _send_requests(self, now: int) -> list[Outbound]:
        out: list[Outbound] = []
        for dest in self._wanted_destinations():
            if dest in self._inflight or self._retry_at.get(dest, 0) > now:
                continue
            request = self._build_request(dest)
            timeout = self.config.request_timeout_ms
            if isinstance(request, FetchRequest):
                timeout += request.max_wait_ms
            self._next_correlation += 1
            self._inflight[dest] = _InFlight(self._next_correlation, request, now + timeout)
            out.append(Outbound(dest, request, self._next_correlation))
        return out

    def _build_request(self, dest: int) -> RaftRequest:
        match self._role:
            case Role.PROSPECTIVE | Role.CANDIDATE:
                return VoteRequest(
                    cluster_id=self.cluster_id,
                    voter_id=dest,
                    replica_epoch=self._epoch,
                    replica_id=self.node_id,
                    last_offset_epoch=self._log.last_epoch,
                    last_offset=self._log.log_end_offset,
                    pre_vote=self._role is Role.PROSPECTIVE,
                )
            case Role.LEADER:
                return BeginQuorumEpochRequest(
                    cluster_id=self.cluster_id,
                    voter_id=dest,
                    leader_id=self.node_id,
                    leader_epoch=self._epoch,
                )
            case Role.RESIGNED:
                return EndQuorumEpochRequest(
                    cluster_id=self.cluster_id,
                    leader_id=self.node_id,
                    leader_epoch=self._epoch,
                    preferred_successors=self._successors,
                )
            case _:
                if self._snapshot_fetch is not None:
                    snapshot_id, buf = self._snapshot_fetch
                    return FetchSnapshotRequest(
                        cluster_id=self.cluster_id,
                        replica_id=self.node_id,
                        current_leader_epoch=self._epoch,
                        snapshot_id=snapshot_id,
                        position=len(buf),
                        max_bytes=self.config.snapshot_chunk_bytes,
                    )
                return FetchRequest(
                    cluster_id=self.cluster_id,
                    replica_id=self.node_id,
                    current_leader_epoch=self._epoch,
                    fetch_offset=self._log.log_end_offset,
                    last_fetched_epoch=self._log.last_epoch,
                    max_wait_ms=self.config.fetch_max_wait_ms,
                    max_bytes=self.config.fetch_max_bytes,
                    log_start_offset=self._log.log_start_offset,
                )

    # -- transitions --------------------------------------------------------------------

    def _persist(self, epoch: int, voted_id: int | None, leader_id: int | None) -> None:
        if epoch < self._epoch:
            raise RaftStateError(f"epoch going back from {self._epoch} to {epoch}")
        state = QuorumState(epoch, voted_id, leader_id)
        if state != QuorumState(self._epoch, self._voted_id, self._last_leader_id):
            self._store.write(state)
        self._epoch, self._voted_id, self._last_leader_id = epoch, voted_id, leader_id

    def _leave_role(self) -> None:
        """Forget what belonged to the previous role; its requests' answers become stale."""
        self._inflight.clear()
        self._retry_at.clear()
        self._granted = set()
        self._rejected = set()
        self._backoff_until = None
        self._progress = None
        self._snapshot_fetch = None
        self._end_acked = set()
        self._leader_id = None
        self._wakeup = True
        for parked in self._parked:
            parked.superseded = True  # answered with an error by complete_parked

    def _become_unattached(self, now: int, epoch: int) -> None:
        if epoch > self._epoch:
            self._persist(epoch, None, None)
        self._leave_role()
        self._role = Role.UNATTACHED
        self._last_leader_contact = None
        self._election_deadline = now + self._random_election_timeout()

    def _become_follower(self, now: int, epoch: int, leader_id: int, *, heard: bool) -> None:
        voted = self._voted_id if epoch == self._epoch else None
        self._persist(epoch, voted, leader_id)
        self._leave_role()
        self._role = Role.FOLLOWER
        self._leader_id = leader_id
        self._last_leader_contact = now if heard else None
        self._fetch_deadline = now + self.config.fetch_timeout_ms

    def _become_prospective(self, now: int) -> None:
        self._leave_role()
        self._role = Role.PROSPECTIVE
        self._granted = {self.node_id}
        self._election_deadline = now + self._random_election_timeout()
        self._maybe_won(now)

    def _end_prospective(self, now: int) -> None:
        """A pre-vote that failed: go back to the known leader, or wait unattached."""
        leader = self._last_leader_id
        if leader is not None and leader != self.node_id:
            self._become_follower(now, self._epoch, leader, heard=False)
        else:
            self._become_unattached(now, self._epoch)

    def _become_candidate(self, now: int) -> None:
        self._persist(self._epoch + 1, self.node_id, None)
        self._leave_role()
        self._role = Role.CANDIDATE
        self._granted = {self.node_id}
        self._election_deadline = now + self._random_election_timeout()
        self._maybe_won(now)

    def _become_leader(self, now: int) -> None:
        self._persist(self._epoch, self._voted_id, self.node_id)
        self._leave_role()
        self._role = Role.LEADER
        self._leader_id = self.node_id
        self._progress = LeaderProgress(self.node_id, self.voters, self._log.log_end_offset, now)
        # Kafka's LeaderChange record: an entry of the new epoch that, once committed, commits
        # every entry before it.
        self._log.append([Entry(self._log.log_end_offset, self._epoch, self.leader_change_payload)])

    def _become_resigned(self, now: int, successors: tuple[int, ...]) -> None:
        self._leave_role()
        self._role = Role.RESIGNED
        self._successors = successors or tuple(v for v in self.voters if v != self.node_id)
        self._election_deadline = now + self._random_election_timeout()

    def _maybe_won(self, now: int) -> None:
        if len(self._granted) >= self._majority:
            if self._role is Role.PROSPECTIVE:
                self._become_candidate(now)
            elif self._role is Role.CANDIDATE:
                self._become_leader(now)
        elif len(self._rejected) > len(self.voters) - self._majority and (
            self._backoff_until is None
        ):
            # The election is lost; wait a random backoff so competing voters spread out.
            self._backoff_until = now + self._rng.randint(0, self.config.election_backoff_max_ms)

    def _observe_leader(self, now: int, leader_id: int, leader_epoch: int) -> bool:
        """React to an epoch and leader named by a peer. True if the message is stale."""
        if leader_epoch > self._epoch:
            if leader_id >= 0 and leader_id != self.node_id:
                self._become_follower(now, leader_epoch, leader_id, heard=False)
            else:
                self._become_unattached(now, leader_epoch)
            return False
        if leader_epoch < self._epoch:
            return True
        if (
            leader_id >= 0
            and leader_id != self.node_id
            and self._role in (Role.UNATTACHED, Role.PROSPECTIVE, Role.CANDIDATE)
            # A prospective already gave up on that leader: going back to it on every answer
            # that names it would stop any election while it is unreachable (ping-pong).
            and not (self._role is Role.PROSPECTIVE and leader_id == self._last_leader_id)
        ):
            self._become_follower(now, leader_epoch, leader_id, heard=False)
        return False

    def resign(self, now_ms: int) -> None:
        """Step down (controlled shutdown): tell voters to elect a successor at once."""
        self._start(now_ms)
        if self._role is Role.LEADER:
            assert self._progress is not None
            self._become_resigned(self._now, self._progress.successors())

    # -- leader -------------------------------------------------------------------------

    def append(self, payloads: Sequence[bytes]) -> int:
        """Append entries as leader; returns the offset of the last one.

        They are not durable (nor can they commit) until the next :meth:`poll` flushes them.
        """
        if self._role is not Role.LEADER:
            raise NotLeaderError(self._leader_id, self._epoch)
        start = self._log.log_end_offset
        entries = [Entry(start + i, self._epoch, bytes(p)) for i, p in enumerate(payloads)]
        self._log.append(entries)
        self._wakeup = True
        return self._log.log_end_offset - 1

    def _maybe_flush_leader(self) -> None:
        if self._flushed_end < self._log.log_end_offset:
            self._log.flush()
            self._flushed_end = self._log.log_end_offset
        self._maybe_advance_high_watermark()

    def _maybe_advance_high_watermark(self) -> None:
        assert self._progress is not None
        hw = self._progress.high_watermark_candidate(self._flushed_end)
        if hw is not None and hw > self._high_watermark:
            self._high_watermark = hw

    # -- requests -----------------------------------------------------------------------

    def handle_request(self, now_ms: int, src: int, message: RaftRequest) -> RaftResponse | Parked:
        """Answer a request from voter ``src`` (or park a long-polling Fetch)."""
        self._start(now_ms)
        now = self._now
        self._wakeup = True
        match message:
            case VoteRequest():
                return self._handle_vote(now, message)
            case BeginQuorumEpochRequest():
                return self._handle_begin_quorum_epoch(now, message)
            case EndQuorumEpochRequest():
                return self._handle_end_quorum_epoch(now, message)
            case FetchRequest():
                for parked in self._parked:
                    if parked.src == src:
                        parked.superseded = True
                return self._handle_fetch(now, src, message, may_park=True)
            case FetchSnapshotRequest():
                return self._handle_fetch_snapshot(now, message)
        raise TypeError(f"not a Raft request: {message!r}")

    def _cluster_ok(self, cluster_id: str | None) -> bool:
        return cluster_id is None or self.cluster_id is None or cluster_id == self.cluster_id

    def _known_leader(self) -> int:
        return -1 if self._leader_id is None else self._leader_id

    def _log_up_to_date(self, last_epoch: int, end_offset: int) -> bool:
        return (last_epoch, end_offset) >= (self._log.last_epoch, self._log.log_end_offset)

    def _handle_vote(self, now: int, req: VoteRequest) -> VoteResponse:
        def answer(error: int, granted: bool) -> VoteResponse:
            return VoteResponse(error, self._known_leader(), self._epoch, granted)

        if not self._cluster_ok(req.cluster_id):
            return answer(ErrorCode.INCONSISTENT_CLUSTER_ID, False)
        if req.replica_id not in self.voters or req.voter_id not in (-1, self.node_id):
            return answer(ErrorCode.INCONSISTENT_VOTER_SET, False)
        if req.replica_epoch < self._epoch:
            return answer(ErrorCode.FENCED_LEADER_EPOCH, False)
        if req.replica_epoch > self._epoch:
            # A higher epoch exists (someone was candidate in it): our leader, if any, is
            # deposed. Learning an epoch is safe even from a pre-vote.
            self._become_unattached(now, req.replica_epoch)
        up_to_date = self._log_up_to_date(req.last_offset_epoch, req.last_offset)
        if req.pre_vote:
            # KIP-996: a pre-vote changes nothing durable. Refuse it while a leader is alive
            # (we are it, or fetched from it within fetch.timeout): that is what keeps a
            # voter that was only cut off from disrupting a healthy quorum when it returns.
            heard = self._last_leader_contact is not None and (
                now - self._last_leader_contact < self.config.fetch_timeout_ms
            )
            leader_alive = self._role is Role.LEADER or (self._role is Role.FOLLOWER and heard)
            return answer(_NONE, up_to_date and not leader_alive)
        granted = False
        # A prospective that followed a leader of this epoch knows the epoch is taken.
        leader_known = self._role is Role.PROSPECTIVE and self._last_leader_id is not None
        if self._role in (Role.UNATTACHED, Role.PROSPECTIVE) and up_to_date and not leader_known:
            if self._voted_id is None:
                self._persist(self._epoch, req.replica_id, None)
                self._become_unattached(now, self._epoch)  # new election timer for the winner
                granted = True
            else:
                granted = self._voted_id == req.replica_id
        elif self._role is Role.CANDIDATE:
            granted = req.replica_id == self.node_id
        return answer(_NONE, granted)

    def _handle_begin_quorum_epoch(
        self, now: int, req: BeginQuorumEpochRequest
    ) -> BeginQuorumEpochResponse:
        def answer(error: int) -> BeginQuorumEpochResponse:
            return BeginQuorumEpochResponse(error, self._known_leader(), self._epoch)

        if not self._cluster_ok(req.cluster_id):
            return answer(ErrorCode.INCONSISTENT_CLUSTER_ID)
        if req.leader_id not in self.voters or req.voter_id not in (-1, self.node_id):
            return answer(ErrorCode.INCONSISTENT_VOTER_SET)
        if req.leader_epoch < self._epoch:
            return answer(ErrorCode.FENCED_LEADER_EPOCH)
        if req.leader_epoch == self._epoch and self._role in (Role.LEADER, Role.RESIGNED):
            if req.leader_id != self.node_id:
                raise RaftStateError(
                    f"two leaders in epoch {self._epoch}: {self.node_id} and {req.leader_id}"
                )
            return answer(_NONE)
        if (
            self._role is Role.FOLLOWER
            and self._leader_id == req.leader_id
            and (req.leader_epoch == self._epoch)
        ):
            self._heard_from_leader(now)
        else:
            self._become_follower(now, req.leader_epoch, req.leader_id, heard=True)
        return answer(_NONE)

    def _heard_from_leader(self, now: int) -> None:
        self._last_leader_contact = now
        self._fetch_deadline = now + self.config.fetch_timeout_ms

    def _handle_end_quorum_epoch(
        self, now: int, req: EndQuorumEpochRequest
    ) -> EndQuorumEpochResponse:
        def answer(error: int) -> EndQuorumEpochResponse:
            return EndQuorumEpochResponse(error, self._known_leader(), self._epoch)

        if not self._cluster_ok(req.cluster_id):
            return answer(ErrorCode.INCONSISTENT_CLUSTER_ID)
        if req.leader_epoch < self._epoch:
            return answer(ErrorCode.FENCED_LEADER_EPOCH)
        if req.leader_epoch > self._epoch:
            self._become_unattached(now, req.leader_epoch)
        # The most caught-up successor starts its election first (Kafka's position backoff).
        successors = list(req.preferred_successors)
        position = successors.index(self.node_id) if self.node_id in successors else len(successors)
        backoff = 0
        if position > 0:
            backoff = min(
                self.config.election_backoff_max_ms, self.config.retry_backoff_ms << position
            )
        backoff += self._rng.randrange(max(1, self.config.retry_backoff_ms))
        if self._role is Role.FOLLOWER and self._leader_id == req.leader_id:
            self._last_leader_contact = None  # the leader is gone: pre-votes may be granted
            self._fetch_deadline = min(self._fetch_deadline, now + backoff)
        elif self._role is Role.UNATTACHED:
            self._election_deadline = min(self._election_deadline, now + backoff)
        return answer(_NONE)

    def _fetch_error(self, error: int) -> FetchResponse:
        return FetchResponse(error, self._known_leader(), self._epoch)

    def _handle_fetch(
        self, now: int, src: int, req: FetchRequest, *, may_park: bool
    ) -> FetchResponse | Parked:
        if not self._cluster_ok(req.cluster_id):
            return self._fetch_error(ErrorCode.INCONSISTENT_CLUSTER_ID)
        if self._role is not Role.LEADER:
            return self._fetch_error(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if req.current_leader_epoch < self._epoch:
            return self._fetch_error(ErrorCode.FENCED_LEADER_EPOCH)
        if req.current_leader_epoch > self._epoch:
            return self._fetch_error(ErrorCode.UNKNOWN_LEADER_EPOCH)
        progress = self._progress
        assert progress is not None
        log = self._log
        if req.fetch_offset < log.log_start_offset:
            progress.touch(req.replica_id, now)
            return self._fetch_answer(snapshot_id=log.latest_snapshot())
        found = log.end_offset_for_epoch(req.last_fetched_epoch)
        if found is None:
            progress.touch(req.replica_id, now)
            return self._fetch_answer(snapshot_id=log.latest_snapshot())
        epoch, end = found
        if epoch != req.last_fetched_epoch or req.fetch_offset > end:
            # The follower's log diverges from ours after (epoch, end): it must truncate.
            progress.update_fetch(req.replica_id, None, log.log_end_offset, now)
            return self._fetch_answer(diverging_epoch=EpochEndOffset(epoch, end))
        # By log matching the follower holds our entries below fetch_offset.
        progress.update_fetch(req.replica_id, req.fetch_offset, log.log_end_offset, now)
        high_watermark = self._high_watermark
        self._maybe_advance_high_watermark()
        if req.fetch_offset < log.log_end_offset:
            return self._fetch_answer(records=tuple(log.read(req.fetch_offset, req.max_bytes)))
        # Park only when there is nothing to say: no entries and no news of the commit point
        # (this very fetch may have moved it).
        if may_park and req.max_wait_ms > 0 and high_watermark == self._high_watermark:
            self._parked.append(
                _ParkedFetch(
                    src=src,
                    request=req,
                    epoch=self._epoch,
                    deadline_ms=now + req.max_wait_ms,
                    high_watermark=self._high_watermark,
                )
            )
            return PARKED
        return self._fetch_answer()

    def _fetch_answer(
        self,
        *,
        diverging_epoch: EpochEndOffset | None = None,
        snapshot_id: SnapshotId | None = None,
        records: tuple[Entry, ...] = (),
    ) -> FetchResponse:
        return FetchResponse(
            _NONE,
            self.node_id,
            self._epoch,
            high_watermark=self._high_watermark,
            log_start_offset=self._log.log_start_offset,
            diverging_epoch=diverging_epoch,
            snapshot_id=snapshot_id,
            records=records,
        )

    def _handle_fetch_snapshot(self, now: int, req: FetchSnapshotRequest) -> FetchSnapshotResponse:
        def answer(error: int) -> FetchSnapshotResponse:
            return FetchSnapshotResponse(error, self._known_leader(), self._epoch)

        if not self._cluster_ok(req.cluster_id):
            return answer(ErrorCode.INCONSISTENT_CLUSTER_ID)
        if self._role is not Role.LEADER:
            return answer(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if req.current_leader_epoch < self._epoch:
            return answer(ErrorCode.FENCED_LEADER_EPOCH)
        if req.current_leader_epoch > self._epoch:
            return answer(ErrorCode.UNKNOWN_LEADER_EPOCH)
        assert self._progress is not None
        self._progress.touch(req.replica_id, now)
        max_bytes = min(req.max_bytes, self.config.snapshot_chunk_bytes)
        try:
            chunk, size = self._log.read_snapshot(req.snapshot_id, req.position, max_bytes)
        except SnapshotNotFoundError:
            return answer(ErrorCode.SNAPSHOT_NOT_FOUND)
        except PositionOutOfRangeError:
            return answer(ErrorCode.POSITION_OUT_OF_RANGE)
        return FetchSnapshotResponse(
            _NONE,
            self.node_id,
            self._epoch,
            snapshot_id=req.snapshot_id,
            size=size,
            position=req.position,
            unaligned_records=chunk,
        )

    # -- parked fetches -----------------------------------------------------------------

    def _parked_ready(self, parked: _ParkedFetch) -> bool:
        return (
            parked.superseded
            or self._role is not Role.LEADER
            or self._epoch != parked.epoch
            or self._now >= parked.deadline_ms
            or self._log.log_end_offset > parked.request.fetch_offset
            or self._high_watermark != parked.high_watermark
        )

    def complete_parked(self, now_ms: int) -> list[tuple[int, RaftResponse]]:
        """Answers for parked fetches that have data, a new high watermark or timed out.

        For one source, answers come in the order its fetches were parked.
        """
        self._start(now_ms)
        if not self._parked:
            return []
        if self._role is Role.LEADER:
            self._maybe_advance_high_watermark()
        done: list[tuple[int, RaftResponse]] = []
        keep: list[_ParkedFetch] = []
        for parked in self._parked:
            if not self._parked_ready(parked):
                keep.append(parked)
                continue
            response = self._handle_fetch(self._now, parked.src, parked.request, may_park=False)
            assert isinstance(response, FetchResponse)
            done.append((parked.src, response))
        self._parked = keep
        return done

    # -- responses ----------------------------------------------------------------------

    def handle_unreachable(self, now_ms: int, dest: int) -> None:
        """The driver could not reach ``dest`` at all: connection refused or reset, as when
        its process died (not a timeout, which a paused or slow node also causes).

        A follower whose leader is unreachable stops waiting out ``fetch.timeout``: it forgets
        the leader contact (so it grants pre-votes) and starts a pre-vote after a short random
        backoff, as if the leader had sent EndQuorumEpoch. Only timing changes: every safety
        rule still applies to the election that follows.
        """
        if self._role is not Role.FOLLOWER or self._leader_id != dest:
            return
        self._last_leader_contact = None
        backoff = self.config.retry_backoff_ms + self._rng.randrange(
            max(1, self.config.election_backoff_max_ms // 4)
        )
        self._fetch_deadline = min(self._fetch_deadline, now_ms + backoff)
        self._wakeup = True

    def handle_response(
        self,
        now_ms: int,
        src: int,
        message: RaftResponse,
        correlation_id: int | None = None,
    ) -> None:
        """Consume the answer of ``src`` to our request ``correlation_id``.

        Without a correlation id the answer is taken for the request in flight to ``src``,
        which is right only if the driver delivers answers in request order.
        """
        self._start(now_ms)
        now = self._now
        inflight = self._inflight.get(src)
        if inflight is None:
            return
        if correlation_id is not None and correlation_id != inflight.correlation_id:
            return
        request = inflight.request
        del self._inflight[src]
        self._wakeup = True
        match message:
            case VoteResponse() if isinstance(request, VoteRequest):
                self._handle_vote_response(now, src, message)
            case BeginQuorumEpochResponse() if isinstance(request, BeginQuorumEpochRequest):
                if not self._observe_leader(now, message.leader_id, message.leader_epoch):
                    if self._role is Role.LEADER and message.error_code == _NONE:
                        assert self._progress is not None
                        self._progress.begin_acked.add(src)
                    else:
                        self._retry_at[src] = now + self.config.retry_backoff_ms
            case EndQuorumEpochResponse() if isinstance(request, EndQuorumEpochRequest):
                if not self._observe_leader(now, message.leader_id, message.leader_epoch):
                    if self._role is Role.RESIGNED and message.error_code == _NONE:
                        self._end_acked.add(src)
                    else:
                        self._retry_at[src] = now + self.config.retry_backoff_ms
            case FetchResponse() if isinstance(request, FetchRequest):
                self._handle_fetch_response(now, src, request, message)
            case FetchSnapshotResponse() if isinstance(request, FetchSnapshotRequest):
                self._handle_fetch_snapshot_response(now, src, request, message)
            case _:
                # An answer of another kind than what is in flight: not ours; ask again.
                self._retry_at[src] = now + self.config.retry_backoff_ms

    def _handle_vote_response(self, now: int, src: int, resp: VoteResponse) -> None:
        if self._observe_leader(now, resp.leader_id, resp.leader_epoch):
            return
        if self._role not in (Role.PROSPECTIVE, Role.CANDIDATE):
            return
        if resp.error_code != _NONE:
            self._retry_at[src] = now + self.config.retry_backoff_ms
            return
        (self._granted if resp.vote_granted else self._rejected).add(src)
        self._maybe_won(now)

    def _handle_fetch_response(
        self, now: int, src: int, req: FetchRequest, resp: FetchResponse
    ) -> None:
        if self._observe_leader(now, resp.leader_id, resp.leader_epoch):
            return
        if self._role is not Role.FOLLOWER or src != self._leader_id:
            return
        log = self._log
        if resp.error_code != _NONE:
            self._retry_at[src] = now + self.config.retry_backoff_ms
            return
        if req.fetch_offset != log.log_end_offset or req.last_fetched_epoch != log.last_epoch:
            return  # our log moved since this fetch left: the answer does not apply
        self._heard_from_leader(now)
        if resp.diverging_epoch is not None:
            self._truncate_to_diverging(resp.diverging_epoch)
            return
        if resp.snapshot_id is not None:
            self._snapshot_fetch = (resp.snapshot_id, bytearray())
            return
        if resp.records:
            if resp.records[0].offset != log.log_end_offset:
                return
            log.append(resp.records)
            log.flush()
            self._flushed_end = log.log_end_offset
        hw = min(resp.high_watermark, log.log_end_offset)
        if hw > self._high_watermark:
            self._high_watermark = hw

    def _truncate_to_diverging(self, diverging: EpochEndOffset) -> None:
        log = self._log
        local = log.end_offset_for_epoch(diverging.epoch)
        # Cut where both logs may still agree: the end of the diverging epoch in the shorter.
        target = log.log_start_offset if local is None else min(local[1], diverging.end_offset)
        target = max(target, log.log_start_offset)
        if target >= log.log_end_offset:
            return
        if target < self._high_watermark:
            raise RaftStateError(
                f"node {self.node_id}: truncation to {target} below high watermark "
                f"{self._high_watermark}"
            )
        log.truncate_to(target)
        self._flushed_end = min(self._flushed_end, log.log_end_offset)

    def _handle_fetch_snapshot_response(
        self, now: int, src: int, req: FetchSnapshotRequest, resp: FetchSnapshotResponse
    ) -> None:
        if self._observe_leader(now, resp.leader_id, resp.leader_epoch):
            return
        if self._role is not Role.FOLLOWER or src != self._leader_id:
            return
        fetch = self._snapshot_fetch
        if fetch is None or fetch[0] != req.snapshot_id:
            return
        if resp.error_code != _NONE:
            # The leader replaced that snapshot (or the position is off): fetch again, which
            # names the current snapshot.
            self._snapshot_fetch = None
            self._retry_at[src] = now + self.config.retry_backoff_ms
            return
        self._heard_from_leader(now)
        snapshot_id, buf = fetch
        if resp.snapshot_id != snapshot_id or resp.position != len(buf):
            return
        buf += resp.unaligned_records
        if len(buf) < resp.size:
            return
        self._snapshot_fetch = None
        self._log.install_snapshot(snapshot_id, bytes(buf))
        self._flushed_end = self._log.log_end_offset
        # Everything a snapshot holds is committed.
        self._high_watermark = max(self._high_watermark, snapshot_id.end_offset)

    # -- consumers of the committed log -------------------------------------------------

    def committed_snapshot_needed(self, from_offset: int) -> SnapshotId | None:
        """The snapshot to load first if ``from_offset`` is below the log start, else None."""
        if from_offset < self._log.log_start_offset:
            return self._log.latest_snapshot()
        return None

    def load_snapshot(self, snapshot_id: SnapshotId) -> list[bytes]:
        """The payloads the state machine stored in a snapshot."""
        return self._log.load_snapshot(snapshot_id)

    def read_committed(self, from_offset: int, max_entries: int) -> list[Entry]:
        """Up to ``max_entries`` committed entries (below the high watermark) from an offset."""
        if from_offset < self._log.log_start_offset:
            raise ValueError(
                f"offset {from_offset} is below the log start {self._log.log_start_offset}; "
                "load committed_snapshot_needed() first"
            )
        if from_offset >= self._high_watermark or max_entries <= 0:
            return []
        entries = self._log.read(from_offset, self.config.fetch_max_bytes)
        out: list[Entry] = []
        for entry in entries:
            if entry.offset >= self._high_watermark or len(out) >= max_entries:
                break
            out.append(entry)
        return out

    def snapshot_due(self) -> bool:
        """True once ``snapshot_interval_records`` committed entries follow the log start."""
        return (
            self._high_watermark - self._log.log_start_offset
            >= self.config.snapshot_interval_records
        )

    def create_snapshot(self, offset: int, payloads: Sequence[bytes]) -> SnapshotId:
        """Snapshot the state after the entries below ``offset`` (committed only)."""
        if offset > self._high_watermark:
            raise ValueError(f"snapshot at {offset} above high watermark {self._high_watermark}")
        epoch = self._log.read(offset - 1, 0)[0].epoch
        return self._log.create_snapshot(offset, epoch, payloads)

    def describe_quorum(self) -> DescribeQuorumResult:
        """DescribeQuorum: the leader's view of every voter."""
        if self._role is not Role.LEADER:
            return DescribeQuorumResult(
                int(ErrorCode.NOT_LEADER_OR_FOLLOWER),
                self._known_leader(),
                self._epoch,
                self._high_watermark,
            )
        assert self._progress is not None
        voters = [ReplicaState(self.node_id, self._log.log_end_offset, self._now, self._now)]
        for voter, p in sorted(self._progress.replicas.items()):
            voters.append(ReplicaState(voter, p.end_offset, p.last_fetch_ms, p.last_caught_up_ms))
        return DescribeQuorumResult(
            _NONE,
            self.node_id,
            self._epoch,
            self._high_watermark,
            current_voters=tuple(voters),
        )
