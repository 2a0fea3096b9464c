"""InitProducerId (key 22), v0-v5.

Idempotent producers (no transactional id) get a fresh producer id with epoch 0, as Kafka does
even when they send their current id/epoch (v3+, KIP-360). Producer ids are never reused across
restarts (:class:`~pydmq.producers.id_manager.ProducerIdManager`). In cluster mode ids come from
blocks the controller allocates (AllocateProducerIds); while no block can be had the answer is
COORDINATOR_NOT_AVAILABLE (retriable), as it is on one node while the next block of ids cannot
be made durable (a full disk).

A transactional id goes to the transaction coordinator
(:meth:`~pydmq.transactions.coordinator.TransactionCoordinator.init_producer_id`): a new id gets
a producer id and epoch 0, a known one an epoch bump (with the caller's ``producer_id`` and
``producer_epoch``, v3+: KIP-360's checks), an ongoing transaction is aborted first
(CONCURRENT_TRANSACTIONS until it completes), ``transaction_timeout_ms`` above
``transaction.max.timeout.ms`` is INVALID_TRANSACTION_TIMEOUT, NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS when the id's ``__transaction_state`` partition is led elsewhere
or loading. PRODUCER_FENCED is answered INVALID_PRODUCER_EPOCH below v4 (KIP-588).
v6 (KIP-939 two-phase commit) is not advertised.

Authorization (as Kafka): with a transactional id, WRITE on it (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED); without, IDEMPOTENT_WRITE on the cluster or WRITE on
some topic (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from collections.abc import Awaitable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_by_resource_type, authorized_cluster
from pydmq.broker.handlers._transactions import (
    TXN_ID_DENIED,
    coordinator,
    fenced_as,
    txn_id_denied,
)
from pydmq.producers.id_manager import ProducerIdBlockError
from pydmq.protocol.acl import AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse

__all__ = ["HANDLER"]


def handle(
    ctx: BrokerContext, request: InitProducerIdRequest
) -> InitProducerIdResponse | Awaitable[InitProducerIdResponse]:
    if request.transactional_id is not None:
        if txn_id_denied(ctx, request.transactional_id):
            return _refused(TXN_ID_DENIED)
        return _transactional(ctx, request)
    if not (
        authorized_cluster(ctx, AclOperation.IDEMPOTENT_WRITE)
        or authorized_by_resource_type(ctx, AclOperation.WRITE, ResourceType.TOPIC)
    ):
        return _refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    try:
        producer_id = ctx.broker.producer_ids.generate_producer_id()
    except ProducerIdBlockError as exc:
        return _unavailable(exc)
    if isinstance(producer_id, int):
        return InitProducerIdResponse(
            error_code=ErrorCode.NONE, producer_id=producer_id, producer_epoch=0
        )
    return _from_new_block(producer_id)


async def _transactional(
    ctx: BrokerContext, request: InitProducerIdRequest
) -> InitProducerIdResponse:
    assert request.transactional_id is not None
    kip360 = ctx.api_version >= 3
    result = await coordinator(ctx).init_producer_id(
        request.transactional_id,
        request.transaction_timeout,
        request.producer_id if kip360 else -1,
        request.producer_epoch if kip360 else -1,
    )
    return InitProducerIdResponse(
        error_code=fenced_as(result.error_code, ctx.api_version, 4),
        producer_id=result.producer_id,
        producer_epoch=result.producer_epoch,
    )


def _unavailable(exc: ProducerIdBlockError) -> InitProducerIdResponse:
    return _refused(exc.error_code)


def _refused(code: int) -> InitProducerIdResponse:
    return InitProducerIdResponse(error_code=code, producer_id=-1, producer_epoch=-1)


async def _from_new_block(waiting: Awaitable[int]) -> InitProducerIdResponse:
    try:
        producer_id = await waiting
    except ProducerIdBlockError as exc:
        return _unavailable(exc)
    return InitProducerIdResponse(
        error_code=ErrorCode.NONE, producer_id=producer_id, producer_epoch=0
    )


HANDLER = ApiHandlerSpec(22, 0, 5, handle, "InitProducerId")
