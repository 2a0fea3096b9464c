"""``__cluster_metadata`` record layouts are frozen: golden bytes captured from the codec of
f8518cb (hand-written before the layouts were generated from schemas).

Every case encodes a record with today's codec and compares with the captured bytes, and
decodes the captured bytes back to the record: Raft logs and snapshots written by earlier
versions keep loading. Bytes over 1 KiB are kept as their SHA-256 and length.

Regenerate the fixture (only for a deliberate format change, which needs a new version):
``python tests/unit/metadata/test_metadata_records_golden.py > tests/unit/metadata/golden/records.json``.
"""

from __future__ import annotations

import hashlib
import json
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from pydmq.metadata.records import (
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
    decode_record,
    encode_record,
)

FIXTURE = Path(__file__).parent / "golden" / "records.json"
MAX_STRING = "x" * 0x7FFF
I16 = (-(2**15), 2**15 - 1)
I32 = (-(2**31), 2**31 - 1)
I64 = (-(2**63), 2**63 - 1)
T1 = uuid.UUID("11111111-2222-3333-4444-555555555555")
T0 = uuid.UUID(int=0)
TMAX = uuid.UUID(int=2**128 - 1)
MANY = tuple(range(1000))

CASES: dict[str, MetadataRecord] = {
    "register-broker": RegisterBrokerRecord(
        1,
        T1,
        10,
        (Endpoint("PLAINTEXT", "localhost", 9092), Endpoint("CONTROLLER", "::1", 9093, 3)),
        "rack-a",
        True,
        False,
    ),
    "register-broker-empty": RegisterBrokerRecord(0, T0, 0, (), None, False, True),
    "register-broker-max": RegisterBrokerRecord(
        I32[1], TMAX, I64[1], (Endpoint(MAX_STRING, "", 65535, I16[1]),), "", True, True
    ),
    "unregister-broker": UnregisterBrokerRecord(3, I64[0]),
    "topic": TopicRecord("orders", T1),
    "topic-empty": TopicRecord("", T0),
    "topic-max": TopicRecord(MAX_STRING, TMAX),
    "partition": PartitionRecord(0, T1, (1, 2, 3), (1, 2), (3,), (4,), 1, 0, 5, 6),
    "partition-offline": PartitionRecord(I32[1], T0, (), (), (), (), -1, 1, I32[0], I32[1]),
    "partition-many": PartitionRecord(1, TMAX, MANY, MANY, MANY, MANY, 0, 0, 0, 0),
    "config": ConfigRecord(2, "orders", "retention.ms", "1000"),
    "config-deleted": ConfigRecord(4, "1", "log.retention.ms", None),
    "config-empty": ConfigRecord(-128, "", "", ""),
    "partition-change-unchanged": PartitionChangeRecord(0, T1),
    "partition-change-all": PartitionChangeRecord(
        7,
        T1,
        isr=(1,),
        leader=2,
        replicas=(1, 2),
        removing_replicas=(),
        adding_replicas=(2,),
        leader_recovery_state=1,
    ),
    "partition-change-no-leader": PartitionChangeRecord(
        0, TMAX, isr=(), leader=-1, leader_recovery_state=0
    ),
    "fence-broker": FenceBrokerRecord(1, 10),
    "unfence-broker": UnfenceBrokerRecord(I32[1], I64[1]),
    "remove-topic": RemoveTopicRecord(T1),
    "feature-level": FeatureLevelRecord("metadata.version", 1),
    "feature-level-extremes": FeatureLevelRecord("", I16[0]),
    "producer-ids": ProducerIdsRecord(1, 10, 2000),
    "producer-ids-extremes": ProducerIdsRecord(-1, I64[0], I64[1]),
    "client-quota": ClientQuotaRecord(
        (EntityData("client-id", None), EntityData("user", "alice")),
        "producer_byte_rate",
        1048576.0,
        False,
    ),
    "client-quota-removed": ClientQuotaRecord(
        (EntityData("ip", "10.0.0.1"),), "connection_creation_rate", 0.0, True
    ),
    "broker-change-unchanged": BrokerRegistrationChangeRecord(1, 10),
    "broker-change-set": BrokerRegistrationChangeRecord(1, 10, True, True),
    "broker-change-cleared": BrokerRegistrationChangeRecord(2, 11, False, False),
    "broker-change-mixed": BrokerRegistrationChangeRecord(3, 12, None, False),
    "user-scram-credential": UserScramCredentialRecord(
        "alice", 1, b"\x00salt", b"stored-key", b"server-key", 4096
    ),
    "user-scram-credential-empty": UserScramCredentialRecord("", 2, b"", b"", b"", I32[1]),
    "remove-user-scram-credential": RemoveUserScramCredentialRecord("alice", 2),
    "no-op": NoOpRecord(),
    "acl": AccessControlEntryRecord(T1, 2, "orders", 3, "User:alice", "*", 3, 3),
    "acl-prefixed-deny": AccessControlEntryRecord(TMAX, 3, "app-", 4, "User:*", "10.0.0.1", 2, 2),
    "remove-acl": RemoveAccessControlEntryRecord(T1),
    "rest-answer": RestAnswerRecord(
        "alice\x00create-1",
        "ab" * 32,
        201,
        "application/json",
        "/v1/admin/topics/t",
        b'{"name":"t"}',
        1_700_000_000_000,
        1_700_086_400_000,
    ),
    "rest-answer-no-location": RestAnswerRecord(
        "\x00k", "", 204, "text/plain; charset=utf-8", None, b"", 0, 1
    ),
}


def _fingerprint(data: bytes) -> str | dict[str, Any]:
    if len(data) <= 1024:
        return data.hex()
    return {"sha256": hashlib.sha256(data).hexdigest(), "length": len(data)}


def _golden() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(FIXTURE.read_text())
    return loaded


def test_every_record_type_is_captured() -> None:
    assert set(CASES) == set(_golden())
    assert {type(r) for r in CASES.values()} == set(RECORD_CLASSES.values())


@pytest.mark.parametrize("name", sorted(CASES))
def test_encoding_is_unchanged(name: str) -> None:
    assert _fingerprint(encode_record(CASES[name])) == _golden()[name]


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_bytes_decode(name: str) -> None:
    golden = _golden()[name]
    data = bytes.fromhex(golden) if isinstance(golden, str) else encode_record(CASES[name])
    assert _fingerprint(data) == golden
    assert decode_record(data) == CASES[name]
    assert decode_record(memoryview(data)) == CASES[name]


def _capture() -> None:
    """Print the fixture: run against the codec whose bytes are the reference."""
    golden = {name: _fingerprint(encode_record(rec)) for name, rec in CASES.items()}
    print(json.dumps(golden, indent=1, sort_keys=True))


if __name__ == "__main__":
    sys.exit(_capture())
