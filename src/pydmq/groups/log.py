"""The internal compacted topic ``__consumer_offsets``: partitioning, appends and replay.

A group lives in partition ``abs(java_string_hashcode(group_id)) % partitions`` (Kafka's
``Utils.abs`` of ``String.hashCode``). Records are built as RecordBatch v2 and appended
through the partition's ``UnifiedLog.append_as_leader`` (the produce path: validation, offset
assignment, fetch wake-up). The topic is created internal (``cleanup.policy=compact``) on first
use with ``offsets.topic.num.partitions`` partitions; if someone created it first, its actual
partition count is used.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from pydmq.protocol.records import (
    Record,
    SimpleRecord,
    build_batch,
    decode_records,
    iter_batch_headers,
    validate_crc,
)
from pydmq.storage.api import TopicPartition

if TYPE_CHECKING:
    from pydmq.broker.server import Broker

__all__ = ["OFFSETS_TOPIC", "ConsumerOffsetsLog", "java_string_hashcode", "partition_for"]

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
_RECORDS_PER_BATCH = 500
_READ_BYTES = 1 << 20


def java_string_hashcode(s: str) -> int:
    """``java.lang.String.hashCode`` (over UTF-16 code units), as a signed int32."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int) -> int:
    h = java_string_hashcode(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


class ConsumerOffsetsLog:
    """Appends to and replays ``__consumer_offsets`` through the broker's replica manager."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    @property
    def exists(self) -> bool:
        return self._broker.topics.get(OFFSETS_TOPIC) is not None

    @property
    def num_partitions(self) -> int:
        topic = self._broker.topics.get(OFFSETS_TOPIC)
        if topic is not None:
            return len(topic.partitions)
        return self._broker.config.get_int("offsets.topic.num.partitions")

    def ensure_created(self) -> None:
        if self.exists:
            return
        self._broker.topic_ops.create_topic(
            OFFSETS_TOPIC,
            num_partitions=self._broker.config.get_int("offsets.topic.num.partitions"),
            configs={"cleanup.policy": "compact", "retention.ms": "-1"},
        )
        log.info("created %s", OFFSETS_TOPIC)

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def append(self, group_id: str, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        """Append ``(key, value)`` records (value None = tombstone) to the group's partition."""
        if not records:
            return
        self.ensure_created()
        tp = TopicPartition(OFFSETS_TOPIC, self.partition_for(group_id))
        replica_manager = self._broker.replica_manager
        partition = replica_manager.get(tp)
        if partition is None:
            raise RuntimeError(f"{tp} is not hosted here")
        for start in range(0, len(records), _RECORDS_PER_BATCH):
            chunk = records[start : start + _RECORDS_PER_BATCH]
            batch = build_batch([SimpleRecord(k, v) for k, v in chunk])
            replica_manager.append(partition, memoryview(bytearray(batch)))

    def replay(self) -> Iterator[Record]:
        """Every record of every partition, in offset order per partition."""
        if not self.exists:
            return
        for index in range(self.num_partitions):
            partition = self._broker.replica_manager.get(TopicPartition(OFFSETS_TOPIC, index))
            if partition is None:
                continue
            unified = partition.log
            offset = unified.log_start_offset
            end = unified.log_end_offset
            while offset < end:
                data = unified.read(offset, _READ_BYTES, end, True)
                if not data.buffers:
                    break
                buf = b"".join(bytes(b) for b in data.buffers)
                next_offset = offset
                for header in iter_batch_headers(buf):
                    next_offset = header.next_offset
                    if header.is_control:
                        continue
                    validate_crc(buf, header)
                    for record in decode_records(buf, header):
                        if record.offset >= offset:
                            yield record
                if next_offset <= offset:
                    break
                offset = next_offset
