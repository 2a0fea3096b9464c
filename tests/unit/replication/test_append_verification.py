"""Partition verification in ``ReplicaManager.append_records`` (KIP-890 part 1), with a stub
verifier answering now (the coordinator in process) or later (another broker's coordinator):
which batches are verified, what a refusal answers, that nothing refused is appended, the
verification guard that refuses a batch whose transaction ended while it was verified, and
Kafka's mapping of the coordinator's codes to produce errors.

The partition is a real ``Partition`` on the memory engine, led by broker 1 alone.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
from pathlib import Path

import pytest

from pydmq.protocol.errors import ErrorCode
from pydmq.replication.append import AppendResult, ProduceEntry
from pydmq.replication.txn_verification import produce_error
from pydmq.testing.conformance_transactions import transactional_batch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replica_support import TP, Verifier, batch, verified_leader

pytestmark = pytest.mark.timeout(30)

PID, EPOCH = 7, 0
TXN = "txn"


def _entry(sequence: int, pid: int = PID) -> ProduceEntry:
    return ProduceEntry(TP, memoryview(bytearray(transactional_batch(pid, EPOCH, sequence))))


def _now(answer: list[AppendResult] | object) -> list[AppendResult]:
    assert isinstance(answer, list), "answered later, expected now"
    return answer


def _codes(results: list[AppendResult]) -> list[int]:
    return [r.error_code for r in results]


def test_only_a_transactions_first_batch_per_partition_is_verified() -> None:
    verifier = Verifier()
    rm, p = verified_leader(verifier)
    assert _codes(_now(rm.append_records([_entry(0)], 1, 1000, transactional_id=TXN))) == [0]
    assert _codes(_now(rm.append_records([_entry(1)], 1, 1000, transactional_id=TXN))) == [0]
    assert verifier.calls == [(TXN, PID, EPOCH, [TP])]
    # a non-transactional produce, and a produce without a transactional id, are not verified
    assert _codes(_now(rm.append_records([ProduceEntry(TP, batch(1))], 1, 1000))) == [0]
    assert len(verifier.calls) == 1
    # once the transaction ended, the next one's first batch is verified again
    p.append_marker_to_leader(PID, EPOCH, 0, commit=True)
    assert _codes(_now(rm.append_records([_entry(2)], 1, 1000, transactional_id=TXN))) == [0]
    assert len(verifier.calls) == 2


def test_a_follower_asks_no_coordinator() -> None:
    verifier = Verifier(later=True)
    rm, p = verified_leader(verifier)
    p.make_follower(2, 2, 1, [1, 2], [1, 2])
    [result] = _now(rm.append_records([_entry(0)], 1, 1000, transactional_id=TXN))
    assert result.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert verifier.calls == []


def test_a_refused_partition_appends_nothing() -> None:
    rm, p = verified_leader(Verifier(ErrorCode.INVALID_TXN_STATE))
    [result] = _now(rm.append_records([_entry(0)], 1, 1000, transactional_id=TXN))
    assert result.error_code == ErrorCode.INVALID_TXN_STATE
    assert result.base_offset == -1
    assert p.log.log_end_offset == 0
    assert p.log.producer_state.ongoing_txns == {}
    assert p.log.producer_state.verification_guards == {}


def test_turned_off_nothing_is_verified() -> None:
    verifier = Verifier(ErrorCode.INVALID_TXN_STATE)
    verifier.enabled = False
    rm, p = verified_leader(verifier)
    assert _codes(_now(rm.append_records([_entry(0)], 1, 1000, transactional_id=TXN))) == [0]
    assert verifier.calls == []
    assert p.log.log_end_offset == 1


def test_a_remote_answer_appends_once_it_arrived() -> None:
    async def scenario() -> None:
        verifier = Verifier(later=True)
        rm, p = verified_leader(verifier)
        answer = rm.append_records([_entry(0)], 1, 1000, transactional_id=TXN)
        assert inspect.isawaitable(answer)
        waiting = asyncio.ensure_future(answer)
        await asyncio.sleep(0)
        assert p.log.log_end_offset == 0  # not before the coordinator answered
        # a second produce of the producer while the first waits shares its guard
        second = asyncio.ensure_future(
            rm.append_records([_entry(1)], 1, 1000, transactional_id=TXN)  # type: ignore[arg-type]
        )
        await asyncio.sleep(0)
        verifier.answer()
        assert _codes(await waiting) == [0]
        assert _codes(await second) == [0]
        assert p.log.log_end_offset == 2
        assert p.log.producer_state.ongoing_txns == {PID: 0}

    asyncio.run(scenario())


def test_a_transaction_ended_while_its_partition_was_verified_is_refused() -> None:
    """The race KIP-890's verification guard closes: the coordinator said the partition was in
    the transaction, then the transaction was aborted (its marker written here) before the
    batch could be appended: the batch is a zombie and is refused."""

    async def scenario() -> None:
        verifier = Verifier(later=True)
        rm, p = verified_leader(verifier)
        waiting = asyncio.ensure_future(
            rm.append_records([_entry(0)], 1, 1000, transactional_id=TXN)  # type: ignore[arg-type]
        )
        await asyncio.sleep(0)
        p.append_marker_to_leader(PID, EPOCH, 0, commit=False)
        verifier.answer()
        [result] = await waiting
        assert result.error_code == ErrorCode.INVALID_TXN_STATE
        assert p.log.log_end_offset == 1  # the marker alone
        assert p.log.producer_state.ongoing_txns == {}
        assert p.log.last_stable_offset == p.log.high_watermark == 1

    asyncio.run(scenario())


def test_a_batch_appended_after_its_verification_is_the_one_produced() -> None:
    """The false refusals of the 3-node Streams run: a produce's records are views of the
    connection's receive buffer, which the next requests of that (pipelining) producer
    overwrite once the produce waits for its remote verification. Appended after the await,
    the batch was whatever bytes were there by then: a later batch of the producer
    (OUT_OF_ORDER_SEQUENCE_NUMBER, or INVALID_TXN_STATE when its producer id or epoch no longer
    matched the guard), or garbage (CORRUPT_MESSAGE). The batch appended must be the one
    produced, whatever happens to the request's buffer meanwhile."""

    async def scenario() -> None:
        verifier = Verifier(later=True)
        rm, p = verified_leader(verifier)
        produced = bytes(transactional_batch(PID, EPOCH, 0, count=3))
        receive_buffer = bytearray(produced)
        entry = ProduceEntry(TP, memoryview(receive_buffer))
        waiting = asyncio.ensure_future(
            rm.append_records([entry], 1, 1000, transactional_id=TXN)  # type: ignore[arg-type]
        )
        await asyncio.sleep(0)
        # the connection reads the producer's next request into the same bytes
        receive_buffer[:] = transactional_batch(PID + 1, EPOCH + 1, 5, count=3)
        verifier.answer()
        assert _codes(await waiting) == [0]
        assert p.log.log_end_offset == 3
        assert p.log.producer_state.ongoing_txns == {PID: 0}
        stored = p.log.read(0, 1 << 20, 3, True)
        # the same batch from its magic byte on (base offset and leader epoch are assigned)
        assert b"".join(bytes(b) for b in stored.buffers)[16:] == produced[16:]

    asyncio.run(scenario())


