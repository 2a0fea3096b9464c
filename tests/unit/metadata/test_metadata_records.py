"""Metadata record codec: every record type round-trips; garbage raises CorruptRecordError."""

from __future__ import annotations

import contextlib
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pydmq.metadata.records import (
    RECORD_CLASSES,
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    CorruptRecordError,
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
    decode_record,
    encode_record,
)
from pydmq.protocol.errors import ProtocolError

int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
broker_ids = st.integers(0, 2**31 - 1)
uuids = st.uuids()
names = st.text(max_size=20)
replica_lists = st.lists(broker_ids, max_size=6).map(tuple)
optional_replicas = st.none() | replica_lists
endpoints = st.builds(Endpoint, names, names, st.integers(0, 65535), st.integers(0, 3))

RECORDS: st.SearchStrategy[MetadataRecord] = st.one_of(
    st.builds(
        RegisterBrokerRecord,
        broker_ids,
        uuids,
        int64,
        st.lists(endpoints, max_size=3).map(tuple),
        st.none() | names,
        st.booleans(),
        st.booleans(),
    ),
    st.builds(UnregisterBrokerRecord, broker_ids, int64),
    st.builds(TopicRecord, names, uuids),
    st.builds(
        PartitionRecord,
        broker_ids,
        uuids,
        replica_lists,
        replica_lists,
        replica_lists,
        replica_lists,
        st.integers(-1, 2**31 - 1),
        st.sampled_from([0, 1]),
        int32,
        int32,
    ),
    st.builds(ConfigRecord, st.sampled_from([2, 4]), names, names, st.none() | names),
    st.builds(
        PartitionChangeRecord,
        broker_ids,
        uuids,
        optional_replicas,
        st.none() | st.integers(-1, 2**31 - 1),
        optional_replicas,
        optional_replicas,
        optional_replicas,
        st.none() | st.sampled_from([0, 1]),
    ),
    st.builds(FenceBrokerRecord, broker_ids, int64),
    st.builds(UnfenceBrokerRecord, broker_ids, int64),
    st.builds(RemoveTopicRecord, uuids),
    st.builds(FeatureLevelRecord, names, st.integers(0, 2**15 - 1)),
    st.builds(ProducerIdsRecord, st.integers(-1, 2**31 - 1), int64, int64),
    st.builds(
        ClientQuotaRecord,
        st.lists(st.builds(EntityData, names, st.none() | names), max_size=3).map(tuple),
        names,
        st.floats(allow_nan=False),
        st.booleans(),
    ),
    st.builds(
        BrokerRegistrationChangeRecord,
        broker_ids,
        int64,
        st.none() | st.booleans(),
        st.none() | st.booleans(),
    ),
    st.builds(
        UserScramCredentialRecord,
        names,
        st.sampled_from([1, 2]),
        st.binary(max_size=64),
        st.binary(max_size=64),
        st.binary(max_size=64),
        int32,
    ),
    st.builds(RemoveUserScramCredentialRecord, names, st.sampled_from([1, 2])),
    st.just(NoOpRecord()),
    st.builds(
        AccessControlEntryRecord,
        uuids,
        st.sampled_from([2, 3, 4, 5, 6, 7]),
        names,
        st.sampled_from([3, 4]),
        names,
        names,
        st.integers(2, 15),
        st.sampled_from([2, 3]),
    ),
    st.builds(RemoveAccessControlEntryRecord, uuids),
)

TID = uuid.UUID(int=7)
EXAMPLES: list[MetadataRecord] = [
    RegisterBrokerRecord(
        1, uuid.UUID(int=1), 10, (Endpoint("PLAINTEXT", "h", 9092, 0),), "r1", True, False
    ),
    UnregisterBrokerRecord(1, 10),
    TopicRecord("t", TID),
    PartitionRecord(0, TID, (1, 2), (1, 2), (), (), 1, 0, 3, 4),
    ConfigRecord(2, "t", "retention.ms", None),
    PartitionChangeRecord(0, TID, isr=(1,), leader=None),
    FenceBrokerRecord(1, 10),
    UnfenceBrokerRecord(1, 10),
    RemoveTopicRecord(TID),
    FeatureLevelRecord("metadata.version", 1),
    ProducerIdsRecord(1, 10, 2000),
    ClientQuotaRecord(
        (EntityData("user", "alice"), EntityData("client-id", None)),
        "producer_byte_rate",
        1024.0,
        False,
    ),
    BrokerRegistrationChangeRecord(1, 10, fenced=False, in_controlled_shutdown=True),
    UserScramCredentialRecord("alice", 1, b"salt", b"stored", b"server", 4096),
    RemoveUserScramCredentialRecord("alice", 2),
    NoOpRecord(),
    AccessControlEntryRecord(TID, 2, "orders", 4, "User:alice", "*", 3, 3),
    RemoveAccessControlEntryRecord(TID),
    RestAnswerRecord("key", "f1", 201, "application/json", "/v1/admin/topics/t", b"{}", 1, 2),
]


