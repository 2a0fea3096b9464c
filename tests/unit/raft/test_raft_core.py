"""RaftCore rules, one at a time: votes, pre-votes, fetch validation, commit, check-quorum."""

from __future__ import annotations

import random

import pytest

from pydmq.protocol.errors import ErrorCode
from pydmq.raft.core import PARKED, NotLeaderError, Outbound, RaftConfig, RaftCore, Role
from pydmq.raft.log import Entry, MemoryRaftLog, SnapshotId
from pydmq.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    VoteRequest,
    VoteResponse,
)
from pydmq.raft.state import MemoryQuorumStateStore, QuorumState

CONFIG = RaftConfig()
VOTERS = (1, 2, 3)


def make(
    node_id: int = 1,
    voters: tuple[int, ...] = VOTERS,
    state: QuorumState | None = None,
    log: MemoryRaftLog | None = None,
) -> tuple[RaftCore, MemoryRaftLog, MemoryQuorumStateStore]:
    log = log or MemoryRaftLog()
    store = MemoryQuorumStateStore(state)
    core = RaftCore(
        node_id,
        voters,
        log,
        store,
        random.Random(node_id),
        CONFIG,
        cluster_id="c",
        leader_change_payload=b"noop",
    )
    return core, log, store


def vote(
    candidate: int,
    epoch: int,
    last_epoch: int = 0,
    end: int = 0,
    *,
    pre_vote: bool = False,
    voter: int = -1,
) -> VoteRequest:
    return VoteRequest("c", voter, epoch, candidate, last_epoch, end, pre_vote)


def fetch(replica: int, epoch: int, offset: int, last_epoch: int, wait: int = 0) -> FetchRequest:
    return FetchRequest("c", replica, epoch, offset, last_epoch, max_wait_ms=wait)


def fill(log: MemoryRaftLog, epochs: list[int]) -> None:
    start = log.log_end_offset
    log.append([Entry(start + i, e, b"x") for i, e in enumerate(epochs)])
    log.flush()


def answer(response: object) -> VoteResponse:
    assert isinstance(response, VoteResponse)
    return response


# Time at which :func:`elect` has made its leader; later calls must not go back before it.
T0 = 2 * CONFIG.election_timeout_ms


def elect(
    node_id: int = 1,
    log: MemoryRaftLog | None = None,
    epoch: int = 0,
    voters: tuple[int, ...] = VOTERS,
) -> tuple[RaftCore, MemoryRaftLog]:
    """A voter that won the election of ``epoch + 1`` at time T0 (votes given by hand)."""
    core, log, _ = make(node_id, voters, log=log, state=QuorumState(epoch, None, None))
    core.poll(0)
    prevotes = core.poll(T0)
    assert prevotes and all(isinstance(o.message, VoteRequest) for o in prevotes)
    for out in prevotes:
        core.handle_response(T0, out.dest, VoteResponse(0, -1, epoch, True), out.correlation_id)
    assert core.role is Role.CANDIDATE and core.epoch == epoch + 1
    votes = core.poll(T0)
    for out in votes:
        core.handle_response(T0, out.dest, VoteResponse(0, -1, epoch + 1, True), out.correlation_id)
    assert core.is_leader
    return core, log


# -- elections ------------------------------------------------------------------------


def test_single_voter_leads_at_once_and_commits_on_flush() -> None:
    core, log, store = make(voters=(1,))
    assert core.poll(0) == []
    assert core.is_leader and core.epoch == 1 and core.leader_id == 1
    assert store.read() == QuorumState(1, 1, 1)
    assert log.read(0, 100)[0] == Entry(0, 1, b"noop")
    assert core.high_watermark == 1  # poll flushed the leader change entry
    assert core.append([b"a", b"b"]) == 2
    assert core.high_watermark == 1  # not flushed yet
    assert core.next_deadline_ms() == 0  # a flush is due
    core.poll(2)
    assert core.high_watermark == 3
    assert [e.payload for e in core.read_committed(0, 10)] == [b"noop", b"a", b"b"]


