"""UnifiedLog's checkpoints: what close and the periodic checkpoint write, and what a reopen
reads back (the memory engine keeps checkpoints and batches across a "reopen" of the same log).
"""

from __future__ import annotations

from pydmq.engines.memory import MemoryLog
from pydmq.protocol.records import SimpleRecord, build_batch
from pydmq.storage.api import LogConfig
from pydmq.storage.log import AppendPolicy, UnifiedLog

POLICY = AppendPolicy(
    max_message_bytes=1 << 20,
    log_append_time=False,
    timestamp_before_max_ms=2**62,
    timestamp_after_max_ms=2**62,
    flush_messages=2**63 - 1,
)


class RecordingLog(MemoryLog):
    """A memory log that records the names of the checkpoints written and the flushes."""

    def __init__(self) -> None:
        super().__init__(LogConfig())
        self.written: list[str] = []
        self.flushes = 0

    def write_checkpoint(self, name: str, data: bytes) -> None:
        self.written.append(name)
        super().write_checkpoint(name, data)

    def flush(self) -> None:
        self.flushes += 1
        super().flush()

    def take(self) -> list[str]:
        written, self.written = sorted(self.written), []
        return written


def produce(log: UnifiedLog, count: int, producer_id: int = -1, epoch: int = 0) -> None:
    sequence = 0 if producer_id >= 0 else -1
    if producer_id >= 0:
        entry = log.producer_state.last_entry(producer_id)
        sequence = entry.last_seq + 1 if entry is not None else 0
    data = build_batch(
        [SimpleRecord(None, b"v%d" % i, (), 1000) for i in range(count)],
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=sequence,
    )
    log.append_as_leader(memoryview(bytearray(data)), epoch, POLICY)


def test_close_writes_only_what_changed() -> None:
    engine_log = RecordingLog()
    log = UnifiedLog(engine_log)
    log.maybe_assign_epoch_start_offset(0, 0)
    produce(log, 3, producer_id=7)
    log.update_high_watermark(log.log_end_offset)
    assert engine_log.take() == []  # a new log's first epoch waits for a batch under it
    log.close()
    assert engine_log.take() == ["high-watermark", "leader-epoch-checkpoint", "producer-state"]
    assert engine_log.flushes >= 1

    log = UnifiedLog(engine_log)  # a clean reopen: nothing changed, nothing rewritten
    assert (log.high_watermark, log.producer_state.map_end_offset) == (3, 3)
    log.update_high_watermark(log.log_end_offset)
    log.close()
    assert engine_log.take() == []

    log = UnifiedLog(engine_log)
    produce(log, 2)  # no producer id: the producer state does not move
    log.update_high_watermark(log.log_end_offset)
    log.close()
    assert engine_log.take() == ["high-watermark"]


def test_the_periodic_checkpoint_spares_close_the_writes() -> None:
    engine_log = RecordingLog()
    log = UnifiedLog(engine_log)
    log.maybe_assign_epoch_start_offset(0, 0)
    produce(log, 3, producer_id=7)
    log.update_high_watermark(3)
    engine_log.take()
    assert log.maybe_checkpoint() == 3
    assert log.maybe_checkpoint() == 0
    assert engine_log.take() == ["high-watermark", "leader-epoch-checkpoint", "producer-state"]
    log.close()
    assert engine_log.take() == []


def test_a_snapshot_behind_the_log_is_rewritten_after_a_reopen() -> None:
    """After an unclean stop the producer state is rebuilt past the snapshot; the next
    checkpoint writes it, so the following start does not replay those batches again."""
    engine_log = RecordingLog()
    log = UnifiedLog(engine_log)
    log.maybe_assign_epoch_start_offset(0, 0)
    produce(log, 2, producer_id=7)
    log.take_producer_snapshot()
    produce(log, 2, producer_id=7)  # not in the snapshot; the broker dies here
    engine_log.take()

    log = UnifiedLog(engine_log)
    assert log.producer_state.map_end_offset == 4
    assert log.maybe_checkpoint() == 1
    assert engine_log.take() == ["producer-state"]
    log = UnifiedLog(engine_log)
    assert log.maybe_checkpoint() == 0


def test_the_state_replayed_at_open_is_snapshotted_once() -> None:
    """The leader does not move the producer state's end for batches without a producer id;
    the replay at open does, and the next checkpoint (or close) writes the snapshot once, so
    the start after it replays nothing."""
    engine_log = RecordingLog()
    log = UnifiedLog(engine_log)
    log.maybe_assign_epoch_start_offset(0, 0)
    produce(log, 3)
    log.close()
    assert "producer-state" not in engine_log.take()
    log = UnifiedLog(engine_log)
    assert log.producer_state.map_end_offset == 3  # replayed from the log start
    log.close()
    assert engine_log.take() == ["producer-state"]
    log = UnifiedLog(engine_log)
    produce(log, 2)
    log.close()
    assert engine_log.take() == []


