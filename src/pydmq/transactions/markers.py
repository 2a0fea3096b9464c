"""The marker channel (Kafka's TransactionMarkerChannelManager): once a transaction's
PrepareCommit or PrepareAbort record is committed, its COMMIT or ABORT markers are written to
every partition of the transaction with real WriteTxnMarkers requests (api key 27), one per
partition leader for the transaction's partitions it leads, and the coordinator is told when
every partition has answered.

Who receives them is the :class:`MarkerSender` port: in cluster mode the leader over the
inter-broker listener, on a single node the handler served for api key 27, called in process.
Per partition, by the answer (Kafka's rules): NONE is done; UNSUPPORTED_FOR_MESSAGE_FORMAT and
UNSUPPORTED_VERSION drop the partition (it cannot hold markers); a partition the metadata no
longer knows (deleted) is dropped; INVALID_PRODUCER_EPOCH and TRANSACTION_COORDINATOR_FENCED
mean this coordinator is stale: the transaction is abandoned (its new coordinator completes it);
anything else (leader moved or unknown, not enough replicas, a timeout, a connection failure,
a storage error) is retried against the leader of the moment, after a backoff doubling from
``retry_backoff_ms`` up to ``max_backoff_ms``.

Batching: one request to a broker carries the markers of every transaction queued for it
since its previous request (Kafka's channel drains a queue per broker the same way).

Owned by the event loop; one task per transaction whose markers are in flight, one per broker
with markers queued.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from pydmq.storage.api import TopicPartition

__all__ = [
    "NO_LEADER",
    "MarkerSender",
    "PartitionLeaders",
    "TransactionMarkerChannel",
    "TxnMarkers",
]

log = logging.getLogger(__name__)

NO_LEADER = -1
""":meth:`PartitionLeaders.leader_of` of a partition that exists without a leader now."""

_DROPPED = frozenset({ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.UNSUPPORTED_VERSION})
_STALE = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})


class PartitionLeaders(Protocol):
    """Where partitions are led, as this broker's metadata has it."""

    def leader_of(self, tp: TopicPartition) -> int | None:
        """The leader's broker id, :data:`NO_LEADER` when it has none now, None when the
        partition does not exist (deleted)."""
        ...


class MarkerSender(Protocol):
    """Delivers a WriteTxnMarkers request to a broker (the real request, api key 27)."""

    def send(
        self, broker_id: int, version: int, request: WriteTxnMarkersRequest
    ) -> Awaitable[WriteTxnMarkersResponse]:
        """The broker's answer; raises (ConnectionError, ...) when it cannot be had."""
        ...