def test_unattached_voter_waits_a_randomised_election_timeout_then_prevotes() -> None:
    core, _, store = make()
    assert core.poll(0) == []
    deadline = core.next_deadline_ms()
    t = CONFIG.election_timeout_ms
    assert t <= deadline < 2 * t
    out = core.poll(deadline)
    assert core.role is Role.PROSPECTIVE and core.epoch == 0
    assert sorted(o.dest for o in out) == [2, 3]
    assert all(isinstance(o.message, VoteRequest) and o.message.pre_vote for o in out)
    assert all(o.message.replica_epoch == 0 for o in out)  # type: ignore[union-attr]
    assert store.writes == 0  # a pre-vote round persists nothing


def test_prevote_majority_makes_a_candidate_that_bumps_the_epoch() -> None:
    core, _, store = make()
    core.poll(0)
    t = core.next_deadline_ms()
    out = core.poll(t)
    core.handle_response(t, out[0].dest, VoteResponse(0, -1, 0, True), out[0].correlation_id)
    assert core.role is Role.CANDIDATE and core.epoch == 1 and core.voted_id == 1
    assert store.read() == QuorumState(1, 1, None)  # durable before any vote request leaves
    votes = core.poll(t)
    assert all(isinstance(o.message, VoteRequest) and not o.message.pre_vote for o in votes)
    assert all(o.message.replica_epoch == 1 for o in votes)  # type: ignore[union-attr]
    core.handle_response(t, votes[0].dest, VoteResponse(0, -1, 1, True), votes[0].correlation_id)
    assert core.is_leader
    begins = core.poll(t)
    assert sorted(o.dest for o in begins) == [2, 3]
    assert all(isinstance(o.message, BeginQuorumEpochRequest) for o in begins)


def test_lost_prevote_returns_to_unattached_without_an_epoch_bump() -> None:
    core, _, _ = make()
    core.poll(0)
    t = core.next_deadline_ms()
    out = core.poll(t)
    for o in out:
        core.handle_response(t, o.dest, VoteResponse(0, -1, 0, False), o.correlation_id)
    assert core.role is Role.PROSPECTIVE
    core.poll(t + CONFIG.election_backoff_max_ms + 1)
    assert core.role is Role.UNATTACHED and core.epoch == 0


def test_vote_granted_once_per_epoch_and_persisted_first() -> None:
    core, _, store = make()
    response = answer(core.handle_request(0, 2, vote(2, 1)))
    assert response.vote_granted and response.leader_epoch == 1
    assert store.read() == QuorumState(1, 2, None)
    assert answer(core.handle_request(1, 2, vote(2, 1))).vote_granted  # same candidate again
    assert not answer(core.handle_request(2, 3, vote(3, 1))).vote_granted  # another one
    # A restarted voter remembers its vote.
    again, _, _ = make(state=store.read())
    assert not answer(again.handle_request(3, 3, vote(3, 1))).vote_granted
    assert answer(again.handle_request(3, 2, vote(2, 1))).vote_granted


def test_vote_refused_to_a_candidate_with_a_less_up_to_date_log() -> None:
    log = MemoryRaftLog()
    fill(log, [1, 1, 2])
    core, _, store = make(log=log, state=QuorumState(2, None, None))
    assert not answer(core.handle_request(0, 2, vote(2, 3, last_epoch=1, end=9))).vote_granted
    assert not answer(core.handle_request(0, 2, vote(2, 3, last_epoch=2, end=2))).vote_granted
    # The epoch moved on even though the vote was refused.
    assert core.epoch == 3 and store.read().voted_id is None
    assert answer(core.handle_request(0, 2, vote(2, 3, last_epoch=2, end=3))).vote_granted


def test_vote_errors() -> None:
    core, _, _ = make(state=QuorumState(5, None, None))
    stale = answer(core.handle_request(0, 2, vote(2, 4)))
    assert stale.error_code == ErrorCode.FENCED_LEADER_EPOCH and stale.leader_epoch == 5
    other_cluster = VoteRequest("other", -1, 6, 2, 0, 0)
    assert answer(core.handle_request(0, 2, other_cluster)).error_code == (
        ErrorCode.INCONSISTENT_CLUSTER_ID
    )
    assert answer(core.handle_request(0, 9, vote(9, 6))).error_code == (
        ErrorCode.INCONSISTENT_VOTER_SET
    )
    assert answer(core.handle_request(0, 2, vote(2, 6, voter=3))).error_code == (
        ErrorCode.INCONSISTENT_VOTER_SET
    )


