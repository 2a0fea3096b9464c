"""Idempotent producer state (pydmq.producers.state): Kafka's ProducerStateManager rules."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pydmq.producers.state import (
    APPEND_OK,
    INVALID_PRODUCER_EPOCH,
    NUM_BATCHES_TO_RETAIN,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    AppendCheck,
    ProducerStateManager,
    ProducerStateSnapshotError,
    in_sequence,
)
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.records import BatchHeader, SimpleRecord, build_batch, parse_batch_header

INT32_MAX = 2**31 - 1
NOW = 1_700_000_000_000


def batch(
    pid: int = 1,
    epoch: int = 0,
    seq: int = 0,
    count: int = 1,
    *,
    ts: int = NOW,
    transactional: bool = False,
    control: bool = False,
    base_offset: int = 0,
) -> BatchHeader:
    """A real header, built and parsed (so last_sequence wraparound is Kafka's)."""
    data = build_batch(
        [SimpleRecord(None, b"v", (), ts)] * count,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=transactional,
        is_control=control,
        base_offset=base_offset,
    )
    return parse_batch_header(data)


class Log:
    """A leader's append path in miniature: check, assign offsets, update."""

    def __init__(self) -> None:
        self.state = ProducerStateManager()
        self.end = 0
        self.headers: list[BatchHeader] = []

    def produce(self, header: BatchHeader, now: int = NOW) -> tuple[AppendCheck, int]:
        check = self.state.check_and_prepare(header, now)
        if check.is_duplicate:
            assert check.duplicate_of is not None
            return check, check.duplicate_of.first_offset
        if check.error_code:
            return check, -1
        placed = replace(header, base_offset=self.end)
        self.state.update(placed, placed.base_offset, placed.last_offset, now)
        self.headers.append(placed)
        self.end = placed.next_offset
        return check, placed.base_offset


def test_no_producer_id_skips_checks() -> None:
    log = Log()
    for _ in range(3):
        check, _offset = log.produce(batch(pid=-1, epoch=-1, seq=-1))
        assert check is APPEND_OK
    assert len(log.state) == 0
    assert log.state.map_end_offset == 3


def test_in_sequence_batches_and_gap() -> None:
    log = Log()
    assert log.produce(batch(seq=0, count=3))[1] == 0
    assert log.produce(batch(seq=3, count=2))[1] == 3
    check, _ = log.produce(batch(seq=6))
    assert check.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert not check.is_ok and not check.is_duplicate
    assert "expected 5" in check.message
    assert log.produce(batch(seq=5))[1] == 5


def test_duplicates_within_last_five_batches_return_original_offsets() -> None:
    log = Log()
    offsets = [log.produce(batch(seq=2 * i, count=2))[1] for i in range(7)]
    assert offsets == [0, 2, 4, 6, 8, 10, 12]
    # batches 2..6 are the last 5: each retry answers with the original base offset
    for i in range(2, 7):
        check, offset = log.produce(batch(seq=2 * i, count=2))
        assert check.is_duplicate and check.error_code == 0
        assert check.duplicate_of is not None
        assert (check.duplicate_of.first_offset, check.duplicate_of.last_offset) == (
            2 * i,
            2 * i + 1,
        )
        assert offset == 2 * i
    assert log.end == 14  # nothing appended twice
    # the 6th batch back is forgotten: a retry of it is out of order
    check, _ = log.produce(batch(seq=2, count=2))
    assert check.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert len(log.state.last_entry(1).batches) == NUM_BATCHES_TO_RETAIN  # type: ignore[union-attr]


def test_partial_overlap_is_out_of_order_not_duplicate() -> None:
    log = Log()
    log.produce(batch(seq=0, count=4))
    check, _ = log.produce(batch(seq=0, count=2))
    assert check.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER


def test_unknown_producer_accepts_any_sequence() -> None:
    log = Log()
    check, _ = log.produce(batch(pid=42, epoch=5, seq=1234))
    assert check.is_ok
    check, _ = log.produce(batch(pid=42, epoch=5, seq=1236))
    assert check.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER


def test_epoch_bump_must_restart_at_zero() -> None:
    log = Log()
    log.produce(batch(epoch=0, seq=0, count=5))
    check, _ = log.produce(batch(epoch=1, seq=5))
    assert check.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert "new epoch" in check.message
    check, _ = log.produce(batch(epoch=1, seq=0))
    assert check.is_ok
    entry = log.state.last_entry(1)
    assert entry is not None and entry.producer_epoch == 1 and len(entry.batches) == 1


def test_old_epoch_is_fenced() -> None:
    log = Log()
    log.produce(batch(epoch=0, seq=0))
    log.produce(batch(epoch=1, seq=0))
    check, _ = log.produce(batch(epoch=0, seq=1))
    assert check.error_code == INVALID_PRODUCER_EPOCH
    # a retry of an old-epoch batch is not a duplicate either
    check, _ = log.produce(batch(epoch=0, seq=0))
    assert check.error_code == INVALID_PRODUCER_EPOCH


def test_sequence_wraps_at_int32_max() -> None:
    assert in_sequence(INT32_MAX, 0)
    assert not in_sequence(INT32_MAX, 1)
    assert not in_sequence(5, 7) and in_sequence(5, 6)
    log = Log()
    log.produce(batch(seq=INT32_MAX - 1, count=2))  # last sequence INT32_MAX
    header = batch(seq=0, count=3)
    assert log.produce(header)[0].is_ok
    # a batch that itself wraps: base INT32_MAX - 1, 4 records -> last sequence 2
    log2 = Log()
    log2.produce(batch(seq=INT32_MAX - 5, count=4))
    wrapping = batch(seq=INT32_MAX - 1, count=4)
    assert wrapping.last_sequence == 1
    assert log2.produce(wrapping)[0].is_ok
    assert log2.produce(batch(seq=INT32_MAX - 1, count=4))[0].is_duplicate
    assert log2.produce(batch(seq=2))[0].is_ok


def test_independent_producers() -> None:
    log = Log()
    log.produce(batch(pid=1, seq=0))
    log.produce(batch(pid=2, seq=0))
    assert log.produce(batch(pid=1, seq=1))[0].is_ok
    assert log.produce(batch(pid=2, seq=2))[0].error_code == OUT_OF_ORDER_SEQUENCE_NUMBER


def test_control_batches_check_epoch_only_and_clear_batches_on_bump() -> None:
    log = Log()
    log.produce(batch(epoch=3, seq=0, transactional=True))
    assert log.state.first_unstable_offset() == 0
    assert log.state.check_and_prepare(batch(epoch=2, seq=-1, control=True), NOW).error_code == (
        INVALID_PRODUCER_EPOCH
    )
    marker = batch(epoch=4, seq=-1, control=True)
    assert log.produce(marker)[0].is_ok
    entry = log.state.last_entry(1)
    assert entry is not None and entry.producer_epoch == 4 and not entry.batches
    assert log.state.first_unstable_offset() is None
    # same epoch, no batches: the next sequence must be 0
    assert log.produce(batch(epoch=4, seq=3))[0].error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.produce(batch(epoch=4, seq=0))[0].is_ok


def test_complete_txn() -> None:
    state = ProducerStateManager()
    header = batch(epoch=1, seq=0, count=2, transactional=True, base_offset=10)
    state.update(header, 10, 11, NOW)
    state.update(batch(pid=2, epoch=0, seq=0, transactional=True), 12, 12, NOW)
    assert state.first_unstable_offset() == 10
    assert state.complete_txn(1, 0, 5, 13, NOW) == INVALID_PRODUCER_EPOCH
    assert state.complete_txn(1, 1, 5, 13, NOW) == 0
    assert state.first_unstable_offset() == 12
    assert state.complete_txn(1, 1, 4, 14, NOW) == 52  # TRANSACTION_COORDINATOR_FENCED
    assert state.complete_txn(2, 0, 5, 14, NOW) == 0
    assert state.first_unstable_offset() is None
    assert state.map_end_offset == 15
    assert state.complete_txn(9, 0, 0, 15, NOW) == 0  # unknown producer: state created
    assert state.last_entry(9) is not None


def test_remove_expired() -> None:
    state = ProducerStateManager()
    state.update(batch(pid=1, ts=1000), 0, 0, 1000)
    state.update(batch(pid=2, ts=5000), 1, 1, 5000)
    state.update(batch(pid=3, ts=1000, transactional=True), 2, 2, 1000)  # ongoing txn
    assert state.remove_expired(3000, 2000) == [1]
    assert sorted(state.producers) == [2, 3]
    assert state.remove_expired(NOW) == [2]  # default producer.id.expiration.ms, one day
    assert sorted(state.producers) == [3]


def test_missing_timestamp_falls_back_to_now() -> None:
    state = ProducerStateManager()
    state.update(batch(ts=-1), 0, 0, 777)
    entry = state.last_entry(1)
    assert entry is not None and entry.last_timestamp == 777


def test_truncate_to() -> None:
    log = Log()
    for i in range(4):
        log.produce(batch(pid=1, seq=i))
    log.produce(batch(pid=2, seq=0, transactional=True))  # offset 4
    log.state.truncate_to(2)
    entry = log.state.last_entry(1)
    assert entry is not None and [b.first_offset for b in entry.batches] == [0, 1]
    assert log.state.last_entry(2) is None
    assert log.state.map_end_offset == 2
    assert log.state.first_unstable_offset() is None
    assert log.state.check_and_prepare(batch(pid=1, seq=2), NOW).is_ok


def _random_log(seed: int, n: int = 60) -> Log:
    rng = random.Random(seed)
    log = Log()
    seqs: dict[int, int] = {}
    epochs: dict[int, int] = {}
    for _ in range(n):
        pid = rng.choice([-1, 1, 2, 3])
        if pid == -1:
            log.produce(batch(pid=-1, epoch=-1, seq=-1, count=rng.randint(1, 3)))
            continue
        if rng.random() < 0.1:
            epochs[pid] = epochs.get(pid, 0) + 1
            seqs[pid] = 0
        count = rng.randint(1, 4)
        seq = seqs.get(pid, 0)
        check, _ = log.produce(
            batch(
                pid=pid, epoch=epochs.get(pid, 0), seq=seq, count=count, ts=NOW + rng.randint(0, 99)
            )
        )
        assert check.is_ok
        seqs[pid] = seq + count
        if rng.random() < 0.2:  # a retry
            assert log.produce(batch(pid=pid, epoch=epochs.get(pid, 0), seq=seq, count=count))[
                0
            ].is_duplicate
    return log


def _state_view(state: ProducerStateManager) -> object:
    return (
        state.map_end_offset,
        {
            pid: (e.producer_epoch, list(e.batches), e.current_txn_first_offset, e.last_timestamp)
            for pid, e in state.producers.items()
        },
    )


@given(st.integers(0, 10_000))
@settings(max_examples=25, deadline=None)
def test_rebuild_equals_incremental(seed: int) -> None:
    log = _random_log(seed)
    rebuilt = ProducerStateManager()
    rebuilt.rebuild_from(log.headers)
    assert _state_view(rebuilt) == _state_view(log.state)
    # replaying again is a no-op (already-applied batches are skipped)
    rebuilt.rebuild_from(log.headers)
    assert _state_view(rebuilt) == _state_view(log.state)


@given(st.integers(0, 10_000))
@settings(max_examples=25, deadline=None)
def test_snapshot_round_trip_and_resume(seed: int) -> None:
    log = _random_log(seed)
    cut = len(log.headers) // 2
    partial = ProducerStateManager()
    partial.rebuild_from(log.headers[:cut])
    image = partial.snapshot()
    restored = ProducerStateManager()
    resume = restored.load_snapshot(image, up_to_offset=log.end)
    assert _state_view(restored) == _state_view(partial)
    assert resume == partial.map_end_offset
    restored.rebuild_from(log.headers)
    assert _state_view(restored) == _state_view(log.state)


def test_snapshot_with_transaction_state_round_trip() -> None:
    state = ProducerStateManager()
    state.update(batch(pid=5, epoch=2, seq=0, transactional=True), 0, 0, NOW)
    state.complete_txn(6, 1, 9, 1, NOW)
    restored = ProducerStateManager()
    restored.load_snapshot(state.snapshot(), up_to_offset=100)
    assert _state_view(restored) == _state_view(state)
    assert restored.last_entry(6).coordinator_epoch == 9  # type: ignore[union-attr]
    assert restored.first_unstable_offset() == 0


def test_snapshot_loaded_beyond_log_end_is_truncated() -> None:
    log = Log()
    for i in range(5):
        log.produce(batch(seq=i))
    restored = ProducerStateManager()
    assert restored.load_snapshot(log.state.snapshot(), up_to_offset=3) == 3
    entry = restored.last_entry(1)
    assert entry is not None and [b.last_seq for b in entry.batches] == [0, 1, 2]


def test_corrupt_snapshots_are_rejected() -> None:
    log = Log()
    log.produce(batch(seq=0))
    image = log.state.snapshot()
    for bad in (
        b"",
        image[:10],
        b"XXXX" + image[4:],
        image[:4] + b"\x00\x09" + image[6:],  # unknown version
        image[:-1] + bytes([image[-1] ^ 1]),  # CRC mismatch
    ):
        with pytest.raises(ProducerStateSnapshotError):
            ProducerStateManager().load_snapshot(bad, 100)
    empty = ProducerStateManager()
    empty.load_snapshot(ProducerStateManager().snapshot(), 0)
    assert len(empty) == 0 and empty.map_end_offset == 0


def test_check_does_not_mutate_state() -> None:
    state = ProducerStateManager()
    state.update(batch(seq=0), 0, 0, NOW)
    before = state.snapshot()
    for header in (batch(seq=1), batch(seq=9), batch(epoch=1, seq=0), batch(seq=0)):
        state.check_and_prepare(header, NOW)
    assert state.snapshot() == before


def test_coordinator_transactional_batches_without_sequence_check_only_the_epoch() -> None:
    """TxnOffsetCommit offsets in ``__consumer_offsets``: the group coordinator appends
    transactional batches with no sequence (Kafka's coordinator origin): every one of them,
    then a new epoch's, is accepted; an older epoch is fenced."""
    log = Log()
    assert log.produce(batch(pid=9, epoch=3, seq=-1, transactional=True))[0] is APPEND_OK
    assert log.produce(batch(pid=9, epoch=3, seq=-1, transactional=True))[0] is APPEND_OK
    log.produce(batch(pid=9, epoch=3, seq=-1, transactional=True, control=True))
    assert log.produce(batch(pid=9, epoch=4, seq=-1, transactional=True))[0] is APPEND_OK
    check, _ = log.produce(batch(pid=9, epoch=3, seq=-1, transactional=True))
    assert check.error_code == INVALID_PRODUCER_EPOCH


def test_an_open_transaction_wants_transactional_batches_at_any_epoch() -> None:
    state = ProducerStateManager()
    state.update(batch(seq=0, transactional=True), 0, 0, NOW)
    assert state.ongoing_txns == {1: 0}
    assert state.check_and_prepare(batch(seq=1), NOW).error_code == ErrorCode.INVALID_TXN_STATE
    assert state.check_and_prepare(batch(epoch=1), NOW).error_code == ErrorCode.INVALID_TXN_STATE
    assert state.check_and_prepare(batch(seq=1, transactional=True), NOW) is APPEND_OK
    # the epoch and sequence checks come first, as Kafka's
    assert state.check_and_prepare(batch(seq=5), NOW).error_code == OUT_OF_ORDER_SEQUENCE_NUMBER


def test_markers_are_fenced_by_producer_and_coordinator_epochs() -> None:
    state = ProducerStateManager()
    state.update(batch(epoch=2, transactional=True), 0, 0, NOW)
    assert state.complete_txn(1, 2, 5, 1, NOW) == ErrorCode.NONE
    assert state.ongoing_txns == {}
    assert state.check_end_txn(1, 1, 5) == INVALID_PRODUCER_EPOCH
    assert state.check_end_txn(1, 2, 4) == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert state.check_end_txn(1, 3, 5) == ErrorCode.NONE
    assert state.check_end_txn(99, 0, 0) == ErrorCode.NONE  # no state: accepted


def test_a_snapshot_keeps_open_transactions() -> None:
    state = ProducerStateManager()
    state.update(batch(pid=1, transactional=True), 3, 3, NOW)
    state.update(batch(pid=2, seq=0), 4, 4, NOW)
    restored = ProducerStateManager()
    restored.load_snapshot(state.snapshot(), 10)
    assert restored.ongoing_txns == {1: 3}
    assert restored.first_unstable_offset() == 3
    restored.truncate_to(3)  # the transaction's first batch goes with the tail
    assert restored.ongoing_txns == {}


def test_verification_guards() -> None:
    """KIP-890's guard: shared by a producer's verifications in flight, removed by its marker
    (applied or replicated) and by its transactional data batch (Kafka's rule), never by
    another producer's."""
    state = ProducerStateManager()
    guard = state.start_verification(1, 0, 0)
    assert state.start_verification(1, 0, 0) is guard
    other = state.start_verification(2, 0, 0)
    assert state.is_verified(1, guard) and state.is_verified(2, other)
    assert state.complete_txn(1, 0, 0, 10, NOW) == 0
    assert not state.is_verified(1, guard)
    assert state.is_verified(2, other)
    state.update(batch(pid=2, control=True, base_offset=11), 11, 11, NOW)
    assert not state.is_verified(2, other)
    opened = state.start_verification(3, 0, 0)
    state.update(batch(pid=4, transactional=True, base_offset=12), 12, 12, NOW)
    assert state.is_verified(3, opened)
    state.update(batch(pid=3, base_offset=13), 13, 13, NOW)  # not transactional
    assert state.is_verified(3, opened)
    state.update(batch(pid=3, seq=1, transactional=True, base_offset=14), 14, 14, NOW)
    assert not state.is_verified(3, opened)
    assert state.verification_guards == {}


def test_has_ongoing_txn_is_per_epoch() -> None:
    state = ProducerStateManager()
    assert not state.has_ongoing_txn(1, 0)
    state.update(batch(pid=1, epoch=0, transactional=True), 0, 0, NOW)
    assert state.has_ongoing_txn(1, 0)
    assert not state.has_ongoing_txn(1, 1)
    assert state.complete_txn(1, 0, 0, 1, NOW) == 0
    assert not state.has_ongoing_txn(1, 0)


def test_a_marker_at_the_bumped_epoch_starts_the_next_transaction_at_sequence_0() -> None:
    """Transactions v2 (KIP-890 part 2) ends each transaction with a marker at the epoch the
    coordinator bumped: the partition takes it, and the producer's next transaction at that
    epoch starts from sequence 0 (an older epoch is fenced)."""
    log = Log()
    for seq in range(3):
        check, _ = log.produce(batch(pid=1, epoch=4, seq=seq, transactional=True))
        assert check.error_code == 0
    assert log.state.complete_txn(1, 5, 0, log.end, NOW) == 0
    log.end += 1
    check, _ = log.produce(batch(pid=1, epoch=5, seq=0, transactional=True))
    assert check.error_code == 0
    assert log.state.has_ongoing_txn(1, 5)
    check, _ = log.produce(batch(pid=1, epoch=4, seq=3, transactional=True))
    assert check.error_code == INVALID_PRODUCER_EPOCH


def test_transactions_v2_markers_must_carry_a_bumped_epoch() -> None:
    """KIP-890: the coordinator bumps the epoch before writing the markers, so a TV2 marker at
    the epoch of the producer's open transaction is late (it would end the next transaction)
    and is fenced; at the current epoch with nothing open it is a retry of a written marker
    (accepted, as Kafka's KAFKA-19999); transactions v1 markers keep the old rule."""
    state = ProducerStateManager()
    state.update(batch(epoch=0, seq=0, transactional=True), 0, 0, NOW)
    assert state.check_end_txn(1, 0, 0, transaction_version=2) == INVALID_PRODUCER_EPOCH
    assert state.check_end_txn(1, 0, 0, transaction_version=0) == 0  # v1: the same epoch
    assert state.complete_txn(1, 1, 0, 1, NOW) == 0  # the marker at the bumped epoch 1
    assert state.check_end_txn(1, 1, 0, transaction_version=2) == 0  # its retry
    # the next transaction, at the epoch the EndTxn returned
    state.update(batch(epoch=1, seq=0, transactional=True, base_offset=2), 2, 2, NOW)
    assert state.txn_first_offset(1) == 2
    # a late marker of the previous transaction (epoch 1) must not end it
    assert state.check_end_txn(1, 1, 0, transaction_version=2) == INVALID_PRODUCER_EPOCH
    assert state.check_end_txn(1, 0, 0, transaction_version=2) == INVALID_PRODUCER_EPOCH
    assert state.txn_first_offset(1) == 2
    assert state.check_end_txn(1, 2, 0, transaction_version=2) == 0
    # a zombie batch of the epoch before the marker is fenced
    log = Log()
    assert log.produce(batch(epoch=0, seq=0, transactional=True))[0].is_ok
    assert log.produce(batch(epoch=1, seq=-1, control=True))[0].is_ok
    assert log.produce(batch(epoch=0, seq=1, transactional=True))[0].error_code == (
        INVALID_PRODUCER_EPOCH
    )
    # the next transaction at the bumped epoch starts at sequence 0
    assert log.produce(batch(epoch=1, seq=0, transactional=True))[0].is_ok


def test_a_transactions_v2_guard_outlives_the_previous_transactions_marker() -> None:
    """Kafka's isV2NextTransactionStarted: under transactions v2 the coordinator writes the
    previous transaction's marker at the epoch it bumped, the epoch of the producer's next
    transaction. A guard of a transactions v2 verification at that epoch is the next
    transaction's first batch, verified while the marker was written: the marker leaves it. A
    marker at another epoch (a fence, an abort of a zombie), or any marker of a transactions
    v1 guard, removes it; so does the producer's transactional batch."""
    state = ProducerStateManager()
    state.update(batch(pid=1, epoch=0, transactional=True, base_offset=0), 0, 0, NOW)
    guard = state.start_verification(1, 1, 0, supports_epoch_bump=True)
    assert state.complete_txn(1, 1, 0, 1, NOW) == 0  # the previous transaction's marker
    assert state.is_verified(1, guard)
    state.update(batch(pid=1, epoch=1, transactional=True, base_offset=2), 2, 2, NOW)
    assert not state.is_verified(1, guard)  # its transaction is open here now
    fenced = state.start_verification(2, 1, 0, supports_epoch_bump=True)
    assert state.complete_txn(2, 2, 0, 3, NOW) == 0  # aborted at a newer epoch
    assert not state.is_verified(2, fenced)
    v1 = state.start_verification(3, 1, 0)
    state.update(batch(pid=3, epoch=1, control=True, base_offset=4), 4, 4, NOW)
    assert not state.is_verified(3, v1)
    assert state.verification_guards == {}


def test_a_guard_keeps_the_first_verified_batch_first() -> None:
    """Kafka's checkSequence while a verification is in flight: a batch may not start above
    the lowest sequence verified (it would overtake the first batch, refused or still
    waiting), and a transactions v2 producer with no batch here starts at 0; both
    OUT_OF_ORDER_SEQUENCE_NUMBER, which the client retries behind its first batch."""
    state = ProducerStateManager()
    guard = state.start_verification(1, 0, 5, supports_epoch_bump=True)
    assert state.start_verification(1, 0, 0, supports_epoch_bump=True) is guard
    assert (guard.producer_epoch, guard.lowest_sequence) == (0, 0)
    later = state.check_and_prepare(batch(pid=1, epoch=0, seq=5, transactional=True), NOW)
    assert later.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
    first = state.check_and_prepare(batch(pid=1, epoch=0, seq=0, transactional=True), NOW)
    assert first.is_ok
    # transactions v1: a producer unknown here may start anywhere at or below the lowest
    state.start_verification(2, 0, 7)
    assert state.check_and_prepare(batch(pid=2, seq=7, transactional=True), NOW).is_ok
    refused = state.check_and_prepare(batch(pid=2, seq=9, transactional=True), NOW)
    assert refused.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
    # a new epoch restarts the lowest sequence; a known producer past its marker
    state.update(batch(pid=3, epoch=0, seq=0, transactional=True, base_offset=0), 0, 0, NOW)
    assert state.complete_txn(3, 1, 0, 1, NOW) == 0
    v2 = state.start_verification(3, 1, 0, supports_epoch_bump=True)
    v2.maybe_update_lowest_sequence_and_epoch(4, 2)
    assert (v2.producer_epoch, v2.lowest_sequence) == (2, 4)
    gap = state.check_and_prepare(batch(pid=3, epoch=2, seq=4, transactional=True), NOW)
    assert gap.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER  # no batch here: starts at 0
