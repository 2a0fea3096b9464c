"""``__consumer_offsets`` record layouts are frozen: golden bytes captured from the codecs of
f8518cb (hand-written before the layouts were generated from schemas).

Every case encodes a value with today's codec and compares with the captured bytes, and
decodes the captured bytes back to the expected value: data directories written by earlier
versions keep loading. Bytes over 1 KiB are kept as their SHA-256 and length.

Regenerate the fixture (only for a deliberate format change, which needs a new version):
``python tests/unit/groups/test_records_golden.py > tests/unit/groups/golden/records.json``.
"""

from __future__ import annotations

import hashlib
import json
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pydmq.groups.consumer import records as crec
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

FIXTURE = Path(__file__).parent / "golden" / "records.json"
MAX_STRING = "x" * 0x7FFF
I32 = (-(2**31), 2**31 - 1)
I64 = (-(2**63), 2**63 - 1)
T1 = uuid.UUID("11111111-2222-3333-4444-555555555555")
T2 = uuid.UUID(int=0)
T3 = uuid.UUID(int=2**128 - 1)


@dataclass(frozen=True)
class Case:
    """One value: how the codec encodes it, how its bytes decode, what they decode to."""

    id: str
    encode: Callable[[], bytes]
    decode: Callable[[bytes], Any]
    expected: Any


def _classic(id_: str, value: Any, decode: Callable[[bytes], Any]) -> Case:
    return Case(id_, value.encode, decode, value)


def _key(
    id_: str, key: crec.ConsumerGroupKey, expected: crec.ConsumerGroupKey | None = None
) -> Case:
    return Case(id_, key.encode, crec.decode_consumer_key, key if expected is None else expected)


def _member(*members: MemberMetadataValue) -> tuple[MemberMetadataValue, ...]:
    return members


MEMBER_FULL = MemberMetadataValue(
    "m-1", "instance-1", "client", "/10.0.0.1", 300000, 45000, b"\x00\x01sub", b"\xffasg"
)
MEMBER_EMPTY = MemberMetadataValue("", None, "", "", 0, 0, b"", b"")
MEMBER_MAX = MemberMetadataValue("m-2", "", "c", "h", I32[1], I32[0], bytes(range(256)), b"\x00")

CONSUMER_MEMBER_FULL = crec.MemberMetadataValue(
    "instance",
    "rack-a",
    "client-1",
    "/127.0.0.1",
    45000,
    ("b-topic", "a-topic", "é"),
    "topic-.*",
    "uniform",
)
CONSUMER_MEMBER_NULLS = crec.MemberMetadataValue(None, None, "", "", 0, (), None, None)
CONSUMER_MEMBER_MAX = crec.MemberMetadataValue(
    "", "", MAX_STRING, "h", I32[1], tuple(str(i) for i in range(100)), "", ""
)
PARTS = {T1: frozenset({2, 0, 1}), T3: frozenset({I32[1]}), T2: frozenset()}
PARTS_DECODED = {T1: frozenset({0, 1, 2}), T3: frozenset({I32[1]})}

