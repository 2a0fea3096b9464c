"""Producer ids in cluster mode: blocks allocated by the controller (AllocateProducerIds, 67).

Every broker hands out producer ids, and no two may ever hand out the same one, so the
controller owns the counter (ProducerIdsRecord in the metadata log) and gives each broker
blocks of ids; the broker serves InitProducerId from its block and asks for the next block
when it runs out (one request at a time). Like Kafka's RPCProducerIdManager, without
prefetching: a request that finds the block empty waits for the next one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from pydmq.broker.cluster.controller_client import ControllerClient, ControllerUnavailableError
from pydmq.producers.id_manager import ProducerIdBlockError
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.allocate_producer_ids import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
)

__all__ = ["ProducerIdBlockManager", "ProducerIdsUnavailableError"]

log = logging.getLogger(__name__)

ALLOCATE_PRODUCER_IDS_API = 67
ALLOCATE_PRODUCER_IDS_VERSION = 0


class ProducerIdsUnavailableError(ProducerIdBlockError):
    """No block could be obtained; ``error_code`` is what InitProducerId answers."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


class ProducerIdBlockManager:
    """Owned by the broker's event loop."""

    def __init__(
        self,
        *,
        broker_id: int,
        broker_epoch: Callable[[], int],
        client: ControllerClient,
        timeout_s: float = 5.0,
    ) -> None:
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self.client = client
        self.timeout_s = timeout_s
        self._next = 0
        self._end = 0
        self._fetching: asyncio.Future[None] | None = None

    def try_generate(self) -> int | None:
        """The next id of the current block, or None when it is used up."""
        if self._next < self._end:
            producer_id = self._next
            self._next += 1
            return producer_id
        return None

    def generate_producer_id(self) -> int | Awaitable[int]:
        """The next producer id: at once from the current block, else awaitable once a new
        block came (:class:`~pydmq.broker.services.ProducerIdSource`)."""
        producer_id = self.try_generate()
        return producer_id if producer_id is not None else self._from_new_block()

    async def _from_new_block(self) -> int:
        """The next producer id, fetching a new block first if needed."""
        while True:
            producer_id = self.try_generate()
            if producer_id is not None:
                return producer_id
            if self._fetching is None or self._fetching.done():
                self._fetching = asyncio.ensure_future(self._fetch_block())
            await asyncio.shield(self._fetching)

    async def _fetch_block(self) -> None:
        epoch = self._broker_epoch()
        if epoch < 0:
            raise ProducerIdsUnavailableError(
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, "this broker is not registered yet"
            )
        try:
            response: AllocateProducerIdsResponse = await self.client.send(
                ALLOCATE_PRODUCER_IDS_API,
                ALLOCATE_PRODUCER_IDS_VERSION,
                AllocateProducerIdsRequest(broker_id=self.broker_id, broker_epoch=epoch),
                self.timeout_s,
            )
        except ControllerUnavailableError as exc:
            raise ProducerIdsUnavailableError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc)
            ) from None
        if response.error_code != ErrorCode.NONE:
            raise ProducerIdsUnavailableError(
                response.error_code, f"AllocateProducerIds: {ErrorCode(response.error_code).name}"
            )
        self._next = response.producer_id_start
        self._end = response.producer_id_start + response.producer_id_len
        log.info("broker %d: producer ids [%d, %d)", self.broker_id, self._next, self._end)
