"""A synchronous, group-less consumer: Fetch from explicit positions (no fetch sessions).

:func:`parse_fetched_records` turns one partition's fetched bytes into records: it skips the
records before the fetch offset (a batch is returned whole even when the offset asked for is
in its middle), ignores a truncated batch at the end (the broker may cut the last one at the
size limit), skips control batches and, for read_committed, aborted transactions.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pydmq.client.client import ApiKey, KafkaClient
from pydmq.client.errors import KafkaConnectionError, KafkaError
from pydmq.protocol.messages.fetch import (
    AbortedTransaction,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
)
from pydmq.protocol.records import (
    ControlRecordType,
    CorruptRecordError,
    decode_records,
    parse_batch_header,
    parse_end_txn_marker,
    read_frame_length,
    validate_crc,
)

__all__ = [
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "ConsumedRecord",
    "Consumer",
    "parse_fetched_records",
]

READ_UNCOMMITTED = 0
READ_COMMITTED = 1


@dataclass(frozen=True, slots=True)
class ConsumedRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def parse_fetched_records(
    topic: str,
    partition: int,
    data: bytes | bytearray | memoryview | None,
    fetch_offset: int,
    *,
    aborted: Sequence[AbortedTransaction] | None = None,
    isolation_level: int = READ_UNCOMMITTED,
    check_crc: bool = True,
) -> tuple[list[ConsumedRecord], int]:
    """Decode the complete batches of ``data``; returns (records, next fetch offset)."""
    out: list[ConsumedRecord] = []
    next_offset = fetch_offset
    if not data:
        return out, next_offset
    buf = memoryview(data)
    pending_aborts = sorted(aborted or (), key=lambda a: a.first_offset)
    active_aborts: set[int] = set()
    position = 0
    while True:
        frame = read_frame_length(buf, position)
        if frame is None or position + frame[1] > len(buf):
            break  # a partial batch at the end of the response
        header = parse_batch_header(buf, position)
        position += header.size
        if header.next_offset <= fetch_offset:
            next_offset = max(next_offset, header.next_offset)
            continue
        if check_crc:
            validate_crc(buf, header)
        next_offset = max(next_offset, header.next_offset)
        if isolation_level == READ_COMMITTED:
            while pending_aborts and pending_aborts[0].first_offset <= header.last_offset:
                active_aborts.add(pending_aborts.pop(0).producer_id)
        if header.is_control:
            if isolation_level == READ_COMMITTED and header.producer_id in active_aborts:
                for record in decode_records(buf, header):
                    try:
                        marker = parse_end_txn_marker(record)
                    except CorruptRecordError:
                        continue
                    if marker.control_type == ControlRecordType.ABORT:
                        active_aborts.discard(header.producer_id)
            continue
        if (
            isolation_level == READ_COMMITTED
            and header.is_transactional
            and header.producer_id in active_aborts
        ):
            continue
        for record in decode_records(buf, header):
            if record.offset < fetch_offset:
                continue
            out.append(
                ConsumedRecord(
                    topic,
                    partition,
                    record.offset,
                    record.timestamp,
                    record.key,
                    record.value,
                    record.headers,
                )
            )
    return out, next_offset


@dataclass(slots=True)
class PartitionState:
    position: int
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1


@dataclass(slots=True)
class FetchRound:
    records: list[ConsumedRecord] = field(default_factory=list)
    errors: dict[int, KafkaError] = field(default_factory=dict)


class Consumer:
    """Fetches ``topic``'s partitions from the positions given; :meth:`poll` does one round."""

    def __init__(
        self,
        client: KafkaClient,
        topic: str,
        positions: dict[int, int],
        *,
        max_wait_ms: int = 500,
        min_bytes: int = 1,
        max_bytes: int = 52_428_800,
        partition_max_bytes: int = 1_048_576,
        isolation_level: int = READ_UNCOMMITTED,
        retry_backoff: float = 0.1,
    ) -> None:
        self.client = client
        self.retry_backoff = retry_backoff
        self.topic = topic
        self.state = {p: PartitionState(o) for p, o in positions.items()}
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.partition_max_bytes = partition_max_bytes
        self.isolation_level = isolation_level

    def end_offset(self, partition: int) -> int:
        st = self.state[partition]
        return (
            st.last_stable_offset if self.isolation_level == READ_COMMITTED else st.high_watermark
        )

    def at_end(self, partitions: Iterable[int] | None = None) -> bool:
        """True once every partition's position has reached its end offset (from a fetch)."""
        for p in self.state if partitions is None else partitions:
            end = self.end_offset(p)
            if end < 0 or self.state[p].position < end:
                return False
        return True

    def poll(self, *, max_wait_ms: int | None = None) -> FetchRound:
        """One Fetch per leader for every partition; raises on non-retriable errors."""
        result = FetchRound()
        by_leader: dict[int, list[int]] = {}
        for partition in sorted(self.state):
            try:
                leader = self.client.leader_for(self.topic, partition)
            except KafkaError as exc:
                result.errors[partition] = exc
                continue
            by_leader.setdefault(leader, []).append(partition)
        wait = self.max_wait_ms if max_wait_ms is None else max_wait_ms
        for leader, partitions in by_leader.items():
            try:
                self._fetch(leader, partitions, wait, result)
            except KafkaConnectionError as exc:
                result.errors.update(dict.fromkeys(partitions, exc))
        if result.errors:
            fatal = [e for e in result.errors.values() if not e.retriable]
            if fatal:
                raise fatal[0]
            time.sleep(self.retry_backoff)
            with contextlib.suppress(KafkaConnectionError):
                self.client.refresh_metadata([self.topic])
        return result

    def _fetch(self, leader: int, partitions: list[int], wait: int, result: FetchRound) -> None:
        version = self.client.version_for(ApiKey.FETCH, leader)
        topic_id = uuid.UUID(int=0)
        if version >= 13:
            topic_id = self.client.topic_id(self.topic)
        request = FetchRequest(
            replica_id=-1,
            max_wait=wait,
            min_bytes=self.min_bytes,
            max_bytes=self.max_bytes,
            isolation_level=self.isolation_level,
            session_id=0,
            session_epoch=-1,
            topics=[
                FetchTopic(
                    topic=self.topic,
                    topic_id=topic_id,
                    partitions=[
                        FetchPartition(
                            partition=p,
                            fetch_offset=self.state[p].position,
                            partition_max_bytes=self.partition_max_bytes,
                        )
                        for p in partitions
                    ],
                )
            ],
        )
        response: FetchResponse = self.client.send(
            ApiKey.FETCH,
            request,
            node_id=leader,
            version=version,
            timeout=wait / 1000 + self.client.timeout,
        )
        if response.error_code:
            raise KafkaError(response.error_code, "Fetch failed")
        for t in response.responses:
            for p in t.partitions:
                st = self.state.get(p.partition_index)
                if st is None:
                    continue
                if p.error_code:
                    result.errors[p.partition_index] = KafkaError(
                        p.error_code,
                        f"{self.topic}-{p.partition_index} at offset {st.position}",
                    )
                    continue
                st.high_watermark = p.high_watermark
                st.last_stable_offset = (
                    p.last_stable_offset if p.last_stable_offset >= 0 else p.high_watermark
                )
                st.log_start_offset = p.log_start_offset
                records, next_offset = parse_fetched_records(
                    self.topic,
                    p.partition_index,
                    p.records,
                    st.position,
                    aborted=p.aborted_transactions,
                    isolation_level=self.isolation_level,
                )
                st.position = next_offset
                result.records.extend(records)
