"""A coordinator's internal topic over this node's replica manager (the writes and reads that
``__consumer_offsets`` and ``__transaction_state`` share).

:class:`InternalTopicPartitions` appends one batch as the partition's leader with acks=-1
(through ``ReplicaManager.append_records``, as Kafka's coordinators append through
``appendRecords``), waits for the high watermark to reach the log end, and reads a partition
back batch by batch for a load. A refused append raises
:class:`~pydmq.coordinator.api.CoordinatorWriteError`; an accepted one returns None when it is
committed already (a single node: the high watermark follows the log end) or a future the
delayed-produce purgatory settles: NONE once committed, NOT_LEADER_OR_FOLLOWER on a leadership
change, NOT_ENOUGH_REPLICAS_AFTER_APPEND, or REQUEST_TIMED_OUT after ``timeout_ms``. Owned by
the event loop; the waiting tasks run on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from typing import Any

from pydmq.coordinator.api import CoordinatorRecord, CoordinatorWriteError
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.records import (
    BatchHeader,
    Record,
    SimpleRecord,
    build_batch,
    decode_records,
    iter_batch_headers,
    validate_crc,
)
from pydmq.replication.append import AppendResult, ProduceEntry
from pydmq.replication.delayed_produce import PendingAck, await_acks
from pydmq.replication.partition import Partition
from pydmq.replication.replica_manager import ReplicaManager
from pydmq.storage.api import TopicPartition
from pydmq.storage.log import AppendOrigin

__all__ = ["InternalTopicPartitions"]

_READ_BYTES = 1 << 20


class InternalTopicPartitions:
    """The partitions of internal topic ``topic`` as its coordinator writes and loads them
    (see the module docstring). ``replica_manager`` is read at each call: the node builds it
    after the coordinator."""

    def __init__(
        self, topic: str, replica_manager: Callable[[], ReplicaManager], timeout_ms: int
    ) -> None:
        self.topic = topic
        self._replica_manager = replica_manager
        self.timeout_ms = timeout_ms
        self._waiting: set[asyncio.Task[None]] = set()

    def track(self, coroutine: Coroutine[Any, Any, None]) -> None:
        """Run ``coroutine`` on the loop, keeping a reference until it is done."""
        task = asyncio.ensure_future(coroutine)
        self._waiting.add(task)
        task.add_done_callback(self._waiting.discard)

    def append_batch(
        self, partition: int, batch: memoryview, origin: AppendOrigin = AppendOrigin.CLIENT
    ) -> asyncio.Future[int] | None:
        """Append ``batch`` to ``partition`` as its leader with acks=-1."""
        tp = TopicPartition(self.topic, partition)
        answer = self._replica_manager().append_records(
            [ProduceEntry(tp, batch)], -1, self.timeout_ms, origin
        )
        if not isinstance(answer, list):
            future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
            self.track(_settle(answer, future))
            return future
        [result] = answer
        if result.error_code != ErrorCode.NONE:
            raise CoordinatorWriteError(
                result.error_code,
                result.error_message or f"{tp}: {ErrorCode(result.error_code).name}",
            )
        return None

    def append_records(
        self, partition: int, records: Sequence[CoordinatorRecord], per_batch: int = 500
    ) -> asyncio.Future[int] | None:
        """Append ``records`` (key, value) as batches of at most ``per_batch`` records, the
        :meth:`~pydmq.coordinator.api.CoordinatorLog.append` of a coordinator's topic: None
        when committed already, else the future of the last batch (whose commit commits the
        earlier ones)."""
        pending: asyncio.Future[int] | None = None
        for start in range(0, len(records), per_batch):
            chunk = records[start : start + per_batch]
            batch = build_batch([SimpleRecord(k, v) for k, v in chunk])
            waiter = self.append_batch(partition, memoryview(bytearray(batch)))
            if waiter is not None:
                pending = waiter
        return pending

    def data_records(self, partition: int) -> Iterator[Record]:
        """The records of ``partition``'s data batches up to its log end offset of now
        (control batches skipped): a coordinator's load."""
        for header, records in self.read_batches(partition):
            if not header.is_control:
                yield from records

    def await_log_end(self, partition: int) -> asyncio.Future[int] | None:
        """The high watermark reaching the partition's log end offset of now: None when it
        has, else a future resolved with NONE once it does (waiting through the purgatory,
        ``timeout_ms`` at a time) or with NOT_LEADER_OR_FOLLOWER once this node does not
        lead the partition."""
        hosted = self._replica_manager().get(TopicPartition(self.topic, partition))
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if hosted is None:
            future.set_result(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return future
        required_offset = hosted.log.log_end_offset
        if hosted.high_watermark >= required_offset:
            return None
        self.track(self._await_high_watermark(hosted, required_offset, future))
        return future

    async def _await_high_watermark(
        self, hosted: Partition, required_offset: int, future: asyncio.Future[int]
    ) -> None:
        def report(code: int) -> None:
            if code == ErrorCode.REQUEST_TIMED_OUT or future.done():
                return  # not yet: wait again
            # NOT_ENOUGH_REPLICAS_AFTER_APPEND: the high watermark passed, on fewer replicas
            committed = code in (ErrorCode.NONE, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
            future.set_result(ErrorCode.NONE if committed else code)

        purgatory = self._replica_manager().produce_purgatory
        while not future.done():
            await await_acks(
                purgatory, [PendingAck(hosted, required_offset, report)], self.timeout_ms
            )

    def read_batches(self, partition: int) -> Iterator[tuple[BatchHeader, list[Record]]]:
        """Each batch of ``partition`` up to its log end offset of now (control batches
        included), CRC-checked, with its records from the read position on (a read returns
        whole batches); nothing when the partition is not hosted here."""
        hosted = self._replica_manager().get(TopicPartition(self.topic, partition))
        if hosted is None:
            return
        unified = hosted.log
        offset = unified.log_start_offset
        end = unified.log_end_offset
        while offset < end:
            data = unified.read(offset, _READ_BYTES, end, True)
            if not data.buffers:
                break
            buf = b"".join(bytes(b) for b in data.buffers)
            next_offset = offset
            for header in iter_batch_headers(buf):
                next_offset = header.next_offset
                validate_crc(buf, header)
                yield header, [r for r in decode_records(buf, header) if r.offset >= offset]
            if next_offset <= offset:
                break
            offset = next_offset


async def _settle(answer: Awaitable[list[AppendResult]], future: asyncio.Future[int]) -> None:
    """Resolve ``future`` with the code of the one acks=-1 append ``answer`` settles (with
    its failure when the wait itself fails: the write it reports on must not wait forever)."""
    try:
        [result] = await answer
    except BaseException as exc:
        if not future.done():
            future.set_exception(exc)
        raise
    if not future.done():
        future.set_result(result.error_code)
