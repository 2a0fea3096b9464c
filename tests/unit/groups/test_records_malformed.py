"""Malformed ``__consumer_offsets`` records: every decoder raises GroupRecordError, and only
that, without allocating for lengths the bytes do not carry or returning half a record."""

from __future__ import annotations

import contextlib
import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pydmq.groups.consumer import records as crec
from pydmq.groups.records import (
    GroupRecordError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)

GOLDEN: dict[str, Any] = json.loads((Path(__file__).parent / "golden" / "records.json").read_text())

# The decoder of each golden case, by the prefix of its id.
DECODERS: dict[str, Callable[[bytes], Any]] = {
    "offset-key": decode_key,
    "group-key": decode_key,
    "offset-value": decode_offset_commit_value,
    "group-value": decode_group_metadata_value,
    "consumer-key": crec.decode_consumer_key,
    "epoch": crec.decode_epoch,
    "partition-metadata": crec.decode_partition_metadata,
    "partitions": crec.decode_partitions,
    "member-metadata": crec.decode_member_metadata,
    "current-member": crec.decode_current_member,
}
ALL_DECODERS = sorted(set(DECODERS.values()), key=lambda f: f.__name__)


def _decoder(case: str) -> Callable[[bytes], Any]:
    return next(
        d for prefix, d in DECODERS.items() if case.startswith(prefix + "-") or case == prefix
    )


SMALL = {name: bytes.fromhex(h) for name, h in GOLDEN.items() if isinstance(h, str)}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_every_truncation_is_rejected(name: str) -> None:
    data, decode = SMALL[name], _decoder(name)
    for cut in range(len(data)):
        with pytest.raises(GroupRecordError):
            decode(data[:cut])


def _i16(v: int) -> bytes:
    return struct.pack(">h", v)


def _i32(v: int) -> bytes:
    return struct.pack(">i", v)


def _string(s: str) -> bytes:
    return _i16(len(s)) + s.encode()


TID = bytes(range(16))
MEMBER_HEAD = _string("m") + _i16(-1) + _string("c") + _string("h") + _i32(1) + _i32(2)
GROUP_HEAD = _i16(3) + _string("consumer") + _i32(1) + _i16(-1) + _i16(-1) + bytes(8)


@pytest.mark.parametrize(
    ("decode", "data"),
    [
        # negative lengths
        (decode_key, _i16(1) + _i16(-2) + _string("t") + _i32(0)),
        (decode_key, _i16(1) + _i16(-1) + _string("t") + _i32(0)),  # null group
        (decode_offset_commit_value, _i16(3) + bytes(12) + _i16(-1) + bytes(16)),
        (decode_group_metadata_value, GROUP_HEAD + _i32(-1)),
        (decode_group_metadata_value, GROUP_HEAD + _i32(1) + MEMBER_HEAD + _i32(-5) + _i32(0)),
        (decode_group_metadata_value, GROUP_HEAD + _i32(1) + MEMBER_HEAD + _i32(0) + _i32(-1)),
        (crec.decode_consumer_key, _i16(5) + _string("g") + _i16(-1)),
        (crec.decode_partitions, _i16(0) + _i32(-1)),
        (crec.decode_partitions, _i16(0) + _i32(1) + TID + _i32(-1)),
        (crec.decode_partition_metadata, _i16(0) + _i32(-3)),
        (
            crec.decode_member_metadata,
            _i16(0) + _i16(-1) * 2 + _string("c") * 2 + _i32(0) + _i32(-1),
        ),
        # lengths past the bytes that remain: nothing is allocated for them
        (decode_key, _i16(2) + _i16(0x7FFF) + b"g"),
        (decode_group_metadata_value, GROUP_HEAD + _i32(2**31 - 1)),
        (decode_group_metadata_value, GROUP_HEAD + _i32(1) + MEMBER_HEAD + _i32(2**31 - 1)),
        (crec.decode_partitions, _i16(0) + _i32(2**31 - 1)),
        (crec.decode_partitions, _i16(0) + _i32(1) + TID + _i32(2**31 - 1) + _i32(0)),
        (crec.decode_partition_metadata, _i16(0) + _i32(2**31 - 1) + bytes(22)),
        (
            crec.decode_member_metadata,
            _i16(0) + _i16(-1) * 2 + _string("c") * 2 + _i32(0) + _i32(2**30),
        ),
        (crec.decode_current_member, _i16(0) + bytes(10) + _i32(2**31 - 1)),
        # values outside their domain, invalid UTF-8
        (crec.decode_current_member, _i16(0) + bytes(8) + b"\x03\x00" + _i32(0) * 2),
        (decode_key, _i16(2) + _i16(2) + b"\xff\xfe"),
        (crec.decode_consumer_key, b"\x00"),
        (crec.decode_epoch, b""),
    ],
)
def test_malformed_lengths_and_values_are_rejected(
    decode: Callable[[bytes], Any], data: bytes
) -> None:
    with pytest.raises(GroupRecordError):
        decode(data)


@pytest.mark.parametrize("decode", ALL_DECODERS, ids=lambda f: f.__name__)
@given(raw=st.binary(max_size=64))
def test_garbage_never_escapes_as_another_error(decode: Callable[[bytes], Any], raw: bytes) -> None:
    with contextlib.suppress(GroupRecordError):
        decode(raw)


@given(name=st.sampled_from(sorted(SMALL)), data=st.data())
def test_damaged_golden_records_decode_or_raise_group_record_error(
    name: str, data: st.DataObject
) -> None:
    raw = bytearray(SMALL[name])
    pos = data.draw(st.integers(0, len(raw) - 1))
    raw[pos] = data.draw(st.integers(0, 255))
    with contextlib.suppress(GroupRecordError):
        _decoder(name)(bytes(raw))
