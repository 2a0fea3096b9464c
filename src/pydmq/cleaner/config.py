"""The broker-level settings the log cleaner honours (``log.cleaner.*``); values only, derived
from the broker config by :mod:`pydmq.config`. The per-log knobs are in
:class:`~pydmq.storage.api.LogConfig` (Kafka's LogConfig has them too)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CleanerSettings"]


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
