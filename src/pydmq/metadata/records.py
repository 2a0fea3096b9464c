"""KRaft-style metadata records and their binary codec.

Every change to cluster metadata is one of these records, appended to the ``__cluster_metadata``
Raft log by the active controller and replayed by :class:`~pydmq.metadata.delta.MetadataDelta`.
Record names, ``record_type`` ids and field names are Kafka's (in snake_case); the body layout
is ours: a frame ``int16 record_type, int16 version`` followed by the fields in declaration
order, written with :class:`~pydmq.protocol.primitives.Writer`. Decoding is bounded by the
:class:`~pydmq.protocol.primitives.Reader`, so a torn or hostile record raises
:class:`CorruptRecordError` instead of allocating or returning half a record.

Sans-IO: no asyncio, sockets or files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, ClassVar, TypeAlias
from uuid import UUID

from pydmq.protocol.errors import MalformedFrameError
from pydmq.protocol.primitives import Buffer, Reader, Writer

__all__ = [
    "NO_LEADER",
    "RECORD_CLASSES",
    "RESOURCE_BROKER",
    "RESOURCE_TOPIC",
    "BrokerRegistrationChangeRecord",
    "ConfigRecord",
    "CorruptRecordError",
    "Endpoint",
    "FeatureLevelRecord",
    "FenceBrokerRecord",
    "MetadataRecord",
    "NoOpRecord",
    "PartitionChangeRecord",
    "PartitionRecord",
    "ProducerIdsRecord",
    "RegisterBrokerRecord",
    "RemoveTopicRecord",
    "TopicRecord",
    "UnfenceBrokerRecord",
    "UnregisterBrokerRecord",
    "decode_record",
    "encode_record",
]

NO_LEADER = -1
"""``leader`` of a partition that has none (offline)."""

_LEADER_UNCHANGED = -2  # PartitionChangeRecord.leader on the wire when the leader is unchanged

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
"""ConfigRecord.resource_type values (Kafka's ConfigResource.Type ids)."""


class CorruptRecordError(MalformedFrameError):
    """A metadata record that cannot be decoded: truncated, unknown type/version, bad values."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One listener a broker advertises (Kafka's BrokerEndpoint).

    ``security_protocol`` is Kafka's SecurityProtocol id: 0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT,
    3 SASL_SSL.
    """

    name: str
    host: str
    port: int
    security_protocol: int = 0


@dataclass(frozen=True, slots=True)
class RegisterBrokerRecord:
    """A broker (re-)registered; replaces any earlier registration of the same id."""

    record_type: ClassVar[int] = 0
    broker_id: int
    incarnation_id: UUID
    broker_epoch: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRecord:
    """A broker's registration was removed (only when ``broker_epoch`` still matches)."""

    record_type: ClassVar[int] = 1
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class TopicRecord:
    """A topic was created; its partitions follow as PartitionRecords."""

    record_type: ClassVar[int] = 2
    name: str
    topic_id: UUID


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    """The full state of one partition (creation, or a snapshot)."""

    record_type: ClassVar[int] = 3
    partition_id: int
    topic_id: UUID
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    removing_replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    leader: int
    leader_recovery_state: int
    leader_epoch: int
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    """One config key of a resource set (``value``) or deleted (``value is None``)."""

    record_type: ClassVar[int] = 4
    resource_type: int
    resource_name: str
    name: str
    value: str | None


@dataclass(frozen=True, slots=True)
class PartitionChangeRecord:
    """A change to some fields of a partition; ``None`` leaves a field unchanged.

    Replaying one bumps ``partition_epoch`` by 1, and ``leader_epoch`` by 1 when the leader
    actually changes. On the wire an unchanged leader is Kafka's ``-2``.
    """

    record_type: ClassVar[int] = 5
    partition_id: int
    topic_id: UUID
    isr: tuple[int, ...] | None = None
    leader: int | None = None
    replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] | None = None
    leader_recovery_state: int | None = None


@dataclass(frozen=True, slots=True)
class FenceBrokerRecord:
    """A broker was fenced: not a leader or ISR candidate until unfenced."""

    record_type: ClassVar[int] = 7
    id: int
    epoch: int


@dataclass(frozen=True, slots=True)
class UnfenceBrokerRecord:
    """A broker caught up with the metadata log and may lead partitions again."""

    record_type: ClassVar[int] = 8
    id: int
    epoch: int


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord:
    """A topic, its partitions and its configs were deleted."""

    record_type: ClassVar[int] = 9
    topic_id: UUID


@dataclass(frozen=True, slots=True)
class FeatureLevelRecord:
    """A finalized feature level (``feature_level`` 0 removes the feature)."""

    record_type: ClassVar[int] = 12
    name: str
    feature_level: int


@dataclass(frozen=True, slots=True)
class ProducerIdsRecord:
    """A block of producer ids was handed to a broker; ``next_producer_id`` is the next free."""

    record_type: ClassVar[int] = 15
    broker_id: int
    broker_epoch: int
    next_producer_id: int


