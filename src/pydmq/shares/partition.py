"""The state of one share-partition (KIP-932), sans-IO.

A share-partition is a topic partition as one share group consumes it. Its records from the
share-partition start offset (``start_offset``, Kafka's SPSO) up to ``end_offset`` (SPEO, the
next offset never acquired) are *in flight*: each has a state (AVAILABLE, ACQUIRED,
ACKNOWLEDGED, ARCHIVED), a delivery count (incremented at each acquisition) and, while
ACQUIRED, the member holding it and its acquisition lock deadline. Records below the start
offset are done (acknowledged or archived); records from the end offset are available and
never delivered. The start offset moves up past every leading record that is done.

Owned by whoever serves the partition's ShareFetch and ShareAcknowledge (the partition
leader's event loop); it never reads a clock: every call that depends on time is given
``now_ms``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum

from pydmq.protocol.errors import ErrorCode

__all__ = [
    "AcknowledgeType",
    "AcquiredRecords",
    "InFlightRecord",
    "RecordState",
    "SharePartition",
    "SharePartitionLimits",
]


class RecordState(IntEnum):
    """An in-flight record's state, with Kafka's codes (as the share-state APIs carry them)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(IntEnum):
    """The acknowledge types of ShareFetch and ShareAcknowledge (KIP-932; RENEW: KIP-1222)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


@dataclass(frozen=True, slots=True)
class SharePartitionLimits:
    """The group's settings a share-partition applies."""

    # group.share.partition.max.record.locks: the most in-flight records (end - start).
    max_record_locks: int = 2000
    # share.record.lock.duration.ms (group.share.record.lock.duration.ms).
    record_lock_duration_ms: int = 30_000
    # share.delivery.count.limit (group.share.delivery.count.limit).
    delivery_count_limit: int = 5


@dataclass(frozen=True, slots=True)
class AcquiredRecords:
    """A run of consecutive offsets acquired together, all with the same delivery count."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(slots=True)
class InFlightRecord:
    """One in-flight record's state."""

    state: RecordState
    delivery_count: int = 0
    member_id: str | None = None
    lock_deadline_ms: int = 0