# -- leader epochs ------------------------------------------------------------------------------


def follower_batch(count: int, base_offset: int, epoch: int) -> bytes:
    records = [SimpleRecord(None, b"x%d" % i, (), 1000) for i in range(count)]
    return build_batch(records, base_offset=base_offset, partition_leader_epoch=epoch)


def test_a_new_logs_first_epoch_waits_for_a_batch_under_it() -> None:
    """Creating a partition writes no epoch file; closing it still empty writes none either, and
    the next leadership assigns the epoch again."""
    engine_log = RecordingLog()
    log = UnifiedLog(engine_log)
    log.maybe_assign_epoch_start_offset(0, 0)
    assert log.leader_epochs == [(0, 0)]
    assert log.maybe_checkpoint() == 0
    log.flush()
    log.close()
    assert engine_log.take() == []
    log = UnifiedLog(engine_log)
    assert log.leader_epochs == []
    log.maybe_assign_epoch_start_offset(1, 0)  # replaces the lost entry: no batch was under it
    produce(log, 2, epoch=1)
    log.flush()
    assert engine_log.take() == ["leader-epoch-checkpoint"]
    assert UnifiedLog(engine_log).leader_epochs == [(1, 0)]


def test_epochs_kept_in_memory_are_learnt_from_the_batches_after_a_crash() -> None:
    engine_log = RecordingLog()
    log = UnifiedLog(engine_log)
    log.maybe_assign_epoch_start_offset(3, 0)
    produce(log, 2, epoch=3)
    produce(log, 2, epoch=3)
    assert engine_log.take() == []  # the broker dies before any checkpoint or flush
    log = UnifiedLog(engine_log)
    assert log.leader_epochs == [(3, 0)]
    assert log.end_offset_for_epoch(2) == (2, 0)
    assert log.maybe_checkpoint() == 2  # the epochs, then the snapshot of the replayed state
    assert engine_log.written == ["leader-epoch-checkpoint", "producer-state"]
    engine_log.take()

    follower = RecordingLog()
    log = UnifiedLog(follower)
    log.append_as_follower(follower_batch(3, 0, 1))
    log.append_as_follower(follower_batch(2, 3, 1) + follower_batch(4, 5, 4))
    assert log.leader_epochs == [(1, 0), (4, 5)]
    assert follower.take() == []
    assert UnifiedLog(follower).leader_epochs == [(1, 0), (4, 5)]


def test_the_epochs_are_written_before_a_snapshot_that_skips_their_batches() -> None:
    engine_log = RecordingLog()
    log = UnifiedLog(engine_log)
    log.maybe_assign_epoch_start_offset(0, 0)
    produce(log, 2, producer_id=5)
    log.take_producer_snapshot()
    assert engine_log.written == ["leader-epoch-checkpoint", "producer-state"]
    engine_log.take()
    log = UnifiedLog(engine_log)  # the replay starts after the snapshot: nothing to learn
    assert log.leader_epochs == [(0, 0)]


def test_epochs_after_a_full_truncation_wait_and_are_learnt_again() -> None:
    engine_log = RecordingLog()
    log = UnifiedLog(engine_log)
    log.append_as_follower(follower_batch(3, 0, 1))
    log.truncate_fully_and_start_at(100)  # writes [] and a snapshot at 100
    assert engine_log.take() == ["leader-epoch-checkpoint", "producer-state"]
    log.append_as_follower(follower_batch(2, 100, 2))
    assert engine_log.take() == []
    log = UnifiedLog(engine_log)
    assert (log.log_start_offset, log.leader_epochs) == (100, [(2, 100)])


def test_a_new_epoch_of_a_log_with_epochs_on_disk_is_written_at_once() -> None:
    engine_log = RecordingLog()
    log = UnifiedLog(engine_log)
    log.maybe_assign_epoch_start_offset(0, 0)
    produce(log, 2)
    log.flush()
    assert engine_log.take() == ["leader-epoch-checkpoint"]
    log.maybe_assign_epoch_start_offset(1, 2)
    assert engine_log.take() == ["leader-epoch-checkpoint"]


def test_a_pass_without_producer_snapshots_writes_only_the_high_watermark() -> None:
    """The broker's 5 s pass leaves producer snapshots to every 12th pass (each costs two
    fsyncs per partition); the snapshot still follows on the next pass that allows it, and
    on close."""
    engine_log = RecordingLog()
    log = UnifiedLog(engine_log)
    log.maybe_assign_epoch_start_offset(0, 0)
    produce(log, 2, producer_id=7)
    log.update_high_watermark(2)
    engine_log.take()
    assert log.maybe_checkpoint(producer_snapshot=False) >= 1
    assert "producer-state" not in engine_log.take()
    assert log.maybe_checkpoint() == 1
    assert engine_log.take() == ["producer-state"]