@dataclass(frozen=True, slots=True)
class BrokerRegistrationChangeRecord:
    """A change to a registered broker's flags; ``None`` leaves a flag unchanged."""

    record_type: ClassVar[int] = 17
    broker_id: int
    broker_epoch: int
    fenced: bool | None = None
    in_controlled_shutdown: bool | None = None


@dataclass(frozen=True, slots=True)
class NoOpRecord:
    """Written by a new Raft leader so that it can commit an entry of its own epoch."""

    record_type: ClassVar[int] = 20


MetadataRecord: TypeAlias = (
    RegisterBrokerRecord
    | UnregisterBrokerRecord
    | TopicRecord
    | PartitionRecord
    | ConfigRecord
    | PartitionChangeRecord
    | FenceBrokerRecord
    | UnfenceBrokerRecord
    | RemoveTopicRecord
    | FeatureLevelRecord
    | ProducerIdsRecord
    | BrokerRegistrationChangeRecord
    | NoOpRecord
)

RECORD_CLASSES: dict[int, type[MetadataRecord]] = {
    cls.record_type: cls
    for cls in (
        RegisterBrokerRecord,
        UnregisterBrokerRecord,
        TopicRecord,
        PartitionRecord,
        ConfigRecord,
        PartitionChangeRecord,
        FenceBrokerRecord,
        UnfenceBrokerRecord,
        RemoveTopicRecord,
        FeatureLevelRecord,
        ProducerIdsRecord,
        BrokerRegistrationChangeRecord,
        NoOpRecord,
    )
}

_VERSION = 0

# -- field codecs -------------------------------------------------------------------------
# One (encode, decode) pair per field kind; each record's layout is its fields, in order,
# with the kind derived from the field name below. Keeping the layout in one table means a
# new field cannot be encoded without also being decoded.


def _enc_int_array(w: Writer, v: tuple[int, ...]) -> None:
    w.array_length(len(v))
    w.int32_array(list(v))


def _dec_int_array(r: Reader) -> tuple[int, ...]:
    return tuple(r.int32_array(r.array_length()))


def _enc_nullable_int_array(w: Writer, v: tuple[int, ...] | None) -> None:
    if v is None:
        w.array_length(-1)
    else:
        _enc_int_array(w, v)


def _dec_nullable_int_array(r: Reader) -> tuple[int, ...] | None:
    n = r.nullable_array_length()
    return None if n < 0 else tuple(r.int32_array(n))


def _enc_optional_leader(w: Writer, v: int | None) -> None:
    w.int32(_LEADER_UNCHANGED if v is None else v)


def _dec_optional_leader(r: Reader) -> int | None:
    v = r.int32()
    if v == _LEADER_UNCHANGED:
        return None
    if v < NO_LEADER:
        raise CorruptRecordError(f"invalid leader {v}")
    return v


def _enc_recovery_state(w: Writer, v: int) -> None:
    w.int8(v)


def _dec_recovery_state(r: Reader) -> int:
    return _check_recovery_state(r.int8())


def _enc_optional_recovery_state(w: Writer, v: int | None) -> None:
    w.int8(-1 if v is None else v)


def _dec_optional_recovery_state(r: Reader) -> int | None:
    v = r.int8()
    return None if v == -1 else _check_recovery_state(v)


def _check_recovery_state(v: int) -> int:
    if v not in (0, 1):
        raise CorruptRecordError(f"invalid leader_recovery_state {v}")
    return v


# Kafka's BrokerRegistrationChangeRecord encodes its flags as int8: 0 = no change, 1 = set,
# -1 = cleared. We keep that encoding for both tri-state flags.
def _enc_tri_state(w: Writer, v: bool | None) -> None:
    w.int8(0 if v is None else (1 if v else -1))


def _dec_tri_state(r: Reader) -> bool | None:
    v = r.int8()
    if v == 0:
        return None
    if v in (1, -1):
        return v == 1
    raise CorruptRecordError(f"invalid tri-state flag {v}")


def _enc_endpoints(w: Writer, v: tuple[Endpoint, ...]) -> None:
    w.array_length(len(v))
    for e in v:
        w.string(e.name)
        w.string(e.host)
        w.uint16(e.port)
        w.int16(e.security_protocol)


def _dec_endpoints(r: Reader) -> tuple[Endpoint, ...]:
    return tuple(
        Endpoint(r.string(), r.string(), r.uint16(), r.int16()) for _ in range(r.array_length())
    )


def _enc_bool(w: Writer, v: bool) -> None:
    w.bool(v)


def _dec_bool(r: Reader) -> bool:
    v = r.int8()
    if v not in (0, 1):
        raise CorruptRecordError(f"invalid boolean {v}")
    return v == 1


_Codec = tuple[Callable[[Writer, Any], None], Callable[[Reader], Any]]

