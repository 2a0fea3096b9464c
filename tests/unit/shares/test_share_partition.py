"""The share-partition state machine (sans-IO): acquisition, acknowledge types, lock expiry
on an injected clock, the delivery-count limit and the in-flight window."""

from __future__ import annotations

import uuid

import pytest

from pydmq.protocol.errors import ErrorCode
from pydmq.shares.generated_records import (
    ShareSnapshotKey,
    StateBatch,
    decode_key,
    decode_share_snapshot_value,
)
from pydmq.shares.partition import (
    AcknowledgeType,
    AcquiredRecords,
    InFlightRecord,
    RecordState,
    SharePartition,
    SharePartitionLimits,
)
from pydmq.shares.state_log import restore, snapshot_of

pytestmark = pytest.mark.timeout(10)

ACCEPT = AcknowledgeType.ACCEPT
RELEASE = AcknowledgeType.RELEASE
REJECT = AcknowledgeType.REJECT
RENEW = AcknowledgeType.RENEW
GAP = AcknowledgeType.GAP


def _partition(**limits: int) -> SharePartition:
    return SharePartition(
        0,
        SharePartitionLimits(
            **{"max_record_locks": 100, "record_lock_duration_ms": 1000, **limits}
        ),
    )


def test_acquire_hands_new_records_once() -> None:
    sp = _partition()
    assert sp.acquire("a", high_watermark=10, max_records=4, now_ms=0) == [AcquiredRecords(0, 3, 1)]
    assert sp.acquire("b", high_watermark=10, max_records=100, now_ms=0) == [
        AcquiredRecords(4, 9, 1)
    ]
    assert sp.acquire("a", high_watermark=10, max_records=100, now_ms=0) == []
    assert sp.end_offset == 10 and sp.acquired_count() == 10


def test_accept_advances_start_offset_over_done_records_only() -> None:
    sp = _partition()
    sp.acquire("a", 10, 10, 0)
    assert sp.acknowledge("a", 2, 4, [ACCEPT], 0) is ErrorCode.NONE
    assert sp.start_offset == 0
    assert sp.acknowledge("a", 0, 1, [ACCEPT, REJECT], 0) is ErrorCode.NONE
    assert sp.start_offset == 5
    assert sp.record(0) is None


def test_release_returns_record_with_higher_delivery_count() -> None:
    sp = _partition()
    sp.acquire("a", 3, 10, 0)
    assert sp.acknowledge("a", 1, 1, [RELEASE], 0) is ErrorCode.NONE
    assert sp.acquire("b", 3, 10, 0) == [AcquiredRecords(1, 1, 2)]


def test_rejected_record_never_returns() -> None:
    sp = _partition()
    sp.acquire("a", 3, 10, 0)
    assert sp.acknowledge("a", 0, 2, [REJECT, ACCEPT, RELEASE], 0) is ErrorCode.NONE
    assert sp.acquire("a", 3, 10, 0) == [AcquiredRecords(2, 2, 2)]
    assert sp.start_offset == 2


def test_ack_by_another_member_or_of_unacquired_record_is_invalid() -> None:
    sp = _partition()
    sp.acquire("a", 5, 2, 0)
    assert sp.acknowledge("b", 0, 0, [ACCEPT], 0) is ErrorCode.INVALID_RECORD_STATE
    assert sp.acknowledge("a", 0, 2, [ACCEPT], 0) is ErrorCode.INVALID_RECORD_STATE
    assert sp.record(0) == InFlightRecord(RecordState.ACQUIRED, 1, "a", 1000)
    assert sp.acknowledge("a", 0, 1, [ACCEPT, ACCEPT, ACCEPT], 0) is ErrorCode.INVALID_REQUEST
    assert sp.acknowledge("a", 0, 0, [9], 0) is ErrorCode.INVALID_REQUEST


def test_gap_archives_offsets_without_records() -> None:
    sp = _partition()
    sp.acquire("a", 4, 10, 0)
    assert sp.acknowledge("a", 0, 3, [ACCEPT, GAP, GAP, ACCEPT], 0) is ErrorCode.NONE
    assert sp.start_offset == 4