def test_follower_and_leader_refuse_votes_in_their_epoch() -> None:
    follower, _, _ = make(state=QuorumState(1, None, 2))
    follower.poll(0)
    assert follower.role is Role.FOLLOWER
    assert not answer(follower.handle_request(0, 3, vote(3, 1))).vote_granted
    leader, _ = elect()
    assert not answer(leader.handle_request(0, 3, vote(3, 1, 9, 99))).vote_granted


def test_prevote_refused_while_the_leader_is_alive_and_persists_nothing() -> None:
    core, _, store = make()
    core.handle_request(0, 2, BeginQuorumEpochRequest("c", 1, 2, 1))
    assert core.role is Role.FOLLOWER and core.leader_id == 2
    writes = store.writes
    refused = answer(core.handle_request(100, 3, vote(3, 1, pre_vote=True)))
    assert not refused.vote_granted and refused.leader_id == 2
    # Once the leader has been silent for fetch.timeout, the pre-vote is granted...
    granted = answer(core.handle_request(CONFIG.fetch_timeout_ms + 1, 3, vote(3, 1, pre_vote=True)))
    assert granted.vote_granted
    # ...and nothing durable changed: no epoch, no vote.
    assert store.writes == writes and core.voted_id is None and core.epoch == 1
    assert core.role is Role.FOLLOWER


def test_prevote_needs_an_up_to_date_log_and_leaders_refuse_it() -> None:
    log = MemoryRaftLog()
    fill(log, [1, 1])
    core, _, _ = make(log=log, state=QuorumState(1, None, None))
    assert not answer(core.handle_request(0, 2, vote(2, 1, 1, 1, pre_vote=True))).vote_granted
    assert answer(core.handle_request(0, 2, vote(2, 1, 1, 2, pre_vote=True))).vote_granted
    leader, _ = elect()
    assert not answer(leader.handle_request(0, 2, vote(2, 1, 5, 50, pre_vote=True))).vote_granted


def test_prospective_ignores_answers_naming_the_leader_it_gave_up_on() -> None:
    """No ping-pong: a pre-vote granted by a voter that still names the old leader counts."""
    core, _, _ = make(state=QuorumState(1, None, 2))
    core.poll(0)
    t = CONFIG.fetch_timeout_ms
    out = core.poll(t)
    assert core.role is Role.PROSPECTIVE
    o = next(o for o in out if o.dest == 3)
    core.handle_response(t, 3, VoteResponse(0, 2, 1, True), o.correlation_id)
    assert core.role is Role.CANDIDATE and core.epoch == 2


def test_answers_to_abandoned_requests_are_ignored() -> None:
    core, _, _ = make()
    core.poll(0)
    t = core.next_deadline_ms()
    out = core.poll(t)
    core.handle_response(t, out[0].dest, VoteResponse(0, -1, 0, True), out[0].correlation_id + 99)
    assert core.role is Role.PROSPECTIVE


def test_higher_epoch_in_a_response_makes_the_leader_step_down() -> None:
    leader, _ = elect()
    out = leader.poll(T0)
    begin = next(o for o in out if o.dest == 2)
    leader.handle_response(T0, 2, BeginQuorumEpochResponse(0, 3, 7), begin.correlation_id)
    assert leader.role is Role.FOLLOWER and leader.epoch == 7 and leader.leader_id == 3
    with pytest.raises(NotLeaderError) as info:
        leader.append([b"x"])
    assert info.value.leader_id == 3


def test_restarted_leader_resigns_its_epoch() -> None:
    core, _, _ = make(state=QuorumState(4, 1, 1))
    out = core.poll(0)
    assert core.role is Role.RESIGNED and core.epoch == 4
    assert all(isinstance(o.message, EndQuorumEpochRequest) for o in out)


