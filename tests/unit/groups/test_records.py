"""__consumer_offsets record schemas and Kafka's group partitioning."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pydmq.groups.log import java_string_hashcode, partition_for
from pydmq.groups.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    GroupRecordError,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)


def test_java_string_hashcode_matches_java() -> None:
    assert java_string_hashcode("") == 0
    assert java_string_hashcode("hello") == 99162322
    assert java_string_hashcode("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) == 0
    assert java_string_hashcode("🎉") == 0xD83C * 31 + 0xDF89  # surrogate pair: two UTF-16 units
    assert 0 <= partition_for("my-group", 50) < 50


@given(
    st.text(max_size=50),
    st.text(max_size=50),
    st.integers(0, 2**31 - 1),
    st.integers(-1, 2**62),
    st.integers(-1, 2**31 - 1),
    st.text(max_size=200),
)
def test_offset_commit_round_trip(
    group: str, topic: str, partition: int, offset: int, epoch: int, metadata: str
) -> None:
    key = OffsetCommitKey(group, topic, partition)
    assert decode_key(key.encode()) == key
    value = OffsetCommitValue(offset, epoch, metadata, 1234, -1)
    assert decode_offset_commit_value(value.encode()) == value


def test_group_metadata_round_trip() -> None:
    key = GroupMetadataKey("g")
    assert decode_key(key.encode()) == key
    value = GroupMetadataValue(
        "consumer",
        3,
        "range",
        "m-1",
        99,
        (MemberMetadataValue("m-1", "i", "c", "/h", 100, 200, b"sub", b"asg"),),
    )
    assert decode_group_metadata_value(value.encode()) == value


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x09abc", b"\x00\x01\x00\x05ab"])
def test_garbage_is_rejected(data: bytes) -> None:
    with pytest.raises(GroupRecordError):
        decode_key(data)
