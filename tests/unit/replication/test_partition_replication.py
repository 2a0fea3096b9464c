"""Partition: leader state (follower positions, HW, ISR proposals), follower side, single node."""

from __future__ import annotations

import uuid

import pytest
from replica_support import POLICY, TP, batch, new_log, partition

from pydmq.protocol.errors import ErrorCode
from pydmq.replication.partition import NotEnoughReplicasError, NotLeaderOrFollowerError, Partition
from pydmq.replication.strategy import QuorumStrategy


def leader(**kwargs: object) -> Partition:
    p = partition(1, **kwargs)  # type: ignore[arg-type]
    assert p.make_leader(1, 1, [1, 2, 3], [1, 2, 3], now_ms=0)
    return p


def test_single_node_partition_advances_hw_on_append() -> None:
    p = Partition(
        tp=TP,
        topic_id=uuid.UUID(int=1),
        log=new_log(),
        leader_id=7,
        leader_epoch=0,
        replicas=[7],
        isr=[7],
        policy=POLICY,
        min_insync_replicas=1,
    )
    assert p.is_leader
    info = p.append_records_to_leader(batch(3), required_acks=-1)
    assert (info.first_offset, info.last_offset) == (0, 2)
    assert p.high_watermark == 3
    assert p.acks_all_satisfied(3) == (True, ErrorCode.NONE)


def test_hw_waits_for_every_isr_member() -> None:
    p = leader()
    p.append_records_to_leader(batch(3))
    assert p.high_watermark == 0
    assert not p.update_follower_fetch_state(2, 3, now_ms=10)
    assert p.acks_all_satisfied(3) == (False, ErrorCode.NONE)
    assert p.update_follower_fetch_state(3, 2, now_ms=10)
    assert p.high_watermark == 2
    assert p.update_follower_fetch_state(3, 3, now_ms=10)
    assert p.high_watermark == 3
    assert p.acks_all_satisfied(3) == (True, ErrorCode.NONE)


def test_unknown_replica_and_follower_fetches_are_ignored() -> None:
    p = leader()
    assert not p.update_follower_fetch_state(9, 0, now_ms=0)
    f = partition(2)
    f.make_follower(1, 1, 1, [1, 2, 3], [1, 2, 3])
    assert not f.update_follower_fetch_state(3, 0, now_ms=0)


def test_acks_all_needs_the_minimum_isr_before_appending() -> None:
    p = partition(1, min_isr=2)
    p.make_leader(1, 1, [1, 2, 3], [1], now_ms=0)
    with pytest.raises(NotEnoughReplicasError) as raised:
        p.append_records_to_leader(batch(1), required_acks=-1)
    assert raised.value.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert p.log.log_end_offset == 0
    p.append_records_to_leader(batch(1), required_acks=1)  # acks=1 is not checked
    assert p.log.log_end_offset == 1


def test_quorum_minimum_is_a_majority_whatever_the_config() -> None:
    p = partition(1, strategy=QuorumStrategy(), min_isr=1)
    p.make_leader(1, 1, [1, 2, 3], [1], now_ms=0)
    assert p.effective_min_insync_replicas == 2
    with pytest.raises(NotEnoughReplicasError):
        p.append_records_to_leader(batch(1), required_acks=-1)


def test_not_enough_replicas_after_append_when_the_isr_shrank() -> None:
    p = partition(1, min_isr=2, lag_ms=100)
    p.make_leader(1, 1, [1, 2], [1, 2], now_ms=0)
    p.append_records_to_leader(batch(1), required_acks=-1)
    assert p.isr_change_proposal(now_ms=500) == [1]
    p.isr_change_sent([1])
    assert p.acks_all_satisfied(1) == (False, ErrorCode.NONE)  # still counting broker 2
    assert p.isr_change_committed([1], 2)
    assert p.acks_all_satisfied(1) == (True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)


def test_produce_to_a_follower_is_refused() -> None:
    f = partition(2)
    f.make_follower(1, 1, 1, [1, 2], [1, 2])
    with pytest.raises(NotLeaderOrFollowerError):
        f.append_records_to_leader(batch(1))
    assert f.acks_all_satisfied(0) == (True, ErrorCode.NOT_LEADER_OR_FOLLOWER)


