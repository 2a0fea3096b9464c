"""Request decode speed on the hot path: header parse + body decode, as the dispatcher does.

Decodes typical Produce and Fetch requests (and a Metadata request) in a loop and prints
requests/s and microseconds per request. Run it against two source trees to compare, e.g.
before and after the decode budgets:

    PYTHONPATH=/path/to/old/src python benchmarks/decode_budget.py
    PYTHONPATH=src python benchmarks/decode_budget.py

On a tree with decode budgets each body is decoded with its API's budget, as the dispatcher
decodes it; on an older tree without a budget.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from pydmq.protocol.headers import parse_request_header
from pydmq.protocol.messages import API_SCHEMAS
from pydmq.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from pydmq.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from pydmq.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pydmq.protocol.primitives import Reader, Writer
from pydmq.protocol.records import SimpleRecord, build_batch


def _decode_budget() -> Callable[[int], int] | None:
    try:
        from pydmq.protocol.budgets import decode_budget
    except ImportError:  # a tree from before the decode budgets
        return None
    return decode_budget


DECODE_BUDGET = _decode_budget()


def _frame(api_key: int, version: int, request: Any) -> bytes:
    w = Writer()
    w.int16(api_key)
    w.int16(version)
    w.int32(1)
    w.nullable_string("bench")
    if API_SCHEMAS[api_key].is_flexible(version):
        w.uvarint(0)
    API_SCHEMAS[api_key].encode_request(w, request, version)
    return w.getvalue()


def _decoder(frame: bytes) -> Callable[[], Any]:
    view = memoryview(bytearray(frame))

    def decode() -> Any:
        header, offset = parse_request_header(view)
        key = header.api_key
        reader = (
            Reader(view, offset)
            if DECODE_BUDGET is None
            else Reader(view, offset, budget=DECODE_BUDGET(key))
        )
        return API_SCHEMAS[key].decode_request(reader, header.api_version)

    return decode


def _produce(partitions: int, records_bytes: int) -> ProduceRequest:
    batch = build_batch([SimpleRecord(None, b"x" * 100)] * max(1, records_bytes // 110))
    return ProduceRequest(
        acks=-1,
        timeout=30_000,
        topic_data=[
            TopicProduceData(
                name="bench",
                partition_data=[
                    PartitionProduceData(index=i, records=batch) for i in range(partitions)
                ],
            )
        ],
    )


def _fetch(topics: int, partitions: int) -> FetchRequest:
    return FetchRequest(
        replica_id=-1,
        max_wait=500,
        min_bytes=1,
        max_bytes=50 << 20,
        session_epoch=-1,
        topics=[
            FetchTopic(
                topic=f"topic-{t}",
                partitions=[
                    FetchPartition(partition=p, fetch_offset=1000, partition_max_bytes=1 << 20)
                    for p in range(partitions)
                ],
            )
            for t in range(topics)
        ],
    )


CASES: list[tuple[str, int, int, Any]] = [
    ("Produce v9, 1 partition, 16 KiB batch", 0, 9, _produce(1, 16 * 1024)),
    ("Produce v9, 10 partitions, 16 KiB batches", 0, 9, _produce(10, 16 * 1024)),
    ("Produce v7, 100 partitions, 1 KiB batches", 0, 7, _produce(100, 1024)),
    ("Fetch v12, 1 topic x 1 partition", 1, 12, _fetch(1, 1)),
    ("Fetch v12, 1 topic x 100 partitions", 1, 12, _fetch(1, 100)),
    ("Fetch v11, 10 topics x 100 partitions", 1, 11, _fetch(10, 100)),
    (
        "Metadata v12, 10 topics",
        3,
        12,
        MetadataRequest(topics=[MetadataRequestTopic(name=f"t{i}") for i in range(10)]),
    ),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="time per case per round")
    parser.add_argument("--rounds", type=int, default=5, help="best of this many rounds")
    args = parser.parse_args()
    mode = "no budget (old tree)" if DECODE_BUDGET is None else "with decode budgets"
    print(f"request decode (header + body), {mode}; best of {args.rounds} x {args.seconds} s")
    for label, api_key, version, request in CASES:
        decode = _decoder(_frame(api_key, version, request))
        assert decode() == request
        best = float("inf")
        for _ in range(args.rounds):
            count = 0
            started = time.perf_counter()
            deadline = started + args.seconds
            while True:
                for _ in range(100):
                    decode()
                count += 100
                now = time.perf_counter()
                if now >= deadline:
                    break
            best = min(best, (now - started) / count)
        print(f"  {label:42s} {1 / best:>10,.0f} req/s  {best * 1e6:8.2f} us/req")


if __name__ == "__main__":
    main()
