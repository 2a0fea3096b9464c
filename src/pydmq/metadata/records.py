"""KRaft-style metadata records and their binary codec.

Every change to cluster metadata is one of these records, appended to the ``__cluster_metadata``
Raft log by the active controller and replayed by :class:`~pydmq.metadata.delta.MetadataDelta`.
Record names, ``record_type`` ids and field names are Kafka's (in snake_case); the body layout
is ours: a frame ``int16 record_type, int16 version`` followed by the fields in declaration
order. The layouts are declared once, in
``protocol/codegen/schemas/records/cluster_metadata.json``, and the record classes and their
codec are generated from them (:mod:`pydmq.metadata.generated_records`); this module is their
public face. Decoding is bounded by the :class:`~pydmq.protocol.primitives.Reader`, so a torn
or hostile record raises :class:`CorruptRecordError` instead of allocating or returning half a
record. :func:`encode_payload` frames the records of one log entry (one operation's records,
committed together), in the cluster's Raft log and in a single node's local metadata log alike.

Sans-IO: no asyncio, sockets or files.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import Final

from pydmq.metadata import generated_records as gen
from pydmq.metadata.generated_records import (
    RECORD_CLASSES,
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    Endpoint,
    EntityData,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    RestAnswerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)
from pydmq.protocol.errors import MalformedFrameError
from pydmq.protocol.primitives import Buffer

__all__ = [
    "NO_LEADER",
    "RECORD_CLASSES",
    "RESOURCE_BROKER",
    "RESOURCE_GROUP",
    "RESOURCE_TOPIC",
    "AccessControlEntryRecord",
    "BrokerRegistrationChangeRecord",
    "ClientQuotaRecord",
    "ConfigRecord",
    "CorruptRecordError",
    "Endpoint",
    "EntityData",
    "FeatureLevelRecord",
    "FenceBrokerRecord",
    "MetadataRecord",
    "NoOpRecord",
    "PartitionChangeRecord",
    "PartitionRecord",
    "ProducerIdsRecord",
    "RegisterBrokerRecord",
    "RemoveAccessControlEntryRecord",
    "RemoveTopicRecord",
    "RemoveUserScramCredentialRecord",
    "RestAnswerRecord",
    "TopicRecord",
    "UnfenceBrokerRecord",
    "UnregisterBrokerRecord",
    "UserScramCredentialRecord",
    "decode_payload",
    "decode_record",
    "encode_payload",
    "encode_record",
    "payload_frames",
]

NO_LEADER = -1
"""``leader`` of a partition that has none (offline)."""

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_GROUP = 32
"""ConfigRecord.resource_type values (Kafka's ConfigResource.Type ids)."""

_FRAME: Final = struct.Struct(">I")


class CorruptRecordError(MalformedFrameError):
    """A metadata record that cannot be decoded: truncated, unknown type/version, bad values."""


def encode_record(rec: MetadataRecord) -> bytes:
    """The framed bytes of ``rec``: ``int16 record_type, int16 version`` then its fields."""
    return rec.encode()


def decode_record(buf: Buffer) -> MetadataRecord:
    """Decode one framed record; every byte of ``buf`` must belong to it.

    Raises :class:`CorruptRecordError` on truncation, trailing bytes, an unknown record type
    or version, or a field value outside its domain.
    """
    try:
        return gen.decode_record(buf)
    except MalformedFrameError as exc:
        raise CorruptRecordError(f"metadata record: {exc}") from None


def encode_payload(records: Sequence[MetadataRecord]) -> bytes:
    """One metadata log entry's payload: ``uint32 length | record`` frames (the records of
    one controller operation, committed together)."""
    out = bytearray()
    for rec in records:
        body = encode_record(rec)
        out += _FRAME.pack(len(body))
        out += body
    return bytes(out)


def payload_frames(payload: Buffer) -> Iterator[memoryview]:
    """The encoded records of an :func:`encode_payload` payload, one by one; raises
    CorruptRecordError for a torn frame."""
    view = memoryview(payload)
    pos = 0
    while pos < len(view):
        if pos + _FRAME.size > len(view):
            raise CorruptRecordError("truncated record frame in a metadata log entry")
        (length,) = _FRAME.unpack_from(view, pos)
        pos += _FRAME.size
        if pos + length > len(view):
            raise CorruptRecordError("record frame runs past the end of its entry")
        yield view[pos : pos + length]
        pos += length


def decode_payload(payload: Buffer) -> list[MetadataRecord]:
    """Records of an :func:`encode_payload` payload; raises CorruptRecordError."""
    return [decode_record(frame) for frame in payload_frames(payload)]
