"""How a partition leader reads and writes share-partition state (Kafka's share persister).

A share-partition's state lives with its share coordinator, the leader of its
``__share_group_state`` partition (:mod:`pydmq.shares.coordinator`). :class:`SharePersister`
reaches it in process when this node leads that partition (always on a single node), else with
the share-state APIs (ReadShareGroupState 84, WriteShareGroupState 85,
InitializeShareGroupState 83, DeleteShareGroupState 86, ReadShareGroupStateSummary 87) over
the inter-broker listener, to the leader its metadata names.

A call retries while the coordinator is not found, moves, loads or cannot be reached
(NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, REQUEST_TIMED_OUT,
NOT_ENOUGH_REPLICAS, a lost connection, the topic still being created), backing off, for up
to ``timeout_ms``; then it answers the last error. Any other error (FENCED_LEADER_EPOCH,
FENCED_STATE_EPOCH) is answered at once. Owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, NamedTuple, Protocol

from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages import delete_share_group_state as ds
from pydmq.protocol.messages import initialize_share_group_state as init
from pydmq.protocol.messages import read_share_group_state as rs
from pydmq.protocol.messages import read_share_group_state_summary as rss
from pydmq.protocol.messages import write_share_group_state as ws
from pydmq.shares.coordinator import ShareCoordinator, StateAnswer
from pydmq.shares.generated_records import ShareSnapshotValue, StateBatch
from pydmq.shares.state_log import StateKey

__all__ = ["RemoteStates", "SharePersister"]

log = logging.getLogger(__name__)

_RETRIABLE = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
)
_BACKOFF_S = (0.05, 0.1, 0.2, 0.5)
_REQUEST_TIMEOUT_S = 10.0


class RemoteStates(Protocol):
    """The other brokers' share coordinators: requests over the inter-broker listener
    (:class:`~pydmq.broker.inter_broker.InterBrokerConnections`)."""

    async def request(
        self, broker_id: int, api_key: int, version: int, body: object, timeout: float
    ) -> Any: ...

    async def close(self) -> None: ...


class _Rpc(NamedTuple):
    """A share-state request to another node's share coordinator, and how to read its answer."""

    api_key: int
    version: int
    request: object
    decode: Callable[[Any], StateAnswer]


def _one(request_type: Any, data_type: Any, key: StateKey, partition: object) -> Any:
    """A share-state request of one share-partition: the group, its topic, the partition."""
    return request_type(
        group_id=key[0], topics=[data_type(topic_id=key[1], partitions=[partition])]
    )


def _result(response: Any) -> Any:
    """The one partition's result of a share-state answer."""
    return response.results[0].partitions[0]


def _state(result: Any, leader_epoch: int, batches: tuple[StateBatch, ...]) -> ShareSnapshotValue:
    """A state as a share coordinator answered it."""
    return ShareSnapshotValue(
        snapshot_epoch=0,
        state_epoch=result.state_epoch,
        leader_epoch=leader_epoch,
        start_offset=result.start_offset,
        create_timestamp=-1,
        write_timestamp=-1,
        state_batches=batches,
        delivery_complete_count=getattr(result, "delivery_complete_count", -1),
    )


def _batches(value: ShareSnapshotValue) -> list[ws.StateBatch]:
    return [
        ws.StateBatch(
            first_offset=b.first_offset,
            last_offset=b.last_offset,
            delivery_state=b.delivery_state,
            delivery_count=b.delivery_count,
        )
        for b in value.state_batches
    ]


