"""RecordBatch v2 building, decoding, validation and LogAppendTime (pydmq.protocol.records)."""

from __future__ import annotations

import contextlib
import struct
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pydmq.protocol.compression import CompressionError
from pydmq.protocol.records import (
    BATCH_HEADER_SIZE,
    ControlRecordType,
    CorruptRecordError,
    InvalidRecordError,
    Record,
    RecordTooLargeError,
    SimpleRecord,
    build_batch,
    build_end_txn_marker,
    decode_records,
    has_record_without_key,
    iter_batch_headers,
    iter_records,
    parse_batch_header,
    parse_end_txn_marker,
    patch_offsets,
    set_log_append_time,
    validate_batch,
    validate_crc,
)

CODECS = [0, 1, 2, 3, 4]

headers_st = st.lists(
    st.tuples(st.text(max_size=10), st.one_of(st.none(), st.binary(max_size=20))), max_size=3
)
record_st = st.builds(
    SimpleRecord,
    st.one_of(st.none(), st.binary(max_size=50)),
    st.one_of(st.none(), st.binary(max_size=300)),
    headers_st.map(tuple),
    st.integers(min_value=0, max_value=2**41),
)


def _expected(records: list[SimpleRecord], base_offset: int) -> list[Record]:
    return [
        Record(base_offset + i, r.timestamp or 0, r.key, r.value, tuple(r.headers))
        for i, r in enumerate(records)
    ]


@pytest.mark.parametrize("codec", CODECS)
@given(records=st.lists(record_st, min_size=1, max_size=20), base_offset=st.integers(0, 2**62))
@settings(max_examples=60, deadline=None)
def test_round_trip(codec: int, records: list[SimpleRecord], base_offset: int) -> None:
    data = build_batch(records, base_offset=base_offset, compression=codec)
    header = parse_batch_header(data)
    validate_batch(data, header, from_client=True)
    assert header.size == len(data)
    assert header.base_offset == base_offset
    assert header.records_count == len(records)
    assert header.last_offset_delta == len(records) - 1
    assert header.compression == codec
    assert header.base_timestamp == records[0].timestamp
    assert header.max_timestamp == max(r.timestamp or 0 for r in records)
    assert decode_records(data, header) == _expected(records, base_offset)


def test_producer_fields_and_flags() -> None:
    data = build_batch(
        [SimpleRecord(b"k", b"v")],
        producer_id=77,
        producer_epoch=3,
        base_sequence=2**31 - 1,
        is_transactional=True,
        partition_leader_epoch=9,
        base_offset=5,
    )
    header = parse_batch_header(data)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 3, 2**31 - 1)
    assert header.is_transactional and not header.is_control and not header.is_log_append_time
    assert header.partition_leader_epoch == 9
    assert header.last_sequence == 2**31 - 1
    validate_crc(data, header)


def test_timestamp_none_means_now() -> None:
    before = time.time_ns() // 1_000_000
    data = build_batch([SimpleRecord(None, b"a"), SimpleRecord(None, b"b", (), None)])
    after = time.time_ns() // 1_000_000
    header = parse_batch_header(data)
    assert before <= header.base_timestamp <= after
    assert {r.timestamp for r in decode_records(data, header)} == {header.base_timestamp}


def test_plain_tuples_and_negative_timestamp_deltas() -> None:
    data = build_batch([(b"k", b"1", (), 1000), (None, None, (("h", None),), 10)])  # type: ignore[list-item]
    header = parse_batch_header(data)
    assert header.base_timestamp == 1000 and header.max_timestamp == 1000
    recs = decode_records(data, header)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in recs] == [
        (0, 1000, b"k", b"1", ()),
        (1, 10, None, None, (("h", None),)),
    ]


def test_build_rejects_empty_and_bad_codec() -> None:
    with pytest.raises(ValueError):
        build_batch([])
    with pytest.raises(ValueError):
        build_batch([SimpleRecord(None, b"x")], compression=5)


