"""The RecordBatch v2 header layout of ``protocol/batch_header.py``: each named offset is where
the header struct puts its field, and each single-field struct reads what the header parse
reads (issue 16: the layout is declared once, these names are the only way to it)."""

from __future__ import annotations

import struct

import pytest

from pydmq.protocol import batch_header as layout
from pydmq.protocol.records import SimpleRecord, build_batch, parse_batch_header

pytestmark = pytest.mark.timeout(30)

# (offset name, struct over that field alone or None, BatchHeader attribute), in header order
_FIELDS = [
    ("BASE_OFFSET_AT", layout.BASE_OFFSET, "base_offset"),
    ("BATCH_LENGTH_AT", None, "batch_length"),
    ("PARTITION_LEADER_EPOCH_AT", layout.PARTITION_LEADER_EPOCH, "partition_leader_epoch"),
    ("MAGIC_AT", None, "magic"),
    ("CRC_AT", layout.CRC, "crc"),
    ("ATTRIBUTES_AT", layout.ATTRIBUTES, "attributes"),
    ("LAST_OFFSET_DELTA_AT", layout.LAST_OFFSET_DELTA, "last_offset_delta"),
    ("BASE_TIMESTAMP_AT", None, "base_timestamp"),
    ("MAX_TIMESTAMP_AT", layout.MAX_TIMESTAMP, "max_timestamp"),
    ("PRODUCER_ID_AT", None, "producer_id"),
    ("PRODUCER_EPOCH_AT", None, "producer_epoch"),
    ("BASE_SEQUENCE_AT", None, "base_sequence"),
    ("RECORDS_COUNT_AT", None, "records_count"),
]


def test_named_offsets_are_the_header_struct_field_positions() -> None:
    codes = layout.HEADER.format.lstrip(">")
    assert len(codes) == len(_FIELDS)
    for index, (name, _, _) in enumerate(_FIELDS):
        assert getattr(layout, name) == struct.calcsize(">" + codes[:index]), name
    assert layout.HEADER.size == layout.BATCH_HEADER_SIZE == layout.RECORDS_COUNT_AT + 4
    assert layout.FRAME.size == layout.LOG_OVERHEAD
    assert layout.CRC_AT + layout.CRC.size == layout.CRC_START


def test_single_field_structs_read_what_the_header_parse_reads() -> None:
    batch = bytearray(
        build_batch(
            [SimpleRecord(b"k", b"v", (), 1_000), SimpleRecord(None, b"w", (), 2_000)],
            base_offset=7,
            partition_leader_epoch=3,
            producer_id=42,
            producer_epoch=5,
            base_sequence=9,
            is_transactional=True,
        )
    )
    header = parse_batch_header(batch)
    for name, field_struct, attribute in _FIELDS:
        if field_struct is not None:
            value = field_struct.unpack_from(batch, getattr(layout, name))[0]
            assert value == getattr(header, attribute), name
    assert layout.FRAME.unpack_from(batch, 0) == (header.base_offset, header.batch_length)
    producer = layout.PRODUCER.unpack_from(batch, layout.PRODUCER_ID_AT)
    assert producer == (42, 5, 9)
    assert batch[layout.MAGIC_AT] == layout.MAGIC
    assert header.attributes & layout.TRANSACTIONAL_FLAG