def test_end_quorum_epoch_lets_followers_elect_at_once() -> None:
    core, _, _ = make(state=QuorumState(3, None, 2))
    core.poll(0)
    core.handle_request(0, 2, EndQuorumEpochRequest("c", 2, 3, (1, 3)))
    core.poll(0)
    assert core.next_deadline_ms() < CONFIG.retry_backoff_ms
    core.poll(CONFIG.retry_backoff_ms)
    assert core.role is Role.PROSPECTIVE
    # The other voter, told the leader is gone, grants the pre-vote at once.
    other, _, _ = make(3, state=QuorumState(3, None, 2))
    other.handle_request(0, 2, BeginQuorumEpochRequest("c", 3, 2, 3))
    other.handle_request(1, 2, EndQuorumEpochRequest("c", 2, 3, (1, 3)))
    assert answer(other.handle_request(2, 1, vote(1, 3, pre_vote=True))).vote_granted


def test_unreachable_leader_lets_a_follower_elect_before_fetch_timeout() -> None:
    core, _, _ = make(state=QuorumState(3, None, 2))
    core.handle_request(0, 2, BeginQuorumEpochRequest("c", 3, 2, 3))
    core.poll(0)
    assert core.role is Role.FOLLOWER
    soon = CONFIG.retry_backoff_ms + CONFIG.election_backoff_max_ms
    assert soon < CONFIG.fetch_timeout_ms
    core.handle_unreachable(10, 3)  # not the leader: nothing changes
    core.poll(10 + soon)
    assert core.role is Role.FOLLOWER
    core.handle_unreachable(10 + soon, 2)
    core.poll(10 + 2 * soon)
    assert core.role is Role.PROSPECTIVE
    assert core.epoch == 3, "a pre-vote does not bump the epoch"


# -- leader: commit, fetch, check-quorum -----------------------------------------------


def test_append_needs_leadership() -> None:
    core, _, _ = make()
    with pytest.raises(NotLeaderError):
        core.append([b"x"])


def test_high_watermark_waits_for_an_entry_of_the_leaders_epoch() -> None:
    log = MemoryRaftLog()
    fill(log, [1, 1, 1])  # entries of an older epoch, not known committed
    leader, _ = elect(log=log, epoch=1)
    assert leader.epoch == 2
    leader.poll(T0 + 0)
    # Follower 2 has the old entries but not the new epoch's leader change entry: the old
    # entries are on a majority, yet nothing commits until an entry of epoch 2 does.
    response = leader.handle_request(T0 + 0, 2, fetch(2, 2, 3, 1))
    assert isinstance(response, FetchResponse) and response.records[0] == Entry(3, 2, b"noop")
    assert leader.high_watermark == 0
    leader.handle_request(T0 + 0, 2, fetch(2, 2, 4, 2))
    assert leader.high_watermark == 4


def test_fetch_answers_a_diverging_epoch() -> None:
    log = MemoryRaftLog()
    fill(log, [1, 1, 3, 3])
    leader, log = elect(log=log, epoch=3)
    leader.poll(T0 + 0)
    # Follower wrote 2 entries of epoch 2 after offset 2 that the leader never had.
    response = leader.handle_request(T0 + 0, 2, fetch(2, leader.epoch, 4, 2))
    assert isinstance(response, FetchResponse)
    assert response.diverging_epoch is not None
    assert (response.diverging_epoch.epoch, response.diverging_epoch.end_offset) == (1, 2)
    assert response.records == ()
    # Fetch offset past the end of the follower's last epoch in the leader's log.
    response = leader.handle_request(T0 + 0, 2, fetch(2, leader.epoch, 3, 1))
    assert isinstance(response, FetchResponse) and response.diverging_epoch is not None
    assert (response.diverging_epoch.epoch, response.diverging_epoch.end_offset) == (1, 2)