def test_examples_cover_every_record_type() -> None:
    assert {type(r) for r in EXAMPLES} == set(RECORD_CLASSES.values())
    assert sorted(RECORD_CLASSES) == [
        *(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 14, 15, 16, 17, 20, 22),
        1000,  # pydmq's own: RestAnswerRecord
    ]


@pytest.mark.parametrize("rec", EXAMPLES, ids=lambda r: type(r).__name__)
def test_example_round_trip(rec: MetadataRecord) -> None:
    data = encode_record(rec)
    assert int.from_bytes(data[:2], "big") == rec.record_type
    assert decode_record(data) == rec
    assert decode_record(memoryview(data)) == rec


@given(RECORDS)
def test_round_trip(rec: MetadataRecord) -> None:
    assert decode_record(encode_record(rec)) == rec


def test_unchanged_leader_is_minus_two_on_the_wire() -> None:
    data = encode_record(PartitionChangeRecord(0, TID))
    # frame (4) + partition_id (4) + topic_id (16) + isr null (4), then the leader
    assert data[28:32] == (-2).to_bytes(4, "big", signed=True)


@given(RECORDS, st.data())
def test_every_truncation_is_corrupt(rec: MetadataRecord, data: st.DataObject) -> None:
    raw = encode_record(rec)
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(CorruptRecordError):
        decode_record(raw[:cut])


@given(st.binary(max_size=64))
def test_garbage_never_escapes_as_another_error(raw: bytes) -> None:
    with contextlib.suppress(CorruptRecordError):
        decode_record(raw)


@pytest.mark.parametrize(
    "raw",
    [
        b"\x00\x06\x00\x00",  # record type 6 does not exist
        b"\x00\x14\x00\x01",  # NoOpRecord version 1
        b"\x00\x14\x00\x00\x00",  # trailing byte
        encode_record(FenceBrokerRecord(1, 1))[:-1],
    ],
)
def test_corrupt_records(raw: bytes) -> None:
    with pytest.raises(CorruptRecordError) as info:
        decode_record(raw)
    assert isinstance(info.value, ProtocolError)


def test_out_of_domain_values_are_corrupt() -> None:
    good = bytearray(encode_record(BrokerRegistrationChangeRecord(1, 2, True, None)))
    good[-2] = 5  # fenced tri-state must be -1, 0 or 1
    with pytest.raises(CorruptRecordError):
        decode_record(bytes(good))
    partition = bytearray(encode_record(EXAMPLES[3]))
    partition[-9] = 2  # leader_recovery_state must be 0 or 1
    with pytest.raises(CorruptRecordError):
        decode_record(bytes(partition))


def _frame(record_type: int) -> bytes:
    return record_type.to_bytes(2, "big") + b"\x00\x00"


def _i32(v: int) -> bytes:
    return v.to_bytes(4, "big", signed=True)


@pytest.mark.parametrize(
    "raw",
    [
        # negative lengths
        _frame(2) + b"\xff\xfe" + bytes(16),  # topic name of length -2
        _frame(2) + b"\xff\xff" + bytes(16),  # null where a name is required
        _frame(3) + _i32(0) + bytes(16) + _i32(-1) + bytes(40),  # null replicas
        _frame(3) + _i32(0) + bytes(16) + _i32(-7) + bytes(40),
        _frame(5) + _i32(0) + bytes(16) + _i32(-2) + _i32(-2) + _i32(-1) * 3 + b"\xff",
        _frame(0) + _i32(1) + bytes(24) + _i32(-1) + b"\xff\xff\x00\x00",  # endpoints
        # lengths past the bytes that remain: nothing is allocated for them
        _frame(0) + _i32(1) + bytes(24) + _i32(2**31 - 1) + b"\xff\xff\x00\x00",
        _frame(3) + _i32(0) + bytes(16) + _i32(2**31 - 1) + bytes(40),
        _frame(5) + _i32(0) + bytes(16) + _i32(2**30) + bytes(20),
        _frame(4) + b"\x02" + b"\x7f\xff" + b"t",
        # values outside their domain, invalid UTF-8
        _frame(5) + _i32(0) + bytes(16) + _i32(-1) + _i32(-3) + _i32(-1) * 3 + b"\xff",
        _frame(5) + _i32(0) + bytes(16) + _i32(-1) + _i32(-2) + _i32(-1) * 3 + b"\x02",
        _frame(0) + _i32(1) + bytes(24) + _i32(0) + b"\xff\xff" + b"\x02\x00",
        _frame(0) + _i32(1) + bytes(24) + _i32(0) + b"\xff\xff" + b"\x00\xff",
        _frame(12) + b"\x00\x02\xc3\x28" + b"\x00\x01",
    ],
)
def test_malformed_lengths_and_values_are_corrupt(raw: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decode_record(raw)
