"""AddOffsetsToTxn (key 25), v0-v4.

Adds the ``__consumer_offsets`` partition of ``group_id`` (the partition TxnOffsetCommit then
writes to) to the producer's ongoing transaction, through the transaction coordinator: errors as
AddPartitionsToTxn's (INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, answered
INVALID_PRODUCER_EPOCH below v2 (KIP-588), CONCURRENT_TRANSACTIONS while the previous
transaction completes, NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS). Flexible from v3; v4
is the version transactions v2 clients send, answered the same.
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._transactions import coordinator, fenced_as
from pydmq.protocol.messages.add_offsets_to_txn import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
)

__all__ = ["HANDLER"]


async def handle(ctx: BrokerContext, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    code = await coordinator(ctx).add_offsets(
        request.transactional_id, request.producer_id, request.producer_epoch, request.group_id
    )
    return AddOffsetsToTxnResponse(error_code=fenced_as(code, ctx.api_version, 2))


HANDLER = ApiHandlerSpec(25, 0, 4, handle, "AddOffsetsToTxn")
