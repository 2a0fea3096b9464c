"""EndTxn (key 26), v0-v5.

Commits or aborts the producer's transaction through the transaction coordinator: the answer
comes once PrepareCommit/PrepareAbort is committed to ``__transaction_state`` (the markers are
written to the partitions after it, as Kafka). A retry of a completing or completed result
answers CONCURRENT_TRANSACTIONS / NONE, the other result INVALID_TXN_STATE (so does an Empty
transaction); INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH below v2,
KIP-588), NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS. v5 is transactions v2 (KIP-890):
the epoch is bumped by every EndTxn and the answer carries the producer id and epoch the
client goes on with (v0-v4 keep the transactions v1 epoch; the fields exist only in v5).

Authorization (as Kafka): WRITE on the transactional id, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._transactions import (
    TXN_ID_DENIED,
    coordinator,
    fenced_as,
    txn_id_denied,
)
from pydmq.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse

__all__ = ["HANDLER"]

_TRANSACTIONS_V2_VERSION = 5


async def handle(ctx: BrokerContext, request: EndTxnRequest) -> EndTxnResponse:
    if txn_id_denied(ctx, request.transactional_id):
        return EndTxnResponse(error_code=TXN_ID_DENIED, producer_id=-1, producer_epoch=-1)
    v2 = ctx.api_version >= _TRANSACTIONS_V2_VERSION
    result = await coordinator(ctx).end_transaction(
        request.transactional_id,
        request.producer_id,
        request.producer_epoch,
        request.committed,
        2 if v2 else 0,
    )
    return EndTxnResponse(
        error_code=fenced_as(result.error_code, ctx.api_version, 2),
        producer_id=result.producer_id,
        producer_epoch=result.producer_epoch,
    )


HANDLER = ApiHandlerSpec(26, 0, 5, handle, "EndTxn")