def test_shrink_after_lag_and_pending_shrink_keeps_counting_the_old_isr() -> None:
    p = leader(lag_ms=100)
    p.append_records_to_leader(batch(2))
    p.update_follower_fetch_state(2, 2, now_ms=50)
    assert p.isr_change_proposal(now_ms=100) is None  # 3 is within its lag
    proposal = p.isr_change_proposal(now_ms=101)
    assert proposal == [1, 2]
    p.isr_change_sent(proposal)
    assert p.isr_change_proposal(now_ms=200) is None  # one change in flight
    assert p.maximal_isr == [1, 2, 3]
    assert p.high_watermark == 0  # 3 still counts until the controller commits
    assert p.isr_change_committed([1, 2], 2)
    assert (p.isr, p.partition_epoch, p.high_watermark) == ([1, 2], 2, 2)


def test_quorum_never_proposes_shrinking_below_a_majority() -> None:
    p = leader(strategy=QuorumStrategy(), lag_ms=100)
    p.append_records_to_leader(batch(1))
    assert p.isr_change_proposal(now_ms=1000) is None  # both followers lag: [1] is too small
    p.update_follower_fetch_state(2, 1, now_ms=1000)
    assert p.isr_change_proposal(now_ms=1000) == [1, 2]


def test_a_follower_catching_up_is_caught_up_at_its_previous_fetch_time() -> None:
    p = leader(lag_ms=100)
    p.append_records_to_leader(batch(1))
    p.update_follower_fetch_state(2, 0, now_ms=90)  # behind: not caught up at 90
    p.append_records_to_leader(batch(1))
    p.update_follower_fetch_state(2, 1, now_ms=180)  # reached the LEO seen at 90
    assert p.remote_replicas[2].last_caught_up_time_ms == 90
    p.update_follower_fetch_state(3, 2, now_ms=180)
    assert p.isr_change_proposal(now_ms=190) is None
    assert p.isr_change_proposal(now_ms=191) == [1, 3]


def test_expansion_needs_the_hw_and_the_epoch_start() -> None:
    log = new_log()
    log.append_as_leader(batch(2), 0, POLICY)
    p = partition(1, log=log)
    p.make_leader(1, 1, [1, 2, 3], [1, 2], now_ms=0)
    assert p.leader_epoch_start_offset == 2
    p.append_records_to_leader(batch(2))
    p.update_follower_fetch_state(2, 4, now_ms=0)
    assert p.high_watermark == 4
    p.update_follower_fetch_state(3, 3, now_ms=0)
    assert p.isr_change_proposal(now_ms=0) is None  # below the HW
    p.update_follower_fetch_state(3, 4, now_ms=0)
    assert p.isr_change_proposal(now_ms=0) == [1, 2, 3]
    p.isr_change_sent([1, 2, 3])
    p.append_records_to_leader(batch(1))
    p.update_follower_fetch_state(2, 5, now_ms=0)
    assert p.high_watermark == 4  # a pending expansion already counts broker 3
    p.update_follower_fetch_state(3, 5, now_ms=0)
    assert p.high_watermark == 5


def test_expansion_not_resent_for_a_follower_that_fell_behind() -> None:
    """Sim seed 51523 (quorum): an expansion proposed while broker 3 was caught up, resent
    after 3 restarted without its unflushed tail, made the controller put a replica lacking
    committed records into the ISR. The resend asks for the committed ISR instead."""
    log = new_log()
    p = partition(1, log=log)
    p.make_leader(1, 1, [1, 2, 3], [1, 2], now_ms=0)
    p.append_records_to_leader(batch(4))
    p.update_follower_fetch_state(2, 4, now_ms=0, broker_epoch=1)
    p.update_follower_fetch_state(3, 4, now_ms=0, broker_epoch=1)
    assert p.high_watermark == 4
    assert p.isr_change_proposal(now_ms=0) == [1, 2, 3]
    p.isr_change_sent([1, 2, 3])
    p.isr_change_failed(maybe_applied=True)
    assert p.isr_change_proposal(now_ms=0) == [1, 2, 3]  # still caught up: resent as it was
    p.update_follower_fetch_state(3, 0, now_ms=1, broker_epoch=2)  # restarted, tail lost
    assert p.isr_change_proposal(now_ms=1) == [1, 2]
    p.isr_change_sent([1, 2])
    assert 3 in p.maximal_isr  # the first proposal may have been applied: keep counting it