_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class SharePartition:
    """One share group's view of one partition: which records are in flight, and how."""

    def __init__(self, start_offset: int, limits: SharePartitionLimits) -> None:
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.limits = limits
        # Offsets in [start_offset, end_offset) with their state; every one is present.
        self._in_flight: dict[int, InFlightRecord] = {}

    # -- reading ---------------------------------------------------------------------------

    def record(self, offset: int) -> InFlightRecord | None:
        """The in-flight record at ``offset`` (None below the start or from the end offset)."""
        return self._in_flight.get(offset)

    def in_flight(self) -> Iterator[tuple[int, InFlightRecord]]:
        """The in-flight records in offset order."""
        for offset in range(self.start_offset, self.end_offset):
            yield offset, self._in_flight[offset]

    def acquired_count(self) -> int:
        """How many records are ACQUIRED now."""
        return sum(1 for r in self._in_flight.values() if r.state is RecordState.ACQUIRED)

    # -- acquisition -----------------------------------------------------------------------

    def acquire(
        self, member_id: str, high_watermark: int, max_records: int, now_ms: int
    ) -> list[AcquiredRecords]:
        """Acquire up to ``max_records`` records below ``high_watermark`` for ``member_id``:
        first the AVAILABLE in-flight ones in offset order (released or lock-expired records,
        redelivered with a higher delivery count), then new ones from the end offset, within
        ``max_record_locks`` of the start offset. Returns the acquired runs."""
        self.expire_locks(now_ms)
        acquired: list[int] = []
        for offset in range(self.start_offset, self.end_offset):
            if len(acquired) >= max_records or offset >= high_watermark:
                break
            if self._in_flight[offset].state is RecordState.AVAILABLE:
                acquired.append(offset)
        window_end = min(high_watermark, self.start_offset + self.limits.max_record_locks)
        while len(acquired) < max_records and self.end_offset < window_end:
            self._in_flight[self.end_offset] = InFlightRecord(RecordState.AVAILABLE)
            acquired.append(self.end_offset)
            self.end_offset += 1
        deadline = now_ms + self.limits.record_lock_duration_ms
        for offset in acquired:
            record = self._in_flight[offset]
            record.state = RecordState.ACQUIRED
            record.delivery_count += 1
            record.member_id = member_id
            record.lock_deadline_ms = deadline
        return _runs(acquired, self._in_flight)

    def expire_locks(self, now_ms: int) -> int:
        """Release every ACQUIRED record whose lock deadline has passed (archived instead once
        its delivery count reached the limit). Returns how many were released or archived."""
        expired = 0
        for record in self._in_flight.values():
            if record.state is RecordState.ACQUIRED and record.lock_deadline_ms <= now_ms:
                self._release(record)
                expired += 1
        if expired:
            self._maybe_advance_start()
        return expired

    def next_lock_deadline(self) -> int | None:
        """The earliest lock deadline of an ACQUIRED record (None when none is acquired)."""
        deadlines = [
            r.lock_deadline_ms for r in self._in_flight.values() if r.state is RecordState.ACQUIRED
        ]
        return min(deadlines) if deadlines else None

    # -- acknowledgement -------------------------------------------------------------------

    def acknowledge(
        self,
        member_id: str,
        first_offset: int,
        last_offset: int,
        acknowledge_types: Sequence[int],
        now_ms: int,
    ) -> ErrorCode:
        """Apply one acknowledgement batch of ``member_id``: one type for the whole range, or
        one per offset. Every offset must be ACQUIRED by this member (GAP: acquired or not),
        else nothing changes and INVALID_RECORD_STATE is returned; INVALID_REQUEST for a
        malformed batch."""
        count = last_offset - first_offset + 1
        if count <= 0 or len(acknowledge_types) not in (1, count):
            return ErrorCode.INVALID_REQUEST
        try:
            types = [AcknowledgeType(t) for t in acknowledge_types]
        except ValueError:
            return ErrorCode.INVALID_REQUEST
        if len(types) == 1:
            types = types * count
        for offset, ack in zip(range(first_offset, last_offset + 1), types, strict=True):
            if ack is AcknowledgeType.GAP and offset < self.start_offset:
                continue
            record = self._in_flight.get(offset)
            if record is None:
                return ErrorCode.INVALID_RECORD_STATE
            if ack is not AcknowledgeType.GAP and (
                record.state is not RecordState.ACQUIRED or record.member_id != member_id
            ):
                return ErrorCode.INVALID_RECORD_STATE
        for offset, ack in zip(range(first_offset, last_offset + 1), types, strict=True):
            record = self._in_flight.get(offset)
            if record is None:
                continue
            if ack is AcknowledgeType.ACCEPT:
                self._finish(record, RecordState.ACKNOWLEDGED)
            elif ack is AcknowledgeType.RELEASE:
                self._release(record)
            elif ack is AcknowledgeType.RENEW:
                record.lock_deadline_ms = now_ms + self.limits.record_lock_duration_ms
            elif record.state is not RecordState.ACKNOWLEDGED:
                self._finish(record, RecordState.ARCHIVED)
        self._maybe_advance_start()
        return ErrorCode.NONE

    def release_member(self, member_id: str) -> int:
        """Release every record ``member_id`` holds (its share session closed or it left the
        group). Returns how many were released or archived."""
        released = 0
        for record in self._in_flight.values():
            if record.state is RecordState.ACQUIRED and record.member_id == member_id:
                self._release(record)
                released += 1
        if released:
            self._maybe_advance_start()
        return released

    def archive_acquired(self, offsets: Iterable[int]) -> int:
        """Archive records just acquired that must never be delivered (a read_committed
        group's records of aborted transactions). Returns how many were archived."""
        archived = 0
        for offset in offsets:
            record = self._in_flight.get(offset)
            if record is not None and record.state is RecordState.ACQUIRED:
                self._finish(record, RecordState.ARCHIVED)
                archived += 1
        if archived:
            self._maybe_advance_start()
        return archived

    # -- start offset ----------------------------------------------------------------------

    def reset(self, start_offset: int) -> None:
        """Move the start offset to ``start_offset`` and forget every in-flight record (the
        group's offsets were altered, or the log start moved past them)."""
        self._in_flight.clear()
        self.start_offset = start_offset
        self.end_offset = start_offset

    def restore(self, start_offset: int, records: Sequence[tuple[int, InFlightRecord]]) -> None:
        """Load persisted state: the start offset and the in-flight records above it (their
        acquisitions, which did not survive, become AVAILABLE again)."""
        self.reset(start_offset)
        for offset, record in sorted(records, key=lambda item: item[0]):
            if offset < start_offset:
                continue
            while self.end_offset < offset:
                self._in_flight[self.end_offset] = InFlightRecord(RecordState.AVAILABLE)
                self.end_offset += 1
            state = RecordState.AVAILABLE if record.state is RecordState.ACQUIRED else record.state
            self._in_flight[offset] = InFlightRecord(state, record.delivery_count)
            self.end_offset = offset + 1
        self._maybe_advance_start()

    # -- internals -------------------------------------------------------------------------

    def _release(self, record: InFlightRecord) -> None:
        if record.delivery_count >= self.limits.delivery_count_limit:
            self._finish(record, RecordState.ARCHIVED)
        else:
            record.state = RecordState.AVAILABLE
            record.member_id = None
            record.lock_deadline_ms = 0

    @staticmethod
    def _finish(record: InFlightRecord, state: RecordState) -> None:
        record.state = state
        record.member_id = None
        record.lock_deadline_ms = 0

    def _maybe_advance_start(self) -> None:
        while self.start_offset < self.end_offset:
            record = self._in_flight[self.start_offset]
            if record.state not in _DONE:
                return
            del self._in_flight[self.start_offset]
            self.start_offset += 1


def _runs(offsets: list[int], in_flight: dict[int, InFlightRecord]) -> list[AcquiredRecords]:
    """Group ascending offsets into runs of consecutive offsets with one delivery count."""
    runs: list[AcquiredRecords] = []
    for offset in offsets:
        count = in_flight[offset].delivery_count
        if runs and runs[-1].last_offset == offset - 1 and runs[-1].delivery_count == count:
            last = runs[-1]
            runs[-1] = AcquiredRecords(last.first_offset, offset, count)
        else:
            runs.append(AcquiredRecords(offset, offset, count))
    return runs
