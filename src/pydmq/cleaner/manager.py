"""LogCleanerManager: the cleaner threads of one broker (Kafka's LogCleaner and
LogCleanerManager): which log to clean next, and the threads that clean them.

Owned by the broker: :meth:`LogCleanerManager.start` and :meth:`stop` run on its event loop.
Each of the ``log.cleaner.threads`` threads loops: on the event loop (through the
:class:`~pydmq.cleaner.log_cleaner.Owner`) it plans every compacted log that is not being
cleaned and, among those past ``max.compaction.lag.ms`` or at or above their
``min.cleanable.dirty.ratio``, takes the one with the highest dirty ratio (as Kafka); it cleans it on its own thread
(:func:`~pydmq.cleaner.log_cleaner.clean_log`), and sleeps ``log.cleaner.backoff.ms`` when
nothing is cleanable. Settings are read at every pass, so the dynamic ``log.cleaner.*`` broker
configs apply without a restart (a changed thread count at the next pass).

A cleaning that fails on a storage error (a full disk, an I/O error: the log's own write path
reports and handles those) is retried after the backoff. Any other failure (a batch the cleaner
cannot read, a bug) marks the partition uncleanable, as Kafka does: it is skipped from then on,
so one bad log does not take a cleaner thread's every pass, until its log is replaced (the
partition deleted and re-created, or re-opened after a follower's re-fetch) or the broker
restarts. :meth:`LogCleanerManager.uncleanable_partitions` lists them (Kafka's
``uncleanable-partitions-count``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import TypeVar

from pydmq.cleaner.config import CleanerSettings
from pydmq.cleaner.log_cleaner import (
    CleanerStoppedError,
    LogToClean,
    Owner,
    clean_log,
    plan_cleaning,
)
from pydmq.cleaner.offset_map import OffsetMap
from pydmq.cleaner.throttler import Throttler
from pydmq.storage.api import LogConfig, TopicPartition
from pydmq.storage.errors import KafkaStorageError
from pydmq.storage.log import UnifiedLog

__all__ = ["LogCleanerManager", "LoopOwner"]

log = logging.getLogger(__name__)

T = TypeVar("T")

# What the broker lists: every log it hosts.
LogSource = Callable[[], Iterable[tuple[TopicPartition, UnifiedLog]]]


class LoopOwner:
    """Runs calls on an asyncio event loop for the cleaner threads and waits for their result;
    gives up (CleanerStoppedError) once ``stopping`` is set, so that a loop blocked in
    :meth:`LogCleanerManager.stop` never waits on a thread that waits on the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, stopping: threading.Event) -> None:
        self._loop = loop
        self._stopping = stopping

    def __call__(self, fn: Callable[[], T]) -> T:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)

        if self._stopping.is_set():
            raise CleanerStoppedError
        self._loop.call_soon_threadsafe(run)
        while True:
            try:
                return future.result(timeout=0.1)
            except concurrent.futures.TimeoutError:
                if self._stopping.is_set() and future.cancel():
                    raise CleanerStoppedError from None