def test_failed_proposal_resent_when_it_may_have_been_applied() -> None:
    p = leader(lag_ms=10)
    p.append_records_to_leader(batch(1))
    p.update_follower_fetch_state(2, 1, now_ms=100)
    p.isr_change_sent(p.isr_change_proposal(now_ms=100) or [])
    p.isr_change_failed()  # timeout: unknown outcome
    assert p.maximal_isr == [1, 2, 3]
    assert p.isr_change_proposal(now_ms=100) == [1, 2]
    p.isr_change_sent([1, 2])
    p.isr_change_failed(maybe_applied=False)  # e.g. INELIGIBLE_REPLICA
    assert p.pending_isr is None and p.maximal_isr == [1, 2, 3]


def test_leader_and_isr_states_not_newer_are_ignored() -> None:
    p = leader(lag_ms=10)
    p.append_records_to_leader(batch(1))
    p.update_follower_fetch_state(2, 1, now_ms=100)
    p.isr_change_sent([1, 2])
    # a resend of the applied state must not drop the in-flight proposal
    assert not p.make_leader(1, 1, [1, 2, 3], [1, 2, 3], now_ms=100)
    assert p.pending_isr == [1, 2]
    assert not p.make_follower(2, 0, 5, [1, 2, 3], [1, 2, 3])  # older leader epoch
    assert not p.isr_change_committed([1, 2], 1)  # not newer
    # a newer partition epoch from the controller settles it
    assert not p.make_leader(1, 2, [1, 2, 3], [1, 2], now_ms=100)
    assert p.pending_isr is None and p.isr == [1, 2] and p.high_watermark == 1


def test_stale_broker_epoch_fetch_is_ignored() -> None:
    p = leader()
    p.append_records_to_leader(batch(1))
    p.update_follower_fetch_state(2, 1, now_ms=0, broker_epoch=5)
    assert not p.update_follower_fetch_state(2, 0, now_ms=0, broker_epoch=4)
    assert p.remote_replicas[2].log_end_offset == 1
    assert p.remote_replicas[2].broker_epoch == 5


def test_new_leader_does_not_know_followers_and_keeps_its_hw() -> None:
    log = new_log()
    log.append_as_leader(batch(3), 0, POLICY)
    log.update_high_watermark(2)
    p = partition(1, log=log)
    assert p.make_leader(1, 1, [1, 2], [1, 2], now_ms=0)
    assert p.remote_replicas[2].log_end_offset == -1
    assert p.high_watermark == 2
    assert log.leader_epochs[-1] == (1, 3)


def test_follower_appends_the_leaders_batches_unchanged() -> None:
    f = partition(2)
    assert f.make_follower(1, 3, 1, [1, 2], [1, 2])
    assert not f.make_follower(1, 3, 1, [1, 2], [1, 2])  # the same state again
    data = bytes(batch(2, base_offset=0, epoch=1)) + bytes(batch(3, base_offset=2, epoch=3))
    info = f.append_records_as_follower(memoryview(data))
    assert info is not None and (info.first_offset, info.last_offset) == (0, 4)
    assert f.log.leader_epochs == [(1, 0), (3, 2)]
    headers = list(f.log.engine_log.batch_headers(0))
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(0, 1), (2, 3)]
    assert f.update_follower_high_watermark(9)
    assert f.high_watermark == 5  # capped by its own log end offset
    assert not f.update_follower_high_watermark(3)  # never backwards
    assert f.high_watermark == 5
    assert f.last_offset_for_epoch(1) == (1, 2)
    assert f.last_offset_for_epoch(3) == (3, 5)


def test_follower_truncation_and_becoming_leader() -> None:
    f = partition(2)
    f.make_follower(1, 3, 1, [1, 2], [1, 2])
    f.append_records_as_follower(batch(2, base_offset=0, epoch=1))
    f.append_records_as_follower(batch(2, base_offset=2, epoch=3))
    assert f.truncate_to(2)
    assert f.log.log_end_offset == 2 and f.log.leader_epochs == [(1, 0)]
    assert f.make_leader(4, 2, [1, 2], [2], now_ms=0)
    assert f.log.leader_epochs == [(1, 0), (4, 2)]
    assert f.high_watermark == 2  # ISR is itself alone