def test_a_refused_verification_leaves_the_guard_a_concurrent_produce_shares() -> None:
    """The false refusal of the 3-node Streams run: two produces of one producer open its next
    transaction on the partition, each verified in its own request to the coordinator (the
    second queued while the first was in flight), sharing the producer's guard. The first is
    answered a retriable error (the coordinator was loading after a fail-over), the second
    NONE. The refusal must not take the guard: the second batch is then checked as any other
    (here a sequence gap, retriable, as Kafka answers), not refused as a zombie with
    INVALID_TXN_STATE, which is fatal to a producer. The retries then commit both batches."""

    async def scenario() -> None:
        verifier = Verifier(later=True)
        rm, p = verified_leader(verifier)
        # the producer's previous transaction, ended: the next one's first batch is verified
        first = asyncio.ensure_future(
            rm.append_records([_entry(0)], 1, 1000, transactional_id=TXN)  # type: ignore[arg-type]
        )
        await asyncio.sleep(0)
        verifier.answer()
        assert _codes(await first) == [0]
        p.append_marker_to_leader(PID, EPOCH, 0, commit=True)
        one = asyncio.ensure_future(
            rm.append_records([_entry(1)], 1, 1000, transactional_id=TXN)  # type: ignore[arg-type]
        )
        two = asyncio.ensure_future(
            rm.append_records([_entry(2)], 1, 1000, transactional_id=TXN)  # type: ignore[arg-type]
        )
        await asyncio.sleep(0)
        assert len(verifier.pending) == 2
        (answer_one, tps_one), (answer_two, tps_two) = verifier.pending
        verifier.pending.clear()
        answer_one.set_result(dict.fromkeys(tps_one, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
        assert _codes(await one) == [ErrorCode.NOT_ENOUGH_REPLICAS]
        answer_two.set_result(dict.fromkeys(tps_two, ErrorCode.NONE))
        assert _codes(await two) == [ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER]
        assert p.log.log_end_offset == 2  # nothing appended since the marker
        # the producer retries in order: both are appended in the one transaction
        for sequence in (1, 2):
            retry = rm.append_records([_entry(sequence)], 1, 1000, transactional_id=TXN)
            if not isinstance(retry, list):
                retry_task = asyncio.ensure_future(retry)
                await asyncio.sleep(0)
                verifier.answer()
                retry = await retry_task
            assert _codes(retry) == [0]
        assert p.log.log_end_offset == 4
        assert p.log.producer_state.ongoing_txns == {PID: 2}
        assert p.log.producer_state.verification_guards == {}

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("coordinator", "produce"),
    [
        (ErrorCode.NONE, ErrorCode.NONE),
        (ErrorCode.INVALID_TXN_STATE, ErrorCode.INVALID_TXN_STATE),
        (ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.NETWORK_EXCEPTION, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.UNKNOWN_PRODUCER_ID, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
        (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH),
        (ErrorCode.INVALID_PRODUCER_ID_MAPPING, ErrorCode.INVALID_PRODUCER_ID_MAPPING),
    ],
)
def test_coordinator_codes_as_produce_errors(coordinator: int, produce: int) -> None:
    code, message = produce_error(coordinator)
    assert code == produce
    assert (message is None) == (produce == ErrorCode.NONE)


def test_transactions_v2_add_the_partition_even_with_verification_off() -> None:
    """A transactions v2 produce (Produce v12): the coordinator adds the partition (the
    client sent no AddPartitionsToTxn), whatever the verification config says; its refusal
    appends nothing."""
    verifier = Verifier()
    verifier.enabled = False
    rm, p = verified_leader(verifier)
    [result] = _now(
        rm.append_records([_entry(0)], 1, 1000, transactional_id=TXN, add_partition=True)
    )
    assert result.error_code == ErrorCode.NONE
    assert verifier.calls == [(TXN, PID, EPOCH, [TP])] and verifier.adds == [True]
    assert p.log.producer_state.txn_first_offset(PID) == 0
    # later batches of the open transaction are not added again
    _now(rm.append_records([_entry(1)], 1, 1000, transactional_id=TXN, add_partition=True))
    assert len(verifier.calls) == 1

    refused, p2 = verified_leader(Verifier(ErrorCode.PRODUCER_FENCED))
    [result] = _now(
        refused.append_records([_entry(0)], 1, 1000, transactional_id=TXN, add_partition=True)
    )
    assert result.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert p2.log.log_end_offset == 0


def test_a_waiting_produce_appends_a_copy_of_its_records() -> None:
    """The records are views of the connection's receive buffer, reused (overwritten) once the
    handler returned: a produce that waits for its coordinator appends what it received."""

    async def scenario() -> None:
        verifier = Verifier(later=True)
        rm, p = verified_leader(verifier)
        received = bytearray(transactional_batch(PID, EPOCH, 0))
        entry = ProduceEntry(TP, memoryview(received))
        answer = rm.append_records([entry], 1, 1000, transactional_id=TXN, add_partition=True)
        assert inspect.isawaitable(answer)
        waiting = asyncio.ensure_future(answer)
        await asyncio.sleep(0)
        received[:] = bytes(len(received))  # the next frames land in the buffer
        verifier.answer()
        [result] = await waiting
        assert (result.error_code, result.base_offset) == (ErrorCode.NONE, 0)
        assert p.log.producer_state.txn_first_offset(PID) == 0

    asyncio.run(scenario())


def _v2_entry(epoch: int, sequence: int, count: int = 1) -> ProduceEntry:
    return ProduceEntry(
        TP, memoryview(bytearray(transactional_batch(PID, epoch, sequence, count=count)))
    )


def test_transactions_v2_the_next_transaction_verified_while_the_previous_marker_is_written() -> (
    None
):
    """The broker side of franz-go's TestTxnEtl failure on transactions v2. The producer
    commits its transaction at epoch 0; EndTxn v5 answers epoch 1 and the coordinator writes
    the markers at epoch 1. The producer's next transaction sends its first batch here at
    epoch 1, sequence 0, whose partition the coordinator adds (Produce v12) while the
    previous transaction's marker is written here, at epoch 1. That marker must leave the
    batch's verification guard (Kafka's isV2NextTransactionStarted): removing it refused the
    batch with INVALID_TXN_STATE, fatal to the producer, and the producer's next batches
    (sequence 1 on, verified on their own once the transaction was added) then failed with
    OUT_OF_ORDER_SEQUENCE_NUMBER ("expected 0")."""

    async def scenario() -> None:
        verifier = Verifier()
        rm, p = verified_leader(verifier)
        state = p.log.producer_state
        first = rm.append_records(
            [_v2_entry(0, 0, 3)], 1, 1000, transactional_id=TXN, add_partition=True
        )
        assert _codes(_now(first)) == [0]
        verifier.later = True
        waiting = asyncio.ensure_future(
            rm.append_records(  # type: ignore[arg-type]
                [_v2_entry(1, 0, 2)], 1, 1000, transactional_id=TXN, add_partition=True
            )
        )
        await asyncio.sleep(0)
        p.append_marker_to_leader(PID, 1, 0, commit=True, transaction_version=2)
        verifier.answer()
        [result] = await waiting
        assert (result.error_code, result.base_offset) == (ErrorCode.NONE, 4)
        assert state.txn_first_offset(PID) == 4
        verifier.later = False
        [after] = _now(
            rm.append_records([_v2_entry(1, 2)], 1, 1000, transactional_id=TXN, add_partition=True)
        )
        assert (after.error_code, after.base_offset) == (ErrorCode.NONE, 6)
        assert len(verifier.calls) == 2  # the transaction is open: not added again
        # a marker at another epoch (the transaction fenced) still refuses a verified batch
        verifier.later = True
        p.append_marker_to_leader(PID, 2, 0, commit=False, transaction_version=2)
        zombie = asyncio.ensure_future(
            rm.append_records(  # type: ignore[arg-type]
                [_v2_entry(2, 0)], 1, 1000, transactional_id=TXN, add_partition=True
            )
        )
        await asyncio.sleep(0)
        p.append_marker_to_leader(PID, 3, 0, commit=False, transaction_version=2)
        verifier.answer()
        [refused] = await zombie
        assert refused.error_code == ErrorCode.INVALID_TXN_STATE

    asyncio.run(scenario())


def test_a_batch_overtaking_its_transactions_refused_first_batch_is_refused() -> None:
    """Two pipelined produces open a transactions v2 producer's next transaction here: the
    first (sequence 0) is refused by the coordinator (CONCURRENT_TRANSACTIONS: the previous
    markers are written), the second (sequence 3) shares its guard and is verified in the
    next request. Appending it would leave a gap the first batch's retry cannot fill; it is
    OUT_OF_ORDER_SEQUENCE_NUMBER (Kafka's lowest verified sequence), which the client retries
    behind the first."""

    async def scenario() -> None:
        verifier = Verifier(later=True)
        rm, p = verified_leader(verifier)
        first = asyncio.ensure_future(
            rm.append_records(  # type: ignore[arg-type]
                [_v2_entry(0, 0, 3)], 1, 1000, transactional_id=TXN, add_partition=True
            )
        )
        await asyncio.sleep(0)
        verifier.code = ErrorCode.CONCURRENT_TRANSACTIONS
        verifier.answer()
        assert _codes(await first) == [ErrorCode.NOT_ENOUGH_REPLICAS]
        second = asyncio.ensure_future(
            rm.append_records(  # type: ignore[arg-type]
                [_v2_entry(0, 3)], 1, 1000, transactional_id=TXN, add_partition=True
            )
        )
        await asyncio.sleep(0)
        verifier.code = ErrorCode.NONE
        verifier.answer()
        assert _codes(await second) == [ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER]
        assert p.log.log_end_offset == 0
        retried = asyncio.ensure_future(
            rm.append_records(  # type: ignore[arg-type]
                [_v2_entry(0, 0, 3)], 1, 1000, transactional_id=TXN, add_partition=True
            )
        )
        await asyncio.sleep(0)
        verifier.answer()
        assert _codes(await retried) == [0]
        assert _codes(
            _now(rm.append_records([_v2_entry(0, 3)], 1, 1000, transactional_id=TXN))
        ) == [0]
        assert p.log.log_end_offset == 4

    asyncio.run(scenario())
