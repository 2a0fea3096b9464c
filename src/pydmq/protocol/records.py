"""RecordBatch v2 framing: header parsing, CRC32C validation and in-place offset assignment.

Hand-written hot path (DESIGN.md §3): the produce path touches each batch header, never each
record. The header layout (field offsets, structs, the CRC range, attribute bits) is declared in
:mod:`pydmq.protocol.batch_header`; ``baseOffset`` and ``partitionLeaderEpoch`` are outside the
CRC, so they are patched in place without recomputing it.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Final, NamedTuple

import crc32c as _crc32c

from pydmq.protocol.batch_header import (
    ATTRIBUTES,
    ATTRIBUTES_AT,
    BASE_OFFSET,
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    CONTROL_FLAG,
    CRC,
    CRC_AT,
    CRC_START,
    FRAME,
    HEADER,
    LOG_OVERHEAD,
    MAGIC,
    MAX_TIMESTAMP,
    MAX_TIMESTAMP_AT,
    PARTITION_LEADER_EPOCH,
    PARTITION_LEADER_EPOCH_AT,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG,
)
from pydmq.protocol.errors import ErrorCode

__all__ = [
    "BATCH_HEADER_SIZE",
    "LOG_OVERHEAD",
    "MIN_HEADER_SIZE",
    "MIN_RECORD_SIZE",
    "BatchHeader",
    "ControlRecordType",
    "CorruptRecordError",
    "EndTxnMarker",
    "InvalidRecordError",
    "Record",
    "RecordTooLargeError",
    "SimpleRecord",
    "build_batch",
    "build_end_txn_marker",
    "crc32c",
    "decode_records",
    "has_record_without_key",
    "iter_batch_headers",
    "iter_record_timestamps",
    "iter_records",
    "parse_batch_header",
    "parse_end_txn_marker",
    "patch_offsets",
    "set_log_append_time",
    "validate_batch",
]

# The smallest record: length, attributes, timestampDelta, offsetDelta, key and value lengths
# (-1) and header count, one byte each. A header is at least its key and value lengths.
MIN_RECORD_SIZE: Final = 7
MIN_HEADER_SIZE: Final = 2
NO_PRODUCER_ID: Final = -1
NO_SEQUENCE: Final = -1


class CorruptRecordError(ValueError):
    """A record batch whose framing, magic or CRC is wrong (Kafka: CORRUPT_MESSAGE).

    Base class of every record-batch rejection of this module; ``error_code`` is the Kafka error
    code a Produce response should carry for it.
    """

    error_code: int = ErrorCode.CORRUPT_MESSAGE


class InvalidRecordError(CorruptRecordError):
    """A well-formed batch that breaks Kafka's rules for its origin (Kafka: INVALID_RECORD)."""

    error_code: int = ErrorCode.INVALID_RECORD


