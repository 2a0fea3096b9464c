"""SqliteStorageEngine: every partition's batches as rows of one SQLite database.

Table ``batches`` is keyed by (topic, partition, base_offset) and holds last_offset,
max_timestamp, leader_epoch and the batch bytes. Each batch counts as one "segment" for
retention and compaction (the last batch is the active one). Every mutation is one
transaction; with WAL and ``synchronous=NORMAL`` a commit survives a process crash, and
``flush`` checkpoints the WAL. Owned by the broker's event loop; not thread-safe: the log
cleaner's thread only sees bytes taken on the loop (:class:`SqliteBatches`) and fills a
:class:`SqliteCleanedSegment` in memory, and the swap is one transaction on the loop that
deletes the rows of the cleaned range and inserts the cleaned batches (a crash leaves either).
Table ``aborted_txns`` is the aborted-transaction index, keyed by the ABORT marker's offset;
an entry is deleted in the transaction that deletes its marker's batch.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Collection, Iterator, Mapping, Sequence

from pydmq.protocol.records import BatchHeader, parse_batch_header
from pydmq.storage.api import (
    AbortedTxn,
    CleanedSegment,
    FetchDataInfo,
    LogConfig,
    OffsetOutOfRangeError,
    SegmentInfo,
    TimestampAndOffset,
    TopicPartition,
)

__all__ = ["SqliteBatches", "SqliteCleanedSegment", "SqliteLog", "SqliteStorageEngine"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS logs (
    topic TEXT NOT NULL, partition INTEGER NOT NULL,
    log_start_offset INTEGER NOT NULL, log_end_offset INTEGER NOT NULL,
    PRIMARY KEY (topic, partition));
CREATE TABLE IF NOT EXISTS batches (
    topic TEXT NOT NULL, partition INTEGER NOT NULL, base_offset INTEGER NOT NULL,
    last_offset INTEGER NOT NULL, max_timestamp INTEGER NOT NULL, leader_epoch INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (topic, partition, base_offset));
CREATE INDEX IF NOT EXISTS batches_by_last ON batches (topic, partition, last_offset);
CREATE TABLE IF NOT EXISTS checkpoints (
    topic TEXT NOT NULL, partition INTEGER NOT NULL, name TEXT NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (topic, partition, name));
CREATE TABLE IF NOT EXISTS aborted_txns (
    topic TEXT NOT NULL, partition INTEGER NOT NULL, last_offset INTEGER NOT NULL,
    producer_id INTEGER NOT NULL, first_offset INTEGER NOT NULL,
    last_stable_offset INTEGER NOT NULL,
    PRIMARY KEY (topic, partition, last_offset));
"""


