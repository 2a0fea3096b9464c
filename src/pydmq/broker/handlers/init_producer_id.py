"""InitProducerId (key 22), v0-v5.

Idempotent producers (no transactional id) get a fresh producer id with epoch 0, as Kafka does
even when they send their current id/epoch (v3+, KIP-360). Producer ids are never reused across
restarts (:class:`~pydmq.producers.id_manager.ProducerIdManager`). A transactional id needs the
transaction coordinator, which is a later issue: until then such requests get
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, a non-retriable error every client surfaces at once
(a retriable one such as COORDINATOR_NOT_AVAILABLE would make clients spin).
v6 (KIP-939 two-phase commit) is not advertised. In cluster mode ids come from blocks the
controller allocates (AllocateProducerIds); while no block can be had the answer is
COORDINATOR_NOT_AVAILABLE (retriable), as it is on one node while the next block of ids cannot
be made durable (a full disk).
"""

from __future__ import annotations

from collections.abc import Awaitable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.producers.id_manager import ProducerIdBlockError
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse

__all__ = ["HANDLER"]

_TRANSACTIONS_UNSUPPORTED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def handle(
    ctx: BrokerContext, request: InitProducerIdRequest
) -> InitProducerIdResponse | Awaitable[InitProducerIdResponse]:
    if request.transactional_id is not None:
        return InitProducerIdResponse(
            error_code=_TRANSACTIONS_UNSUPPORTED, producer_id=-1, producer_epoch=-1
        )
    try:
        producer_id = ctx.broker.producer_ids.generate_producer_id()
    except ProducerIdBlockError as exc:
        return _unavailable(exc)
    if isinstance(producer_id, int):
        return InitProducerIdResponse(
            error_code=ErrorCode.NONE, producer_id=producer_id, producer_epoch=0
        )
    return _from_new_block(producer_id)


def _unavailable(exc: ProducerIdBlockError) -> InitProducerIdResponse:
    return InitProducerIdResponse(error_code=exc.error_code, producer_id=-1, producer_epoch=-1)


async def _from_new_block(waiting: Awaitable[int]) -> InitProducerIdResponse:
    try:
        producer_id = await waiting
    except ProducerIdBlockError as exc:
        return _unavailable(exc)
    return InitProducerIdResponse(
        error_code=ErrorCode.NONE, producer_id=producer_id, producer_epoch=0
    )


HANDLER = ApiHandlerSpec(22, 0, 5, handle, "InitProducerId")