@dataclass(frozen=True, slots=True)
class TxnMarkers:
    """The markers of one transaction: its result, ids and the coordinator epoch (the leader
    epoch of the transactional id's ``__transaction_state`` partition)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    transaction_version: int
    partitions: frozenset[TopicPartition]


Done = Callable[[TxnMarkers, bool], None]
"""Called once per transaction: ``(markers, True)`` when every partition answered (or was
dropped), ``(markers, False)`` when this coordinator is stale and abandoned it."""


class _Queued:
    """Partitions of one transaction waiting for the next request to their leader."""

    __slots__ = ("future", "markers", "partitions")

    def __init__(
        self,
        markers: TxnMarkers,
        partitions: list[TopicPartition],
        future: asyncio.Future[dict[TopicPartition, int]],
    ) -> None:
        self.markers = markers
        self.partitions = partitions
        self.future = future


class TransactionMarkerChannel:
    """Markers in flight, one task per transactional id, and one sender per broker that
    batches the markers queued for it (of any number of transactions) into one request, the
    next one taking whatever queued meanwhile; event loop."""

    def __init__(
        self,
        leaders: PartitionLeaders,
        sender: MarkerSender,
        *,
        retry_backoff_ms: int = 100,
        max_backoff_ms: int = 1000,
    ) -> None:
        self._leaders = leaders
        self._sender = sender
        self._retry_backoff_ms = retry_backoff_ms
        self._max_backoff_ms = max_backoff_ms
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._queues: dict[int, list[_Queued]] = {}
        self._senders: dict[int, asyncio.Task[None]] = {}

    def send(self, markers: TxnMarkers, done: Done) -> None:
        """Write ``markers`` to their partitions, then call ``done`` (needs the running loop).
        A transactional id with markers in flight has them replaced."""
        self.cancel(markers.transactional_id)
        task = asyncio.get_running_loop().create_task(self._run(markers, done))
        self._tasks[markers.transactional_id] = task
        task.add_done_callback(lambda t: self._forget(markers.transactional_id, t))

    def in_flight(self, transactional_id: str) -> bool:
        return transactional_id in self._tasks

    def cancel(self, transactional_id: str) -> None:
        """Stop sending the markers of ``transactional_id`` (its partition was unloaded)."""
        task = self._tasks.pop(transactional_id, None)
        if task is not None:
            task.cancel()

    def cancel_all(self, transactional_ids: Iterable[str] | None = None) -> None:
        """Stop the markers of ``transactional_ids``; of every transaction when None (the
        coordinator stops), the per-broker senders included."""
        for transactional_id in list(
            self._tasks if transactional_ids is None else transactional_ids
        ):
            self.cancel(transactional_id)
        if transactional_ids is None:
            for sender in self._senders.values():
                sender.cancel()
            self._senders.clear()
            self._queues.clear()

    def _forget(self, transactional_id: str, task: asyncio.Task[None]) -> None:
        if self._tasks.get(transactional_id) is task:
            del self._tasks[transactional_id]

    async def _run(self, markers: TxnMarkers, done: Done) -> None:
        remaining = set(markers.partitions)
        backoff = self._retry_backoff_ms
        while remaining:
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in sorted(remaining, key=lambda t: (t.topic, t.partition)):
                leader = self._leaders.leader_of(tp)
                if leader is None:
                    log.info(
                        "%s: no marker for %s, which no longer exists",
                        markers.transactional_id,
                        tp,
                    )
                    remaining.discard(tp)
                elif leader != NO_LEADER:
                    by_leader.setdefault(leader, []).append(tp)
            answers = await asyncio.gather(
                *(self._enqueue(markers, broker, tps) for broker, tps in by_leader.items())
            )
            for answered in answers:
                for tp, code in answered.items():
                    if code == ErrorCode.NONE or code in _DROPPED:
                        remaining.discard(tp)
                    elif code in _STALE:
                        log.info(
                            "%s: markers abandoned: %s answered %s (a newer coordinator)",
                            markers.transactional_id,
                            tp,
                            ErrorCode(code).name,
                        )
                        done(markers, False)
                        return
            if remaining:
                await asyncio.sleep(backoff / 1000)
                backoff = min(backoff * 2, self._max_backoff_ms)
        done(markers, True)

    def _enqueue(
        self, markers: TxnMarkers, broker: int, partitions: list[TopicPartition]
    ) -> asyncio.Future[dict[TopicPartition, int]]:
        """The answer of ``broker`` for ``partitions``, sent with the next request to it."""
        future: asyncio.Future[dict[TopicPartition, int]] = (
            asyncio.get_running_loop().create_future()
        )
        self._queues.setdefault(broker, []).append(_Queued(markers, partitions, future))
        if broker not in self._senders:
            task = asyncio.get_running_loop().create_task(self._drain(broker))
            self._senders[broker] = task
        return future

    async def _drain(self, broker: int) -> None:
        """Send what is queued for ``broker``, one request at a time, until nothing is."""
        try:
            while True:
                queued = [q for q in self._queues.pop(broker, []) if not q.future.done()]
                if not queued:
                    return
                answers = await self._send(broker, queued)
                for item, answer in zip(queued, answers, strict=True):
                    if not item.future.done():
                        item.future.set_result(answer)
        finally:
            if self._senders.get(broker) is asyncio.current_task():
                del self._senders[broker]

    async def _send(self, broker: int, queued: list[_Queued]) -> list[dict[TopicPartition, int]]:
        """The answer of ``broker`` for each queued transaction: an error code per partition
        (a partition missing from the answer, or a failed request, counts as retriable)."""
        answers = [dict.fromkeys(q.partitions, int(ErrorCode.REQUEST_TIMED_OUT)) for q in queued]
        version = 2 if any(q.markers.transaction_version >= 2 for q in queued) else 1
        request = WriteTxnMarkersRequest(markers=[_marker(q) for q in queued])
        try:
            response = await self._sender.send(broker, version, request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.info("markers to broker %d failed: %s", broker, exc)
            return answers
        results = list(response.markers)
        for item, answer in zip(queued, answers, strict=True):
            # answers come in the request's order; matched by producer id all the same
            index = next(
                (i for i, r in enumerate(results) if r.producer_id == item.markers.producer_id),
                None,
            )
            if index is None:
                continue
            result = results.pop(index)
            for topic in result.topics:
                for p in topic.partitions:
                    tp = TopicPartition(topic.name, p.partition_index)
                    if tp in answer:
                        answer[tp] = p.error_code
        return answers


def _marker(queued: _Queued) -> WritableTxnMarker:
    markers = queued.markers
    by_topic: dict[str, list[int]] = {}
    for tp in queued.partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return WritableTxnMarker(
        producer_id=markers.producer_id,
        producer_epoch=markers.producer_epoch,
        transaction_result=markers.committed,
        topics=[
            WritableTxnMarkerTopic(name=topic, partition_indexes=indexes)
            for topic, indexes in by_topic.items()
        ],
        coordinator_epoch=markers.coordinator_epoch,
        transaction_version=markers.transaction_version,
    )
