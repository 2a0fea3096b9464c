"""The conformance suite every storage engine must pass, built-in or third-party.

Use it from a test module of your own::

    from pydmq.testing.conformance import StorageEngineConformance

    class TestMyEngine(StorageEngineConformance):
        def make_engine(self, data_dir: str) -> StorageEngine:
            return MyEngine(data_dir, {})

Set ``persistent = False`` on the subclass for an engine whose data does not outlive it.
The suite covers reads (whole batches, ``max_bytes``, ``min_one_batch``, ``max_offset``,
out-of-range), timestamp lookups, truncation, log start increments, retention, rolling,
checkpoints, reopening, the log listing, the aborted-transaction index and log compaction
(for engines implementing :class:`~pydmq.storage.api.CompactableLog`), plus a Hypothesis stateful test comparing the
engine with a trivial model (:func:`model_state_machine`).

Damaged data: override :meth:`StorageEngineConformance.damage_batch` (damage the stored bytes
of one batch of a closed engine, as a disk could) and the suite checks the obligation of
:mod:`pydmq.storage.api`: reopening either refuses with ``StorageCorruptionError`` or serves
the intact batches and raises ``StorageCorruptionError`` for reads of the damaged one, never
its bytes. Without the override that test is skipped.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from pydmq.protocol.batch_header import (
    BATCH_HEADER_SIZE,
    CRC,
    CRC_AT,
    CRC_START,
    HEADER,
    LOG_OVERHEAD,
    MAGIC,
)
from pydmq.protocol.records import BatchHeader, crc32c, iter_batch_headers
from pydmq.storage.api import (
    FetchDataInfo,
    LogConfig,
    OffsetOutOfRangeError,
    PartitionLog,
    StorageCorruptionError,
    StorageEngine,
    TopicPartition,
)
from pydmq.testing.conformance_compaction import CompactionConformance
from pydmq.testing.conformance_transactions import TransactionConformance

__all__ = [
    "StorageEngineConformance",
    "append_batches",
    "fetched_bytes",
    "make_batch",
    "model_state_machine",
]

TP = TopicPartition("conformance", 0)
BIG = 1 << 30


def _varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = zigzag & 0x7F
        zigzag >>= 7
        if zigzag:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def make_batch(
    base_offset: int,
    count: int = 1,
    *,
    timestamp: int = 1_000,
    max_timestamp: int | None = None,
    value_size: int = 16,
    leader_epoch: int = 0,
) -> bytes:
    """A valid uncompressed RecordBatch v2 of ``count`` records (CRC32C included)."""
    max_ts = timestamp if max_timestamp is None else max_timestamp
    records = bytearray()
    for i in range(count):
        value = bytes([(base_offset + i) & 0xFF]) * value_size
        ts_delta = (max_ts - timestamp) if i == count - 1 else 0
        body = (
            b"\x00"
            + _varint(ts_delta)
            + _varint(i)
            + _varint(-1)
            + _varint(len(value))
            + value
            + _varint(0)
        )
        records += _varint(len(body)) + body
    batch = bytearray(BATCH_HEADER_SIZE)
    HEADER.pack_into(
        batch,
        0,
        base_offset,
        BATCH_HEADER_SIZE - LOG_OVERHEAD + len(records),
        leader_epoch,
        MAGIC,
        0,  # crc, set below
        0,  # attributes
        count - 1,
        timestamp,
        max_ts,
        -1,
        -1,
        -1,
        count,
    )
    batch += records
    CRC.pack_into(batch, CRC_AT, crc32c(memoryview(batch)[CRC_START:]))
    return bytes(batch)


def append_batches(log: PartitionLog, *batches: bytes) -> list[BatchHeader]:
    """Append batches in one call (as the broker does) and return their headers."""
    data = b"".join(batches)
    headers = list(iter_batch_headers(data))
    log.append(data, headers)
    return headers


def fetched_bytes(info: FetchDataInfo) -> bytes:
    return b"".join(bytes(b) for b in info.buffers)


def _cfg(**kwargs: int) -> LogConfig:
    return LogConfig(**kwargs)  # type: ignore[arg-type]


class StorageEngineConformance(CompactionConformance, TransactionConformance):
    """Base class of the conformance tests; subclasses provide :meth:`make_engine`.

    The compaction tests (:class:`~pydmq.testing.conformance_compaction.CompactionConformance`)
    run for engines whose logs implement :class:`~pydmq.storage.api.CompactableLog`; the
    transaction tests (:class:`~pydmq.testing.conformance_transactions.TransactionConformance`)
    run for every engine."""

    persistent: ClassVar[bool] = True
    model_examples: ClassVar[int] = 60

    def make_engine(self, data_dir: str) -> StorageEngine:
        raise NotImplementedError

    @pytest.fixture
    def data_dir(self, tmp_path: object) -> str:
        return str(tmp_path)

    @pytest.fixture
    def engine(self, data_dir: str) -> Iterator[StorageEngine]:
        engine = self.make_engine(data_dir)
        yield engine
        engine.close()

    def _log(self, engine: StorageEngine, **config: int) -> PartitionLog:
        return engine.open_log(TP, _cfg(**config))

    def _three(self, log: PartitionLog) -> list[bytes]:
        batches = [
            make_batch(0, 1, timestamp=100),
            make_batch(1, 3, timestamp=200, max_timestamp=250),
            make_batch(4, 2, timestamp=300),
        ]
        append_batches(log, batches[0])
        append_batches(log, *batches[1:])
        return batches

    # -- append and read -----------------------------------------------------------------

    def test_empty_log(self, engine: StorageEngine) -> None:
        log = self._log(engine)
        assert (log.log_start_offset, log.log_end_offset, log.size_in_bytes) == (0, 0, 0)
        assert log.read(0, BIG, BIG, True).size == 0
        assert log.max_timestamp_and_offset() is None
        assert log.fetch_offset_by_timestamp(0) is None
        assert list(log.batch_headers(0)) == []

    def test_append_and_read(self, engine: StorageEngine) -> None:
        log = self._log(engine)
        batches = self._three(log)
        assert log.log_end_offset == 6
        assert log.size_in_bytes == sum(map(len, batches))
        info = log.read(0, BIG, 6, True)
        assert fetched_bytes(info) == b"".join(batches)
        assert info.size == sum(map(len, batches)) and info.first_offset == 0

    def test_read_inside_batch_returns_whole_batch(self, engine: StorageEngine) -> None:
        log = self._log(engine)
        batches = self._three(log)
        for offset in (1, 2, 3):
            info = log.read(offset, BIG, 6, True)
            assert info.first_offset == 1
            assert fetched_bytes(info) == batches[1] + batches[2]
        assert fetched_bytes(log.read(5, BIG, 6, True)) == batches[2]

    def test_max_bytes_returns_whole_batches_only(self, engine: StorageEngine) -> None:
        log = self._log(engine)
        batches = self._three(log)
        info = log.read(0, len(batches[0]) + len(batches[1]) // 2, 6, True)
        assert fetched_bytes(info) == batches[0]
        info = log.read(0, len(batches[0]) + len(batches[1]), 6, False)
        assert fetched_bytes(info) == batches[0] + batches[1]

    def test_min_one_batch(self, engine: StorageEngine) -> None:
        log = self._log(engine)
        batches = self._three(log)
        assert fetched_bytes(log.read(1, 10, 6, True)) == batches[1]
        assert log.read(1, 10, 6, False).size == 0

    def test_max_offset_bounds_the_read(self, engine: StorageEngine) -> None:
        log = self._log(engine)
        batches = self._three(log)
        assert fetched_bytes(log.read(0, BIG, 4, True)) == batches[0] + batches[1]
        assert fetched_bytes(log.read(0, BIG, 3, True)) == batches[0]
        assert log.read(1, BIG, 3, True).size == 0

    def test_offset_out_of_range(self, engine: StorageEngine) -> None:
        log = self._log(engine)
        self._three(log)
        with pytest.raises(OffsetOutOfRangeError):
            log.read(7, BIG, BIG, True)
        with pytest.raises(OffsetOutOfRangeError):
            log.read(-1, BIG, BIG, True)
        info = log.read(6, BIG, BIG, True)
        assert info.size == 0 and info.first_offset == 6

    def test_append_below_log_end_is_rejected(self, engine: StorageEngine) -> None:
        log = self._log(engine)
        self._three(log)
        with pytest.raises(ValueError):
            append_batches(log, make_batch(5))

    def test_batch_headers(self, engine: StorageEngine) -> None:
        log = self._log(engine)
        self._three(log)
        assert [h.base_offset for h in log.batch_headers(0)] == [0, 1, 4]
        assert [h.base_offset for h in log.batch_headers(2)] == [1, 4]
        assert [(h.last_offset, h.max_timestamp) for h in log.batch_headers(4)] == [(5, 300)]
        assert list(log.batch_headers(6)) == []

    def test_many_batches_every_offset(self, engine: StorageEngine) -> None:
        log = self._log(engine, segment_bytes=2_000, index_interval_bytes=100)
        batches = [make_batch(i * 3, 3, timestamp=i) for i in range(200)]
        for i in range(0, 200, 7):
            append_batches(log, *batches[i : i + 7])
        for offset in range(0, 600, 5):
            info = log.read(offset, 1, 600, True)
            assert fetched_bytes(info) == batches[offset // 3]
            assert info.first_offset == offset // 3 * 3
        assert log.fetch_offset_by_timestamp(150) is not None
        assert log.fetch_offset_by_timestamp(150).offset == 450  # type: ignore[union-attr]

    # -- timestamps ------------------------------------------------------------------------

    def test_timestamp_lookup_across_batches_and_segments(self, engine: StorageEngine) -> None:
        log = self._log(engine, segment_bytes=250)
        stamps = [100, 300, 200, 400, 400, 500]
        for i, ts in enumerate(stamps):
            append_batches(
                log, make_batch(i * 2, 2, timestamp=ts - 5, max_timestamp=ts, leader_epoch=i)
            )
        found = log.fetch_offset_by_timestamp(150)
        assert found is not None and (found.timestamp, found.offset, found.leader_epoch) == (
            300,
            2,
            1,
        )
        found = log.fetch_offset_by_timestamp(400)
        assert found is not None and (found.offset, found.timestamp) == (6, 400)
        found = log.fetch_offset_by_timestamp(0)
        assert found is not None and found.offset == 0
        assert log.fetch_offset_by_timestamp(501) is None
        top = log.max_timestamp_and_offset()
        assert top is not None and (top.timestamp, top.offset, top.leader_epoch) == (500, 10, 5)

    def test_max_timestamp_prefers_first_batch_with_it(self, engine: StorageEngine) -> None:
        log = self._log(engine)
        for i, ts in enumerate([10, 90, 40, 90]):
            append_batches(log, make_batch(i, timestamp=ts))
        top = log.max_timestamp_and_offset()
        assert top is not None and (top.timestamp, top.offset) == (90, 1)

    # -- truncation and log start ------------------------------------------------------------

    def test_truncate_to(self, engine: StorageEngine) -> None:
        log = self._log(engine, segment_bytes=250)
        batches = [make_batch(i * 2, 2, timestamp=i * 10) for i in range(6)]
        for b in batches:
            append_batches(log, b)
        log.truncate_to(20)  # beyond the end: nothing
        assert log.log_end_offset == 12
        log.truncate_to(6)
        assert log.log_end_offset == 6
        assert log.size_in_bytes == sum(map(len, batches[:3]))
        assert fetched_bytes(log.read(0, BIG, BIG, True)) == b"".join(batches[:3])
        top = log.max_timestamp_and_offset()
        assert top is not None and top.timestamp == 20
        assert log.fetch_offset_by_timestamp(30) is None
        again = make_batch(6, 4, timestamp=99)
        append_batches(log, again)
        assert fetched_bytes(log.read(5, BIG, BIG, True)) == batches[2] + again
        log.truncate_to(0)
        assert (log.log_start_offset, log.log_end_offset, log.size_in_bytes) == (0, 0, 0)

    def test_truncate_fully_and_start_at(self, engine: StorageEngine) -> None:
        log = self._log(engine)
        self._three(log)
        log.truncate_fully_and_start_at(100)
        assert (log.log_start_offset, log.log_end_offset, log.size_in_bytes) == (100, 100, 0)
        with pytest.raises(OffsetOutOfRangeError):
            log.read(0, BIG, BIG, True)
        batch = make_batch(100, 2)
        append_batches(log, batch)
        assert fetched_bytes(log.read(100, BIG, BIG, True)) == batch

    def test_maybe_increment_log_start_offset(self, engine: StorageEngine) -> None:
        log = self._log(engine, segment_bytes=1)
        batches = self._three(log)
        assert log.maybe_increment_log_start_offset(2)
        assert not log.maybe_increment_log_start_offset(1)
        assert log.log_start_offset == 2
        with pytest.raises(OffsetOutOfRangeError):
            log.read(1, BIG, BIG, True)
        info = log.read(2, BIG, BIG, True)
        assert fetched_bytes(info) == batches[1] + batches[2] and info.first_offset == 1
        with pytest.raises(OffsetOutOfRangeError):
            log.maybe_increment_log_start_offset(7)
        assert log.maybe_increment_log_start_offset(6)
        assert log.read(6, BIG, BIG, True).size == 0
        assert log.fetch_offset_by_timestamp(0) is None
        assert log.max_timestamp_and_offset() is None
        append_batches(log, make_batch(6))
        assert log.log_end_offset == 7

    # -- retention and roll ----------------------------------------------------------------

    def test_retention_by_time(self, engine: StorageEngine) -> None:
        log = self._log(engine, segment_bytes=1, retention_ms=1_500)
        for i, ts in enumerate([1_000, 2_000, 3_000, 4_000]):
            append_batches(log, make_batch(i, timestamp=ts))
        assert log.delete_retention_ms_breached(4_000) == 2
        assert log.log_start_offset == 2
        assert log.read(2, BIG, BIG, True).first_offset == 2
        assert log.delete_retention_ms_breached(4_000) == 0
        assert log.delete_retention_ms_breached(10**9) == 1  # never the active segment
        assert (log.log_start_offset, log.log_end_offset) == (3, 4)
        assert log.fetch_offset_by_timestamp(0) is not None

    def test_retention_unlimited(self, engine: StorageEngine) -> None:
        log = self._log(engine, segment_bytes=1, retention_ms=-1)
        for i in range(3):
            append_batches(log, make_batch(i, timestamp=0))
        assert log.delete_retention_ms_breached(10**12) == 0
        assert log.delete_retention_size_breached() == 0

    def test_retention_only_with_the_delete_policy(self, engine: StorageEngine) -> None:
        one = len(make_batch(0))
        log = engine.open_log(
            TP, LogConfig(segment_bytes=1, retention_ms=1, retention_bytes=one, delete=False)
        )
        for i in range(4):
            append_batches(log, make_batch(i, timestamp=0))
        assert log.delete_retention_ms_breached(10**12) == 0  # cleanup.policy=compact
        assert log.delete_retention_size_breached() == 0
        assert (log.log_start_offset, log.size_in_bytes) == (0, 4 * one)

    def test_retention_by_size(self, engine: StorageEngine) -> None:
        one = len(make_batch(0))
        log = self._log(engine, segment_bytes=1, retention_bytes=one * 5 // 2)
        for i in range(6):
            append_batches(log, make_batch(i))
        assert log.delete_retention_size_breached() == 3
        assert (log.log_start_offset, log.size_in_bytes) == (3, 3 * one)
        assert log.delete_retention_size_breached() == 0

    def test_roll_keeps_data(self, engine: StorageEngine) -> None:
        log = self._log(engine, segment_ms=1_000, segment_bytes=300)
        batches = [make_batch(i, timestamp=1_000 * i) for i in range(8)]
        for i, b in enumerate(batches):
            append_batches(log, b)
            log.maybe_roll(1_000 * i + 5_000)
        log.maybe_roll(10**9)
        log.maybe_roll(10**9)
        assert fetched_bytes(log.read(0, BIG, BIG, True)) == b"".join(batches)
        assert log.fetch_offset_by_timestamp(2_500) is not None
        append_batches(log, make_batch(8))
        assert log.log_end_offset == 9

    # -- durability, checkpoints, listing ------------------------------------------------------

    def test_checkpoints(self, engine: StorageEngine) -> None:
        log = self._log(engine)
        assert log.read_checkpoint("high-watermark") is None
        log.write_checkpoint("high-watermark", b"\x00\x01")
        log.write_checkpoint("leader-epoch", b"epochs")
        log.write_checkpoint("high-watermark", b"\x00\x02")
        assert log.read_checkpoint("high-watermark") == b"\x00\x02"
        assert log.read_checkpoint("leader-epoch") == b"epochs"

    def test_flush_and_reopen_log(self, engine: StorageEngine) -> None:
        log = self._log(engine)
        batches = self._three(log)
        log.flush()
        log.close()
        log = self._log(engine)
        assert fetched_bytes(log.read(0, BIG, BIG, True)) == b"".join(batches)

    def test_reopen_engine(self, data_dir: str) -> None:
        if not self.persistent:
            # The contract of a non-persistent engine: a new instance starts empty.
            engine = self.make_engine(data_dir)
            append_batches(self._log(engine), make_batch(0, 2))
            engine.close()
            assert self.make_engine(data_dir).list_logs() == []
            return
        engine = self.make_engine(data_dir)
        log = self._log(engine, segment_bytes=250, index_interval_bytes=50)
        batches = [make_batch(i * 2, 2, timestamp=i * 10, leader_epoch=i) for i in range(8)]
        for b in batches:
            append_batches(log, b)
        log.maybe_increment_log_start_offset(3)
        log.write_checkpoint("hw", b"12")
        engine.close()
        engine = self.make_engine(data_dir)
        try:
            assert engine.list_logs() == [TP]
            log = self._log(engine, segment_bytes=250, index_interval_bytes=50)
            assert (log.log_start_offset, log.log_end_offset) == (3, 16)
            assert fetched_bytes(log.read(3, BIG, BIG, True)) == b"".join(batches[1:])
            assert log.read_checkpoint("hw") == b"12"
            top = log.max_timestamp_and_offset()
            assert top is not None and (top.timestamp, top.offset, top.leader_epoch) == (70, 14, 7)
            found = log.fetch_offset_by_timestamp(35)
            assert found is not None and found.offset == 8
            append_batches(log, make_batch(16))
            assert log.log_end_offset == 17
        finally:
            engine.close()

    def damage_batch(self, data_dir: str, tp: TopicPartition, offset: int) -> bool:
        """Damage the stored bytes of the batch holding ``offset`` in ``tp``'s log of a closed
        engine under ``data_dir`` (e.g. flip a bit inside a record), as a failing disk could.
        Returns False when the engine offers no way to (the damage test is then skipped)."""
        return False

    def test_reads_of_damaged_data_raise_storage_corruption_error(self, data_dir: str) -> None:
        if not self.persistent:
            pytest.skip("a non-persistent engine keeps nothing a disk could damage")
        engine = self.make_engine(data_dir)
        log = self._log(engine, segment_bytes=250, index_interval_bytes=50)
        batches = [make_batch(i * 2, 2, timestamp=i * 10) for i in range(8)]
        for b in batches:
            append_batches(log, b)
        log.flush()
        engine.close()
        if not self.damage_batch(data_dir, TP, 6):
            pytest.skip("the engine subclass does not override damage_batch")
        engine = self.make_engine(data_dir)
        try:
            try:
                log = self._log(engine, segment_bytes=250, index_interval_bytes=50)
            except StorageCorruptionError:
                return  # refusing to open the log is allowed
            for offset in range(6):
                assert fetched_bytes(log.read(offset, 1, BIG, True)) == batches[offset // 2]
            for offset in (6, 7):
                with pytest.raises(StorageCorruptionError):
                    log.read(offset, BIG, BIG, True)
            served = fetched_bytes(log.read(0, BIG, BIG, True))
            assert batches[3] not in served and b"".join(batches[:3]).startswith(served)
            for offset in range(8, 16):
                try:
                    got = fetched_bytes(log.read(offset, 1, BIG, True))
                except StorageCorruptionError:
                    continue
                assert got == batches[offset // 2]
        finally:
            engine.close()

    def test_list_and_delete_logs(self, engine: StorageEngine) -> None:
        a, b = TopicPartition("a-topic", 0), TopicPartition("a-topic", 1)
        for tp in (a, b):
            append_batches(engine.open_log(tp, LogConfig()), make_batch(0))
        assert engine.list_logs() == [a, b]
        engine.delete_log(a)
        assert engine.list_logs() == [b]
        log = engine.open_log(a, LogConfig())
        assert (log.log_end_offset, log.size_in_bytes) == (0, 0)
        assert engine.open_log(b, LogConfig()).log_end_offset == 1

    def test_model_based(self) -> None:
        machine = model_state_machine(self.make_engine, persistent=self.persistent)
        run_state_machine_as_test(
            machine,
            settings=settings(
                max_examples=self.model_examples,
                stateful_step_count=30,
                deadline=None,
                suppress_health_check=list(HealthCheck),
            ),
        )


def _greedy(
    batches: Sequence[tuple[BatchHeader, bytes]],
    offset: int,
    max_bytes: int,
    max_offset: int,
    min_one: bool,
) -> list[bytes]:
    out: list[bytes] = []
    size = 0
    for h, data in batches:
        if h.last_offset < offset:
            continue
        if h.next_offset > max_offset:
            break
        if size + len(data) > max_bytes and not (min_one and not out):
            break
        out.append(data)
        size += len(data)
        if size >= max_bytes:
            break
    return out


def model_state_machine(
    make_engine: Callable[[str], StorageEngine], *, persistent: bool = True
) -> type[RuleBasedStateMachine]:
    """A stateful test comparing an engine's log with a list of (header, bytes)."""

    config = LogConfig(
        segment_bytes=400, index_interval_bytes=64, retention_ms=100, retention_bytes=600
    )

    class EngineModel(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.dir = tempfile.mkdtemp(prefix="pydmq-model-")
            self.engine = make_engine(self.dir)
            self.log = self.engine.open_log(TP, config)
            self.batches: list[tuple[BatchHeader, bytes]] = []
            self.start = 0
            self.end = 0

        def teardown(self) -> None:
            self.engine.close()
            shutil.rmtree(self.dir, ignore_errors=True)

        def _drop_below(self, start: int) -> None:
            self.start = max(self.start, start)
            self.batches = [(h, d) for h, d in self.batches if h.last_offset >= self.start]

        @rule(
            counts=st.lists(st.integers(1, 5), min_size=1, max_size=3),
            stamps=st.lists(st.integers(0, 1_000), min_size=3, max_size=3),
            gap=st.integers(0, 2),
            value_size=st.integers(0, 120),
        )
        def append(self, counts: list[int], stamps: list[int], gap: int, value_size: int) -> None:
            offset = self.end + gap
            data = []
            for count, ts in zip(counts, stamps, strict=False):
                data.append(make_batch(offset, count, timestamp=ts, value_size=value_size))
                offset += count
            headers = append_batches(self.log, *data)
            self.batches += [(h, d) for h, d in zip(headers, data, strict=True)]
            self.end = offset

        @rule(
            data=st.data(),
            max_bytes=st.integers(1, 2_000),
            min_one=st.booleans(),
            cap=st.booleans(),
        )
        def read(self, data: st.DataObject, max_bytes: int, min_one: bool, cap: bool) -> None:
            offset = data.draw(st.integers(self.start, self.end))
            max_offset = data.draw(st.integers(offset, self.end)) if cap else self.end
            info = self.log.read(offset, max_bytes, max_offset, min_one)
            got = fetched_bytes(info)
            expected = _greedy(self.batches, offset, max_bytes, max_offset, min_one)
            returned = sum(1 for _ in iter_batch_headers(got))
            # An engine may stop early (e.g. at a segment end) but returns whole batches, in
            # order, and at least one when any fits.
            assert got == b"".join(expected[:returned])
            assert info.size == len(got)
            assert bool(got) == bool(expected)
            if got:
                assert info.first_offset == next(
                    h.base_offset for h, _ in self.batches if h.last_offset >= offset
                )

        @rule(offset=st.integers(-2, 3_000))
        def read_out_of_range(self, offset: int) -> None:
            if self.start <= offset <= self.end:
                return
            with pytest.raises(OffsetOutOfRangeError):
                self.log.read(offset, 100, BIG, True)

        @rule(ts=st.integers(-1, 1_001))
        def by_timestamp(self, ts: int) -> None:
            found = self.log.fetch_offset_by_timestamp(ts)
            live = [h for h, _ in self.batches if h.last_offset >= self.start]
            want = next((h for h in live if h.max_timestamp >= ts), None)
            if want is None:
                assert found is None
            else:
                assert found is not None
                assert (found.timestamp, found.offset) == (
                    want.max_timestamp,
                    max(want.base_offset, self.start),
                )

        @rule(data=st.data())
        @precondition(lambda self: len(self.batches) > 0)
        def truncate_to(self, data: st.DataObject) -> None:
            h, _ = data.draw(st.sampled_from(self.batches))
            if h.base_offset < self.start:
                return
            self.log.truncate_to(h.base_offset)
            self.batches = [(x, d) for x, d in self.batches if x.base_offset < h.base_offset]
            self.end = h.base_offset

        @rule(offset=st.integers(0, 3_000))
        def truncate_fully(self, offset: int) -> None:
            self.log.truncate_fully_and_start_at(offset)
            self.batches = []
            self.start = self.end = offset

        @rule(data=st.data())
        def increment_log_start(self, data: st.DataObject) -> None:
            offset = data.draw(st.integers(self.start, self.end))
            assert self.log.maybe_increment_log_start_offset(offset) == (offset > self.start)
            self._drop_below(offset)

        @rule(now=st.integers(0, 1_300))
        def retention_ms(self, now: int) -> None:
            self.log.delete_retention_ms_breached(now)
            start = self.log.log_start_offset
            for h, _ in self.batches:
                if h.next_offset <= start:
                    assert now - h.max_timestamp > config.retention_ms
            self._drop_below(start)

        @rule()
        def retention_size(self) -> None:
            before = self.log.size_in_bytes
            deleted = self.log.delete_retention_size_breached()
            if deleted:
                assert self.log.size_in_bytes >= config.retention_bytes
            else:
                assert self.log.size_in_bytes == before
            self._drop_below(self.log.log_start_offset)

        @rule(now=st.integers(0, 3_000))
        def roll(self, now: int) -> None:
            self.log.maybe_roll(now)

        @rule()
        def flush(self) -> None:
            self.log.flush()

        @precondition(lambda self: persistent)
        @rule()
        def reopen(self) -> None:
            self.engine.close()
            self.engine = make_engine(self.dir)
            self.log = self.engine.open_log(TP, config)

        @invariant()
        def offsets_match(self) -> None:
            assert self.log.log_end_offset == self.end
            assert self.log.log_start_offset == self.start
            top = self.log.max_timestamp_and_offset()
            live = [h for h, _ in self.batches if h.last_offset >= self.start]
            if not live:
                assert top is None
            else:
                best = max(live, key=lambda h: h.max_timestamp)
                assert top is not None and top.timestamp == best.max_timestamp

    return EngineModel