def test_follower_truncates_on_diverging_epoch_and_refetches() -> None:
    log = MemoryRaftLog()
    fill(log, [1, 1, 2, 2])
    follower, _, _ = make(2, log=log, state=QuorumState(3, None, 1))
    out = follower.poll(0)
    (request,) = out
    assert isinstance(request.message, FetchRequest)
    assert (request.message.fetch_offset, request.message.last_fetched_epoch) == (4, 2)
    from pydmq.raft.messages import EpochEndOffset

    diverging = FetchResponse(0, 1, 3, high_watermark=2, diverging_epoch=EpochEndOffset(1, 2))
    follower.handle_response(1, 1, diverging, request.correlation_id)
    assert log.log_end_offset == 2
    (again,) = follower.poll(1)
    assert isinstance(again.message, FetchRequest)
    assert (again.message.fetch_offset, again.message.last_fetched_epoch) == (2, 1)
    records = (Entry(2, 3, b"n"),)
    follower.handle_response(
        2, 1, FetchResponse(0, 1, 3, high_watermark=3, records=records), again.correlation_id
    )
    assert log.log_end_offset == 3 and log.flushed_offset == 3
    assert follower.high_watermark == 3


def test_parked_fetch_completes_on_append_and_on_timeout() -> None:
    leader, log = elect()
    leader.poll(T0 + 0)
    end = log.log_end_offset
    # The first fetch at the end commits the leader change entry: answered at once with it.
    response = leader.handle_request(T0 + 0, 2, fetch(2, 1, end, 1, wait=500))
    assert isinstance(response, FetchResponse) and response.high_watermark == end
    assert leader.handle_request(T0 + 0, 2, fetch(2, 1, end, 1, wait=500)) is PARKED
    assert leader.complete_parked(T0 + 10) == []
    assert leader.next_deadline_ms() <= T0 + 500
    leader.append([b"a"])
    ((src, response),) = leader.complete_parked(T0 + 20)
    assert src == 2 and isinstance(response, FetchResponse)
    assert [e.payload for e in response.records] == [b"a"]
    leader.poll(T0 + 20)
    leader.handle_request(T0 + 25, 3, fetch(3, 1, end + 1, 1))  # commits "a"
    assert leader.handle_request(T0 + 30, 3, fetch(3, 1, end + 1, 1, wait=500)) is PARKED
    assert leader.complete_parked(T0 + 529) == []
    ((src, response),) = leader.complete_parked(T0 + 530)
    assert src == 3 and isinstance(response, FetchResponse) and response.records == ()


def test_parked_fetch_completes_when_the_high_watermark_moves() -> None:
    leader, log = elect(voters=(1, 2, 3, 4, 5))
    leader.poll(T0 + 0)
    end = log.log_end_offset
    assert leader.handle_request(T0 + 0, 2, fetch(2, 1, end, 1, wait=500)) is PARKED
    assert leader.high_watermark == 0  # the leader and voter 2 are not a majority of 5
    # Voter 3's fetch makes a majority: the high watermark moves, 2 must learn it.
    response = leader.handle_request(T0 + 5, 3, fetch(3, 1, end, 1, wait=500))
    assert isinstance(response, FetchResponse) and response.high_watermark == end
    ((src, response),) = leader.complete_parked(T0 + 5)
    assert src == 2 and isinstance(response, FetchResponse) and response.high_watermark == end


def test_stale_fetches_are_fenced_and_non_leaders_refuse() -> None:
    leader, _ = elect()
    response = leader.handle_request(T0 + 0, 2, fetch(2, 0, 0, 0))
    assert isinstance(response, FetchResponse)
    assert response.error_code == ErrorCode.FENCED_LEADER_EPOCH and response.leader_id == 1
    response = leader.handle_request(T0 + 0, 2, fetch(2, 5, 0, 0))
    assert isinstance(response, FetchResponse)
    assert response.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    follower, _, _ = make(2, state=QuorumState(1, None, 1))
    response = follower.handle_request(0, 3, fetch(3, 1, 0, 0))
    assert isinstance(response, FetchResponse)
    assert response.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and response.leader_id == 1


