"""Where a partition leader's transaction verification goes (KIP-890 part 1; the
:class:`~pydmq.replication.txn_verification.TransactionVerifier` port as this broker
implements it, Kafka's AddPartitionsToTxnManager).

The coordinator of a transactional id is found as clients find it: the leader of the id's
``__transaction_state`` partition. When that is this node (always on a single node) the
coordinator's own check answers at once, in process
(:meth:`~pydmq.transactions.coordinator.TransactionCoordinator.verify_partitions`). Otherwise
an AddPartitionsToTxn v4 request with ``verify_only`` goes to it over the inter-broker
listener; the verifications queued for one coordinator while its previous request was in
flight go together in the next one (one entry per transactional id; a second producer id or
epoch for an id waits for the request after). A coordinator without a leader now is
COORDINATOR_NOT_AVAILABLE, a request that failed NETWORK_EXCEPTION: both retriable for the
producer (see :func:`~pydmq.replication.txn_verification.produce_error`).

Transactions v2 (``add_partition``): the same, but the coordinator adds the partitions to the
transaction (:meth:`~pydmq.transactions.coordinator.TransactionCoordinator.add_partitions` of
transactions v2 in process; else AddPartitionsToTxn v5 with ``verify_only`` false), as
Kafka's leaders do for Produce v12 and the group coordinator for TxnOffsetCommit v5.

Owned by the event loop; one sender task per coordinator broker with verifications queued.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field

from pydmq.broker.inter_broker import InterBrokerConnections
from pydmq.broker.txn_markers import RegistryPartitionLeaders
from pydmq.config.broker import BrokerConfig
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.features import TRANSACTIONS_V2
from pydmq.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from pydmq.storage.api import TopicPartition
from pydmq.transactions.coordinator import TransactionCoordinator
from pydmq.transactions.log import TRANSACTION_STATE_TOPIC, TransactionStateLog

__all__ = ["ENABLE_CONFIG", "AddPartitionsToTxnManager"]

log = logging.getLogger(__name__)

ENABLE_CONFIG = "transaction.partition.verification.enable"
ADD_PARTITIONS_TO_TXN = 24
_VERIFY_VERSION = 4
_ADD_VERSION = 5  # transactions v2: partitions added by their leaders
_REQUEST_TIMEOUT_S = 30.0

Verdicts = Mapping[TopicPartition, int]


@dataclass(slots=True)
class _Queued:
    """The partitions of one transactional id to verify in the next request to its
    coordinator, and where their answer goes."""

    producer_id: int
    producer_epoch: int
    add_partition: bool
    partitions: set[TopicPartition]
    answer: asyncio.Future[dict[TopicPartition, int]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class AddPartitionsToTxnManager:
    """Verifies transactional produces with their transaction coordinator: in process when it
    is this node, else batched per coordinator broker over the inter-broker listener."""

    def __init__(
        self,
        node_id: int,
        config: BrokerConfig,
        coordinator: TransactionCoordinator,
        state_log: TransactionStateLog,
        leaders: RegistryPartitionLeaders,
        brokers: InterBrokerConnections | None,
    ) -> None:
        self._node_id = node_id
        self._config = config
        self._coordinator = coordinator
        self._state_log = state_log
        self._leaders = leaders
        # None on a single node: its coordinator owns every transactional id.
        self._brokers = brokers
        self._queues: dict[int, list[tuple[str, _Queued]]] = {}
        self._senders: dict[int, asyncio.Task[None]] = {}

    @property
    def enabled(self) -> bool:
        return self._config.get_bool(ENABLE_CONFIG)

    def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
        add_partition: bool,
    ) -> Verdicts | Awaitable[Verdicts]:
        coordinator_id = self._coordinator_of(transactional_id)
        if coordinator_id is None:
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if coordinator_id == self._node_id:
            if add_partition:
                return self._add_here(transactional_id, producer_id, producer_epoch, partitions)
            return self._coordinator.verify_partitions(
                transactional_id, producer_id, producer_epoch, partitions
            )
        return self._enqueue(
            coordinator_id,
            transactional_id,
            _Queued(producer_id, producer_epoch, add_partition, set(partitions)),
        )

    async def _add_here(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
    ) -> Verdicts:
        """Transactions v2 with this node's coordinator: add the partitions in process."""
        code = await self._coordinator.add_partitions(
            transactional_id,
            producer_id,
            producer_epoch,
            partitions,
            transaction_version=TRANSACTIONS_V2,
        )
        return dict.fromkeys(partitions, code)

    def _coordinator_of(self, transactional_id: str) -> int | None:
        """The broker id of the id's coordinator (this node on a single node), None when its
        partition has no leader now or the topic does not exist."""
        if self._brokers is None:
            return self._node_id
        tp = TopicPartition(
            TRANSACTION_STATE_TOPIC, self._state_log.partition_for(transactional_id)
        )
        leader = self._leaders.leader_of(tp)
        return leader if leader is not None and leader >= 0 else None

    def _enqueue(
        self, coordinator_id: int, transactional_id: str, wanted: _Queued
    ) -> asyncio.Future[dict[TopicPartition, int]]:
        queue = self._queues.setdefault(coordinator_id, [])
        for queued_id, queued in queue:
            if (
                queued_id == transactional_id
                and queued.producer_id == wanted.producer_id
                and queued.producer_epoch == wanted.producer_epoch
                and queued.add_partition == wanted.add_partition
            ):
                queued.partitions.update(wanted.partitions)
                return queued.answer
        queued = wanted
        queue.append((transactional_id, queued))
        if coordinator_id not in self._senders:
            self._senders[coordinator_id] = asyncio.create_task(
                self._send_all(coordinator_id), name=f"txn-verification-{coordinator_id}"
            )
        return queued.answer

    async def _send_all(self, coordinator_id: int) -> None:
        """Send what is queued for ``coordinator_id``, one request at a time, until nothing
        is left."""
        try:
            while queue := self._queues.get(coordinator_id):
                batch: dict[str, _Queued] = {}
                later: list[tuple[str, _Queued]] = []
                for transactional_id, queued in queue:
                    if transactional_id in batch:
                        later.append((transactional_id, queued))
                    else:
                        batch[transactional_id] = queued
                self._queues[coordinator_id] = later
                await self._send(coordinator_id, batch)
        finally:
            del self._senders[coordinator_id]
            if not self._queues.get(coordinator_id):
                self._queues.pop(coordinator_id, None)

    async def _send(self, coordinator_id: int, batch: dict[str, _Queued]) -> None:
        assert self._brokers is not None  # queued only in cluster mode
        request = AddPartitionsToTxnRequest(
            transactions=[
                AddPartitionsToTxnTransaction(
                    transactional_id=transactional_id,
                    producer_id=queued.producer_id,
                    producer_epoch=queued.producer_epoch,
                    verify_only=not queued.add_partition,
                    topics=_topics(queued.partitions),
                )
                for transactional_id, queued in batch.items()
            ]
        )
        adds = any(queued.add_partition for queued in batch.values())
        version = _ADD_VERSION if adds else _VERIFY_VERSION
        try:
            response: AddPartitionsToTxnResponse = await self._brokers.request(
                coordinator_id, ADD_PARTITIONS_TO_TXN, version, request, _REQUEST_TIMEOUT_S
            )
        except (ConnectionError, OSError, TimeoutError) as exc:
            log.info("transaction verification with broker %d failed: %s", coordinator_id, exc)
            response = AddPartitionsToTxnResponse(error_code=ErrorCode.NETWORK_EXCEPTION)
        except asyncio.CancelledError:
            # the broker stops: the waiting produces are answered all the same
            response = AddPartitionsToTxnResponse(error_code=ErrorCode.NETWORK_EXCEPTION)
            _answer_all(batch, response)
            raise
        _answer_all(batch, response)

    async def close(self) -> None:
        senders = list(self._senders.values())
        for sender in senders:
            sender.cancel()
        await asyncio.gather(*senders, return_exceptions=True)
        for queue in self._queues.values():
            for _, queued in queue:
                _answer(queued, dict.fromkeys(queued.partitions, ErrorCode.NETWORK_EXCEPTION))
        self._queues.clear()


def _topics(partitions: set[TopicPartition]) -> list[AddPartitionsToTxnTopic]:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions, key=lambda tp: (tp.topic, tp.partition)):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return [AddPartitionsToTxnTopic(name=name, partitions=p) for name, p in by_topic.items()]


def _codes(response: AddPartitionsToTxnResponse) -> dict[str, dict[TopicPartition, int]]:
    """The answer's code per partition, by transactional id."""
    return {
        result.transactional_id: {
            TopicPartition(topic.name, partition.partition_index): partition.partition_error_code
            for topic in result.topic_results
            for partition in topic.results_by_partition
        }
        for result in response.results_by_transaction
    }


def _answer_all(batch: dict[str, _Queued], response: AddPartitionsToTxnResponse) -> None:
    """Each transaction's codes from ``response`` (its top-level error for every partition
    when it has one)."""
    codes = _codes(response)
    for transactional_id, queued in batch.items():
        verdicts = codes.get(transactional_id, {})
        _answer(
            queued,
            {
                tp: response.error_code or verdicts.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
                for tp in queued.partitions
            },
        )


def _answer(queued: _Queued, codes: dict[TopicPartition, int]) -> None:
    if not queued.answer.done():
        queued.answer.set_result(codes)
