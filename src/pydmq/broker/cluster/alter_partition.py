"""AlterPartitionManager: leaders ask the controller to change their partitions' ISR.

A leader decides *that* its ISR should change (a follower caught up, or one lagged for
``replica.lag.time.max.ms``: ``Partition.isr_change_proposal``); only the controller decides
*whether*, because the ISR is metadata every broker must agree on. Proposals are batched into
one AlterPartition (key 56) request per round; a partition with a proposal in flight makes no
other (Kafka's pending ISR state), and the leader keeps using the larger of the two ISRs for
the high watermark until the answer comes. The answer (or a later LeaderAndIsr) commits the
new ISR and partition epoch; errors drop the in-flight mark so the next round proposes again.

Rounds run every ``interval`` and at once after ``wake()`` (a follower reached the high
watermark, so an expansion is due). Replicas not alive in the metadata cache (fenced, shutting
down) are left out of expansions, and a partition whose proposal failed waits one interval
before proposing again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from pydmq.broker.cluster.controller_client import ControllerClient, ControllerUnavailableError
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.alter_partition import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    PartitionData,
    TopicData,
)
from pydmq.storage.api import TopicPartition

if TYPE_CHECKING:
    from pydmq.replication.partition import Partition
    from pydmq.replication.stats import BrokerTopicStats

__all__ = ["AlterPartitionManager"]

log = logging.getLogger(__name__)

ALTER_PARTITION_API = 56
ALTER_PARTITION_VERSION = 2  # new_isr as broker ids (v3's broker epochs are not known here)
# Per-partition errors after which the controller certainly kept the old ISR.
_NOT_APPLIED = frozenset(
    {
        ErrorCode.OPERATION_NOT_ATTEMPTED,
        ErrorCode.INELIGIBLE_REPLICA,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.INVALID_UPDATE_VERSION,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.INVALID_REQUEST,
    }
)


class AlterPartitionManager:
    """Owned by the broker's event loop; ``start()`` spawns the proposal loop."""

    def __init__(
        self,
        *,
        broker_id: int,
        broker_epoch: Callable[[], int],
        client: ControllerClient,
        partitions: Callable[[], Iterable[Partition]],
        on_committed: Callable[[TopicPartition], None],
        interval_ms: int,
        stats: BrokerTopicStats | None = None,
        is_eligible: Callable[[int], bool] = lambda _broker_id: True,
        request_timeout_ms: int = 5000,
    ) -> None:
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self.client = client
        self._partitions = partitions
        self._on_committed = on_committed
        self._stats = stats  # where committed ISR shrinks and expansions are counted
        self._is_eligible = is_eligible
        self.interval = interval_ms / 1000
        self.request_timeout = request_timeout_ms / 1000
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._running = False
        # Partitions whose last proposal failed: not proposed again before this time (the
        # controller refuses e.g. INELIGIBLE_REPLICA until something changes).
        self._retry_after: dict[TopicPartition, float] = {}

    def start(self) -> None:
        self._running = True
        if self._task is None:
            self._task = asyncio.create_task(
                self._run(), name=f"broker-{self.broker_id}-alter-partition"
            )

    async def stop(self) -> None:
        self._running = False  # see ReplicaFetcher.stop
        self._wake.set()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    def wake(self) -> None:
        self._wake.set()

    async def _run(self) -> None:
        while self._running:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval)
            self._wake.clear()
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("AlterPartition round failed")

    def collect(self, now_ms: int) -> list[tuple[Partition, list[int]]]:
        """Partitions led here that want an ISR change, their in-flight marks set."""
        proposals: list[tuple[Partition, list[int]]] = []
        now = time.monotonic()
        for partition in self._partitions():
            if not partition.is_leader:
                continue
            retry_after = self._retry_after.get(partition.tp)
            if retry_after is not None:
                if now < retry_after:
                    continue
                del self._retry_after[partition.tp]
            proposed = partition.isr_change_proposal(now_ms)
            if proposed is None:
                continue
            # Kafka's isReplicaIsrEligible: a fenced or shutting-down broker (gone from the
            # alive set) may not join; the controller would refuse with INELIGIBLE_REPLICA.
            joining = [r for r in proposed if r not in partition.isr]
            if joining:
                proposed = [r for r in proposed if r in partition.isr or self._is_eligible(r)]
                if len(proposed) == len(partition.isr):
                    continue
            partition.isr_change_sent(proposed)
            proposals.append((partition, list(proposed)))
        return proposals

    def build_request(self, proposals: list[tuple[Partition, list[int]]]) -> AlterPartitionRequest:
        topics: dict[uuid.UUID, TopicData] = {}
        for partition, isr in proposals:
            topic = topics.get(partition.topic_id)
            if topic is None:
                topic = topics[partition.topic_id] = TopicData(topic_id=partition.topic_id)
            topic.partitions.append(
                PartitionData(
                    partition_index=partition.tp.partition,
                    leader_epoch=partition.leader_epoch,
                    new_isr=isr,
                    leader_recovery_state=0,
                    partition_epoch=partition.partition_epoch,
                )
            )
        return AlterPartitionRequest(
            broker_id=self.broker_id,
            broker_epoch=self._broker_epoch(),
            topics=list(topics.values()),
        )

    async def run_once(self) -> int:
        """One round: collect, send, apply; returns how many proposals were sent."""
        if self._broker_epoch() < 0:
            return 0
        proposals = self.collect(int(time.time() * 1000))
        if not proposals:
            return 0
        by_key = {(p.topic_id, p.tp.partition): p for p, _ in proposals}
        try:
            response: AlterPartitionResponse = await self.client.send(
                ALTER_PARTITION_API,
                ALTER_PARTITION_VERSION,
                self.build_request(proposals),
                timeout=self.request_timeout,
            )
        except ControllerUnavailableError as exc:
            # Perhaps delivered and committed, perhaps not: keep counting both ISRs.
            log.info("AlterPartition got no answer: %s", exc)
            for partition, _ in proposals:
                self._failed(partition, maybe_applied=True)
            return len(proposals)
        if response.error_code != ErrorCode.NONE:
            log.info("AlterPartition refused: %s", ErrorCode(response.error_code).name)
            for partition, _ in proposals:
                self._failed(partition, maybe_applied=False)
            return len(proposals)
        for topic in response.topics:
            for result in topic.partitions:
                answered = by_key.pop((topic.topic_id, result.partition_index), None)
                if answered is None:
                    continue
                partition = answered
                if result.error_code != ErrorCode.NONE:
                    log.info(
                        "AlterPartition %s: %s", partition.tp, ErrorCode(result.error_code).name
                    )
                    self._failed(partition, maybe_applied=result.error_code not in _NOT_APPLIED)
                    continue
                if result.leader_epoch == partition.leader_epoch and partition.is_leader:
                    old_isr = partition.isr
                    partition.isr_change_committed(list(result.isr), result.partition_epoch)
                    if self._stats is not None:
                        self._stats.record_isr_change(old_isr, partition.isr)
                    log.info(
                        "%s: ISR now %s (partition epoch %d)",
                        partition.tp,
                        list(result.isr),
                        result.partition_epoch,
                    )
                    self._on_committed(partition.tp)
        for partition in by_key.values():
            self._failed(partition, maybe_applied=True)
        return len(proposals)

    def _failed(self, partition: Partition, *, maybe_applied: bool) -> None:
        partition.isr_change_failed(maybe_applied)
        self._retry_after[partition.tp] = time.monotonic() + self.interval
        # The high watermark may have waited for a member of the refused proposal.
        if partition.is_leader and partition.maybe_increment_high_watermark():
            self._on_committed(partition.tp)
