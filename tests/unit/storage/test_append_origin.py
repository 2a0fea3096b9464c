"""Who appends as leader (Kafka's AppendOrigin): a client may not write a transactional batch
without a sequence, a coordinator writing its internal topic may (the group coordinator's
TxnOffsetCommit offsets); neither appends a control batch as produced records: markers go
through ``append_marker_as_leader`` only."""

from __future__ import annotations

import pytest

from pydmq.engines.memory import MemoryLog
from pydmq.protocol.errors import ErrorCode as E
from pydmq.protocol.records import SimpleRecord, build_batch, build_end_txn_marker
from pydmq.storage.api import LogConfig
from pydmq.storage.log import AppendOrigin, AppendPolicy, LogAppendError, UnifiedLog

POLICY = AppendPolicy(
    max_message_bytes=1 << 20,
    log_append_time=False,
    timestamp_before_max_ms=2**62,
    timestamp_after_max_ms=2**62,
    flush_messages=2**63 - 1,
)


def offsets_batch() -> memoryview:
    batch = build_batch(
        [SimpleRecord(b"k", b"v")], producer_id=5, producer_epoch=1, is_transactional=True
    )
    return memoryview(bytearray(batch))


def marker() -> memoryview:
    batch = build_end_txn_marker(producer_id=5, producer_epoch=1, commit=True, coordinator_epoch=0)
    return memoryview(bytearray(batch))


def test_a_client_may_not_append_what_a_coordinator_may() -> None:
    log = UnifiedLog(MemoryLog(LogConfig()))
    with pytest.raises(LogAppendError) as refused:
        log.append_as_leader(offsets_batch(), 0, POLICY)
    assert refused.value.error_code == E.INVALID_RECORD
    assert log.log_end_offset == 0
    log.append_as_leader(offsets_batch(), 0, POLICY, AppendOrigin.COORDINATOR)
    assert log.log_end_offset == 1


@pytest.mark.parametrize("origin", list(AppendOrigin))
def test_no_origin_appends_a_marker_as_produced_records(origin: AppendOrigin) -> None:
    log = UnifiedLog(MemoryLog(LogConfig()))
    with pytest.raises(LogAppendError) as refused:
        log.append_as_leader(marker(), 0, POLICY, origin)
    assert refused.value.error_code == E.INVALID_RECORD
    assert log.log_end_offset == 0


def test_a_coordinator_transaction_is_tracked_until_its_marker() -> None:
    log = UnifiedLog(MemoryLog(LogConfig()))
    log.append_as_leader(offsets_batch(), 0, POLICY, AppendOrigin.COORDINATOR)
    log.append_as_leader(offsets_batch(), 0, POLICY, AppendOrigin.COORDINATOR)
    assert log.producer_state.first_unstable_offset() == 0
    log.append_marker_as_leader(5, 1, 0, True, 0, POLICY.flush_messages)
    assert log.producer_state.first_unstable_offset() is None
