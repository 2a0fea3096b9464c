"""DescribeTransactions (key 65), v0.

Each transactional id as its coordinator holds it: state (Kafka's names: Empty, Ongoing,
PrepareCommit, ...), timeout, start time (-1 without a transaction), producer id and epoch,
and the partitions of the ongoing transaction by topic. Per id: TRANSACTIONAL_ID_NOT_FOUND
(unknown or expired), NOT_COORDINATOR (its ``__transaction_state`` partition is led
elsewhere), COORDINATOR_LOAD_IN_PROGRESS.

Authorization (as Kafka): DESCRIBE on each transactional id, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; only the partitions of topics the principal may
DESCRIBE are listed.
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized, authorized_names
from pydmq.broker.handlers._transactions import coordinator
from pydmq.protocol.acl import AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    TopicData,
    TransactionState,
)

__all__ = ["HANDLER"]


def handle(
    ctx: BrokerContext, request: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    states: list[TransactionState] = []
    txn_coordinator = coordinator(ctx)
    for transactional_id in request.transactional_ids:
        if not authorized(
            ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id
        ):
            states.append(
                TransactionState(
                    error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    transactional_id=transactional_id,
                )
            )
            continue
        described = txn_coordinator.describe(transactional_id)
        by_topic: dict[str, list[int]] = {}
        topics = {tp.topic for tp in described.partitions}
        visible = authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topics)
        for tp in described.partitions:
            if tp.topic not in visible:
                continue
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        states.append(
            TransactionState(
                error_code=described.error_code,
                transactional_id=transactional_id,
                transaction_state=described.state,
                transaction_timeout=described.timeout_ms,
                transaction_start_time=described.start_timestamp,
                producer_id=described.producer_id,
                producer_epoch=described.producer_epoch,
                topics=[TopicData(topic=t, partitions=p) for t, p in by_topic.items()],
            )
        )
    return DescribeTransactionsResponse(transaction_states=states)


HANDLER = ApiHandlerSpec(65, 0, 0, handle, "DescribeTransactions")