_INT32: _Codec = (Writer.int32, Reader.int32)
_INT64: _Codec = (Writer.int64, Reader.int64)
_UUID: _Codec = (Writer.uuid, Reader.uuid)
_STRING: _Codec = (Writer.string, Reader.string)
_NULLABLE_STRING: _Codec = (Writer.nullable_string, Reader.nullable_string)
_INT_ARRAY: _Codec = (_enc_int_array, _dec_int_array)
_NULLABLE_INT_ARRAY: _Codec = (_enc_nullable_int_array, _dec_nullable_int_array)
_BOOL: _Codec = (_enc_bool, _dec_bool)
_TRI_STATE: _Codec = (_enc_tri_state, _dec_tri_state)

_LAYOUTS: dict[type[MetadataRecord], tuple[tuple[str, _Codec], ...]] = {
    RegisterBrokerRecord: (
        ("broker_id", _INT32),
        ("incarnation_id", _UUID),
        ("broker_epoch", _INT64),
        ("endpoints", (_enc_endpoints, _dec_endpoints)),
        ("rack", _NULLABLE_STRING),
        ("fenced", _BOOL),
        ("in_controlled_shutdown", _BOOL),
    ),
    UnregisterBrokerRecord: (("broker_id", _INT32), ("broker_epoch", _INT64)),
    TopicRecord: (("name", _STRING), ("topic_id", _UUID)),
    PartitionRecord: (
        ("partition_id", _INT32),
        ("topic_id", _UUID),
        ("replicas", _INT_ARRAY),
        ("isr", _INT_ARRAY),
        ("removing_replicas", _INT_ARRAY),
        ("adding_replicas", _INT_ARRAY),
        ("leader", _INT32),
        ("leader_recovery_state", (_enc_recovery_state, _dec_recovery_state)),
        ("leader_epoch", _INT32),
        ("partition_epoch", _INT32),
    ),
    ConfigRecord: (
        ("resource_type", (Writer.int8, Reader.int8)),
        ("resource_name", _STRING),
        ("name", _STRING),
        ("value", _NULLABLE_STRING),
    ),
    PartitionChangeRecord: (
        ("partition_id", _INT32),
        ("topic_id", _UUID),
        ("isr", _NULLABLE_INT_ARRAY),
        ("leader", (_enc_optional_leader, _dec_optional_leader)),
        ("replicas", _NULLABLE_INT_ARRAY),
        ("removing_replicas", _NULLABLE_INT_ARRAY),
        ("adding_replicas", _NULLABLE_INT_ARRAY),
        (
            "leader_recovery_state",
            (_enc_optional_recovery_state, _dec_optional_recovery_state),
        ),
    ),
    FenceBrokerRecord: (("id", _INT32), ("epoch", _INT64)),
    UnfenceBrokerRecord: (("id", _INT32), ("epoch", _INT64)),
    RemoveTopicRecord: (("topic_id", _UUID),),
    FeatureLevelRecord: (("name", _STRING), ("feature_level", (Writer.int16, Reader.int16))),
    ProducerIdsRecord: (
        ("broker_id", _INT32),
        ("broker_epoch", _INT64),
        ("next_producer_id", _INT64),
    ),
    BrokerRegistrationChangeRecord: (
        ("broker_id", _INT32),
        ("broker_epoch", _INT64),
        ("fenced", _TRI_STATE),
        ("in_controlled_shutdown", _TRI_STATE),
    ),
    NoOpRecord: (),
}

# A layout that forgets a dataclass field would silently drop data: check at import.
for _cls, _layout in _LAYOUTS.items():
    assert tuple(n for n, _ in _layout) == tuple(f.name for f in fields(_cls)), _cls


def encode_record(rec: MetadataRecord) -> bytes:
    """The framed bytes of ``rec``: ``int16 record_type, int16 version`` then its fields."""
    w = Writer()
    w.int16(rec.record_type)
    w.int16(_VERSION)
    for name, (encode, _) in _LAYOUTS[type(rec)]:
        encode(w, getattr(rec, name))
    return w.getvalue()


def decode_record(buf: Buffer) -> MetadataRecord:
    """Decode one framed record; every byte of ``buf`` must belong to it.

    Raises :class:`CorruptRecordError` on truncation, trailing bytes, an unknown record type
    or version, or a field value outside its domain.
    """
    try:
        r = Reader(buf)
        record_type = r.int16()
        version = r.int16()
        cls = RECORD_CLASSES.get(record_type)
        if cls is None:
            raise CorruptRecordError(f"unknown metadata record type {record_type}")
        if version != _VERSION:
            raise CorruptRecordError(f"unsupported version {version} of record type {record_type}")
        values = [decode(r) for _, (_, decode) in _LAYOUTS[cls]]
        if r.remaining:
            raise CorruptRecordError(f"{r.remaining} trailing bytes after {cls.__name__}")
    except CorruptRecordError:
        raise
    except MalformedFrameError as exc:
        raise CorruptRecordError(str(exc)) from None
    return cls(*values)
