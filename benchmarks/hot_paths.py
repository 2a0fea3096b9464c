"""Produce and Fetch handler micro-benchmarks: ``python benchmarks/hot_paths.py``.

Runs an in-process single-node broker (segment engine, temporary data dir) and calls the
handlers directly, as the dispatcher does after decoding, without sockets:

- ``produce.handle``: one acks=1 Produce of one 16-record batch (100 B values) to one partition
  (header parse, CRC32C, offset assignment in place, segment append);
- ``fetch.handle``: one Fetch of 10 partitions from offset 0, each holding 8 such batches
  (segment reads up to the high watermark, whole batches).

Prints the median and the minimum microseconds per call over ``--rounds`` rounds of
``--calls`` calls. Run it against two source trees in the same session, alternating, to compare:

    PYTHONPATH=/path/to/old/src python benchmarks/hot_paths.py
    PYTHONPATH=src python benchmarks/hot_paths.py

A script that prints figures, never a timed assertion (DESIGN.md section 7).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable

from pydmq.broker.handlers import fetch, produce
from pydmq.broker.server import Broker
from pydmq.config.broker import BrokerConfig
from pydmq.protocol.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from pydmq.protocol.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
)
from pydmq.protocol.records import SimpleRecord, build_batch
from pydmq.storage.api import TopicPartition

try:  # the request layer's home since issue 16 part 2; older trees, to compare with
    from pydmq.api.handler import RequestContext
except ImportError:
    from pydmq.broker.handler import RequestContext  # type: ignore[no-redef]

try:  # the composition root since issue 16 part 2; older trees start the Broker itself
    from pydmq.node import Node as _Root
except ImportError:
    _Root = Broker  # type: ignore[assignment,misc]

PARTITIONS = 10
BATCHES_PER_PARTITION = 8


def _context(broker: Broker, api_key: int, api_version: int) -> RequestContext:
    # The handlers' ports since issue 16 part 2; older trees' handlers take the broker.
    host = getattr(broker, "services", broker)
    return RequestContext(host, api_key, api_version, 1, "bench", "127.0.0.1", 1, "PLAINTEXT", 1)


def _batch() -> bytes:
    return build_batch([SimpleRecord(b"key-%d" % i, b"v" * 100) for i in range(16)])


def _produce_call(broker: Broker) -> Callable[[], None]:
    ctx = _context(broker, 0, 9)
    batch = _batch()

    def call() -> None:
        request = ProduceRequest(
            acks=1,
            timeout=30_000,
            topic_data=[
                TopicProduceData(
                    name="produce",
                    partition_data=[
                        PartitionProduceData(index=0, records=memoryview(bytearray(batch)))
                    ],
                )
            ],
        )
        response = produce.handle(ctx, request)
        assert isinstance(response, ProduceResponse)
        assert response.responses[0].partition_responses[0].error_code == 0

    return call


def _fetch_call(broker: Broker) -> Callable[[], None]:
    batch = _batch()
    for index in range(PARTITIONS):
        partition = broker.replica_manager.get(TopicPartition("fetch", index))
        assert partition is not None
        for _ in range(BATCHES_PER_PARTITION):
            broker.replica_manager.append(partition, memoryview(bytearray(batch)), 1)
    ctx = _context(broker, 1, 12)
    request = FetchRequest(
        replica_id=-1,
        max_wait=0,
        min_bytes=0,
        max_bytes=50 << 20,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchTopic(
                topic="fetch",
                partitions=[
                    FetchPartition(partition=i, fetch_offset=0, partition_max_bytes=1 << 20)
                    for i in range(PARTITIONS)
                ],
            )
        ],
    )

    def call() -> None:
        response = fetch.handle(ctx, request)
        assert isinstance(response, FetchResponse)
        assert response.responses[0].partitions[0].records

    return call


def _measure(call: Callable[[], None], calls: int, rounds: int) -> list[float]:
    for _ in range(calls // 10):
        call()
    per_call: list[float] = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        per_call.append((time.perf_counter() - start) / calls * 1e6)
    return per_call


async def _run(calls: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as data_dir:
        node = _Root(
            BrokerConfig(
                {
                    "listeners": "PLAINTEXT://127.0.0.1:0",
                    "log.dirs": data_dir,
                    "log.segment.bytes": str(1 << 30),
                }
            )
        )
        broker = getattr(node, "broker", node)
        await node.start()
        try:
            # topic_ops in trees before the admin path went through the controller (5f48ec2)
            creator = getattr(broker, "topic_creator", None) or broker.topic_ops
            creator.create_topic("produce", 1)
            creator.create_topic("fetch", PARTITIONS)
            cases = {
                "produce.handle (1 batch of 16 records)": _produce_call(broker),
                f"fetch.handle ({PARTITIONS} partitions)": _fetch_call(broker),
            }
            for name, call in cases.items():
                figures = _measure(call, calls, rounds)
                print(
                    f"{name}: median {statistics.median(figures):.1f} us, "
                    f"min {min(figures):.1f} us per call ({rounds} rounds of {calls})"
                )
        finally:
            await node.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2_000, help="calls per round")
    parser.add_argument("--rounds", type=int, default=15, help="rounds per handler")
    args = parser.parse_args()
    asyncio.run(_run(args.calls, args.rounds))


if __name__ == "__main__":
    main()
