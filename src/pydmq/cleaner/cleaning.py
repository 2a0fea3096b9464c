"""The cleaning of batches, sans-IO: which records of a compacted log are kept, and the batches
that hold them re-encoded in Kafka's RecordBatch v2 layout (CRC32C recomputed).

No thread, no file: a cleaner thread feeds batches in and writes what comes out. Kafka's rules
(``Cleaner.cleanInto`` / ``MemoryRecords.filterTo``):

* the dirty section is mapped first (:class:`OffsetMapBuilder`): each key's last offset;
* a keyed record is kept when no later offset of its key is in the map;
* a record without a key is kept (Kafka refuses them at produce; older data may hold some);
* a tombstone (null value) is kept until the delete horizon of its batch has passed (KIP-534):
  the first cleaning of a batch that keeps a tombstone sets the horizon to now +
  ``delete.retention.ms`` (attribute bit 6, the horizon in baseTimestamp, record timestamp
  deltas rewritten against it); a later cleaning past the horizon removes the tombstones;
* a batch keeps its base offset, last offset delta and producer fields, so offsets are kept
  (readers see gaps) and so are producer sequences; a batch left without records is dropped,
  unless it is the last batch of its producer id, which is kept empty (as Kafka keeps it) so
  that idempotent producer state survives a restart that rebuilds it from the log;
* a batch keeps its compression codec (re-compressed with that codec when rewritten); a batch
  all of whose records are kept is passed on as it is, byte for byte;
* transactions (:class:`~pydmq.cleaner.transactions.CleanedTransactions`, built from the
  log's aborted-transaction index): the records of an aborted transaction are neither mapped
  nor kept (its batch goes, or stays empty when it is its producer's last); committed
  transactional batches are mapped and cleaned as any; control batches (COMMIT/ABORT markers)
  are never mapped. A marker whose transaction's records are all gone gets a delete horizon
  (KIP-534, as a tombstone's) and goes at the first cleaning past it; an ABORT's index entry
  goes as soon as its records are gone (:attr:`BatchCleaner.dropped_index_entries`, removed
  from the log before the cleaned segment is swapped in, so an entry never outlives its
  marker). Transactional and control batches at or past ``CleaningRules.transactions_up_to``
  (the first uncleanable offset: an open transaction may start there) pass untouched.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from pydmq.cleaner.offset_map import OffsetMap
from pydmq.cleaner.transactions import CleanedTransactions
from pydmq.protocol.batch_header import (
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    CRC,
    CRC_AT,
    CRC_START,
    DELETE_HORIZON_FLAG,
    HEADER,
    LOG_OVERHEAD,
    MAGIC,
    TIMESTAMP_TYPE_MASK,
)
from pydmq.protocol.primitives import Writer
from pydmq.protocol.records import BatchHeader, CorruptRecordError, crc32c, parse_batch_header
from pydmq.storage.api import AbortedTxn
from pydmq.storage.transactions import end_txn_marker

__all__ = [
    "BatchCleaner",
    "CleaningRules",
    "CleaningStats",
    "OffsetMapBuilder",
    "RawRecord",
    "iter_raw_records",
]

MAX_DECOMPRESSED = 64 * 1024 * 1024


class RawRecord(NamedTuple):
    """One record of a batch's (decompressed) records section, located but not copied.

    ``[start, end)`` is the whole record, length prefix included; its attributes byte is at
    ``body_start`` and its fields after the timestamp delta start at ``after_timestamp``."""

    start: int
    body_start: int
    end: int
    after_timestamp: int
    timestamp_delta: int
    offset_delta: int
    key: bytes | None
    is_tombstone: bool


def _varint(data: bytes, position: int) -> tuple[int, int]:
    """A zig-zag varint at ``position``: (value, position after it). Hand-written: the
    cleaner walks every record of a compacted log twice (Reader objects per record made
    cleaning 4x slower)."""
    byte = data[position]
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), position + 1
    raw = byte & 0x7F
    shift = 7
    while True:
        position += 1
        byte = data[position]
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (raw >> 1) ^ -(raw & 1), position + 1
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes")


def iter_raw_records(payload: bytes, count: int) -> Iterator[RawRecord]:
    """Walk ``count`` records of a records section; every length is bounded by the bytes
    left (a malformed section raises CorruptRecordError). One-byte varints (most fields of
    most records) are decoded inline: measured 25-30 % faster than a call per field."""
    position = 0
    size = len(payload)
    varint = _varint
    try:
        for _ in range(count):
            start = position
            byte = payload[position]
            if byte < 0x80:
                length, body_start = (byte >> 1) ^ -(byte & 1), position + 1
            else:
                length, body_start = varint(payload, position)
            end = body_start + length
            if length <= 0 or end > size:
                raise CorruptRecordError(f"invalid record length {length}")
            byte = payload[body_start + 1]
            if byte < 0x80:
                timestamp_delta, after_timestamp = (byte >> 1) ^ -(byte & 1), body_start + 2
            else:
                timestamp_delta, after_timestamp = varint(payload, body_start + 1)
            byte = payload[after_timestamp]
            if byte < 0x80:
                offset_delta, position = (byte >> 1) ^ -(byte & 1), after_timestamp + 1
            else:
                offset_delta, position = varint(payload, after_timestamp)
            byte = payload[position]
            if byte < 0x80:
                key_length, position = (byte >> 1) ^ -(byte & 1), position + 1
            else:
                key_length, position = varint(payload, position)
            key = None
            if key_length >= 0:
                key = payload[position : position + key_length]
                position += key_length
            if position >= end:
                raise CorruptRecordError("record fields run past its length")
            yield RawRecord(
                start,
                body_start,
                end,
                after_timestamp,
                timestamp_delta,
                offset_delta,
                key,
                payload[position] == 0x01,  # value length -1 (zig-zag 0x01): a tombstone
            )
            position = end
    except IndexError:
        raise CorruptRecordError("record section truncated") from None


def _payload(buf: bytes | memoryview, header: BatchHeader) -> bytes:
    view = memoryview(buf)[BATCH_HEADER_SIZE : header.size]
    if header.compression:
        from pydmq.protocol.compression import decompress  # cramjam: not at start-up

        return decompress(header.compression, view, MAX_DECOMPRESSED)
    return bytes(view)


class OffsetMapBuilder:
    """Maps the dirty section ``[start, stop)`` batch by batch until ``offset_map`` is full.

    ``reached`` is the offset up to which the map covers the log (Kafka's end offset of a
    cleaning): the next cleaning's first dirty offset. ``aborted``: the log's aborted
    transactions overlapping the section, whose records are not mapped (``stop`` never passes
    the first unstable offset: every transaction below it is decided)."""

    def __init__(
        self, offset_map: OffsetMap, start: int, stop: int, aborted: Sequence[AbortedTxn] = ()
    ) -> None:
        self.offset_map = offset_map
        self.start = start
        self.stop = stop
        self.reached = start
        self.full = False
        self._transactions = CleanedTransactions(txn for txn in aborted if txn.last_offset >= start)

    def add(self, buf: bytes | memoryview) -> bool:
        """Map one batch; False once the map is full or the batch is past ``stop`` (the
        caller stops feeding)."""
        header = parse_batch_header(buf, 0)
        if header.next_offset <= self.start:
            return True
        if header.next_offset > self.stop:
            return False
        if header.is_control:
            self._transactions.on_marker(header, end_txn_marker(buf, header))
        elif not self._transactions.is_aborted(header) and header.records_count:
            if not self.offset_map.room_for(header.records_count):
                self.full = True
                return False
            put = self.offset_map.put
            for record in iter_raw_records(_payload(buf, header), header.records_count):
                if record.key is not None:
                    put(record.key, header.base_offset + record.offset_delta)
        self.reached = header.next_offset
        return True


@dataclass(frozen=True, slots=True)
class CleaningRules:
    """What one cleaning decides by besides the offset map: the time, the topic's
    ``delete.retention.ms``, the last offset of each producer id's last batch (from the
    log's producer state), whose batch is kept even when it ends up empty, the log's aborted
    transactions from its start to ``transactions_up_to``, where transactional and control
    batches stop being cleaned (the first uncleanable offset)."""

    now_ms: int
    delete_retention_ms: int
    last_offset_of_producer: Mapping[int, int]
    aborted: Sequence[AbortedTxn] = ()
    transactions_up_to: int = 2**63 - 1


@dataclass(slots=True)
class CleaningStats:
    """Counts of one cleaning (Kafka's CleanerStats, in part)."""

    batches_read: int = 0
    records_read: int = 0
    bytes_read: int = 0
    batches_written: int = 0
    records_written: int = 0
    bytes_written: int = 0


class BatchCleaner:
    """Cleans batches one at a time against a built offset map (one cleaner thread)."""

    def __init__(self, offset_map: OffsetMap, rules: CleaningRules) -> None:
        self.offset_map = offset_map
        self.rules = rules
        self.stats = CleaningStats()
        self._transactions = CleanedTransactions(rules.aborted)
        # Marker offsets of the ABORTs whose index entries go (records all gone), since the
        # last take_dropped_index_entries().
        self.dropped_index_entries: list[int] = []

    def take_dropped_index_entries(self) -> list[int]:
        """The marker offsets of the index entries to remove before the next swap."""
        dropped, self.dropped_index_entries = self.dropped_index_entries, []
        return dropped

    def clean(self, buf: bytes | memoryview) -> bytes | memoryview | None:
        """The batch to keep in place of ``buf`` (``buf`` itself when unchanged), or None."""
        header = parse_batch_header(buf, 0)
        stats = self.stats
        stats.batches_read += 1
        stats.records_read += header.records_count
        stats.bytes_read += header.size
        out = self._clean(buf, header)
        if out is not None:
            stats.batches_written += 1
            stats.bytes_written += len(out)
        return out

    def _clean(self, buf: bytes | memoryview, header: BatchHeader) -> bytes | memoryview | None:
        transactional = header.is_control or header.is_transactional
        if transactional and header.last_offset >= self.rules.transactions_up_to:
            self.stats.records_written += header.records_count
            return buf  # past the first uncleanable offset: maybe an open transaction
        if header.is_control:
            return self._clean_marker(buf, header)
        if self._transactions.is_aborted(header):
            return self._drop_records(header)
        now = self.rules.now_ms
        horizon_set = bool(header.attributes & DELETE_HORIZON_FLAG)
        removable_tombstones = horizon_set and now >= header.base_timestamp
        payload = _payload(buf, header)
        kept: list[RawRecord] = []
        tombstones = False
        get = self.offset_map.get
        for record in iter_raw_records(payload, header.records_count):
            if record.key is not None and get(record.key) > (
                header.base_offset + record.offset_delta
            ):
                continue  # a later value of the key is in the dirty section
            if record.is_tombstone:
                if removable_tombstones:
                    continue
                tombstones = True
            kept.append(record)
        self.stats.records_written += len(kept)
        needs_horizon = tombstones and not horizon_set
        if len(kept) == header.records_count and not needs_horizon:
            return buf
        if not kept:
            return self._drop_records(header)
        horizon = now + self.rules.delete_retention_ms if needs_horizon else -1
        return _rebuild(header, payload, kept, horizon)

    def _clean_marker(
        self, buf: bytes | memoryview, header: BatchHeader
    ) -> bytes | memoryview | None:
        """A control batch: kept while its transaction has records; then given a delete
        horizon, and removed by the first cleaning past it."""
        verdict = self._transactions.on_marker(header, end_txn_marker(buf, header))
        if verdict.drop_index_entry:
            self.dropped_index_entries.append(header.base_offset)
        if verdict.removable:
            if not header.records_count:
                return None  # an empty control batch: cleaned before
            if not header.attributes & DELETE_HORIZON_FLAG:
                payload = _payload(buf, header)
                records = list(iter_raw_records(payload, header.records_count))
                self.stats.records_written += header.records_count
                horizon = self.rules.now_ms + self.rules.delete_retention_ms
                return _rebuild(header, payload, records, horizon)
            if self.rules.now_ms >= header.base_timestamp:
                return None
        self.stats.records_written += header.records_count
        return buf

    def _drop_records(self, header: BatchHeader) -> bytes | None:
        """No record of the batch is kept: it goes, unless it is its producer's last batch,
        kept empty so that the producer state rebuilt from the log keeps the producer."""
        last = self.rules.last_offset_of_producer.get(header.producer_id, -1)
        if header.producer_id >= 0 and last == header.last_offset:
            return _empty_batch(header)
        return None


def _rebuild(header: BatchHeader, payload: bytes, kept: list[RawRecord], horizon: int) -> bytes:
    """The batch of ``header`` holding only ``kept`` records; with a new delete ``horizon``
    (>= 0), baseTimestamp becomes it and each record's timestamp delta is rewritten."""
    attributes = header.attributes
    base_timestamp = header.base_timestamp
    body = bytearray()
    if horizon < 0:
        for record in kept:
            body += payload[record.start : record.end]
    else:
        attributes |= DELETE_HORIZON_FLAG
        base_timestamp = horizon
        shift = header.base_timestamp - horizon
        for record in kept:
            fields = Writer(bytearray(payload[record.body_start : record.body_start + 1]))
            fields.varlong(record.timestamp_delta + shift)
            fields.raw(payload[record.after_timestamp : record.end])
            prefixed = Writer(body)
            prefixed.varint(len(fields.buf))
            body += fields.buf
    if header.attributes & TIMESTAMP_TYPE_MASK:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = max(header.base_timestamp + r.timestamp_delta for r in kept)
    codec = header.attributes & COMPRESSION_MASK
    from pydmq.protocol.compression import compress  # cramjam: not at start-up

    records: bytes | bytearray = compress(codec, body) if codec else body
    return _encode(header, attributes, base_timestamp, max_timestamp, len(kept), records)


def _empty_batch(header: BatchHeader) -> bytes:
    """The batch of ``header`` without records, uncompressed (Kafka's empty batch header)."""
    attributes = header.attributes & ~COMPRESSION_MASK
    return _encode(header, attributes, header.max_timestamp, header.max_timestamp, 0, b"")


def _encode(
    header: BatchHeader,
    attributes: int,
    base_timestamp: int,
    max_timestamp: int,
    count: int,
    records: bytes | bytearray,
) -> bytes:
    out = bytearray(BATCH_HEADER_SIZE)
    HEADER.pack_into(
        out,
        0,
        header.base_offset,
        BATCH_HEADER_SIZE - LOG_OVERHEAD + len(records),
        header.partition_leader_epoch,
        MAGIC,
        0,
        attributes,
        header.last_offset_delta,
        base_timestamp,
        max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        count,
    )
    out += records
    CRC.pack_into(out, CRC_AT, crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)
