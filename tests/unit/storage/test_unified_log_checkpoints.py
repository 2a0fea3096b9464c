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
    engine_log.take()
    log.close()
    assert engine_log.take() == ["high-watermark", "producer-state"]
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
    assert log.maybe_checkpoint() == 2
    assert log.maybe_checkpoint() == 0
    assert engine_log.take() == ["high-watermark", "producer-state"]
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


def test_a_log_without_producer_ids_never_needs_a_snapshot() -> None:
    """Replaying batches without producer ids moves the state's end but leaves it empty: the
    same state as no snapshot at all, so neither checkpoints nor close write one."""
    engine_log = RecordingLog()
    log = UnifiedLog(engine_log)
    log.maybe_assign_epoch_start_offset(0, 0)
    produce(log, 3)
    log.close()
    log = UnifiedLog(engine_log)
    assert log.producer_state.map_end_offset == 3  # replayed from the log start
    produce(log, 2)
    log.update_high_watermark(log.log_end_offset)
    engine_log.take()
    log.close()
    assert engine_log.take() == ["high-watermark"]
