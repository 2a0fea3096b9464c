"""Periodic checkpoints write only what changed and never hold the event loop for long."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydmq.config import BrokerConfig
from pydmq.node import Node
from pydmq.protocol.records import SimpleRecord, build_batch
from pydmq.storage.api import TopicPartition

PARTITIONS = 40


def test_checkpoints_skip_unchanged_and_yield(tmp_path: Path) -> None:
    async def run() -> None:
        config = BrokerConfig({"log.dirs": str(tmp_path), "listeners": "PLAINTEXT://127.0.0.1:0"})
        node = Node(config)
        broker = node.broker
        assert broker is not None
        await node.start()
        try:
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
        finally:
            await node.stop()

    asyncio.run(run())
