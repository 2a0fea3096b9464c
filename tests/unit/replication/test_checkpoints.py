"""Periodic checkpoints write only what changed and never hold the event loop for long."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from pathlib import Path

from pydmq.broker.server import Broker
from pydmq.config import BrokerConfig
from pydmq.node import Node
from pydmq.protocol.records import SimpleRecord, build_batch
from pydmq.storage.api import TopicPartition

PARTITIONS = 40


@contextlib.asynccontextmanager
async def _started_broker(tmp_path: Path) -> AsyncIterator[Broker]:
    """A started single node in ``tmp_path``; its broker role."""
    config = BrokerConfig(
        {
            "log.dirs": str(tmp_path),
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "pydmq.http.listeners": "http://127.0.0.1:0",
        }
    )
    node = Node(config)
    assert node.broker is not None
    await node.start()
    try:
        yield node.broker
    finally:
        await node.stop()


def test_checkpoints_skip_unchanged_and_yield(tmp_path: Path) -> None:
    async def run() -> None:
        async with _started_broker(tmp_path) as broker:
            broker.topic_creator.create_topic("cp", PARTITIONS)
            manager = broker.replica_manager
            for index in range(PARTITIONS):
                batch = (
                    build_batch(
                        [SimpleRecord(None, b"v", (), None)],
                        producer_id=7,
                        producer_epoch=0,
                        base_sequence=index,
                    )
                    if index == 0
                    else build_batch([SimpleRecord(None, b"v", (), None)])
                )
                manager.append(
                    manager.get(TopicPartition("cp", index)), memoryview(bytearray(batch))
                )

            ticks = 0

            async def ticker() -> None:
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0)

            task = asyncio.create_task(ticker())
            written = await manager.checkpoint_changed()
            task.cancel()
            assert written == PARTITIONS  # every high watermark moved
            assert ticks >= PARTITIONS - 1, "the loop was not yielded between partitions"
            assert await manager.checkpoint_changed() == 0  # nothing moved since
            manager.append(
                manager.get(TopicPartition("cp", 3)),
                memoryview(bytearray(build_batch([SimpleRecord(None, b"w", (), None)]))),
            )
            assert await manager.checkpoint_changed() == 1

    asyncio.run(run())


def test_deleting_a_partition_waits_for_its_checkpoint_write(tmp_path: Path) -> None:
    """A topic deleted while the checkpoint writer's thread is writing one of its partitions'
    checkpoints: the deletion waits for that write, and the log dir stays online. (It once
    removed the directory under the write, whose ENOENT took the whole log dir offline: a
    broker that lost every partition because a client deleted a topic.)"""

    async def run() -> None:
        async with _started_broker(tmp_path) as broker:
            broker.topic_creator.create_topic("doomed", 1)
            broker.topic_creator.create_topic("kept", 1)
            manager = broker.replica_manager
            doomed, kept = TopicPartition("doomed", 0), TopicPartition("kept", 0)
            for tp in (doomed, kept):
                partition = manager.get(tp)
                assert partition is not None
                batch = build_batch([SimpleRecord(None, b"v", (), None)])
                manager.append(partition, memoryview(bytearray(batch)))
            partition = manager.get(doomed)
            assert partition is not None
            engine_log = partition.log.engine_log
            entered, release = threading.Event(), threading.Event()
            original = engine_log.write_checkpoint

            def slow_write(name: str, data: bytes) -> None:
                entered.set()
                release.wait(10)  # a slow fsync
                original(name, data)

            engine_log.write_checkpoint = slow_write  # type: ignore[method-assign]
            checkpoints = asyncio.create_task(manager.checkpoint_changed())
            assert await asyncio.to_thread(entered.wait, 10)
            # The write resumes 0.2 s from now, whether the deletion waits for it or not.
            threading.Timer(0.2, release.set).start()
            manager.delete_partition(doomed, "segment")
            await asyncio.wait_for(checkpoints, 10)
            assert not manager.check_log_dirs(), manager.offline_log_dirs
            assert not (tmp_path / "doomed-0").exists()
            survivor = manager.get(kept)
            assert survivor is not None
            batch = build_batch([SimpleRecord(None, b"w", (), None)])
            manager.append(survivor, memoryview(bytearray(batch)))  # the dir still takes writes

    asyncio.run(run())


def test_an_idle_pass_over_many_partitions_yields_to_the_loop(tmp_path: Path) -> None:
    """Issue 21: with nothing to write, a pass over 100,000 partitions held the loop ~200 ms
    in one piece every 5 s (it yielded only after a partition it wrote); it now yields every
    1,000 partitions it looks at."""

    async def run() -> None:
        async with _started_broker(tmp_path) as broker:
            broker.topic_creator.create_topic("idle", 3000)
            manager = broker.replica_manager
            await manager.checkpoint_changed()  # whatever creating them left to write
            ticks = 0

            async def ticker() -> None:
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0)

            task = asyncio.create_task(ticker())
            await asyncio.sleep(0)  # the ticker's first step
            before = ticks
            assert await manager.checkpoint_changed() == 0
            task.cancel()
            assert ticks - before >= 3, "an idle pass held the loop over 3,000 partitions"

    asyncio.run(run())
