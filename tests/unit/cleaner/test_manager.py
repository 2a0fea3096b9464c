"""LogCleanerManager: cleaner threads that hand every log call to an asyncio event loop."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest

from pydmq.cleaner import manager as manager_module
from pydmq.cleaner.config import CleanerSettings
from pydmq.cleaner.manager import LogCleanerManager, LoopOwner
from pydmq.cleaner.offset_map import OffsetMap
from pydmq.cleaner.throttler import Throttler
from pydmq.engines.memory import MemoryLog
from pydmq.protocol.records import SimpleRecord, build_batch, iter_batch_headers
from pydmq.storage.api import LogConfig, TopicPartition
from pydmq.storage.errors import KafkaStorageError
from pydmq.storage.log import UnifiedLog
from pydmq.testing.conformance_compaction import read_all_records

pytestmark = pytest.mark.timeout(60)

TS = 1_700_000_000_000


def updated_log(tp: TopicPartition, updates: int, *, compact: bool = True) -> UnifiedLog:
    engine_log = MemoryLog(LogConfig(compact=compact, retention_ms=-1), tp)
    for offset in range(updates):
        data = build_batch(
            [SimpleRecord(b"k%d" % (offset % 3), b"v%d" % offset, (), TS + offset)],
            base_offset=offset,
        )
        engine_log.append(data, list(iter_batch_headers(data)))
    log = UnifiedLog(engine_log)
    log.update_high_watermark(log.log_end_offset)
    return log


async def wait_until(condition: object, what: str) -> None:
    for _ in range(1000):  # bounded: a wedge fails within ~10 s
        if condition():  # type: ignore[operator]
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"not {what} within 10 s")


@pytest.fixture
def settings() -> Iterator[dict[str, CleanerSettings]]:
    yield {"now": CleanerSettings(threads=2, backoff_ms=20)}


def test_the_dirtiest_compacted_log_is_cleaned_on_a_cleaner_thread(
    settings: dict[str, CleanerSettings],
) -> None:
    compacted = {
        TopicPartition("a", 0): updated_log(TopicPartition("a", 0), 30),
        TopicPartition("b", 0): updated_log(TopicPartition("b", 0), 60),
        TopicPartition("plain", 0): updated_log(TopicPartition("plain", 0), 60, compact=False),
    }
    # "a" was cleaned up to offset 10 once: a lower dirty ratio than "b", never cleaned.
    compacted[TopicPartition("a", 0)].engine_log.write_checkpoint("cleaner-offset", b"10")
    threads: set[str] = set()

    async def run() -> LogCleanerManager:
        loop_thread = threading.current_thread().name

        def logs() -> list[tuple[TopicPartition, UnifiedLog]]:
            assert threading.current_thread().name == loop_thread  # only on the loop
            return list(compacted.items())

        manager = LogCleanerManager.on_loop(
            lambda: settings["now"], logs, asyncio.get_running_loop()
        )
        first = manager.grab_filthiest_log()
        assert first is not None and first.tp == TopicPartition("b", 0)  # the highest ratio
        manager._in_progress.clear()
        original = manager._clean

        def spy(*args: object) -> None:
            threads.add(threading.current_thread().name)
            original(*args)  # type: ignore[arg-type]

        manager._clean = spy  # type: ignore[method-assign]
        manager.start()
        try:
            await wait_until(lambda: manager.cleanings >= 2, "two cleanings")
        finally:
            manager.stop()
        return manager

    manager = asyncio.run(run())
    assert threads and all(name.startswith("log-cleaner-") for name in threads)
    for tp in (TopicPartition("a", 0), TopicPartition("b", 0)):
        rows = read_all_records(compacted[tp].engine_log)
        keys = [key for _, key, _ in rows]
        assert len(keys) == len(set(keys)) + 1  # each key once; the active batch is not cleaned
    assert len(read_all_records(compacted[TopicPartition("plain", 0)].engine_log)) == 60
    assert manager.bytes_written < manager.bytes_read


def test_stop_does_not_wait_for_a_thread_that_waits_for_the_blocked_loop() -> None:
    """stop() runs on the loop; a thread waiting for a hand-off to it gives up."""

    async def run() -> None:
        stopping = threading.Event()
        owner = LoopOwner(asyncio.get_running_loop(), stopping)
        failed: list[BaseException] = []

        def call() -> None:
            try:
                owner(lambda: 1)
            except BaseException as exc:
                failed.append(exc)

        thread = threading.Thread(target=call)
        thread.start()
        time.sleep(0.05)  # the loop is blocked: the call cannot run
        stopping.set()
        thread.join(10)
        assert not thread.is_alive()
        assert failed and type(failed[0]).__name__ == "CleanerStoppedError"

    asyncio.run(run())


def test_the_throttler_sleeps_what_the_rate_asks() -> None:
    clock = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds

    throttler = Throttler(1000.0, clock=lambda: clock[0], sleep=sleep)
    throttler.acquire(500)
    assert slept == [0.5]
    clock[0] += 1.0
    throttler.acquire(100)  # 600 bytes in 1.5 s: under the rate
    assert slept == [0.5]
    assert Throttler(float("inf")).acquire(1 << 40) is None


def failing_manager(
    monkeypatch: pytest.MonkeyPatch,
    hosted: dict[TopicPartition, UnifiedLog],
    error: Exception,
) -> LogCleanerManager:
    """A manager over ``hosted`` (no threads, calls run in place) whose cleanings raise
    ``error``."""

    def cleaning(*args: object) -> object:
        raise error

    monkeypatch.setattr("pydmq.cleaner.manager.clean_log", cleaning)
    return LogCleanerManager(
        lambda: CleanerSettings(backoff_ms=0),
        lambda: list(hosted.items()),
        lambda f: f(),
        threading.Event(),
    )


def test_a_log_whose_cleaning_fails_is_marked_uncleanable_until_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bad, good = TopicPartition("bad", 0), TopicPartition("good", 0)
    hosted = {bad: updated_log(bad, 60), good: updated_log(good, 30)}
    manager = failing_manager(monkeypatch, hosted, ValueError("unreadable batch"))
    plan = manager.grab_filthiest_log()
    assert plan is not None and plan.tp == bad  # the dirtiest
    manager._clean(plan, OffsetMap(0))
    manager._in_progress.clear()
    assert manager.uncleanable_partitions() == [bad]
    again = manager.grab_filthiest_log()
    assert again is not None and again.tp == good  # "bad" is skipped, "good" still cleaned
    manager._in_progress.clear()

    hosted[bad] = updated_log(bad, 60)  # the partition re-created: a new log
    replaced = manager.grab_filthiest_log()
    assert replaced is not None and replaced.tp == bad
    assert manager.uncleanable_partitions() == []


@pytest.mark.parametrize(
    "error", [OSError(28, "No space left on device"), KafkaStorageError("io", "/d", offline=False)]
)
def test_a_storage_error_is_retried_rather_than_marking_the_log(
    monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    tp = TopicPartition("t", 0)
    hosted = {tp: updated_log(tp, 60)}
    manager = failing_manager(monkeypatch, hosted, error)
    plan = manager.grab_filthiest_log()
    assert plan is not None
    manager._clean(plan, OffsetMap(0))
    manager._in_progress.clear()
    assert manager.uncleanable_partitions() == []
    retried = manager.grab_filthiest_log()
    assert retried is not None and retried.tp == tp


def test_a_log_whose_plan_cannot_be_read_is_skipped_and_the_thread_lives_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Out of file descriptors while reading one log's cleaner checkpoint: that log waits for
    a later pass, the other is cleaned, and the one cleaner thread does not die."""
    broken, fine = TopicPartition("broken", 0), TopicPartition("fine", 0)
    hosted = {broken: updated_log(broken, 60), fine: updated_log(fine, 30)}
    real_plan = manager_module.plan_cleaning
    failing = {"on": True}

    def plan(tp: TopicPartition, *args: object) -> object:
        if tp == broken and failing["on"]:
            raise OSError(24, "Too many open files")
        return real_plan(tp, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(manager_module, "plan_cleaning", plan)

    async def scenario() -> None:
        manager = LogCleanerManager.on_loop(
            lambda: CleanerSettings(threads=1, backoff_ms=20),
            lambda: list(hosted.items()),
            asyncio.get_running_loop(),
        )
        manager.start()
        try:
            await wait_until(lambda: manager.cleanings >= 1, "the fine log cleaned")
            assert manager.uncleanable_partitions() == []
            failing["on"] = False  # descriptors are back
            await wait_until(lambda: manager.cleanings >= 2, "the broken log cleaned too")
        finally:
            manager.stop()

    asyncio.run(scenario())


def test_only_compacted_logs_are_planned(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 21: every cleaner pass planned every hosted log, compacted or not (a runtime
    Protocol check, the cleaner checkpoint, the segment list): at 20,000 idle partitions a
    tenth of the node's CPU. A log that is not compacted is now passed over unplanned."""
    hosted = {
        TopicPartition("plain", p): updated_log(TopicPartition("plain", p), 5, compact=False)
        for p in range(3)
    }
    hosted[TopicPartition("keyed", 0)] = updated_log(TopicPartition("keyed", 0), 30)
    planned: list[TopicPartition] = []
    real_plan = manager_module.plan_cleaning

    def plan(tp: TopicPartition, log: UnifiedLog, now_ms: int) -> object:
        planned.append(tp)
        return real_plan(tp, log, now_ms)

    monkeypatch.setattr(manager_module, "plan_cleaning", plan)
    manager = LogCleanerManager(
        lambda: CleanerSettings(backoff_ms=0),
        lambda: list(hosted.items()),
        lambda f: f(),
        threading.Event(),
    )
    best = manager.grab_filthiest_log()
    assert best is not None and best.tp == TopicPartition("keyed", 0)
    assert planned == [TopicPartition("keyed", 0)]