class SqliteBatches:
    """The bytes of one batch row ("segment"), read on the event loop; handed to a cleaner
    thread, which never touches the database."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def batches(self) -> Iterator[bytes]:
        yield self._data

    def close(self) -> None:
        return None


class SqliteCleanedSegment:
    """Cleaned batches collected in memory by a cleaner thread until the swap (on the event
    loop) writes them as rows."""

    def __init__(self, owner: SqliteLog) -> None:
        self.owner = owner
        self.batches: list[bytes] = []
        self._size = 0

    @property
    def size(self) -> int:
        return self._size

    def append(self, batch: bytes | memoryview) -> None:
        self.batches.append(bytes(batch))
        self._size += len(batch)

    def finish(self) -> None:
        return None  # durable when the swap's transaction commits

    def abort(self) -> None:
        self.batches = []
        self._size = 0


class SqliteLog:
    """One partition's rows; offsets and size are cached in memory."""

    def __init__(self, db: sqlite3.Connection, tp: TopicPartition, config: LogConfig) -> None:
        self._db = db
        self._key = (tp.topic, tp.partition)
        self.config = config
        row = db.execute(
            "SELECT log_start_offset, log_end_offset FROM logs WHERE topic=? AND partition=?",
            self._key,
        ).fetchone()
        if row is None:
            with db:
                db.execute("INSERT INTO logs VALUES (?, ?, 0, 0)", self._key)
            row = (0, 0)
        self._log_start_offset, self._log_end_offset = int(row[0]), int(row[1])
        (size,) = db.execute(
            "SELECT COALESCE(SUM(LENGTH(data)), 0) FROM batches WHERE topic=? AND partition=?",
            self._key,
        ).fetchone()
        self._size = int(size)
        self._cleaning_generation = 0

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def size_in_bytes(self) -> int:
        return self._size

    def _save_offsets(self) -> None:
        self._db.execute(
            "UPDATE logs SET log_start_offset=?, log_end_offset=? WHERE topic=? AND partition=?",
            (self._log_start_offset, self._log_end_offset, *self._key),
        )

    def append(
        self, records: bytes | bytearray | memoryview, headers: Sequence[BatchHeader]
    ) -> None:
        if not headers:
            return
        if headers[0].base_offset < self._log_end_offset:
            raise ValueError(
                f"append at {headers[0].base_offset} below log end {self._log_end_offset}"
            )
        view = memoryview(records)
        rows = [
            (
                *self._key,
                h.base_offset,
                h.last_offset,
                h.max_timestamp,
                h.partition_leader_epoch,
                bytes(view[h.position : h.position + h.size]),
            )
            for h in headers
        ]
        with self._db:
            self._db.executemany("INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            self._log_end_offset = headers[-1].next_offset
            self._save_offsets()
        self._size += len(records)

    def _rows_from(self, offset: int, columns: str) -> Iterator[tuple[object, ...]]:
        return self._db.execute(
            f"SELECT {columns} FROM batches WHERE topic=? AND partition=? AND last_offset>=?"
            " ORDER BY base_offset",
            (*self._key, offset),
        )

    def read(
        self, offset: int, max_bytes: int, max_offset: int, min_one_batch: bool
    ) -> FetchDataInfo:
        if offset < self._log_start_offset or offset > self._log_end_offset:
            raise OffsetOutOfRangeError(offset, self._log_start_offset, self._log_end_offset)
        buffers: list[bytes | memoryview] = []
        size = 0
        first = -1
        for base, last, data in self._rows_from(offset, "base_offset, last_offset, data"):
            assert isinstance(data, bytes) and isinstance(base, int) and isinstance(last, int)
            if last + 1 > max_offset or (
                size + len(data) > max_bytes and not (min_one_batch and not buffers)
            ):
                break
            if first < 0:
                first = base
            buffers.append(data)
            size += len(data)
            if size >= max_bytes:
                break
        if not buffers:
            return FetchDataInfo.empty(offset)
        return FetchDataInfo(buffers, size, first)

    def batch_headers(self, from_offset: int) -> Iterator[BatchHeader]:
        for (data,) in list(self._rows_from(from_offset, "data")):
            assert isinstance(data, bytes)
            yield parse_batch_header(data)

    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        row = self._db.execute(
            "SELECT max_timestamp, base_offset, leader_epoch FROM batches WHERE topic=? AND partition=?"
            " AND last_offset>=? AND max_timestamp>=? ORDER BY base_offset LIMIT 1",
            (*self._key, self._log_start_offset, timestamp),
        ).fetchone()
        if row is None:
            return None
        return TimestampAndOffset(row[0], max(row[1], self._log_start_offset), row[2])

    def max_timestamp_and_offset(self) -> TimestampAndOffset | None:
        row = self._db.execute(
            "SELECT max_timestamp, base_offset, leader_epoch FROM batches WHERE topic=? AND partition=?"
            " AND last_offset>=? ORDER BY max_timestamp DESC, base_offset LIMIT 1",
            (*self._key, self._log_start_offset),
        ).fetchone()
        if row is None:
            return None
        return TimestampAndOffset(row[0], max(row[1], self._log_start_offset), row[2])

    def _delete_where(self, clause: str, params: tuple[object, ...]) -> int:
        where = f"topic=? AND partition=? AND {clause}"
        (removed, count) = self._db.execute(
            f"SELECT COALESCE(SUM(LENGTH(data)), 0), COUNT(*) FROM batches WHERE {where}",
            (*self._key, *params),
        ).fetchone()
        self._db.execute(f"DELETE FROM batches WHERE {where}", (*self._key, *params))
        self._size -= int(removed)
        return int(count)

    def _delete_aborted_txns(self, clause: str, params: tuple[object, ...]) -> None:
        self._db.execute(
            f"DELETE FROM aborted_txns WHERE topic=? AND partition=? AND {clause}",
            (*self._key, *params),
        )

    def _delete_aborted_txns_below_first_batch(self) -> None:
        """Entries go with their marker's batch: delete those below the first batch left."""
        (first,) = self._db.execute(
            "SELECT MIN(base_offset) FROM batches WHERE topic=? AND partition=?", self._key
        ).fetchone()
        self._delete_aborted_txns(
            "last_offset<?", (self._log_end_offset if first is None else int(first),)
        )

    def append_aborted_txn(self, txn: AbortedTxn) -> None:
        with self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO aborted_txns VALUES (?, ?, ?, ?, ?, ?)",
                (
                    *self._key,
                    txn.last_offset,
                    txn.producer_id,
                    txn.first_offset,
                    txn.last_stable_offset,
                ),
            )

    def remove_aborted_txns(self, last_offsets: Collection[int]) -> None:
        with self._db:
            self._db.executemany(
                "DELETE FROM aborted_txns WHERE topic=? AND partition=? AND last_offset=?",
                [(*self._key, offset) for offset in last_offsets],
            )

    def collect_aborted_txns(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        rows = self._db.execute(
            "SELECT producer_id, first_offset, last_offset, last_stable_offset FROM aborted_txns"
            " WHERE topic=? AND partition=? AND last_offset>=? AND first_offset<?"
            " ORDER BY last_offset",
            (*self._key, start_offset, upper_bound_offset),
        )
        return [AbortedTxn(int(p), int(f), int(la), int(ls)) for p, f, la, ls in rows]

    def truncate_to(self, offset: int) -> None:
        if offset >= self._log_end_offset:
            return
        self._cleaning_generation += 1
        if offset < self._log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        row = self._db.execute(
            "SELECT base_offset FROM batches WHERE topic=? AND partition=? AND last_offset>=?"
            " ORDER BY base_offset LIMIT 1",
            (*self._key, offset),
        ).fetchone()
        with self._db:
            cut = offset if row is None else min(offset, int(row[0]))
            self._delete_where("last_offset>=?", (offset,))
            self._delete_aborted_txns("last_offset>=?", (cut,))
            self._log_end_offset = cut
            self._save_offsets()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self._cleaning_generation += 1
        with self._db:
            self._delete_where("1", ())
            self._delete_aborted_txns("1", ())
            self._log_start_offset = self._log_end_offset = offset
            self._save_offsets()

    def _last_base(self) -> int:
        row = self._db.execute(
            "SELECT MAX(base_offset) FROM batches WHERE topic=? AND partition=?", self._key
        ).fetchone()
        return -1 if row[0] is None else int(row[0])

    def _delete_first(self, bases: list[int]) -> int:
        if not bases:
            return 0
        with self._db:
            count = self._delete_where("base_offset<=?", (bases[-1],))
            (first,) = self._db.execute(
                "SELECT MIN(base_offset) FROM batches WHERE topic=? AND partition=?", self._key
            ).fetchone()
            if first is not None and first > self._log_start_offset:
                self._log_start_offset = int(first)
            self._delete_aborted_txns_below_first_batch()
            self._save_offsets()
        return count

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        if offset > self._log_end_offset:
            raise OffsetOutOfRangeError(offset, self._log_start_offset, self._log_end_offset)
        if offset <= self._log_start_offset:
            return False
        with self._db:
            self._log_start_offset = offset
            self._delete_where("last_offset<? AND base_offset<?", (offset, self._last_base()))
            self._delete_aborted_txns_below_first_batch()
            self._save_offsets()
        return True

    def delete_retention_ms_breached(self, now_ms: int) -> int:
        if self.config.retention_ms < 0 or not self.config.delete:
            return 0
        active = self._last_base()
        doomed: list[int] = []
        for base, ts in self._db.execute(
            "SELECT base_offset, max_timestamp FROM batches WHERE topic=? AND partition=? AND base_offset<?"
            " ORDER BY base_offset",
            (*self._key, active),
        ):
            if now_ms - ts <= self.config.retention_ms:
                break
            doomed.append(base)
        return self._delete_first(doomed)

    def delete_retention_size_breached(self) -> int:
        retention = self.config.retention_bytes
        if retention < 0 or self._size < retention or not self.config.delete:
            return 0
        diff = self._size - retention
        doomed: list[int] = []
        for base, size in self._db.execute(
            "SELECT base_offset, LENGTH(data) FROM batches WHERE topic=? AND partition=? AND base_offset<?"
            " ORDER BY base_offset",
            (*self._key, self._last_base()),
        ):
            if diff - size < 0:
                break
            diff -= size
            doomed.append(base)
        return self._delete_first(doomed)

    def maybe_roll(self, now_ms: int) -> None:
        return None

    # -- compaction (the CompactableLog port): each batch row is a segment ----------------

    @property
    def cleaning_generation(self) -> int:
        return self._cleaning_generation

    def _segments(self, where: str, params: tuple[object, ...]) -> list[SegmentInfo]:
        return [
            SegmentInfo(int(base), int(last) + 1, int(size), int(ts), int(ts))
            for base, last, size, ts in self._db.execute(
                "SELECT base_offset, last_offset, LENGTH(data), max_timestamp FROM batches"
                f" WHERE topic=? AND partition=? AND {where} ORDER BY base_offset",
                (*self._key, *params),
            )
        ]

    def closed_segments(self) -> list[SegmentInfo]:
        return self._segments("base_offset<?", (self._last_base(),))

    def open_segment_batches(self, segment: SegmentInfo) -> SqliteBatches:
        row = self._db.execute(
            "SELECT data FROM batches WHERE topic=? AND partition=? AND base_offset=?",
            (*self._key, segment.base_offset),
        ).fetchone()
        if row is None or segment not in self._segments("base_offset=?", (segment.base_offset,)):
            raise ValueError(f"{segment} is not a segment of the log")
        if segment.base_offset >= self._last_base():
            raise ValueError(f"{segment} is the active segment")
        return SqliteBatches(bytes(row[0]))

    def new_cleaned_segment(self, base_offset: int, end_offset: int) -> SqliteCleanedSegment:
        return SqliteCleanedSegment(self)

    def replace_segments(
        self, old: Sequence[SegmentInfo], cleaned: CleanedSegment, generation: int
    ) -> bool:
        if not isinstance(cleaned, SqliteCleanedSegment) or cleaned.owner is not self:
            raise TypeError(f"not a cleaned segment of this log: {cleaned!r}")
        if not old:
            cleaned.abort()
            return False
        first, end = old[0].base_offset, old[-1].next_offset
        if (
            generation != self._cleaning_generation
            or end > self._last_base()  # the active "segment" is never replaced
            or self._segments("base_offset>=? AND base_offset<?", (first, end)) != list(old)
        ):
            cleaned.abort()
            return False
        headers = [parse_batch_header(batch) for batch in cleaned.batches]
        rows = [
            (
                *self._key,
                h.base_offset,
                h.last_offset,
                h.max_timestamp,
                h.partition_leader_epoch,
                batch,
            )
            for h, batch in zip(headers, cleaned.batches, strict=True)
        ]
        size = self._size
        try:
            with self._db:  # rolled back whole if any statement fails
                removed = self._delete_where("base_offset>=? AND base_offset<?", (first, end))
                assert removed == len(old)
                self._db.executemany("INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        except BaseException:
            self._size = size
            cleaned.abort()
            raise
        self._size += cleaned.size
        return True

    def flush(self) -> None:
        self._db.execute("PRAGMA wal_checkpoint(FULL)")

    def read_checkpoint(self, name: str) -> bytes | None:
        row = self._db.execute(
            "SELECT data FROM checkpoints WHERE topic=? AND partition=? AND name=?",
            (*self._key, name),
        ).fetchone()
        return None if row is None else bytes(row[0])

    def write_checkpoint(self, name: str, data: bytes) -> None:
        with self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO checkpoints VALUES (?, ?, ?, ?)", (*self._key, name, data)
            )

    def close(self) -> None:
        return None


class SqliteStorageEngine:
    """One ``pydmq.sqlite3`` database under ``data_dir`` for every partition."""

    def __init__(self, data_dir: str, options: Mapping[str, str] | None = None) -> None:
        os.makedirs(data_dir, exist_ok=True)
        self._db = sqlite3.connect(os.path.join(data_dir, "pydmq.sqlite3"), isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={(options or {}).get('synchronous', 'NORMAL')}")
        self._db.executescript(_SCHEMA)
        self._db.isolation_level = "DEFERRED"
        self._logs: dict[TopicPartition, SqliteLog] = {}

    def open_log(self, tp: TopicPartition, config: LogConfig) -> SqliteLog:
        log = self._logs.get(tp)
        if log is None:
            log = self._logs[tp] = SqliteLog(self._db, tp, config)
        else:
            log.config = config
        return log

    def delete_log(self, tp: TopicPartition) -> None:
        self._logs.pop(tp, None)
        with self._db:
            for table in ("batches", "logs", "checkpoints", "aborted_txns"):
                self._db.execute(
                    f"DELETE FROM {table} WHERE topic=? AND partition=?", (tp.topic, tp.partition)
                )

    def list_logs(self) -> list[TopicPartition]:
        rows = self._db.execute("SELECT topic, partition FROM logs ORDER BY topic, partition")
        return [TopicPartition(t, p) for t, p in rows]

    def close(self) -> None:
        self._logs.clear()
        self._db.close()