class RecordTooLargeError(CorruptRecordError):
    """A batch larger than ``max.message.bytes`` (Kafka: MESSAGE_TOO_LARGE)."""

    error_code: int = ErrorCode.MESSAGE_TOO_LARGE


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC32C (Castagnoli) of ``data``."""
    return int(_crc32c.crc32c(data))


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The fixed 61-byte header of one RecordBatch v2, and where it sits in its buffer."""

    position: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch including the 12-byte log overhead."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def parse_batch_header(buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """Parse the batch header at ``position``; raises CorruptRecordError if it cannot be a v2 batch.

    Only the framing is checked here (enough bytes, magic 2, sane length); the CRC is checked by
    :func:`validate_crc`.
    """
    if len(buf) - position < BATCH_HEADER_SIZE:
        raise CorruptRecordError("record batch shorter than its 61-byte header")
    fields = HEADER.unpack_from(buf, position)
    batch_length = fields[1]
    if fields[3] != MAGIC:
        raise CorruptRecordError(f"unsupported record batch magic {fields[3]}")
    if batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(f"record batch length {batch_length} below the header size")
    if position + LOG_OVERHEAD + batch_length > len(buf):
        raise CorruptRecordError("record batch length runs past the end of the buffer")
    return BatchHeader(position, *fields)


def validate_crc(buf: bytes | bytearray | memoryview, header: BatchHeader) -> None:
    """Raise CorruptRecordError unless the stored CRC32C matches the batch bytes."""
    start = header.position + CRC_START
    end = header.position + header.size
    actual = crc32c(memoryview(buf)[start:end])
    if actual != header.crc:
        raise CorruptRecordError(
            f"record batch CRC mismatch: stored {header.crc:#010x}, computed {actual:#010x}"
        )


def iter_batch_headers(buf: bytes | bytearray | memoryview) -> Iterator[BatchHeader]:
    """Yield each batch header of a buffer of consecutive batches; a torn tail raises."""
    position = 0
    end = len(buf)
    while position < end:
        header = parse_batch_header(buf, position)
        yield header
        position += header.size


def read_frame_length(buf: bytes | bytearray | memoryview, position: int) -> tuple[int, int] | None:
    """Return (base_offset, total size) of the batch at ``position`` or None if fewer than 12 bytes."""
    if len(buf) - position < LOG_OVERHEAD:
        return None
    base_offset, length = FRAME.unpack_from(buf, position)
    return base_offset, length + LOG_OVERHEAD


def patch_offsets(
    buf: bytearray | memoryview, header: BatchHeader, base_offset: int, leader_epoch: int
) -> None:
    """Assign ``base_offset`` and ``partition_leader_epoch`` in place (not covered by the CRC)."""
    BASE_OFFSET.pack_into(buf, header.position, base_offset)
    PARTITION_LEADER_EPOCH.pack_into(buf, header.position + PARTITION_LEADER_EPOCH_AT, leader_epoch)


# -- validation ----------------------------------------------------------------------------------

_MAX_CODEC: Final = 4


def validate_batch(
    buf: bytes | bytearray | memoryview,
    header: BatchHeader,
    *,
    max_size: int | None = None,
    from_client: bool = True,
) -> None:
    """Check one batch as the partition leader does before assigning offsets.

    Checks, in order: size against ``max_size`` (``max.message.bytes``; RecordTooLargeError),
    CRC32C (CorruptRecordError), codec 0..4 (CompressionError) and the record count. For a batch
    produced by a client (``from_client``) Kafka requires ``records_count > 0``,
    ``last_offset_delta == records_count - 1`` and no control batch (InvalidRecordError). For
    replication and recovery, empty batches left by the log cleaner are legal, so only
    ``0 <= records_count <= last_offset_delta + 1`` is required. Records are not decoded.
    Magic 2 and the framing were already checked by :func:`parse_batch_header`.
    """
    if max_size is not None and header.size > max_size:
        raise RecordTooLargeError(
            f"record batch of {header.size} bytes exceeds the maximum of {max_size}"
        )
    validate_crc(buf, header)
    if header.attributes & COMPRESSION_MASK > _MAX_CODEC:
        from pydmq.protocol.compression import CompressionError

        raise CompressionError(f"invalid compression codec id {header.compression}")
    count = header.records_count
    if from_client:
        if header.is_control:
            raise InvalidRecordError("clients are not allowed to write control records")
        if count <= 0:
            raise InvalidRecordError(f"invalid reported count for record batch: {count}")
        if header.last_offset_delta + 1 != count:
            raise InvalidRecordError(
                f"inconsistent batch offset range: last offset delta "
                f"{header.last_offset_delta} for {count} records"
            )
    elif count < 0 or header.last_offset_delta < 0 or count > header.last_offset_delta + 1:
        raise CorruptRecordError(
            f"inconsistent record count {count} for last offset delta {header.last_offset_delta}"
        )


def set_log_append_time(
    buf: bytearray | memoryview, header: BatchHeader, timestamp_ms: int
) -> BatchHeader:
    """Mark the batch LogAppendTime with ``maxTimestamp = timestamp_ms`` and rewrite its CRC.

    What Kafka's leader does for a topic with ``message.timestamp.type=LogAppendTime``: the
    attributes' timestamp-type bit is set and maxTimestamp holds the append time (readers use
    it as every record's timestamp); baseTimestamp and the records are left as they are.
    Returns the header describing the updated bytes.
    """
    position = header.position
    attributes = header.attributes | TIMESTAMP_TYPE_MASK
    ATTRIBUTES.pack_into(buf, position + ATTRIBUTES_AT, attributes)
    MAX_TIMESTAMP.pack_into(buf, position + MAX_TIMESTAMP_AT, timestamp_ms)
    crc = crc32c(memoryview(buf)[position + CRC_START : position + header.size])
    CRC.pack_into(buf, position + CRC_AT, crc)
    return replace(header, attributes=attributes, max_timestamp=timestamp_ms, crc=crc)


# -- record decoding (not the produce hot path) --------------------------------------------------


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record of a v2 batch, with its absolute offset and effective timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def _read_varint(data: bytes, position: int, end: int, max_bytes: int) -> tuple[int, int]:
    """Decode one zig-zag varint (``max_bytes`` 5 for int32, 10 for int64) inside [position, end)."""
    raw = 0
    shift = 0
    limit = position + max_bytes
    while True:
        if position >= end:
            raise CorruptRecordError("record truncated inside a varint")
        if position >= limit:
            raise CorruptRecordError(f"varint longer than {max_bytes} bytes")
        byte = data[position]
        position += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), position
        shift += 7


def _record_span(data: bytes, position: int, end: int) -> tuple[int, int]:
    """Where the record whose length varint is at ``position`` starts and ends."""
    length, position = _read_varint(data, position, end, 5)
    if length <= 0 or length > end - position:
        raise CorruptRecordError(f"invalid record length {length}")
    return position, position + length


def _read_bytes(
    data: bytes, position: int, end: int, what: str, *, nullable: bool = True
) -> tuple[bytes | None, int]:
    length, position = _read_varint(data, position, end, 5)
    if length < 0:
        if length == -1 and nullable:
            return None, position
        raise CorruptRecordError(f"invalid {what} length {length}")
    if length > end - position:
        raise CorruptRecordError(f"{what} length {length} runs past the end of its record")
    return data[position : position + length], position + length


def _records_data(
    buf: bytes | bytearray | memoryview, header: BatchHeader, max_decompressed: int
) -> bytes:
    """The batch's records section, decompressed; its record count checked against the
    smallest size its records can have, before any is decoded."""
    count = header.records_count
    if count < 0:
        raise CorruptRecordError(f"invalid record count {count}")
    view = memoryview(buf)[header.position + BATCH_HEADER_SIZE : header.position + header.size]
    if header.compression:
        from pydmq.protocol.compression import decompress

        data = decompress(header.compression, view, max_decompressed)
    else:
        data = bytes(view)
    if count > len(data) // MIN_RECORD_SIZE:
        raise CorruptRecordError(
            f"record count {count} does not fit in {len(data)} bytes of records"
        )
    return data


def decode_records(
    buf: bytes | bytearray | memoryview,
    header: BatchHeader,
    *,
    max_decompressed: int = 64 * 1024 * 1024,
) -> list[Record]:
    """Decode every record of the batch described by ``header`` (decompressing if needed).

    Every length and count is bounded by the bytes that remain; any inconsistency raises
    CorruptRecordError (CompressionError for codec problems). The batch's record count and each
    record's header count are checked against the smallest size their records and headers can
    have before any is decoded, so a count that the bytes cannot hold costs nothing. For a
    LogAppendTime batch each record's timestamp is the batch's maxTimestamp, as Kafka readers
    report it.
    """
    count = header.records_count
    data = _records_data(buf, header, max_decompressed)
    end = len(data)
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    log_append_time = header.max_timestamp if header.is_log_append_time else None
    records: list[Record] = []
    position = 0
    for _ in range(count):
        start, record_end = _record_span(data, position, end)
        position = start + 1  # attributes (int8, unused)
        timestamp_delta, position = _read_varint(data, position, record_end, 10)
        offset_delta, position = _read_varint(data, position, record_end, 5)
        key, position = _read_bytes(data, position, record_end, "key")
        value, position = _read_bytes(data, position, record_end, "value")
        header_count, position = _read_varint(data, position, record_end, 5)
        if header_count < 0 or header_count > (record_end - position) // MIN_HEADER_SIZE:
            raise CorruptRecordError(f"invalid header count {header_count}")
        headers: list[tuple[str, bytes | None]] = []
        for _h in range(header_count):
            raw_key, position = _read_bytes(
                data, position, record_end, "header key", nullable=False
            )
            assert raw_key is not None
            try:
                header_key = raw_key.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise CorruptRecordError(f"header key is not UTF-8: {exc}") from exc
            header_value, position = _read_bytes(data, position, record_end, "header value")
            headers.append((header_key, header_value))
        if position != record_end:
            raise CorruptRecordError(
                f"record declared {record_end - start} bytes but its fields end {record_end - position} "
                "bytes early"
            )
        records.append(
            Record(
                base_offset + offset_delta,
                base_timestamp + timestamp_delta if log_append_time is None else log_append_time,
                key,
                value,
                tuple(headers),
            )
        )
    if position != end:
        raise CorruptRecordError(
            f"{end - position} bytes remain after the batch's {count} declared records"
        )
    return records


def iter_record_timestamps(
    buf: bytes | bytearray | memoryview,
    header: BatchHeader,
    *,
    max_decompressed: int = 64 * 1024 * 1024,
) -> Iterator[tuple[int, int]]:
    """(offset, timestamp) of each record of the batch, lazily, reading only each record's
    length, timestamp delta and offset delta (timestamp lookups: a batch of millions of tiny
    compressed records is walked without building a Record per record). Bounds and counts are
    checked as :func:`decode_records` checks them; fields the walk skips are not validated."""
    count = header.records_count
    data = _records_data(buf, header, max_decompressed)
    end = len(data)
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    log_append_time = header.max_timestamp if header.is_log_append_time else None
    position = 0
    for _ in range(count):
        position, record_end = _record_span(data, position, end)
        timestamp_delta, field = _read_varint(data, position + 1, record_end, 10)
        offset_delta, _ = _read_varint(data, field, record_end, 5)
        timestamp = base_timestamp + timestamp_delta if log_append_time is None else log_append_time
        yield base_offset + offset_delta, timestamp
        position = record_end


def has_record_without_key(
    buf: bytes | bytearray | memoryview,
    header: BatchHeader,
    *,
    max_decompressed: int = 64 * 1024 * 1024,
) -> bool:
    """Whether a record of the batch has a null key (a compacted topic refuses it), reading
    only each record's length, the two deltas it skips and its key length: about 8 times
    faster than :func:`decode_records`. Bounds and counts are checked as
    :func:`decode_records` checks them; a key length below -1 is corrupt."""
    count = header.records_count
    data = _records_data(buf, header, max_decompressed)
    end = len(data)
    position = 0
    for _ in range(count):
        position, record_end = _record_span(data, position, end)
        field = _skip_varint(data, position + 1, record_end, 10)  # timestamp delta
        field = _skip_varint(data, field, record_end, 5)  # offset delta
        key_length, _ = _read_varint(data, field, record_end, 5)
        if key_length < 0:
            if key_length == -1:
                return True
            raise CorruptRecordError(f"invalid key length {key_length}")
        position = record_end
    return False


def _skip_varint(data: bytes, position: int, end: int, max_bytes: int) -> int:
    """The position after the varint at ``position``, inside [position, end)."""
    limit = min(end, position + max_bytes)
    while position < limit:
        if not data[position] & 0x80:
            return position + 1
        position += 1
    if position >= end:
        raise CorruptRecordError("record truncated inside a varint")
    raise CorruptRecordError(f"varint longer than {max_bytes} bytes")


def iter_records(
    buf: bytes | bytearray | memoryview, *, max_decompressed: int = 64 * 1024 * 1024
) -> Iterator[Record]:
    """Decode the records of every batch of a buffer of consecutive batches (CRC-checked)."""
    for header in iter_batch_headers(buf):
        validate_crc(buf, header)
        yield from decode_records(buf, header, max_decompressed=max_decompressed)


# -- building batches ----------------------------------------------------------------------------


class SimpleRecord(NamedTuple):
    """Input to :func:`build_batch`; ``timestamp`` None means "now" (CreateTime)."""

    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = ()
    timestamp: int | None = None


_UINT64_MASK: Final = (1 << 64) - 1


def _write_varint(out: bytearray, value: int) -> None:
    raw = ((value << 1) ^ (value >> 63)) & _UINT64_MASK
    while raw > 0x7F:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out.append(0x01)  # zig-zag -1
    else:
        _write_varint(out, len(data))
        out += data


def _encode_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Iterable[tuple[str, bytes | None]],
) -> None:
    body = bytearray(b"\x00")  # attributes
    _write_varint(body, timestamp_delta)
    _write_varint(body, offset_delta)
    _write_bytes(body, key)
    _write_bytes(body, value)
    headers = tuple(headers)
    _write_varint(body, len(headers))
    for header_key, header_value in headers:
        _write_bytes(body, header_key.encode("utf-8"))
        _write_bytes(body, header_value)
    _write_varint(out, len(body))
    out += body


def build_batch(
    records: Sequence[SimpleRecord],
    *,
    base_offset: int = 0,
    compression: int = 0,
    compression_level: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = -1,
    timestamp_type_log_append: bool = False,
) -> bytes:
    """Encode one RecordBatch v2 (with CRC32C) holding ``records`` at consecutive offsets.

    ``records`` may be :class:`SimpleRecord` or plain ``(key, value, headers, timestamp)``
    tuples. baseTimestamp is the first record's timestamp and maxTimestamp the largest, as the
    Java producer writes them.
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    if not 0 <= compression <= _MAX_CODEC:
        raise ValueError(f"invalid compression codec id {compression}")
    now: int | None = None
    timestamps: list[int] = []
    for record in records:
        timestamp = record[3]
        if timestamp is None:
            if now is None:
                now = time.time_ns() // 1_000_000
            timestamp = now
        timestamps.append(timestamp)
    base_timestamp = timestamps[0]
    body = bytearray()
    for delta, (record, timestamp) in enumerate(zip(records, timestamps, strict=True)):
        _encode_record(body, delta, timestamp - base_timestamp, record[0], record[1], record[2])
    payload: bytes | bytearray = body
    if compression:
        from pydmq.protocol.compression import compress

        payload = compress(compression, body, compression_level)
    attributes = compression
    if timestamp_type_log_append:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG
    if is_control:
        attributes |= CONTROL_FLAG
    out = bytearray(BATCH_HEADER_SIZE)
    HEADER.pack_into(
        out,
        0,
        base_offset,
        BATCH_HEADER_SIZE - LOG_OVERHEAD + len(payload),
        partition_leader_epoch,
        MAGIC,
        0,
        attributes,
        len(records) - 1,
        base_timestamp,
        max(timestamps),
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    out += payload
    CRC.pack_into(out, CRC_AT, crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


# -- transaction markers (control batches) -------------------------------------------------------


class ControlRecordType:
    """Control record types (the ``type`` field of a control record's key)."""

    ABORT: Final = 0
    COMMIT: Final = 1


class EndTxnMarker(NamedTuple):
    """A decoded COMMIT/ABORT control record."""

    control_type: int
    coordinator_epoch: int


_CONTROL_KEY = struct.Struct(">hh")  # version, type
_END_TXN_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch


def build_end_txn_marker(
    *,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    timestamp: int | None = None,
) -> bytes:
    """A transactional control batch holding one COMMIT or ABORT marker (as WriteTxnMarkers)."""
    control_type = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    record = SimpleRecord(
        _CONTROL_KEY.pack(0, control_type),
        _END_TXN_VALUE.pack(0, coordinator_epoch),
        (),
        timestamp,
    )
    return build_batch(
        [record],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


def parse_end_txn_marker(record: Record) -> EndTxnMarker:
    """Decode a COMMIT/ABORT control record; raises CorruptRecordError for anything else."""
    if record.key is None or len(record.key) < _CONTROL_KEY.size:
        raise CorruptRecordError("control record key too short")
    _version, control_type = _CONTROL_KEY.unpack_from(record.key)
    if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise CorruptRecordError(f"control record type {control_type} is not an end-txn marker")
    if record.value is None or len(record.value) < _END_TXN_VALUE.size:
        raise CorruptRecordError("end-txn marker value too short")
    _version, coordinator_epoch = _END_TXN_VALUE.unpack_from(record.value)
    return EndTxnMarker(control_type, coordinator_epoch)
