"""Keys and values of the classic records of ``__consumer_offsets`` (sans-IO, versioned).

The layouts are declared once, in ``protocol/codegen/schemas/records/classic_group.json``,
and the codec is generated from them (:mod:`pydmq.groups.generated_records`): keys v0-1
``OffsetCommitKey`` (group, topic, partition) and v2 ``GroupMetadataKey`` (group); values v3
``OffsetCommitValue`` and v3 ``GroupMetadataValue`` with its members. This module is their
public face: the classes, and decoders that raise :class:`GroupRecordError` on anything
malformed (every length is bounded by the bytes that remain).

A record with a null value (a tombstone) deletes its key. :class:`GroupMetadataRecord` is a
classic group's record, typed, as a write builds it and as the load decodes it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from pydmq.groups import generated_records as gen
from pydmq.groups.generated_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from pydmq.protocol.errors import MalformedFrameError
from pydmq.protocol.primitives import Buffer

__all__ = [
    "GroupMetadataKey",
    "GroupMetadataRecord",
    "GroupMetadataValue",
    "GroupRecordError",
    "MemberMetadataValue",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "decode_group_metadata_value",
    "decode_key",
    "decode_offset_commit_value",
    "decoded",
]

_T = TypeVar("_T")


class GroupRecordError(ValueError):
    """A ``__consumer_offsets`` record that does not decode."""


@dataclass(frozen=True, slots=True)
class GroupMetadataRecord:
    """A classic group's record: its id and value (None: the group is deleted)."""

    group: str
    value: GroupMetadataValue | None

    def encode(self) -> tuple[bytes, bytes | None]:
        value = None if self.value is None else self.value.encode()
        return GroupMetadataKey(self.group).encode(), value


def decoded(decode: Callable[[Buffer], _T], data: Buffer) -> _T:
    """``decode(data)``, raising :class:`GroupRecordError` if the bytes are malformed."""
    try:
        return decode(data)
    except MalformedFrameError as exc:
        raise GroupRecordError(f"__consumer_offsets record: {exc}") from None


def decode_key(data: Buffer) -> OffsetCommitKey | GroupMetadataKey:
    return decoded(gen.decode_key, data)


def decode_offset_commit_value(data: Buffer) -> OffsetCommitValue:
    return decoded(gen.decode_offset_commit_value, data)


def decode_group_metadata_value(data: Buffer) -> GroupMetadataValue:
    return decoded(gen.decode_group_metadata_value, data)
