"""A synchronous, optionally idempotent producer built on :class:`KafkaClient`.

Records are collected per partition and sent as one RecordBatch v2 per partition when a
partition reaches ``batch_records`` records or ``batch_bytes`` bytes, when ``linger`` seconds
have passed since its first pending record (checked on each :meth:`Producer.send`), or on
:meth:`Producer.flush`. One request is in flight at a time, so with idempotence the sequence
numbers of a partition go out in order and a retried batch (same bytes, same sequence) is
deduplicated by the broker.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from pydmq.client.client import ApiKey, KafkaClient
from pydmq.client.errors import KafkaConnectionError, KafkaError
from pydmq.client.partitioner import default_partition
from pydmq.protocol.errors import ErrorCode, retriable
from pydmq.protocol.messages.init_producer_id import (
    InitProducerIdRequest,
    InitProducerIdResponse,
)
from pydmq.protocol.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from pydmq.protocol.records import SimpleRecord, build_batch

__all__ = ["DeliveryReport", "Producer", "ProducerStats"]

_RECORD_OVERHEAD: Final = 24  # a generous bound on a record's varints and attributes
_BATCH_OVERHEAD: Final = 61
_MAX_SEQUENCE: Final = 0x7FFFFFFF

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class DeliveryReport:
    """One acknowledged batch."""

    topic: str
    partition: int
    base_offset: int  # -1 with acks=0
    count: int


@dataclass(slots=True)
class ProducerStats:
    records: int = 0
    bytes: int = 0  # encoded (possibly compressed) batch bytes sent
    batches: int = 0
    requests: int = 0
    retries: int = 0
    per_partition: dict[TopicPartition, int] = field(default_factory=dict)


@dataclass(slots=True)
class _Pending:
    records: list[SimpleRecord] = field(default_factory=list)
    size: int = _BATCH_OVERHEAD
    since: float = 0.0


class Producer:
    """``Producer(client).send("topic", b"value", key=b"k")`` then ``flush()``."""

    def __init__(
        self,
        client: KafkaClient,
        *,
        acks: int = -1,
        compression: int = 0,
        compression_level: int | None = None,
        idempotent: bool | None = None,
        batch_records: int = 500,
        batch_bytes: int = 1_000_000,
        linger: float = 0.1,
        retries: int = 8,
        retry_backoff: float = 0.1,
        request_timeout_ms: int = 30_000,
    ) -> None:
        if acks not in (0, 1, -1):
            raise ValueError("acks must be 0, 1 or -1")
        self.client = client
        self.acks = acks
        self.compression = compression
        self.compression_level = compression_level
        # Like Java, idempotence needs acks=all; it is on by default when acks=-1.
        self.idempotent = (acks == -1) if idempotent is None else idempotent
        if self.idempotent and acks != -1:
            raise ValueError("an idempotent producer needs acks=-1")
        self.batch_records = max(1, batch_records)
        self.batch_bytes = max(1, batch_bytes)
        self.linger = linger
        self.retries = retries
        self.retry_backoff = retry_backoff
        self.request_timeout_ms = request_timeout_ms
        self.producer_id = -1
        self.producer_epoch = -1
        self.stats = ProducerStats()
        self.reports: list[DeliveryReport] = []
        self.keep_reports = True
        self._pending: dict[TopicPartition, _Pending] = {}
        self._sequences: dict[TopicPartition, int] = {}
        self._round_robin: dict[str, int] = {}

    # -- public API ---------------------------------------------------------------------------

    def init(self) -> None:
        """Obtain a producer id (idempotent producers; done lazily by the first send)."""
        if not self.idempotent or self.producer_id >= 0:
            return
        for attempt in range(self.retries + 1):
            response = self.client.call(
                InitProducerIdRequest(transactional_id=None, transaction_timeout=-1),
                InitProducerIdResponse,
            )
            if response.error_code == 0:
                self.producer_id = response.producer_id
                self.producer_epoch = response.producer_epoch
                return
            if not retriable(response.error_code) or attempt == self.retries:
                raise KafkaError(response.error_code, "InitProducerId failed")
            time.sleep(self.retry_backoff)

    def partition_for(self, topic: str, key: bytes | None) -> int:
        count = len(self.client.topic(topic).partitions)
        if count == 0:
            raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"topic {topic!r} has no partitions")
        if key is not None:
            return default_partition(key, count)
        n = self._round_robin.get(topic, 0)
        self._round_robin[topic] = n + 1
        return n % count

    def send(
        self,
        topic: str,
        value: bytes | None,
        *,
        key: bytes | None = None,
        headers: Sequence[tuple[str, bytes | None]] = (),
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> int:
        """Queue one record; returns its partition. Full batches are sent before returning."""
        self.init()
        if partition is None:
            partition = self.partition_for(topic, key)
        elif partition not in self.client.topic(topic).partitions:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"topic {topic!r} has no partition {partition}",
            )
        if timestamp is None:
            timestamp = time.time_ns() // 1_000_000
        tp = (topic, partition)
        size = (
            _RECORD_OVERHEAD
            + (len(key) if key else 0)
            + (len(value) if value else 0)
            + sum(len(k) + (len(v) if v else 0) + 10 for k, v in headers)
        )
        pending = self._pending.get(tp)
        if pending is not None and pending.size + size > self.batch_bytes:
            self._send({tp: self._pending.pop(tp).records})
            pending = None
        if pending is None:
            pending = self._pending[tp] = _Pending(since=time.monotonic())
        pending.records.append(SimpleRecord(key, value, tuple(headers), timestamp))
        pending.size += size
        full = len(pending.records) >= self.batch_records or pending.size >= self.batch_bytes
        if full or self.linger <= 0:
            self._send({tp: self._pending.pop(tp).records})
        else:
            self.poll()
        return partition

    def poll(self) -> None:
        """Send the batches whose linger time has passed."""
        now = time.monotonic()
        due = [tp for tp, p in self._pending.items() if now - p.since >= self.linger]
        if due:
            self._send({tp: self._pending.pop(tp).records for tp in due})

    def flush(self) -> None:
        """Send everything pending and wait for the acknowledgements."""
        if self._pending:
            batches = {tp: p.records for tp, p in self._pending.items()}
            self._pending.clear()
            self._send(batches)

    # -- sending ------------------------------------------------------------------------------

    def _encode(self, tp: TopicPartition, records: list[SimpleRecord]) -> bytes:
        base_sequence = -1
        if self.idempotent:
            base_sequence = self._sequences.get(tp, 0)
            self._sequences[tp] = (base_sequence + len(records)) & _MAX_SEQUENCE
        return build_batch(
            records,
            compression=self.compression,
            compression_level=self.compression_level,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=base_sequence,
        )

    def _send(self, batches: dict[TopicPartition, list[SimpleRecord]]) -> None:
        encoded = {tp: (self._encode(tp, recs), len(recs)) for tp, recs in batches.items()}
        attempt = 0
        while encoded:
            by_leader: dict[int, dict[TopicPartition, tuple[bytes, int]]] = {}
            failed: dict[TopicPartition, KafkaError] = {}
            for tp, item in encoded.items():
                try:
                    leader = self.client.leader_for(*tp)
                except KafkaError as exc:
                    failed[tp] = exc
                    continue
                by_leader.setdefault(leader, {})[tp] = item
            done: set[TopicPartition] = set()
            for leader, items in by_leader.items():
                try:
                    errors = self._produce(leader, items)
                except KafkaConnectionError as exc:
                    failed.update(dict.fromkeys(items, exc))
                    continue
                for tp in items:
                    if tp in errors:
                        failed[tp] = errors[tp]
                    else:
                        done.add(tp)
            for tp in done:
                del encoded[tp]
            if not failed:
                return
            fatal = [e for e in failed.values() if not e.retriable]
            if fatal or attempt >= self.retries:
                raise (fatal or list(failed.values()))[0]
            attempt += 1
            self.stats.retries += 1
            time.sleep(self.retry_backoff * attempt)
            with contextlib.suppress(KafkaConnectionError):
                self.client.refresh_metadata({tp[0] for tp in failed})

    def _produce(
        self, leader: int, items: dict[TopicPartition, tuple[bytes, int]]
    ) -> dict[TopicPartition, KafkaError]:
        version = self.client.version_for(ApiKey.PRODUCE, leader)
        topics: dict[str, TopicProduceData] = {}
        by_id: dict[object, str] = {}
        for (topic, partition), (data, _count) in sorted(items.items()):
            entry = topics.get(topic)
            if entry is None:
                entry = topics[topic] = TopicProduceData(name=topic)
                if version >= 13:
                    entry.topic_id = self.client.topic_id(topic)
                    by_id[entry.topic_id] = topic
            entry.partition_data.append(PartitionProduceData(index=partition, records=data))
        request = ProduceRequest(
            transactional_id=None,
            acks=self.acks,
            timeout=self.request_timeout_ms,
            topic_data=list(topics.values()),
        )
        self.stats.requests += 1
        response = self.client.send(
            ApiKey.PRODUCE,
            request,
            node_id=leader,
            version=version,
            expect_response=self.acks != 0,
            timeout=self.request_timeout_ms / 1000 + self.client.timeout,
        )
        errors: dict[TopicPartition, KafkaError] = {}
        offsets: dict[TopicPartition, int] = dict.fromkeys(items, -1)
        if response is not None:
            seen: set[TopicPartition] = set()
            for t in response.responses:
                name = t.name or by_id.get(t.topic_id, "")
                for p in t.partition_responses:
                    tp = (name, p.index)
                    seen.add(tp)
                    code = p.error_code
                    if code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                        code = 0  # already written by an earlier attempt
                    if code:
                        detail = p.error_message or ""
                        errors[tp] = KafkaError(code, f"{name}-{p.index}: {detail}".rstrip(": "))
                    else:
                        offsets[tp] = p.base_offset
            for tp in items:
                if tp not in seen and tp not in errors:
                    errors[tp] = KafkaError(
                        ErrorCode.UNKNOWN_SERVER_ERROR, f"no response for {tp[0]}-{tp[1]}"
                    )
        for tp, (data, count) in items.items():
            if tp in errors:
                continue
            self.stats.records += count
            self.stats.bytes += len(data)
            self.stats.batches += 1
            self.stats.per_partition[tp] = self.stats.per_partition.get(tp, 0) + count
            if self.keep_reports:
                self.reports.append(DeliveryReport(tp[0], tp[1], offsets[tp], count))
        return errors
