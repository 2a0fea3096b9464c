"""Partition: one replica of a partition on this broker (leader state, ISR, high watermark).

In single-node mode every partition is led here with ISR = {this node}, so the high watermark
follows the log end offset after each append. The follower side and ISR changes arrive with
cluster mode; the interface (append as leader, read with an isolation bound) does not change.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from pydmq.config.topic import TopicConfig
from pydmq.storage.api import FetchDataInfo, TopicPartition
from pydmq.storage.log import AppendPolicy, LogAppendInfo, UnifiedLog

__all__ = ["Partition", "append_policy"]


_CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def append_policy(config: TopicConfig) -> AppendPolicy:
    return AppendPolicy(
        target_compression=_CODECS.get(config.get_str("compression.type")),
        max_message_bytes=config.get_int("max.message.bytes"),
        log_append_time=config.get_str("message.timestamp.type") == "LogAppendTime",
        timestamp_before_max_ms=config.get_int("message.timestamp.before.max.ms"),
        timestamp_after_max_ms=config.get_int("message.timestamp.after.max.ms"),
        flush_messages=config.get_int("flush.messages"),
    )


@dataclass(slots=True)
class Partition:
    """Owned by the event loop. ``policy`` is resolved when the topic config changes."""

    tp: TopicPartition
    topic_id: uuid.UUID
    log: UnifiedLog
    leader_id: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    policy: AppendPolicy
    min_insync_replicas: int

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def append_records_to_leader(self, records: memoryview) -> LogAppendInfo:
        info = self.log.append_as_leader(records, self.leader_epoch, self.policy)
        self.maybe_increment_high_watermark()
        return info

    def maybe_increment_high_watermark(self) -> bool:
        # ISR = {leader}: everything in the local log is replicated to the whole ISR.
        return self.log.update_high_watermark(self.log.log_end_offset)

    def read(
        self, offset: int, max_bytes: int, min_one_batch: bool, to_high_watermark: bool = True
    ) -> FetchDataInfo:
        upper = self.log.high_watermark if to_high_watermark else self.log.log_end_offset
        return self.log.read(offset, max_bytes, upper, min_one_batch)
