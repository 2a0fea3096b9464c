"""Transaction coordinator micro-benchmarks, in process: ``python benchmarks/transaction_coordinator.py``.

A :class:`~pydmq.transactions.coordinator.TransactionCoordinator` over an in-memory
``__transaction_state`` that commits at append time (a single node) and a marker receiver that
answers at once, called directly, no sockets:

- ``init``: InitProducerId of ``--ids`` new transactional ids (a producer id and epoch 0 each);
- ``transaction``: one whole transaction of an id: AddPartitionsToTxn of two partitions, EndTxn
  commit, the markers' WriteTxnMarkers answered, CompleteCommit written (three records);
- ``load``: replaying the partition those transactions wrote into a new coordinator.

Prints the median and the minimum over ``--rounds`` rounds in CPU time per operation (the
machine may be shared); nothing is asserted (DESIGN.md section 7).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Iterator, Sequence

from pydmq.coordinator.api import CoordinatorRecord
from pydmq.protocol.messages.write_txn_markers import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from pydmq.protocol.records import Record
from pydmq.storage.api import TopicPartition
from pydmq.transactions.api import TransactionConfig
from pydmq.transactions.coordinator import TransactionCoordinator
from pydmq.transactions.markers import TransactionMarkerChannel


class _Log:
    num_partitions = 1
    exists = True

    def __init__(self) -> None:
        self.records: list[CoordinatorRecord] = []

    def partition_for(self, transactional_id: str) -> int:
        return 0

    def append(self, partition: int, records: Sequence[CoordinatorRecord]) -> None:
        self.records.extend(records)

    def replay_partition(self, partition: int) -> Iterator[Record]:
        for offset, (key, value) in enumerate(self.records):
            yield Record(offset, 0, key, value, ())

    def await_committed(self, partition: int) -> None:
        return None


class _Ids:
    def __init__(self) -> None:
        self.next = 0

    def generate_producer_id(self) -> int:
        self.next += 1
        return self.next


class _Leaders:
    def leader_of(self, tp: TopicPartition) -> int:
        return 1


class _Receiver:
    async def send(
        self, broker_id: int, version: int, request: WriteTxnMarkersRequest
    ) -> WriteTxnMarkersResponse:
        return WriteTxnMarkersResponse(
            markers=[
                WritableTxnMarkerResult(
                    producer_id=m.producer_id,
                    topics=[
                        WritableTxnMarkerTopicResult(
                            name=t.name,
                            partitions=[
                                WritableTxnMarkerPartitionResult(partition_index=p)
                                for p in t.partition_indexes
                            ],
                        )
                        for t in m.topics
                    ],
                )
                for m in request.markers
            ]
        )


def _coordinator(log: _Log) -> TransactionCoordinator:
    coordinator = TransactionCoordinator(
        TransactionConfig(),
        log,
        _Ids(),
        TransactionMarkerChannel(_Leaders(), _Receiver()),
        lambda group: 0,
        owns_all_partitions=True,
    )
    coordinator.load()
    coordinator.start()
    return coordinator


async def _round(ids: int) -> tuple[float, float, float]:
    log = _Log()
    coordinator = _coordinator(log)
    names = [f"txn-{i}" for i in range(ids)]
    started = time.process_time()
    answers = [await coordinator.init_producer_id(name, 60000) for name in names]
    init = (time.process_time() - started) / ids
    partitions = [TopicPartition("t", 0), TopicPartition("t", 1)]
    started = time.process_time()
    for name, answer in zip(names, answers, strict=True):
        pid, epoch = answer.producer_id, answer.producer_epoch
        await coordinator.add_partitions(name, pid, epoch, partitions)
        await coordinator.end_transaction(name, pid, epoch, True)
        while coordinator.describe(name).state != "CompleteCommit":
            await asyncio.sleep(0)
    transaction = (time.process_time() - started) / ids
    coordinator.stop()
    started = time.process_time()
    _coordinator(log).stop()
    load = time.process_time() - started
    return init, transaction, load


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ids", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results = [asyncio.run(_round(args.ids)) for _ in range(args.rounds)]
    for index, name, unit, scale in (
        (0, "init (new id)", "us", 1e6),
        (1, "transaction (add 2 partitions, commit, markers, complete)", "us", 1e6),
        (2, f"load of {args.ids * 4} records", "ms", 1e3),
    ):
        values = [r[index] * scale for r in results]
        print(
            f"{name}: median {statistics.median(values):.1f} {unit}, min {min(values):.1f} {unit}"
        )


if __name__ == "__main__":
    main()