def test_patch_offsets_keeps_crc_and_moves_record_offsets() -> None:
    buf = bytearray(build_batch([SimpleRecord(None, b"x", (), 1)] * 3, compression=3))
    header = parse_batch_header(buf)
    patch_offsets(buf, header, 1000, 7)
    patched = parse_batch_header(buf)
    validate_batch(buf, patched)
    assert [r.offset for r in decode_records(buf, patched)] == [1000, 1001, 1002]
    assert patched.partition_leader_epoch == 7


@pytest.mark.parametrize("codec", CODECS)
def test_set_log_append_time(codec: int) -> None:
    records = [SimpleRecord(b"k", b"v", (), 5), SimpleRecord(b"k", b"w", (), 9)]
    buf = bytearray(b"\x00" * 7 + build_batch(records, compression=codec))
    header = parse_batch_header(buf, 7)
    updated = set_log_append_time(buf, header, 123_456)
    reparsed = parse_batch_header(buf, 7)
    assert updated == reparsed
    assert reparsed.is_log_append_time and reparsed.max_timestamp == 123_456
    assert reparsed.base_timestamp == 5 and reparsed.compression == codec
    validate_batch(buf, reparsed)
    assert [r.timestamp for r in decode_records(buf, reparsed)] == [123_456, 123_456]


def test_log_append_time_flag_at_build() -> None:
    data = build_batch([SimpleRecord(None, b"v", (), 42)], timestamp_type_log_append=True)
    header = parse_batch_header(data)
    assert header.is_log_append_time
    assert decode_records(data, header)[0].timestamp == 42


