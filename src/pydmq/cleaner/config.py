"""The settings the log cleaner honours: per log (topic configs) and per broker
(``log.cleaner.*``). Values only; derived from the configs by :mod:`pydmq.config`."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CleanerSettings", "CompactionConfig"]


@dataclass(frozen=True, slots=True)
class CompactionConfig:
    """One log's compaction knobs (Kafka topic-config names in Python casing)."""

    compact: bool = False  # cleanup.policy contains compact
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms (KIP-58)
    max_compaction_lag_ms: int = 2**63 - 1  # max.compaction.lag.ms (KIP-354)
    delete_retention_ms: int = 86400000  # delete.retention.ms
    segment_bytes: int = 1024 * 1024 * 1024  # segment.bytes: the size cleaned groups stay under


@dataclass(frozen=True, slots=True)
class CleanerSettings:
    """The broker's ``log.cleaner.*`` settings."""

    enable: bool = True  # log.cleaner.enable
    threads: int = 1  # log.cleaner.threads
    dedupe_buffer_size: int = 128 * 1024 * 1024  # log.cleaner.dedupe.buffer.size (all threads)
    io_max_bytes_per_second: float = float("inf")  # log.cleaner.io.max.bytes.per.second
    backoff_ms: int = 15000  # log.cleaner.backoff.ms

    @property
    def dedupe_buffer_per_thread(self) -> int:
        """Kafka divides the dedupe buffer among the cleaner threads."""
        return self.dedupe_buffer_size // max(1, self.threads)
