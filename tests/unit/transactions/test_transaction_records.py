"""The records of ``__transaction_state`` in Kafka's on-disk layout (generated codec): the key
v0, the value v0 and the flexible v1 (compact strings and arrays, tagged fields, unknown tags
skipped), checked against byte layouts built by hand from Kafka's schema."""

from __future__ import annotations

import dataclasses
import struct

import pytest

from pydmq.protocol.errors import MalformedFrameError
from pydmq.transactions.generated_records import (
    PartitionsSchema,
    TransactionLogKey,
    TransactionLogValue,
    decode_key,
    decode_transaction_log_value,
)

_VALUE = TransactionLogValue(
    producer_id=4000,
    producer_epoch=3,
    transaction_timeout_ms=60000,
    transaction_status=2,
    transaction_partitions=(PartitionsSchema("t", (0, 2)),),
    transaction_last_update_timestamp_ms=1700000000123,
    transaction_start_timestamp_ms=1700000000000,
)


def test_key_v0_is_version_then_string() -> None:
    data = TransactionLogKey("txn-1").encode()
    assert data == struct.pack(">hh", 0, 5) + b"txn-1"
    assert decode_key(data) == TransactionLogKey("txn-1")


def test_value_v0_layout() -> None:
    expected = (
        struct.pack(">hqhib", 0, 4000, 3, 60000, 2)
        + struct.pack(">i", 1)  # one topic
        + struct.pack(">h", 1)
        + b"t"
        + struct.pack(">iii", 2, 0, 2)
        + struct.pack(">qq", 1700000000123, 1700000000000)
    )
    assert _VALUE.encode(0) == expected
    assert decode_transaction_log_value(expected) == _VALUE


def test_value_v1_layout_with_tagged_fields() -> None:
    value = dataclasses.replace(_VALUE, next_producer_id=7)
    expected = (
        struct.pack(">hqhib", 1, 4000, 3, 60000, 2)
        + bytes([2])  # compact array: 1 + 1
        + bytes([2])
        + b"t"  # compact string: 1 + 1
        + bytes([3])
        + struct.pack(">ii", 0, 2)  # compact int32 array of 2
        + bytes([0])  # the element's tagged fields
        + struct.pack(">qq", 1700000000123, 1700000000000)
        + bytes([1, 1, 8])  # one tagged field: tag 1, 8 bytes
        + struct.pack(">q", 7)
    )
    assert value.encode(1) == expected
    assert decode_transaction_log_value(expected) == value


def test_value_v1_skips_unknown_tags_and_reads_null_partitions() -> None:
    data = (
        struct.pack(">hqhib", 1, 9, 0, 1000, 0)
        + bytes([0])  # null compact array
        + struct.pack(">qq", 5, -1)
        + bytes([2, 2, 2])
        + struct.pack(">h", 2)  # client transaction version 2
        + bytes([9, 1, 0xFF])  # an unknown tag
    )
    value = decode_transaction_log_value(data)
    assert value.transaction_partitions is None
    assert value.client_transaction_version == 2
    assert value.previous_producer_id == -1


def test_malformed_value_is_refused() -> None:
    with pytest.raises(MalformedFrameError):
        decode_transaction_log_value(struct.pack(">hqhib", 0, 1, 0, 1, 9))
    with pytest.raises(MalformedFrameError):
        decode_transaction_log_value(struct.pack(">h", 2))