def test_validate_batch_errors() -> None:
    data = bytearray(build_batch([SimpleRecord(None, b"v", (), 1)] * 2))
    header = parse_batch_header(data)
    validate_batch(data, header, max_size=len(data))
    with pytest.raises(RecordTooLargeError) as too_large:
        validate_batch(data, header, max_size=len(data) - 1)
    assert too_large.value.error_code == 10

    corrupt = bytearray(data)
    corrupt[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC") as bad_crc:
        validate_batch(corrupt, parse_batch_header(corrupt))
    assert bad_crc.value.error_code == 2


def _with_header(data: bytes, offset: int, fmt: str, value: int) -> bytearray:
    from pydmq.protocol.records import crc32c

    buf = bytearray(data)
    struct.pack_into(fmt, buf, offset, value)
    struct.pack_into(">I", buf, 17, crc32c(memoryview(buf)[21:]))
    return buf


def test_validate_batch_count_rules() -> None:
    data = build_batch([SimpleRecord(None, b"v", (), 1)] * 3)
    # recordsCount (offset 57) inconsistent with lastOffsetDelta
    buf = _with_header(data, 57, ">i", 2)
    with pytest.raises(InvalidRecordError, match="inconsistent") as exc:
        validate_batch(buf, parse_batch_header(buf))
    assert exc.value.error_code == 87
    validate_batch(buf, parse_batch_header(buf), from_client=False)  # cleaner-style batch
    buf = _with_header(data, 57, ">i", 0)
    with pytest.raises(InvalidRecordError, match="count"):
        validate_batch(buf, parse_batch_header(buf))
    validate_batch(buf, parse_batch_header(buf), from_client=False)
    buf = _with_header(data, 57, ">i", -1)
    with pytest.raises(CorruptRecordError):
        validate_batch(buf, parse_batch_header(buf), from_client=False)
    buf = _with_header(data, 57, ">i", 4)
    with pytest.raises(CorruptRecordError):
        validate_batch(buf, parse_batch_header(buf), from_client=False)
    # invalid codec 5 in attributes (offset 21)
    buf = _with_header(data, 21, ">h", 5)
    with pytest.raises(CompressionError, match="codec"):
        validate_batch(buf, parse_batch_header(buf))


def test_clients_cannot_write_control_batches() -> None:
    marker = build_end_txn_marker(producer_id=1, producer_epoch=0, commit=True, coordinator_epoch=3)
    header = parse_batch_header(marker)
    with pytest.raises(InvalidRecordError, match="control"):
        validate_batch(marker, header)
    validate_batch(marker, header, from_client=False)


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_marker_round_trip(commit: bool) -> None:
    data = build_end_txn_marker(
        producer_id=5, producer_epoch=2, commit=commit, coordinator_epoch=11, base_offset=40
    )
    header = parse_batch_header(data)
    assert header.is_control and header.is_transactional
    (record,) = decode_records(data, header)
    assert record.offset == 40
    marker = parse_end_txn_marker(record)
    expected = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    assert marker.control_type == expected and marker.coordinator_epoch == 11
    with pytest.raises(CorruptRecordError):
        parse_end_txn_marker(Record(0, 0, b"\x00\x00\x00\x05", b"\x00\x00\x00\x00\x00\x01", ()))
    with pytest.raises(CorruptRecordError):
        parse_end_txn_marker(Record(0, 0, None, None, ()))


def test_iter_records_across_batches() -> None:
    first = build_batch([SimpleRecord(b"a", b"1", (), 1)], base_offset=0)
    second = build_batch([SimpleRecord(b"b", b"2", (), 2)] * 2, base_offset=1, compression=4)
    buf = first + second
    assert [h.base_offset for h in iter_batch_headers(buf)] == [0, 1]
    assert [(r.offset, r.key) for r in iter_records(buf)] == [(0, b"a"), (1, b"b"), (2, b"b")]


# -- corrupt record payloads ---------------------------------------------------------------------


def _uncompressed_with_payload(payload: bytes, count: int) -> bytes:
    """A valid-CRC batch whose records section is ``payload`` and records_count ``count``."""
    from pydmq.protocol.records import crc32c

    template = bytearray(build_batch([SimpleRecord(None, b"", (), 0)]))
    buf = template[:BATCH_HEADER_SIZE] + payload
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    struct.pack_into(">i", buf, 57, count)
    struct.pack_into(">I", buf, 17, crc32c(memoryview(buf)[21:]))
    return bytes(buf)


def _record(body: bytes) -> bytes:
    return bytes([len(body) * 2]) + body  # zig-zag varint length (< 64 bytes)


@pytest.mark.parametrize(
    ("payload", "count", "match"),
    [
        # a count that the bytes cannot hold (7 bytes per record at least): refused up front
        (b"", 1, "does not fit"),  # declared record missing
        (_record(b"\x00\x00\x00\x01\x01\x00"), 2, "does not fit"),  # second record missing
        (b"\x7f", 1, "does not fit"),
        (_record(b"\x00\x00\x00\x01\x01\x00") * 2, 2_000_000_000, "does not fit"),
        # the second record ends inside its timestampDelta varint
        (_record(b"\x00\x00\x00\x01\x01\x00") + b"\x0c\x00" + b"\xff" * 5, 2, "truncated"),
        (_record(b"\x00\x00\x00\x01\x01\x00") + b"\x00", 1, "remain"),  # trailing bytes
        (b"\x7f" + b"\x00" * 6, 1, "length"),  # negative record length
        (b"\x40" + b"\x00" * 6, 1, "length"),  # length beyond the end
        (_record(b"\x00\x00\x00\x03\x01\x00"), 1, "key"),  # key -2
        (_record(b"\x00\x00\x00\x20\x01\x00"), 1, "key"),  # key longer than the record
        (_record(b"\x00\x00\x00\x01\x01\x01"), 1, "header count"),  # headers -1
        (_record(b"\x00\x00\x00\x01\x01\x06\x02\x02"), 1, "header count"),  # 3 in 2 bytes
        (_record(b"\x00\x00\x00\x01\x01\x02\x01\x01"), 1, "header key"),  # null header key
        (_record(b"\x00\x00\x00\x01\x01\x02\x02\xff\x01"), 1, "UTF-8"),
        (_record(b"\x00\x00\x00\x01\x01\x00\x00"), 1, "early"),  # fields end before length
        (_record(b"\x00" + b"\xff" * 11), 1, "varint"),  # varlong over 10 bytes
        (_record(b"\x00\x00" + b"\xff" * 6), 1, "varint"),  # varint over 5 bytes
    ],
)
def test_corrupt_records(payload: bytes, count: int, match: str) -> None:
    data = _uncompressed_with_payload(payload, count)
    header = parse_batch_header(data)
    with pytest.raises(CorruptRecordError, match=match):
        decode_records(data, header)


def test_minimal_valid_handmade_record() -> None:
    data = _uncompressed_with_payload(_record(b"\x00\x04\x00\x01\x01\x00"), 1)
    (record,) = decode_records(data, parse_batch_header(data))
    assert (record.timestamp, record.key, record.value, record.headers) == (2, None, None, ())


def test_negative_record_count_rejected() -> None:
    data = _uncompressed_with_payload(b"", -1)
    with pytest.raises(CorruptRecordError, match="count"):
        decode_records(data, parse_batch_header(data))


def test_decompression_budget_applies() -> None:
    data = build_batch([SimpleRecord(None, bytes(100_000), (), 0)], compression=4)
    header = parse_batch_header(data)
    with pytest.raises(CompressionError):
        decode_records(data, header, max_decompressed=50_000)


@given(st.binary(max_size=200), st.integers(0, 5))
@settings(max_examples=300, deadline=None)
def test_fuzz_payload_never_crashes(payload: bytes, count: int) -> None:
    data = _uncompressed_with_payload(payload, count)
    with contextlib.suppress(CorruptRecordError):
        decode_records(data, parse_batch_header(data))


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
@given(junk=st.binary(max_size=100))
@settings(max_examples=40, deadline=None)
def test_fuzz_compressed_payload_never_crashes(codec: int, junk: bytes) -> None:
    from pydmq.protocol.records import crc32c

    template = bytearray(build_batch([SimpleRecord(None, b"x" * 50, (), 0)], compression=codec))
    buf = template[:BATCH_HEADER_SIZE] + junk
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    struct.pack_into(">I", buf, 17, crc32c(memoryview(buf)[21:]))
    with contextlib.suppress(CorruptRecordError):
        decode_records(buf, parse_batch_header(buf))


# -- framing (parse_batch_header and friends) ----------------------------------------------------


def test_parse_batch_header_framing_errors() -> None:
    from pydmq.protocol.records import read_frame_length

    data = build_batch([SimpleRecord(None, b"v", (), 0)])
    with pytest.raises(CorruptRecordError, match="shorter"):
        parse_batch_header(data[:60])
    with pytest.raises(CorruptRecordError, match="magic"):
        parse_batch_header(data[:16] + b"\x01" + data[17:])
    with pytest.raises(CorruptRecordError, match="below"):
        parse_batch_header(data[:8] + struct.pack(">i", 10) + data[12:])
    with pytest.raises(CorruptRecordError, match="past the end"):
        parse_batch_header(data[:-1])
    with pytest.raises(CorruptRecordError, match="shorter"):
        list(iter_batch_headers(data + data[:30]))  # torn tail
    assert read_frame_length(data, 0) == (0, len(data))
    assert read_frame_length(data[:11], 0) is None


@pytest.mark.parametrize("codec", CODECS)
@given(records=st.lists(record_st, min_size=1, max_size=20))
@settings(max_examples=60, deadline=None)
def test_the_key_scan_agrees_with_decoding(codec: int, records: list[SimpleRecord]) -> None:
    """A compacted topic's key check reads only key lengths: it agrees with a full decode."""
    data = build_batch(records, compression=codec)
    header = next(iter_batch_headers(data))
    decoded = decode_records(data, header)
    assert has_record_without_key(data, header) == any(r.key is None for r in decoded)


def test_the_key_scan_refuses_a_corrupt_key_length_and_a_truncated_varint() -> None:
    data = bytearray(build_batch([SimpleRecord(b"k", b"v", (), 1)]))
    header = next(iter_batch_headers(data))
    # record: length, attributes, timestamp delta, offset delta, key length (zig-zag 1 = b"\x02")
    key_length_at = BATCH_HEADER_SIZE + 4
    assert data[key_length_at] == 0x02
    data[key_length_at] = 0x03  # -2
    with pytest.raises(CorruptRecordError, match="invalid key length -2"):
        has_record_without_key(data, header)
    record_end = BATCH_HEADER_SIZE + 1 + data[BATCH_HEADER_SIZE] // 2
    for position in range(key_length_at - 2, record_end):  # a timestamp delta without an end
        data[position] = 0x80
    with pytest.raises(CorruptRecordError, match="varint"):
        has_record_without_key(data, header)