class SharePersister:
    """Share-partition state, wherever its share coordinator is (see the module)."""

    def __init__(
        self,
        node_id: int,
        coordinator: ShareCoordinator,
        leader_of: Callable[[int], int],
        remote: RemoteStates | None,
        timeout_ms: int = 15_000,
    ) -> None:
        self.node_id = node_id
        self.coordinator = coordinator
        # The leader of a __share_group_state partition as this node's metadata has it.
        self._leader_of = leader_of
        self._remote = remote
        self.timeout_ms = timeout_ms

    async def close(self) -> None:
        """The connections to the other share coordinators close."""
        if self._remote is not None:
            await self._remote.close()

    async def read(self, key: StateKey, leader_epoch: int) -> StateAnswer:
        """The state of ``key`` (None: none), read at this leader's ``leader_epoch``."""
        request = _one(
            rs.ReadShareGroupStateRequest,
            rs.ReadStateData,
            key,
            rs.PartitionData(partition=key[2], leader_epoch=leader_epoch),
        )

        def decode(response: rs.ReadShareGroupStateResponse) -> StateAnswer:
            result = _result(response)
            if result.error_code or result.start_offset < 0:
                return result.error_code, None
            batches = tuple(
                StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                for b in result.state_batches
            )
            return ErrorCode.NONE, _state(result, leader_epoch, batches)

        local = partial(self.coordinator.read_state, key, leader_epoch)
        return await self._call(key, local, 84, rs.REQUEST_MAX_VERSION, request, decode)

    async def write(self, key: StateKey, value: ShareSnapshotValue) -> int:
        """Replace the state of ``key`` with ``value``; the error code."""
        partition = ws.PartitionData(
            partition=key[2],
            state_epoch=value.state_epoch,
            leader_epoch=value.leader_epoch,
            start_offset=value.start_offset,
            delivery_complete_count=value.delivery_complete_count,
            state_batches=_batches(value),
        )
        request = _one(ws.WriteShareGroupStateRequest, ws.WriteStateData, key, partition)
        local = partial(self.coordinator.write_state, key, value)
        return await self._code(key, local, 85, ws.REQUEST_MAX_VERSION, request)

    async def initialize(self, key: StateKey, state_epoch: int, start_offset: int) -> int:
        """A new state of ``key`` at ``start_offset`` with nothing in flight."""
        partition = init.PartitionData(
            partition=key[2], state_epoch=state_epoch, start_offset=start_offset
        )
        request = _one(
            init.InitializeShareGroupStateRequest, init.InitializeStateData, key, partition
        )
        local = partial(self.coordinator.initialize_state, key, state_epoch, start_offset)
        return await self._code(key, local, 83, init.REQUEST_MAX_VERSION, request)

    async def delete(self, key: StateKey) -> int:
        """Forget the state of ``key``."""
        partition = ds.PartitionData(partition=key[2])
        request = _one(ds.DeleteShareGroupStateRequest, ds.DeleteStateData, key, partition)
        local = partial(self.coordinator.delete_state, key)
        return await self._code(key, local, 86, ds.REQUEST_MAX_VERSION, request)

    async def summary(self, key: StateKey) -> StateAnswer:
        """The start offset, epochs and delivery-complete count of ``key`` (no batches)."""
        request = _one(
            rss.ReadShareGroupStateSummaryRequest,
            rss.ReadStateSummaryData,
            key,
            rss.PartitionData(partition=key[2], leader_epoch=-1),
        )

        def decode(response: rss.ReadShareGroupStateSummaryResponse) -> StateAnswer:
            result = _result(response)
            if result.error_code or result.start_offset < 0:
                return result.error_code, None
            return ErrorCode.NONE, _state(result, result.leader_epoch, ())

        async def local() -> StateAnswer:
            return self.coordinator.summary(key)

        return await self._call(key, local, 87, rss.REQUEST_MAX_VERSION, request, decode)

    async def _code(
        self,
        key: StateKey,
        local: Callable[[], Awaitable[StateAnswer]],
        api_key: int,
        version: int,
        request: object,
    ) -> int:
        """:meth:`_call` of a request answered with an error code only."""
        code, _ = await self._call(
            key, local, api_key, version, request, lambda r: (_result(r).error_code, None)
        )
        return code

    async def _call(
        self,
        key: StateKey,
        local: Callable[[], Awaitable[StateAnswer]],
        api_key: int,
        version: int,
        request: object,
        decode: Callable[[Any], StateAnswer],
    ) -> StateAnswer:
        """``local`` when this node is the share coordinator of ``key``, else the request to
        the one its metadata names; retried as the module says."""
        rpc = _Rpc(api_key, version, request, decode)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_ms / 1000
        attempt = 0
        answer: StateAnswer = (ErrorCode.COORDINATOR_NOT_AVAILABLE, None)
        while True:
            answer = await self._attempt(key, local, rpc)
            if answer[0] not in _RETRIABLE or loop.time() >= deadline:
                return answer
            await asyncio.sleep(_BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)])
            attempt += 1

    async def _attempt(
        self, key: StateKey, local: Callable[[], Awaitable[StateAnswer]], rpc: _Rpc
    ) -> StateAnswer:
        coordinator = self.coordinator
        if coordinator.leads(key) or self._remote is None:
            return await local()
        state_log = coordinator.state_log
        if not state_log.ensure_created():
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        leader = self._leader_of(state_log.partition_for(key))
        if leader < 0 or leader == self.node_id:  # no leader, or this node's load not begun
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        try:
            response = await self._remote.request(
                leader, rpc.api_key, rpc.version, rpc.request, _REQUEST_TIMEOUT_S
            )
        except (ConnectionError, OSError, TimeoutError) as exc:
            log.debug("share state of %s at broker %d: %s", key, leader, exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        return rpc.decode(response)