CASES: list[Case] = [
    # -- classic keys -------------------------------------------------------------------
    _classic("offset-key", OffsetCommitKey("group", "topic", 3), decode_key),
    _classic("offset-key-empty", OffsetCommitKey("", "", 0), decode_key),
    _classic("offset-key-max", OffsetCommitKey(MAX_STRING, "t", I32[1]), decode_key),
    _classic("offset-key-unicode", OffsetCommitKey("grüppe-🎉", "тема", I32[0]), decode_key),
    _classic("group-key", GroupMetadataKey("group"), decode_key),
    _classic("group-key-empty", GroupMetadataKey(""), decode_key),
    # -- classic values -----------------------------------------------------------------
    _classic(
        "offset-value",
        OffsetCommitValue(42, 7, "meta", 1700000000000, -1),
        decode_offset_commit_value,
    ),
    _classic(
        "offset-value-default-expire", OffsetCommitValue(0, -1, "", 0), decode_offset_commit_value
    ),
    _classic(
        "offset-value-max",
        OffsetCommitValue(I64[1], I32[1], MAX_STRING, I64[0], I64[1]),
        decode_offset_commit_value,
    ),
    _classic(
        "group-value-empty",
        GroupMetadataValue("", 0, None, None, -1),
        decode_group_metadata_value,
    ),
    _classic(
        "group-value-members",
        GroupMetadataValue(
            "consumer",
            5,
            "range",
            "m-1",
            1700000000123,
            _member(MEMBER_FULL, MEMBER_EMPTY, MEMBER_MAX),
        ),
        decode_group_metadata_value,
    ),
    _classic(
        "group-value-max",
        GroupMetadataValue(MAX_STRING, I32[1], "", "", I64[1], _member(MEMBER_EMPTY)),
        decode_group_metadata_value,
    ),
    # -- consumer-group keys ----------------------------------------------------------
    _key("consumer-key-group", crec.ConsumerGroupKey(crec.GROUP_METADATA, "g")),
    _key("consumer-key-partition-metadata", crec.ConsumerGroupKey(crec.PARTITION_METADATA, "g")),
    _key("consumer-key-member", crec.ConsumerGroupKey(crec.MEMBER_METADATA, "g", "m")),
    _key("consumer-key-target-metadata", crec.ConsumerGroupKey(crec.TARGET_METADATA, "")),
    _key("consumer-key-target-member", crec.ConsumerGroupKey(crec.TARGET_MEMBER, "g", "")),
    _key("consumer-key-current-member", crec.ConsumerGroupKey(crec.CURRENT_MEMBER, "🎉", "m-🎉")),
    _key(
        "consumer-key-member-none",
        crec.ConsumerGroupKey(crec.MEMBER_METADATA, "g"),
        crec.ConsumerGroupKey(crec.MEMBER_METADATA, "g", ""),
    ),
    _key(
        "consumer-key-member-ignored",
        crec.ConsumerGroupKey(crec.GROUP_METADATA, "g", "m"),
        crec.ConsumerGroupKey(crec.GROUP_METADATA, "g"),
    ),
    _key("consumer-key-max", crec.ConsumerGroupKey(crec.CURRENT_MEMBER, MAX_STRING, MAX_STRING)),
    # -- consumer-group values --------------------------------------------------------
    Case("epoch-zero", lambda: crec.encode_epoch(0), crec.decode_epoch, 0),
    Case("epoch-min", lambda: crec.encode_epoch(I32[0]), crec.decode_epoch, I32[0]),
    Case("epoch-max", lambda: crec.encode_epoch(I32[1]), crec.decode_epoch, I32[1]),
    Case(
        "partition-metadata-empty",
        lambda: crec.encode_partition_metadata({}),
        crec.decode_partition_metadata,
        {},
    ),
    Case(
        "partition-metadata",
        lambda: crec.encode_partition_metadata({"b": (T1, 3), "a": (T3, 0), "": (T2, I32[1])}),
        crec.decode_partition_metadata,
        {"b": (T1, 3), "a": (T3, 0), "": (T2, I32[1])},
    ),
    Case("partitions-empty", lambda: crec.encode_partitions({}), crec.decode_partitions, {}),
    Case(
        "partitions", lambda: crec.encode_partitions(PARTS), crec.decode_partitions, PARTS_DECODED
    ),
    Case(
        "member-metadata-full",
        lambda: crec.encode_member_metadata(CONSUMER_MEMBER_FULL),
        crec.decode_member_metadata,
        CONSUMER_MEMBER_FULL,
    ),
    Case(
        "member-metadata-nulls",
        lambda: crec.encode_member_metadata(CONSUMER_MEMBER_NULLS),
        crec.decode_member_metadata,
        CONSUMER_MEMBER_NULLS,
    ),
    Case(
        "member-metadata-max",
        lambda: crec.encode_member_metadata(CONSUMER_MEMBER_MAX),
        crec.decode_member_metadata,
        CONSUMER_MEMBER_MAX,
    ),
    *(
        Case(
            f"current-member-state-{state}-left-{left}",
            lambda state=state, left=left: crec.encode_current_member(  # type: ignore[misc]
                crec.CurrentMemberValue(7, 6, state, left, PARTS, {})
            ),
            crec.decode_current_member,
            crec.CurrentMemberValue(7, 6, state, left, PARTS_DECODED, {}),
        )
        for state in (0, 1, 2)
        for left in (False, True)
    ),
    Case(
        "current-member-extremes",
        lambda: crec.encode_current_member(
            crec.CurrentMemberValue(I32[1], I32[0], 1, False, {}, PARTS)
        ),
        crec.decode_current_member,
        crec.CurrentMemberValue(I32[1], I32[0], 1, False, {}, PARTS_DECODED),
    ),
]


def _fingerprint(data: bytes) -> str | dict[str, Any]:
    if len(data) <= 1024:
        return data.hex()
    return {"sha256": hashlib.sha256(data).hexdigest(), "length": len(data)}


def _golden() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(FIXTURE.read_text())
    return loaded


def test_cases_are_unique_and_captured() -> None:
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
    assert set(ids) == set(_golden())


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_encoding_is_unchanged(case: Case) -> None:
    assert _fingerprint(case.encode()) == _golden()[case.id]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_golden_bytes_decode(case: Case) -> None:
    golden = _golden()[case.id]
    data = bytes.fromhex(golden) if isinstance(golden, str) else case.encode()
    assert _fingerprint(data) == golden
    assert case.decode(data) == case.expected


def test_version_zero_offset_key_decodes() -> None:
    # Kafka's OffsetCommitKey v0 has v1's layout; earlier data may carry it.
    data = bytes.fromhex(_golden()["offset-key"])
    assert decode_key(b"\x00\x00" + data[2:]) == OffsetCommitKey("group", "topic", 3)


@pytest.mark.parametrize(
    ("decode", "data"),
    [
        (decode_key, b"\x00\x09"),  # unknown key version
        (decode_key, b"\x00\x03\x00\x01g"),  # a consumer-group key is not a classic one
        (decode_offset_commit_value, b"\x00\x01" + bytes(30)),  # unknown value version
        (decode_group_metadata_value, b"\x00\x02"),
        (crec.decode_epoch, b"\x00\x01\x00\x00\x00\x01"),
        (crec.decode_consumer_key, b"\x00\x02\x00\x01g"),  # a classic key is not a consumer one
    ],
)
def test_unknown_versions_are_rejected(decode: Callable[[bytes], Any], data: bytes) -> None:
    with pytest.raises(GroupRecordError):
        decode(data)


def _capture() -> None:
    """Print the fixture: run against the codec whose bytes are the reference."""
    print(json.dumps({c.id: _fingerprint(c.encode()) for c in CASES}, indent=1, sort_keys=True))


if __name__ == "__main__":
    sys.exit(_capture())
