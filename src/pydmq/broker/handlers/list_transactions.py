"""ListTransactions (key 66), v0-v2.

The transactional ids coordinated by this broker (its loaded ``__transaction_state``
partitions), filtered by state names (unknown names are returned in
``unknown_state_filters``), producer ids, from v1 ``duration_filter`` (only transactions
started more than that many ms ago; -1: no filter), and from v2 ``transactional_id_pattern``
(KIP-1152: an RE2/J regular expression the whole id must match; null or empty: no filter;
INVALID_REGULAR_EXPRESSION for a pattern RE2/J refuses), as Kafka's.
COORDINATOR_LOAD_IN_PROGRESS while a partition loads.

Authorization (as Kafka): only the transactional ids the principal may DESCRIBE are
listed.
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized
from pydmq.broker.handlers._transactions import coordinator
from pydmq.protocol.acl import AclOperation, ResourceType
from pydmq.protocol.messages.list_transactions import (
    ListTransactionsRequest,
    ListTransactionsResponse,
    TransactionState,
)

__all__ = ["HANDLER"]


def handle(ctx: BrokerContext, request: ListTransactionsRequest) -> ListTransactionsResponse:
    error, unknown, listed = coordinator(ctx).list_transactions(
        request.state_filters,
        request.producer_id_filters,
        request.duration_filter if ctx.api_version >= 1 else -1,
        request.transactional_id_pattern if ctx.api_version >= 2 else None,
    )
    return ListTransactionsResponse(
        error_code=error,
        unknown_state_filters=unknown,
        transaction_states=[
            TransactionState(
                transactional_id=t.transactional_id,
                producer_id=t.producer_id,
                transaction_state=t.state,
            )
            for t in listed
            if authorized(
                ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t.transactional_id
            )
        ],
    )


HANDLER = ApiHandlerSpec(66, 0, 2, handle, "ListTransactions")
