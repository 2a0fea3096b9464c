"""UnifiedLog's follower side: appends as the leader wrote them, truncation, the epoch cache."""

from __future__ import annotations

import pytest

from pydmq.engines.memory import MemoryLog
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.records import SimpleRecord, build_batch
from pydmq.storage.api import LogConfig
from pydmq.storage.log import LogAppendError, UnexpectedAppendOffsetError, UnifiedLog


def new_log() -> UnifiedLog:
    return UnifiedLog(MemoryLog(LogConfig()))


def batch(count: int, base_offset: int, epoch: int, producer_id: int = -1, seq: int = -1) -> bytes:
    records = [SimpleRecord(None, b"x%d" % i, (), 1000) for i in range(count)]
    return build_batch(
        records,
        base_offset=base_offset,
        partition_leader_epoch=epoch,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=seq,
    )


def follower_log(*batches: bytes) -> UnifiedLog:
    log = new_log()
    for data in batches:
        log.append_as_follower(data)
    return log


@pytest.mark.parametrize(
    ("epoch", "expected"),
    [
        (-1, (-1, -1)),  # undefined
        (0, (0, 3)),  # below every known epoch: the first known epoch's start
        (1, (1, 7)),
        (2, (1, 7)),  # unknown in between: the largest epoch below, the next one's start
        (4, (4, 12)),
        (5, (5, 15)),  # the latest: the log end offset
        (6, (-1, -1)),  # above the latest
    ],
)
def test_end_offset_for_epoch_follows_kafka(epoch: int, expected: tuple[int, int]) -> None:
    # epochs 2 and 3 wrote nothing; offsets below 3 are gone (a follower append may skip ahead)
    log = follower_log(batch(4, 3, 1), batch(5, 7, 4), batch(3, 12, 5))
    assert log.leader_epochs == [(1, 3), (4, 7), (5, 12)]
    assert log.end_offset_for_epoch(epoch) == expected


def test_end_offset_for_epoch_on_an_empty_cache() -> None:
    assert new_log().end_offset_for_epoch(0) == (-1, -1)


def test_assign_epoch_start_drops_entries_that_are_not_monotonic() -> None:
    log = new_log()
    log.maybe_assign_epoch_start_offset(1, 0)
    log.maybe_assign_epoch_start_offset(2, 5)  # an epoch that got no record
    log.maybe_assign_epoch_start_offset(2, 7)  # same epoch, later: nothing
    assert log.leader_epochs == [(1, 0), (2, 5)]
    log.maybe_assign_epoch_start_offset(3, 5)  # epoch 2 never had a record: gone
    assert log.leader_epochs == [(1, 0), (3, 5)]
    log.maybe_assign_epoch_start_offset(-1, 9)
    assert log.leader_epochs == [(1, 0), (3, 5)]


def test_follower_append_keeps_offsets_and_epochs() -> None:
    log = follower_log(batch(2, 0, 0) + batch(3, 2, 2))
    assert log.log_end_offset == 5
    assert log.leader_epochs == [(0, 0), (2, 2)]
    assert [h.base_offset for h in log.engine_log.batch_headers(0)] == [0, 2]
    assert log.high_watermark == 0  # the follower HW comes from the leader


def test_follower_append_ignores_an_incomplete_trailing_batch() -> None:
    data = batch(2, 0, 0) + batch(3, 2, 0)
    info = new_log().append_as_follower(data[:-5])
    assert info is not None and info.last_offset == 1
    assert new_log().append_as_follower(data[:30]) is None


def test_follower_append_rejects_corruption_and_overlap() -> None:
    corrupt = bytearray(batch(2, 0, 0))
    corrupt[-1] ^= 0xFF
    with pytest.raises(LogAppendError) as raised:
        new_log().append_as_follower(corrupt)
    assert raised.value.error_code == ErrorCode.CORRUPT_MESSAGE
    log = follower_log(batch(2, 0, 0))
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(batch(2, 1, 0))
    assert log.log_end_offset == 2


def test_follower_append_updates_producer_state_without_enforcing_sequences() -> None:
    log = follower_log(batch(2, 0, 0, producer_id=9, seq=0), batch(2, 2, 0, producer_id=9, seq=7))
    entry = log.producer_state.last_entry(9)
    assert entry is not None and entry.last_seq == 8
    assert log.producer_state.map_end_offset == 4


def test_truncate_to_fixes_epochs_producer_state_and_hw() -> None:
    log = follower_log(
        batch(2, 0, 0, producer_id=9, seq=0),
        batch(2, 2, 1, producer_id=9, seq=2),
        batch(2, 4, 2, producer_id=9, seq=4),
    )
    log.take_producer_snapshot()  # a snapshot past the truncation point must not be used
    log.update_high_watermark(6)
    assert log.truncate_to(3)  # inside the second batch: the whole batch goes
    assert log.log_end_offset == 2
    assert log.leader_epochs == [(0, 0)]
    assert log.high_watermark == 2
    entry = log.producer_state.last_entry(9)
    assert entry is not None and entry.last_seq == 1
    reopened = UnifiedLog(log.engine_log)
    reopened_entry = reopened.producer_state.last_entry(9)
    assert reopened_entry is not None and reopened_entry.last_seq == 1
    assert reopened.leader_epochs == [(0, 0)]
    assert not log.truncate_to(10)


def test_truncate_uses_a_snapshot_below_the_truncation_point() -> None:
    log = follower_log(batch(2, 0, 0, producer_id=9, seq=0))
    log.take_producer_snapshot()
    log.append_as_follower(batch(2, 2, 0, producer_id=9, seq=2))
    log.append_as_follower(batch(2, 4, 0, producer_id=8, seq=0))
    log.truncate_to(4)
    assert log.producer_state.last_entry(8) is None
    entry = log.producer_state.last_entry(9)
    assert entry is not None and entry.last_seq == 3


def test_truncate_fully_and_start_at() -> None:
    log = follower_log(batch(2, 0, 0, producer_id=9, seq=0))
    log.truncate_fully_and_start_at(10)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (10, 10, 10)
    assert log.leader_epochs == [] and len(log.producer_state) == 0
    log.append_as_follower(batch(1, 10, 3))
    assert log.leader_epochs == [(3, 10)]