def test_lock_expiry_on_injected_clock() -> None:
    sp = _partition()
    sp.acquire("a", 2, 10, now_ms=100)
    assert sp.next_lock_deadline() == 1100
    assert sp.expire_locks(1099) == 0
    assert sp.acquire("b", 2, 10, now_ms=1099) == []
    assert sp.acquire("b", 2, 10, now_ms=1100) == [AcquiredRecords(0, 1, 2)]
    assert sp.record(0) == InFlightRecord(RecordState.ACQUIRED, 2, "b", 2100)
    # The former holder can no longer acknowledge.
    assert sp.acknowledge("a", 0, 0, [ACCEPT], 1100) is ErrorCode.INVALID_RECORD_STATE


def test_renew_extends_the_lock() -> None:
    sp = _partition()
    sp.acquire("a", 1, 10, now_ms=0)
    assert sp.acknowledge("a", 0, 0, [RENEW], 900) is ErrorCode.NONE
    assert sp.expire_locks(1500) == 0
    assert sp.record(0) == InFlightRecord(RecordState.ACQUIRED, 1, "a", 1900)
    assert sp.acknowledge("a", 0, 0, [ACCEPT], 1500) is ErrorCode.NONE


def test_delivery_count_limit_archives() -> None:
    sp = _partition(delivery_count_limit=2)
    sp.acquire("a", 1, 10, 0)
    sp.acknowledge("a", 0, 0, [RELEASE], 0)
    assert sp.acquire("a", 1, 10, 0) == [AcquiredRecords(0, 0, 2)]
    # The second delivery's lock expires: the limit is reached, the record is archived.
    assert sp.expire_locks(5000) == 1
    assert sp.start_offset == 1
    assert sp.acquire("a", 1, 10, 5000) == []


def test_window_bounded_by_max_record_locks() -> None:
    sp = _partition(max_record_locks=3)
    assert sp.acquire("a", 10, 10, 0) == [AcquiredRecords(0, 2, 1)]
    assert sp.acquire("b", 10, 10, 0) == []
    sp.acknowledge("a", 0, 0, [ACCEPT], 0)
    assert sp.acquire("b", 10, 10, 0) == [AcquiredRecords(3, 3, 1)]


def test_member_release_and_mixed_runs() -> None:
    sp = _partition()
    sp.acquire("a", 4, 2, 0)
    sp.acquire("b", 4, 2, 0)
    assert sp.release_member("a") == 2
    assert sp.acquire("c", 6, 10, 0) == [AcquiredRecords(0, 1, 2), AcquiredRecords(4, 5, 1)]


def test_restore_makes_acquired_records_available() -> None:
    sp = _partition()
    sp.restore(
        5,
        [
            (5, InFlightRecord(RecordState.ACKNOWLEDGED, 1)),
            (6, InFlightRecord(RecordState.ACQUIRED, 1, "x", 10)),
            (8, InFlightRecord(RecordState.ARCHIVED, 3)),
        ],
    )
    assert sp.start_offset == 6 and sp.end_offset == 9
    assert sp.acquire("a", 10, 10, 0) == [
        AcquiredRecords(6, 6, 2),
        AcquiredRecords(7, 7, 1),
        AcquiredRecords(9, 9, 1),
    ]


def test_snapshot_round_trip_in_kafkas_layout() -> None:
    """A share-partition's ShareSnapshot (key version 0, value version 0 flexible) decodes to
    the same state: acquired records are kept as available, runs are merged."""
    sp = _partition()
    sp.acquire("a", 6, 10, 0)
    sp.acknowledge("a", 1, 2, [ACCEPT, REJECT], 0)
    snapshot = snapshot_of(sp, leader_epoch=3, now_ms=7)
    assert snapshot.state_batches == (
        StateBatch(0, 0, RecordState.AVAILABLE, 1),
        StateBatch(1, 1, RecordState.ACKNOWLEDGED, 1),
        StateBatch(2, 2, RecordState.ARCHIVED, 1),
        StateBatch(3, 5, RecordState.AVAILABLE, 1),
    )
    key = ShareSnapshotKey("g", uuid.UUID(int=5), 0).encode()
    assert key[:2] == b"\x00\x00"  # Kafka's ShareSnapshotKey: version 0
    assert decode_key(key) == ShareSnapshotKey("g", uuid.UUID(int=5), 0)
    decoded = decode_share_snapshot_value(snapshot.encode())
    assert decoded == snapshot and decoded.delivery_complete_count == 2
    loaded = _partition()
    restore(loaded, decoded)
    assert loaded.acquire("b", 6, 10, 0) == [AcquiredRecords(0, 0, 2), AcquiredRecords(3, 5, 2)]
