"""Checkpoint writes on the writer thread: captured at submission, run in order, a queued
write never replaces a newer one, nothing written for a closed log, engines opt in."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from pydmq.engines.memory import MemoryLog
from pydmq.storage.api import LogConfig
from pydmq.storage.checkpoint_writer import CheckpointWriter
from pydmq.storage.log import UnifiedLog


class RecordingLog(MemoryLog):
    """A memory log that records (thread, name, content) of every checkpoint write."""

    def __init__(self) -> None:
        super().__init__(LogConfig())
        self.writes: list[tuple[str, str, bytes]] = []
        self.closed = False

    def write_checkpoint(self, name: str, data: bytes) -> None:
        self.writes.append((threading.current_thread().name, name, bytes(data)))
        super().write_checkpoint(name, data)


class LoopOnlyLog(RecordingLog):
    checkpoints_thread_safe = False


def test_writes_run_on_the_writer_thread_in_order() -> None:
    engine_log = RecordingLog()
    log = UnifiedLog(engine_log)
    writer = CheckpointWriter(name="ckpt-test")
    try:
        log.high_watermark = 0
        log._checkpointed_hw = -1
        assert log.maybe_checkpoint(writer) == 1
        writer.barrier().result(5)
    finally:
        writer.stop()
    assert [(t, n) for t, n, _ in engine_log.writes] == [("ckpt-test", "high-watermark")]


def test_a_queued_write_never_replaces_a_newer_one() -> None:
    engine_log = RecordingLog()
    log = UnifiedLog(engine_log)
    writer = CheckpointWriter()
    gate = threading.Event()
    writer.submit(lambda: gate.wait(5))  # hold the thread so the next write stays queued
    try:
        log.high_watermark = 0
        log._checkpointed_hw = -1
        log.maybe_checkpoint(writer)  # queued: high watermark 0
        log.checkpoint_high_watermark()  # on this thread, newer
        gate.set()
        writer.barrier().result(5)
    finally:
        writer.stop()
    hw_writes = [t for t, n, _ in engine_log.writes if n == "high-watermark"]
    assert hw_writes == ["MainThread"]  # the stale queued write was dropped


def test_nothing_is_written_for_a_log_closed_meanwhile() -> None:
    engine_log = RecordingLog()
    log = UnifiedLog(engine_log)
    writer = CheckpointWriter()
    gate = threading.Event()
    writer.submit(lambda: gate.wait(5))
    try:
        log.high_watermark = 0
        log._checkpointed_hw = -1
        log.maybe_checkpoint(writer)
        engine_log.closed = True
        gate.set()
        writer.barrier().result(5)
    finally:
        writer.stop()
    assert engine_log.writes == []


def test_engines_without_the_opt_in_write_on_the_caller() -> None:
    engine_log = LoopOnlyLog()
    log = UnifiedLog(engine_log)
    writer = CheckpointWriter()
    try:
        log.high_watermark = 0
        log._checkpointed_hw = -1
        log.maybe_checkpoint(writer)
    finally:
        writer.stop()
    assert [t for t, _, _ in engine_log.writes] == ["MainThread"]


def test_drain_awaits_the_queue_from_the_event_loop() -> None:
    writer = CheckpointWriter()
    ran: list[Any] = []
    try:

        async def main() -> None:
            writer.submit(lambda: ran.append(1))
            await writer.drain()
            assert ran == [1]

        asyncio.run(main())
    finally:
        writer.stop()
