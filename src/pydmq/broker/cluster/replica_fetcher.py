"""Replica fetchers: followers pull their partitions from the leaders, as Kafka's do.

One :class:`ReplicaFetcher` task per source broker fetches every partition this broker follows
from that leader, in one Fetch request (v15: topic ids, and ``replica_state`` with this
broker's id and registration epoch, which the leader checks against its metadata cache before
it believes the fetch is a follower's) long polled for ``replica.fetch.wait.max.ms``. A partition starts in the *truncating* state: before
its first fetch from a (new) leader, the follower asks the leader with OffsetForLeaderEpoch
(key 23, ``replica_id`` set) where its latest epoch ends on the leader and truncates what the
leader does not have (records a deposed leader appended but never replicated). Then fetched
record batches are appended as they are (offsets and epochs as the leader wrote them), and the
follower's high watermark becomes ``min(leader HW, own log end)`` and its log start offset the
leader's (capped at its own log end, never moving back). Every fetch carries the follower's log
start offset: the leader waits for it before answering a DeleteRecords.

Errors: OFFSET_OUT_OF_RANGE below the leader's log start -> start over empty at the leader's
log start; above the leader's end -> truncate again. NOT_LEADER_OR_FOLLOWER, FENCED or
UNKNOWN leader epoch, unknown partition -> back off: the controller's next LeaderAndIsr moves
the partition to the right leader and epoch. A broken connection backs off every partition of
that fetcher.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydmq.net.client import NodeConnection, NodeConnectionError
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.fetch import (
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    ReplicaState,
)
from pydmq.protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from pydmq.security.sasl.client import SaslClient
from pydmq.storage.api import TopicPartition
from pydmq.storage.log import LogStorageError

if TYPE_CHECKING:
    import ssl

    from pydmq.replication.partition import Partition

__all__ = ["FetchState", "ReplicaFetcher", "ReplicaFetcherManager", "truncation_offset"]

log = logging.getLogger(__name__)

FETCH_API = 1
FETCH_VERSION = 15
OFFSET_FOR_LEADER_EPOCH_API = 23
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
_FINAL_EPOCH = -1  # sessionless fetch
_RETRIABLE_LEADERSHIP = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.LEADER_NOT_AVAILABLE,
    }
)


@dataclass(slots=True)
class FetchState:
    """One followed partition inside a fetcher."""

    tp: TopicPartition
    topic_id: uuid.UUID
    leader_id: int
    leader_epoch: int
    fetch_offset: int = 0
    truncating: bool = True
    delayed_until: float = 0.0


def truncation_offset(
    follower_epoch: int,
    follower_end: int,
    high_watermark: int,
    leader_epoch: int,
    leader_end: int,
    follower_end_for: Callable[[int], tuple[int, int]],
) -> tuple[int, bool]:
    """Where a follower truncates given the leader's OffsetForLeaderEpoch answer.

    ``follower_epoch`` is the follower's latest epoch, asked about; the leader answered
    (``leader_epoch``, ``leader_end``): the largest epoch it knows <= the asked one and where
    it ends. Returns (offset, done); not done means ask again with the (smaller) latest epoch
    left after truncating, Kafka's multi-round truncation for a follower that has epochs the
    leader never saw.
    """
    if leader_epoch < 0 or leader_end < 0:
        # The leader knows no epoch this old: keep what is known committed.
        return min(high_watermark, follower_end), True
    if leader_epoch == follower_epoch:
        return min(leader_end, follower_end), True
    own_epoch, own_end = follower_end_for(leader_epoch)
    if own_epoch == leader_epoch:
        return min(leader_end, own_end), True
    # We do not have the leader's epoch: cut at the end of our largest epoch below it and
    # ask again.
    return min(leader_end, own_end if own_end >= 0 else follower_end), False


class ReplicaFetcher:
    """Fetches every followed partition whose leader is ``source_id``; one asyncio task."""

    def __init__(self, manager: ReplicaFetcherManager, source_id: int) -> None:
        self.manager = manager
        self.source_id = source_id
        self.partitions: dict[TopicPartition, FetchState] = {}
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._connection: NodeConnection | None = None
        self._endpoint: tuple[str, int] | None = None
        self._running = False

    def start(self) -> None:
        self._running = True
        if self._task is None:
            self._task = asyncio.create_task(
                self._run(), name=f"replica-fetcher-{self.manager.node_id}-from-{self.source_id}"
            )

    async def stop(self) -> None:
        # The flag, not only cancel(): asyncio.wait_for may swallow a cancellation that
        # races with its inner future completing (Python < 3.12).
        self._running = False
        self._changed.set()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        if self._connection is not None:
            await self._connection.close()
            self._connection = None

    def add(self, state: FetchState) -> None:
        self.partitions[state.tp] = state
        self._changed.set()

    def remove(self, tp: TopicPartition) -> FetchState | None:
        return self.partitions.pop(tp, None)

    # -- connection ------------------------------------------------------------------
    def _connect(self) -> NodeConnection | None:
        endpoint = self.manager.endpoint_of(self.source_id)
        if endpoint is None:
            return None
        if self._connection is None or endpoint != self._endpoint:
            if self._connection is not None:
                self._connection.reset()
            self._endpoint = endpoint
            self._connection = NodeConnection(
                endpoint[0],
                endpoint[1],
                client_id=f"replica-fetcher-{self.manager.node_id}",
                ssl_context=self.manager.ssl_context,
                sasl=self.manager.sasl,
            )
        return self._connection

    # -- loop ------------------------------------------------------------------------
    async def _run(self) -> None:
        backoff = self.manager.backoff_s
        while self._running:
            self._changed.clear()
            now = time.monotonic()
            ready = [s for s in self.partitions.values() if s.delayed_until <= now]
            if not ready:
                next_due = min((s.delayed_until for s in self.partitions.values()), default=0)
                timeout = max(0.01, next_due - now) if self.partitions else None
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), timeout)
                continue
            connection = self._connect()
            if connection is None:
                log.debug("no endpoint for leader %d yet", self.source_id)
                self._delay(ready, backoff)
                continue
            try:
                truncating = [s for s in ready if s.truncating]
                if truncating:
                    await self._truncate(connection, truncating)
                fetching = [s for s in ready if not s.truncating and s.delayed_until <= now]
                if fetching:
                    await self._fetch(connection, fetching)
            except NodeConnectionError as exc:
                log.info("fetcher from broker %d: %s", self.source_id, exc)
                self._delay(ready, backoff)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("fetcher from broker %d failed", self.source_id)
                self._delay(ready, backoff)

    def _delay(self, states: Iterable[FetchState], seconds: float) -> None:
        until = time.monotonic() + seconds
        for s in states:
            s.delayed_until = until

    def _current(self, state: FetchState) -> Partition | None:
        """The follower partition if ``state`` still describes it (no newer LeaderAndIsr)."""
        if self.partitions.get(state.tp) is not state:
            return None
        partition = self.manager.partition(state.tp)
        if partition is None or partition.is_leader or partition.leader_epoch != state.leader_epoch:
            return None
        return partition

    # -- truncation ------------------------------------------------------------------
    async def _truncate(self, connection: NodeConnection, states: list[FetchState]) -> None:
        asked: dict[TopicPartition, tuple[FetchState, int]] = {}
        by_topic: dict[str, list[OffsetForLeaderPartition]] = {}
        for state in states:
            partition = self._current(state)
            if partition is None:
                continue
            latest = partition.log.latest_epoch
            if latest < 0:
                # Nothing to reconcile: keep what is committed and fetch from there.
                partition.truncate_to(partition.high_watermark)
                state.fetch_offset = partition.log.log_end_offset
                state.truncating = False
                continue
            asked[state.tp] = (state, latest)
            by_topic.setdefault(state.tp.topic, []).append(
                OffsetForLeaderPartition(
                    partition=state.tp.partition,
                    current_leader_epoch=state.leader_epoch,
                    leader_epoch=latest,
                )
            )
        if not by_topic:
            return
        request = OffsetForLeaderEpochRequest(
            replica_id=self.manager.node_id,
            topics=[OffsetForLeaderTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
        )
        response: OffsetForLeaderEpochResponse = await connection.request(
            OFFSET_FOR_LEADER_EPOCH_API,
            OFFSET_FOR_LEADER_EPOCH_VERSION,
            request,
            timeout=self.manager.request_timeout_s,
        )
        for topic in response.topics:
            for result in topic.partitions:
                entry = asked.pop(TopicPartition(topic.topic, result.partition), None)
                if entry is None:
                    continue
                state, latest = entry
                partition = self._current(state)
                if partition is None:
                    continue
                if result.error_code != ErrorCode.NONE:
                    self._on_error(state, result.error_code)
                    continue
                offset, done = truncation_offset(
                    latest,
                    partition.log.log_end_offset,
                    partition.high_watermark,
                    result.leader_epoch,
                    result.end_offset,
                    partition.last_offset_for_epoch,
                )
                if offset < partition.log.log_end_offset:
                    log.info(
                        "truncating %s to %d (leader %d epoch %d)",
                        state.tp,
                        offset,
                        state.leader_id,
                        state.leader_epoch,
                    )
                    partition.truncate_to(offset)
                state.fetch_offset = partition.log.log_end_offset
                state.truncating = not done
        for state, _ in asked.values():  # missing from the response
            self._delay([state], self.manager.backoff_s)

    # -- fetch -----------------------------------------------------------------------
    def _fetch_request(self, states: list[FetchState]) -> FetchRequest:
        by_topic: dict[uuid.UUID, list[FetchPartition]] = {}
        for state in states:
            partition = self.manager.partition(state.tp)
            log_start = partition.log.log_start_offset if partition is not None else -1
            by_topic.setdefault(state.topic_id, []).append(
                FetchPartition(
                    partition=state.tp.partition,
                    current_leader_epoch=state.leader_epoch,
                    fetch_offset=state.fetch_offset,
                    last_fetched_epoch=-1,
                    log_start_offset=log_start,
                    partition_max_bytes=self.manager.fetch_max_bytes,
                )
            )
        return FetchRequest(
            replica_state=ReplicaState(
                replica_id=self.manager.node_id, replica_epoch=self.manager.broker_epoch()
            ),
            max_wait=self.manager.max_wait_ms,
            min_bytes=1,
            max_bytes=self.manager.response_max_bytes,
            isolation_level=0,
            session_id=0,
            session_epoch=_FINAL_EPOCH,
            topics=[FetchTopic(topic_id=t, partitions=ps) for t, ps in by_topic.items()],
        )

    async def _fetch(self, connection: NodeConnection, states: list[FetchState]) -> None:
        request = self._fetch_request(states)
        sent = {(s.topic_id, s.tp.partition): s for s in states}
        response: FetchResponse = await connection.request(
            FETCH_API,
            FETCH_VERSION,
            request,
            timeout=self.manager.max_wait_ms / 1000 + self.manager.request_timeout_s,
        )
        if response.error_code != ErrorCode.NONE:
            log.info(
                "fetch from broker %d failed: %s",
                self.source_id,
                ErrorCode(response.error_code).name,
            )
            self._delay(states, self.manager.backoff_s)
            return
        for topic in response.responses:
            for data in topic.partitions:
                state = sent.get((topic.topic_id, data.partition_index))
                if state is None:
                    continue
                partition = self._current(state)
                if partition is None:
                    continue
                if data.error_code != ErrorCode.NONE:
                    self._on_fetch_error(state, partition, data.error_code, data.log_start_offset)
                    continue
                records = data.records
                if records is not None and len(records) > 0:
                    view = records if isinstance(records, memoryview) else memoryview(records)
                    try:
                        partition.append_records_as_follower(view)
                    except LogStorageError as exc:
                        # A full disk (or one that failed): fetch again from what reached the
                        # log, after a back-off; the batch may have landed before a later step
                        # (a flush's checkpoint) failed, so the log end, not the fetch
                        # position, says where to go on. The other partitions go on now.
                        log.debug("%s: follower append failed: %s", state.tp, exc.message)
                        state.fetch_offset = partition.log.log_end_offset
                        self._delay([state], self.manager.backoff_s)
                        continue
                    state.fetch_offset = partition.log.log_end_offset
                # After the append: the new log start may lie in the records just fetched.
                partition.update_follower_log_start_offset(data.log_start_offset)
                partition.update_follower_high_watermark(data.high_watermark)

    def _on_fetch_error(
        self, state: FetchState, partition: Partition, code: int, leader_log_start: int
    ) -> None:
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if 0 <= state.fetch_offset < leader_log_start or (
                leader_log_start > partition.log.log_end_offset
            ):
                log.info(
                    "%s: fetch offset %d below the leader's log start %d; starting over there",
                    state.tp,
                    state.fetch_offset,
                    leader_log_start,
                )
                partition.log.truncate_fully_and_start_at(leader_log_start)
                state.fetch_offset = leader_log_start
            else:
                state.truncating = True
            return
        self._on_error(state, code)

    def _on_error(self, state: FetchState, code: int) -> None:
        if code in _RETRIABLE_LEADERSHIP:
            log.debug("%s: %s from broker %d", state.tp, ErrorCode(code).name, self.source_id)
        else:
            log.warning(
                "%s: error %s from broker %d", state.tp, ErrorCode(code).name, self.source_id
            )
        self._delay([state], self.manager.backoff_s)


class ReplicaFetcherManager:
    """The fetchers of one broker, keyed by source (leader) broker. Event-loop owned."""

    def __init__(
        self,
        *,
        node_id: int,
        broker_epoch: Callable[[], int],
        partitions: Callable[[TopicPartition], Partition | None],
        endpoint: Callable[[int], tuple[str, int] | None],
        max_wait_ms: int,
        fetch_max_bytes: int,
        response_max_bytes: int,
        backoff_ms: int = 1000,
        request_timeout_ms: int = 30000,
        ssl_context: ssl.SSLContext | None = None,
        sasl: Callable[[], SaslClient] | None = None,
    ) -> None:
        self.node_id = node_id
        self.ssl_context = ssl_context  # TLS to the leaders when inter-broker is SSL
        self.broker_epoch = broker_epoch  # this broker's registration epoch (-1: none yet)
        self.partition = partitions
        self._endpoint = endpoint
        self.max_wait_ms = max_wait_ms
        self.fetch_max_bytes = fetch_max_bytes
        self.response_max_bytes = response_max_bytes
        self.sasl = sasl  # how fetchers authenticate on a SASL inter-broker listener
        self.backoff_s = backoff_ms / 1000
        self.request_timeout_s = request_timeout_ms / 1000
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._assignment: dict[TopicPartition, int] = {}
        self.leader_endpoints: dict[int, tuple[str, int]] = {}
        self._stopped = False

    def endpoint_of(self, broker_id: int) -> tuple[str, int] | None:
        """The leader's inter-broker endpoint: the metadata cache, else LeaderAndIsr's."""
        return self._endpoint(broker_id) or self.leader_endpoints.get(broker_id)

    def add_partitions(self, states: Iterable[FetchState]) -> None:
        """Fetch these partitions from their leaders (replacing any previous fetch state)."""
        if self._stopped:
            return
        for state in states:
            self.remove_partitions([state.tp])
            fetcher = self.fetchers.get(state.leader_id)
            if fetcher is None:
                fetcher = self.fetchers[state.leader_id] = ReplicaFetcher(self, state.leader_id)
                fetcher.start()
            fetcher.add(state)
            self._assignment[state.tp] = state.leader_id

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            source = self._assignment.pop(tp, None)
            if source is None:
                continue
            fetcher = self.fetchers.get(source)
            if fetcher is not None:
                fetcher.remove(tp)

    def fetch_state(self, tp: TopicPartition) -> FetchState | None:
        source = self._assignment.get(tp)
        if source is None:
            return None
        fetcher = self.fetchers.get(source)
        return None if fetcher is None else fetcher.partitions.get(tp)

    async def shutdown_idle_fetchers(self) -> None:
        for source, fetcher in list(self.fetchers.items()):
            if not fetcher.partitions:
                del self.fetchers[source]
                await fetcher.stop()

    async def shutdown(self) -> None:
        self._stopped = True
        fetchers = list(self.fetchers.values())
        self.fetchers.clear()
        self._assignment.clear()
        for fetcher in fetchers:
            await fetcher.stop()