def test_check_quorum_resigns_a_leader_nobody_fetches_from() -> None:
    leader, _ = elect()
    leader.poll(T0 + 0)
    leader.handle_request(T0 + 1000, 2, fetch(2, 1, 0, 0))
    leader.poll(T0 + CONFIG.fetch_timeout_ms + 999)
    assert leader.is_leader
    out = leader.poll(T0 + CONFIG.fetch_timeout_ms + 1000)
    assert leader.role is Role.RESIGNED and leader.leader_id is None
    ends = [o for o in out if isinstance(o.message, EndQuorumEpochRequest)]
    assert sorted(o.dest for o in ends) == [2, 3]
    assert ends[0].message.preferred_successors[0] == 2  # type: ignore[union-attr]


def test_snapshot_fetch_when_below_the_leaders_log_start() -> None:
    leader, log = elect()
    leader.poll(T0 + 0)
    leader.append([b"a", b"b", b"c"])
    leader.poll(T0 + 1)
    for replica in (2, 3):
        leader.handle_request(T0 + 2, replica, fetch(replica, 1, 4, 1))
    assert leader.high_watermark == 4
    snap = leader.create_snapshot(3, [b"state"])
    assert snap == SnapshotId(3, 1) and log.log_start_offset == 3
    response = leader.handle_request(T0 + 3, 2, fetch(2, 1, 1, 1))
    assert isinstance(response, FetchResponse) and response.snapshot_id == snap

    follower_log = MemoryRaftLog()
    follower, _, _ = make(2, log=follower_log, state=QuorumState(1, None, 1))
    (out,) = follower.poll(0)
    follower.handle_response(0, 1, FetchResponse(0, 1, 1, snapshot_id=snap), out.correlation_id)
    while True:
        (out,) = follower.poll(1)
        if not isinstance(out.message, FetchSnapshotRequest):
            break
        chunk = leader.handle_request(
            T0 + 1,
            2,
            FetchSnapshotRequest(
                "c", 2, 1, out.message.snapshot_id, out.message.position, max_bytes=7
            ),
        )
        assert isinstance(chunk, FetchSnapshotResponse) and chunk.error_code == 0
        follower.handle_response(1, 1, chunk, out.correlation_id)
    assert isinstance(out.message, FetchRequest) and out.message.fetch_offset == 3
    assert follower_log.latest_snapshot() == snap and follower.high_watermark == 3
    assert follower.committed_snapshot_needed(0) == snap
    assert follower.load_snapshot(snap) == [b"state"]
    missing = leader.handle_request(1, 2, FetchSnapshotRequest("c", 2, 1, SnapshotId(2, 1), 0))
    assert isinstance(missing, FetchSnapshotResponse)
    assert missing.error_code == ErrorCode.SNAPSHOT_NOT_FOUND


def test_describe_quorum_and_read_committed() -> None:
    leader, _ = elect()
    leader.poll(T0 + 0)
    leader.append([b"a"])
    leader.poll(T0 + 5)
    leader.handle_request(T0 + 10, 2, fetch(2, 1, 2, 1))
    result = leader.describe_quorum()
    assert result.ok and result.leader_id == 1 and result.high_watermark == 2
    states = {s.replica_id: s for s in result.current_voters}
    assert states[1].log_end_offset == 2
    assert (states[2].log_end_offset, states[2].last_fetch_timestamp) == (2, T0 + 10)
    assert states[2].last_caught_up_timestamp == T0 + 10
    assert states[3].log_end_offset == -1 and states[3].last_fetch_timestamp == -1
    assert [e.offset for e in leader.read_committed(0, 10)] == [0, 1]
    assert [e.offset for e in leader.read_committed(1, 10)] == [1]
    assert leader.read_committed(2, 10) == []
    assert not leader.snapshot_due()
    with pytest.raises(ValueError):
        leader.create_snapshot(3, [])
    follower, _, _ = make(2)
    assert follower.describe_quorum().error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_constructor_rejects_non_voters() -> None:
    with pytest.raises(ValueError):
        make(4)
    with pytest.raises(ValueError):
        make(1, voters=(1, 1, 2))


def test_outbound_carries_correlation_ids() -> None:
    core, _, _ = make()
    core.poll(0)
    out = core.poll(core.next_deadline_ms())
    assert all(isinstance(o, Outbound) for o in out)
    assert len({o.correlation_id for o in out}) == len(out)