# -- log start offsets: the low watermark of DeleteRecords ------------------------------------
def test_low_watermark_is_the_smallest_log_start_of_leader_and_isr() -> None:
    p = leader()
    p.append_records_to_leader(batch(10))
    for follower in (2, 3):
        p.update_follower_fetch_state(follower, 10, now_ms=0, log_start_offset=0)
    assert p.high_watermark == 10
    assert p.log.maybe_increment_log_start_offset(5)
    assert p.low_watermark() == 0
    assert p.delete_records_satisfied(5) == (False, ErrorCode.NONE, 0)
    p.update_follower_fetch_state(2, 10, now_ms=1, log_start_offset=5)
    assert p.low_watermark() == 0  # broker 3 still has everything
    p.update_follower_fetch_state(3, 10, now_ms=1, log_start_offset=5)
    assert p.low_watermark() == 5
    assert p.delete_records_satisfied(5) == (True, ErrorCode.NONE, 5)
    assert p.delete_records_satisfied(3) == (True, ErrorCode.NONE, 5)


def test_a_follower_log_start_never_exceeds_its_log_end_nor_moves_back() -> None:
    p = leader()
    p.append_records_to_leader(batch(10))
    p.update_follower_fetch_state(2, 4, now_ms=0, log_start_offset=7)
    assert p.remote_replicas[2].log_start_offset == 4  # capped by its fetch offset
    p.update_follower_fetch_state(2, 10, now_ms=0, log_start_offset=6)
    assert p.remote_replicas[2].log_start_offset == 6
    p.update_follower_fetch_state(2, 10, now_ms=0, log_start_offset=2)
    assert p.remote_replicas[2].log_start_offset == 6  # never back
    p.update_follower_fetch_state(2, 10, now_ms=0)  # no log start sent: unchanged
    assert p.remote_replicas[2].log_start_offset == 6


def test_low_watermark_counts_isr_members_and_alive_replicas_only() -> None:
    p = partition(1)
    p.make_leader(1, 1, [1, 2, 3], [1, 2], now_ms=0)
    p.append_records_to_leader(batch(10))
    p.update_follower_fetch_state(2, 10, now_ms=0, log_start_offset=10)
    p.log.maybe_increment_log_start_offset(10)
    # Broker 3 is out of the ISR and has never reported a log start.
    assert p.low_watermark() == 10
    assert p.low_watermark(lambda broker: broker != 3) == 10
    assert p.low_watermark(lambda broker: True) == -1  # alive: Kafka counts it
    # An ISR member counts even when its broker is not alive (the controller may elect it).
    p.update_follower_fetch_state(3, 10, now_ms=0, log_start_offset=3)
    assert p.low_watermark(lambda broker: True) == 3
    assert p.low_watermark(lambda broker: False) == 10
    p.isr_change_committed([1, 2, 3], 2)
    assert p.isr == [1, 2, 3]
    assert p.low_watermark(lambda broker: False) == 3


def test_a_new_leader_does_not_know_its_followers_log_starts() -> None:
    f = partition(2)
    f.make_follower(1, 1, 1, [1, 2, 3], [1, 2, 3])
    f.append_records_as_follower(batch(5, base_offset=0, epoch=1))
    assert f.delete_records_satisfied(0) == (True, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)
    f.make_leader(2, 2, [1, 2, 3], [1, 2, 3], now_ms=0)
    assert f.low_watermark() == -1
    f.update_follower_fetch_state(1, 5, now_ms=0, log_start_offset=0)
    f.update_follower_fetch_state(3, 5, now_ms=0, log_start_offset=0)
    assert f.low_watermark() == 0


def test_follower_takes_the_leaders_log_start_up_to_its_log_end() -> None:
    f = partition(2)
    f.make_follower(1, 1, 1, [1, 2], [1, 2])
    f.append_records_as_follower(batch(5, base_offset=0, epoch=1))
    assert f.update_follower_log_start_offset(3)
    assert f.log.log_start_offset == 3
    assert not f.update_follower_log_start_offset(2)  # never back
    assert f.log.log_start_offset == 3
    assert f.update_follower_log_start_offset(8)  # the leader has more: own log end
    assert f.log.log_start_offset == 5 and f.log.log_end_offset == 5
    f.append_records_as_follower(batch(5, base_offset=5, epoch=1))
    assert f.update_follower_log_start_offset(8)
    assert f.log.log_start_offset == 8
    p = leader()
    p.append_records_to_leader(batch(3))
    assert not p.update_follower_log_start_offset(2)  # a leader moves its own
    assert p.log.log_start_offset == 0