class LogCleanerManager:
    """Starts, feeds and stops the cleaner threads (see the module docstring)."""

    def __init__(
        self,
        settings: Callable[[], CleanerSettings],
        logs: LogSource,
        owner: Owner,
        stopping: threading.Event,
    ) -> None:
        self._settings = settings
        self._logs = logs
        self._owner = owner
        self._stopping = stopping
        self._lock = threading.Lock()
        self._in_progress: set[TopicPartition] = set()
        # partition -> the log that failed to clean (a new log object is cleanable again)
        self._uncleanable: dict[TopicPartition, UnifiedLog] = {}
        self._threads: dict[int, threading.Thread] = {}
        self.throttler = Throttler(settings().io_max_bytes_per_second)
        self.cleanings = 0  # completed cleanings, for tests and figures
        self.bytes_read = 0
        self.bytes_written = 0
        # For /metrics (Kafka's max-dirty-percent and max-clean-time-secs): the dirty ratio
        # of the last log picked, the time spent cleaning and that of the last cleaning.
        self.last_dirty_ratio = 0.0
        self.clean_seconds = 0.0
        self.last_clean_seconds = 0.0

    @classmethod
    def on_loop(
        cls,
        settings: Callable[[], CleanerSettings],
        logs: LogSource,
        loop: asyncio.AbstractEventLoop,
    ) -> LogCleanerManager:
        stopping = threading.Event()
        return cls(settings, logs, LoopOwner(loop, stopping), stopping)

    def start(self) -> None:
        if self._settings().enable:
            self._ensure_threads()

    def _ensure_threads(self) -> None:
        """Start the threads up to ``log.cleaner.threads`` (a thread beyond it ends at its next
        pass; a count raised from 0 takes effect at the next start, no thread being left to
        notice it)."""
        with self._lock:
            if self._stopping.is_set():
                return
            wanted = self._settings().threads
            for index in range(wanted):
                thread = self._threads.get(index)
                if thread is None or not thread.is_alive():
                    thread = threading.Thread(
                        target=self._run, args=(index,), name=f"log-cleaner-{index}", daemon=True
                    )
                    self._threads[index] = thread
                    thread.start()

    def stop(self) -> None:
        """Stop every thread (a cleaning in progress stops at its next hand-off to the loop;
        a cleaned segment not swapped in yet is discarded, at the latest by the next open)."""
        self._stopping.set()
        with self._lock:  # no thread starts another once stopping is set
            threads = list(self._threads.values())
            self._threads.clear()
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join()

    # -- the cleaner threads --------------------------------------------------------------

    def _run(self, index: int) -> None:
        offset_map = OffsetMap(0)
        map_bytes = -1
        while not self._stopping.is_set():
            settings = self._settings()
            if index >= settings.threads:
                return
            self._ensure_threads()
            self.throttler.bytes_per_second = settings.io_max_bytes_per_second
            if map_bytes != settings.dedupe_buffer_per_thread:
                map_bytes = settings.dedupe_buffer_per_thread
                offset_map = OffsetMap(map_bytes)
            try:
                plan = self._owner(self.grab_filthiest_log)
            except CleanerStoppedError:
                return
            except Exception:  # a cleaner thread must outlive any one pass
                log.exception("choosing the next log to clean failed; retried after the backoff")
                self._stopping.wait(settings.backoff_ms / 1000)
                continue
            if plan is None:
                self._stopping.wait(settings.backoff_ms / 1000)
                continue
            try:
                self._clean(plan, offset_map)
            except CleanerStoppedError:
                return
            finally:
                with self._lock:
                    self._in_progress.discard(plan.tp)

    def _clean(self, plan: LogToClean, offset_map: OffsetMap) -> None:
        now_ms = int(time.time() * 1000)
        started = time.perf_counter()
        try:
            result = clean_log(
                plan, self._owner, offset_map, self.throttler, now_ms, self._stopping.is_set
            )
        except CleanerStoppedError:
            raise
        except (KafkaStorageError, OSError):
            log.warning("cleaning %s failed on a storage error; retried", plan.tp, exc_info=True)
            self._stopping.wait(self._settings().backoff_ms / 1000)
            return
        except Exception:
            log.exception("cleaning %s failed: the partition is marked uncleanable", plan.tp)
            with self._lock:
                self._uncleanable[plan.tp] = plan.log
            return
        with self._lock:
            self.cleanings += 1
            self.bytes_read += result.stats.bytes_read
            self.bytes_written += result.stats.bytes_written
            self.last_dirty_ratio = plan.dirty_ratio
            self.last_clean_seconds = time.perf_counter() - started
            self.clean_seconds += self.last_clean_seconds
        log.info(
            "cleaned %s up to offset %d: %d groups, %d -> %d bytes, %d -> %d records",
            plan.tp,
            result.end_offset,
            result.groups_swapped,
            result.stats.bytes_read,
            result.stats.bytes_written,
            result.stats.records_read,
            result.stats.records_written,
        )

    def grab_filthiest_log(self) -> LogToClean | None:
        """On the owner: the log to clean next (marked in progress), or None."""
        now_ms = int(time.time() * 1000)
        best: LogToClean | None = None
        hosted = list(self._logs())
        self._forget_replaced_logs(hosted)
        for tp, unified in hosted:
            if not _compacted(unified):
                continue
            with self._lock:
                if tp in self._in_progress or tp in self._uncleanable:
                    continue
            try:
                plan = plan_cleaning(tp, unified, now_ms)
            except (KafkaStorageError, OSError) as exc:  # e.g. EMFILE reading its checkpoint
                log.warning("cannot plan the cleaning of %s (retried later): %s", tp, exc)
                continue
            if plan is None or not plan.config.compact or not plan.cleanable:
                continue
            if best is None or plan.dirty_ratio > best.dirty_ratio:
                best = plan
        if best is not None:
            with self._lock:
                self._in_progress.add(best.tp)
        return best

    def _forget_replaced_logs(self, hosted: list[tuple[TopicPartition, UnifiedLog]]) -> None:
        """Unmark the uncleanable partitions whose failed log is no longer the one hosted."""
        current = dict(hosted)
        with self._lock:
            for tp, failed in list(self._uncleanable.items()):
                if current.get(tp) is not failed:
                    del self._uncleanable[tp]

    def uncleanable_partitions(self) -> list[TopicPartition]:
        """The partitions skipped since their cleaning failed (see the module docstring)."""
        with self._lock:
            return sorted(self._uncleanable)


def _compacted(log: UnifiedLog) -> bool:
    """Whether ``log`` is compacted (its engine log's ``LogConfig`` says so). Asked before
    planning: most logs are not, and planning starts with a runtime Protocol check that cost
    ~10 µs a log (at 20,000 partitions, a tenth of an idle node's CPU went to planning)."""
    config = getattr(log.engine_log, "config", None)
    return isinstance(config, LogConfig) and config.compact
