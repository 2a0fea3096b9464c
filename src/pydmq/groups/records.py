"""Keys and values of the records of ``__consumer_offsets`` (sans-IO, versioned).

Our own schemas, shaped like Kafka's (``OffsetCommitKey``/``OffsetCommitValue``,
``GroupMetadataKey``/``GroupMetadataValue``): every key and value starts with an int16 schema
version; strings are int16-length UTF-8 (-1 = null), bytes int32-length.

- key v1 ``OffsetCommitKey``: group, topic, partition (int32).
- key v2 ``GroupMetadataKey``: group.
- value v3 ``OffsetCommitValue``: offset (int64), leader epoch (int32), metadata (string),
  commit timestamp (int64), expire timestamp (int64, -1 = none; Kafka's v1 field, kept for
  the retention time of OffsetCommit v2-v4).
- value v3 ``GroupMetadataValue``: protocol type, generation (int32), protocol (nullable),
  leader (nullable), current state timestamp (int64), members (int32 count; each member id,
  instance id (nullable), client id, client host, rebalance timeout, session timeout,
  subscription bytes, assignment bytes).

A record with a null value (a tombstone) deletes its key. Decoders bound every length by the
bytes that remain and raise :class:`GroupRecordError` on anything malformed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

__all__ = [
    "GROUP_METADATA_KEY_VERSION",
    "OFFSET_COMMIT_KEY_VERSION",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "GroupRecordError",
    "MemberMetadataValue",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "decode_group_metadata_value",
    "decode_key",
    "decode_offset_commit_value",
]

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class GroupRecordError(ValueError):
    """A ``__consumer_offsets`` record that does not decode."""


class _Out:
    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def i16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def i32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def i64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def string(self, v: str | None) -> None:
        if v is None:
            self.i16(-1)
            return
        data = v.encode("utf-8")
        if len(data) > 0x7FFF:
            raise ValueError(f"string of {len(data)} bytes is too long for a group record")
        self.i16(len(data))
        self.buf += data

    def bytes_(self, v: bytes) -> None:
        self.i32(len(v))
        self.buf += v


class _In:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or n > len(self.data) - self.pos:
            raise GroupRecordError("group record truncated")
        start = self.pos
        self.pos += n
        return self.data[start : self.pos]

    def i16(self) -> int:
        value: int = _I16.unpack(self._take(2))[0]
        return value

    def i32(self) -> int:
        value: int = _I32.unpack(self._take(4))[0]
        return value

    def i64(self) -> int:
        value: int = _I64.unpack(self._take(8))[0]
        return value

    def nullable_string(self) -> str | None:
        n = self.i16()
        if n == -1:
            return None
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise GroupRecordError(f"group record string is not UTF-8: {exc}") from None

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise GroupRecordError("null where a string is required")
        return value

    def bytes_(self) -> bytes:
        return self._take(self.i32())


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int

    def encode(self) -> bytes:
        out = _Out()
        out.i16(OFFSET_COMMIT_KEY_VERSION)
        out.string(self.group)
        out.string(self.topic)
        out.i32(self.partition)
        return bytes(out.buf)


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str

    def encode(self) -> bytes:
        out = _Out()
        out.i16(GROUP_METADATA_KEY_VERSION)
        out.string(self.group)
        return bytes(out.buf)


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1

    def encode(self) -> bytes:
        out = _Out()
        out.i16(OFFSET_COMMIT_VALUE_VERSION)
        out.i64(self.offset)
        out.i32(self.leader_epoch)
        out.string(self.metadata)
        out.i64(self.commit_timestamp)
        out.i64(self.expire_timestamp)
        return bytes(out.buf)


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadataValue, ...] = field(default=())

    def encode(self) -> bytes:
        out = _Out()
        out.i16(GROUP_METADATA_VALUE_VERSION)
        out.string(self.protocol_type)
        out.i32(self.generation)
        out.string(self.protocol)
        out.string(self.leader)
        out.i64(self.current_state_timestamp)
        out.i32(len(self.members))
        for m in self.members:
            out.string(m.member_id)
            out.string(m.group_instance_id)
            out.string(m.client_id)
            out.string(m.client_host)
            out.i32(m.rebalance_timeout)
            out.i32(m.session_timeout)
            out.bytes_(m.subscription)
            out.bytes_(m.assignment)
        return bytes(out.buf)


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey:
    r = _In(data)
    version = r.i16()
    if version in (0, OFFSET_COMMIT_KEY_VERSION):
        key: OffsetCommitKey | GroupMetadataKey = OffsetCommitKey(r.string(), r.string(), r.i32())
    elif version == GROUP_METADATA_KEY_VERSION:
        key = GroupMetadataKey(r.string())
    else:
        raise GroupRecordError(f"unknown __consumer_offsets key version {version}")
    return key


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    r = _In(data)
    version = r.i16()
    if version != OFFSET_COMMIT_VALUE_VERSION:
        raise GroupRecordError(f"unknown offset commit value version {version}")
    return OffsetCommitValue(r.i64(), r.i32(), r.string(), r.i64(), r.i64())


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    r = _In(data)
    version = r.i16()
    if version != GROUP_METADATA_VALUE_VERSION:
        raise GroupRecordError(f"unknown group metadata value version {version}")
    protocol_type = r.string()
    generation = r.i32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    timestamp = r.i64()
    count = r.i32()
    if count < 0 or count > len(data):
        raise GroupRecordError(f"invalid member count {count}")
    members = tuple(
        MemberMetadataValue(
            r.string(),
            r.nullable_string(),
            r.string(),
            r.string(),
            r.i32(),
            r.i32(),
            r.bytes_(),
            r.bytes_(),
        )
        for _ in range(count)
    )
    return GroupMetadataValue(protocol_type, generation, protocol, leader, timestamp, members)
