"""AddOffsetsToTxn (key 25), v0-v4.

Adds the ``__consumer_offsets`` partition of ``group_id`` (the partition TxnOffsetCommit then
writes to) to the producer's ongoing transaction, through the transaction coordinator: errors as
AddPartitionsToTxn's (INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, answered
INVALID_PRODUCER_EPOCH below v2 (KIP-588), CONCURRENT_TRANSACTIONS while the previous
transaction completes, NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS). Flexible from v3; v4
is the version transactions v2 clients send, answered the same.

Authorization (as Kafka): WRITE on the transactional id, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; then READ on the group, else
GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._groups import GROUP_DENIED, group_denied
from pydmq.broker.handlers._transactions import (
    TXN_ID_DENIED,
    coordinator,
    fenced_as,
    txn_id_denied,
)
from pydmq.protocol.acl import AclOperation
from pydmq.protocol.messages.add_offsets_to_txn import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
)

__all__ = ["HANDLER"]


async def handle(ctx: BrokerContext, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    if txn_id_denied(ctx, request.transactional_id):
        return AddOffsetsToTxnResponse(error_code=TXN_ID_DENIED)
    if group_denied(ctx, request.group_id, AclOperation.READ):
        return AddOffsetsToTxnResponse(error_code=GROUP_DENIED)
    code = await coordinator(ctx).add_offsets(
        request.transactional_id, request.producer_id, request.producer_epoch, request.group_id
    )
    return AddOffsetsToTxnResponse(error_code=fenced_as(code, ctx.api_version, 2))


HANDLER = ApiHandlerSpec(25, 0, 4, handle, "AddOffsetsToTxn")
