"""Consumer-group (KIP-848) records of ``__consumer_offsets`` (sans-IO; our own schemas).

Shaped like Kafka's ``ConsumerGroup*Key``/``Value`` records. Every key and value starts with
an int16 version; the key versions (3-8) are distinct from the classic ones (0-2) so one
replay reads both. Strings are int16-length UTF-8 (-1 = null); partition sets are an int32
topic count, then per topic a 16-byte topic id and an int32-counted int32 array.

==== ================================ ===========================================================
key  record                           value
==== ================================ ===========================================================
3    group metadata (group)           group epoch (int32)
4    partition metadata (group)       subscribed topics: count, (name, topic id, partitions)
5    member metadata (group, member)  instance id, rack id, client id, client host, rebalance
                                      timeout, subscribed names (count, strings), regex,
                                      server assignor
6    target metadata (group)          target assignment epoch (int32)
7    target member (group, member)    partitions
8    current member (group, member)   member epoch, previous epoch, state (int8), left static
                                      (int8), assigned partitions, pending revocation partitions
==== ================================ ===========================================================

A null value deletes its key. Decoders bound every length and raise
:class:`~pydmq.groups.records.GroupRecordError` on malformed input.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from pydmq.groups.records import GroupRecordError

__all__ = [
    "CONSUMER_KEY_VERSIONS",
    "ConsumerGroupKey",
    "CurrentMemberValue",
    "MemberMetadataValue",
    "decode_consumer_key",
    "decode_current_member",
    "decode_epoch",
    "decode_member_metadata",
    "decode_partition_metadata",
    "decode_partitions",
    "encode_current_member",
    "encode_epoch",
    "encode_member_metadata",
    "encode_partition_metadata",
    "encode_partitions",
    "is_consumer_key",
]

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_METADATA = 6
TARGET_MEMBER = 7
CURRENT_MEMBER = 8
CONSUMER_KEY_VERSIONS = frozenset(range(3, 9))
_VALUE_VERSION = 0

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class _Out:
    def __init__(self) -> None:
        self.buf = bytearray()

    def i8(self, v: int) -> _Out:
        self.buf += _I8.pack(v)
        return self

    def i16(self, v: int) -> _Out:
        self.buf += _I16.pack(v)
        return self

    def i32(self, v: int) -> _Out:
        self.buf += _I32.pack(v)
        return self

    def string(self, v: str | None) -> _Out:
        if v is None:
            return self.i16(-1)
        data = v.encode("utf-8")
        if len(data) > 0x7FFF:
            raise ValueError("string too long for a group record")
        self.i16(len(data))
        self.buf += data
        return self

    def partitions(self, parts: dict[uuid.UUID, frozenset[int]]) -> _Out:
        items = sorted((t, ps) for t, ps in parts.items() if ps)
        self.i32(len(items))
        for topic_id, ps in items:
            self.buf += topic_id.bytes
            self.i32(len(ps))
            for p in sorted(ps):
                self.i32(p)
        return self

    def done(self) -> bytes:
        return bytes(self.buf)


class _In:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or n > len(self.data) - self.pos:
            raise GroupRecordError("consumer group record truncated")
        start = self.pos
        self.pos += n
        return self.data[start : self.pos]

    def i8(self) -> int:
        v: int = _I8.unpack(self.take(1))[0]
        return v

    def i16(self) -> int:
        v: int = _I16.unpack(self.take(2))[0]
        return v

    def i32(self) -> int:
        v: int = _I32.unpack(self.take(4))[0]
        return v

    def count(self, unit: int) -> int:
        n = self.i32()
        if n < 0 or n * unit > len(self.data) - self.pos:
            raise GroupRecordError(f"invalid count {n}")
        return n

    def nullable_string(self) -> str | None:
        n = self.i16()
        if n == -1:
            return None
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError:
            raise GroupRecordError("consumer group record string is not UTF-8") from None

    def string(self) -> str:
        v = self.nullable_string()
        if v is None:
            raise GroupRecordError("null where a string is required")
        return v

    def partitions(self) -> dict[uuid.UUID, frozenset[int]]:
        out: dict[uuid.UUID, frozenset[int]] = {}
        for _ in range(self.count(20)):
            topic_id = uuid.UUID(bytes=self.take(16))
            out[topic_id] = frozenset(self.i32() for _ in range(self.count(4)))
        return out

    def version(self) -> None:
        v = self.i16()
        if v != _VALUE_VERSION:
            raise GroupRecordError(f"unknown consumer group value version {v}")


# -- keys ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    kind: int  # one of the key versions 3-8
    group: str
    member: str | None = None

    def encode(self) -> bytes:
        out = _Out().i16(self.kind).string(self.group)
        if self.kind in (MEMBER_METADATA, TARGET_MEMBER, CURRENT_MEMBER):
            out.string(self.member or "")
        return out.done()


def is_consumer_key(data: bytes) -> bool:
    return len(data) >= 2 and _I16.unpack_from(data)[0] in CONSUMER_KEY_VERSIONS


def decode_consumer_key(data: bytes) -> ConsumerGroupKey:
    r = _In(data)
    kind = r.i16()
    if kind not in CONSUMER_KEY_VERSIONS:
        raise GroupRecordError(f"not a consumer group key (version {kind})")
    group = r.string()
    member = r.string() if kind in (MEMBER_METADATA, TARGET_MEMBER, CURRENT_MEMBER) else None
    return ConsumerGroupKey(kind, group, member)


# -- values ----------------------------------------------------------------------------
def encode_epoch(epoch: int) -> bytes:
    return _Out().i16(_VALUE_VERSION).i32(epoch).done()


def decode_epoch(data: bytes) -> int:
    r = _In(data)
    r.version()
    return r.i32()


def encode_partition_metadata(meta: dict[str, tuple[uuid.UUID, int]]) -> bytes:
    out = _Out().i16(_VALUE_VERSION).i32(len(meta))
    for name in sorted(meta):
        topic_id, partitions = meta[name]
        out.string(name)
        out.buf += topic_id.bytes
        out.i32(partitions)
    return out.done()


def decode_partition_metadata(data: bytes) -> dict[str, tuple[uuid.UUID, int]]:
    r = _In(data)
    r.version()
    out: dict[str, tuple[uuid.UUID, int]] = {}
    for _ in range(r.count(22)):
        name = r.string()
        out[name] = (uuid.UUID(bytes=r.take(16)), r.i32())
    return out


def encode_partitions(parts: dict[uuid.UUID, frozenset[int]]) -> bytes:
    return _Out().i16(_VALUE_VERSION).partitions(parts).done()


def decode_partitions(data: bytes) -> dict[uuid.UUID, frozenset[int]]:
    r = _In(data)
    r.version()
    return r.partitions()


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    server_assignor: str | None


def encode_member_metadata(v: MemberMetadataValue) -> bytes:
    out = _Out().i16(_VALUE_VERSION)
    out.string(v.instance_id).string(v.rack_id).string(v.client_id).string(v.client_host)
    out.i32(v.rebalance_timeout_ms).i32(len(v.subscribed_topic_names))
    for name in v.subscribed_topic_names:
        out.string(name)
    out.string(v.subscribed_topic_regex).string(v.server_assignor)
    return out.done()


def decode_member_metadata(data: bytes) -> MemberMetadataValue:
    r = _In(data)
    r.version()
    instance_id = r.nullable_string()
    rack_id = r.nullable_string()
    client_id = r.string()
    client_host = r.string()
    rebalance = r.i32()
    names = tuple(r.string() for _ in range(r.count(2)))
    return MemberMetadataValue(
        instance_id,
        rack_id,
        client_id,
        client_host,
        rebalance,
        names,
        r.nullable_string(),
        r.nullable_string(),
    )


@dataclass(frozen=True, slots=True)
class CurrentMemberValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    left_static: bool
    assigned: dict[uuid.UUID, frozenset[int]]
    pending_revocation: dict[uuid.UUID, frozenset[int]]


def encode_current_member(v: CurrentMemberValue) -> bytes:
    out = _Out().i16(_VALUE_VERSION).i32(v.member_epoch).i32(v.previous_member_epoch)
    out.i8(v.state).i8(1 if v.left_static else 0)
    return out.partitions(v.assigned).partitions(v.pending_revocation).done()


def decode_current_member(data: bytes) -> CurrentMemberValue:
    r = _In(data)
    r.version()
    epoch = r.i32()
    previous = r.i32()
    state = r.i8()
    if state not in (0, 1, 2):
        raise GroupRecordError(f"invalid member state {state}")
    left = r.i8() != 0
    return CurrentMemberValue(epoch, previous, state, left, r.partitions(), r.partitions())
