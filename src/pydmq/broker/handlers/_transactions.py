"""Helpers shared by the transaction handlers: the coordinator of a request's broker, and the
error codes older request versions answer instead of PRODUCER_FENCED (KIP-588), and the
authorization of a request's transactional id (WRITE on Kafka's TRANSACTIONAL_ID resource)."""

from __future__ import annotations

from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized
from pydmq.protocol.acl import AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode
from pydmq.transactions.coordinator import TransactionCoordinator

__all__ = ["TXN_ID_DENIED", "coordinator", "fenced_as", "txn_id_denied"]

TXN_ID_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def coordinator(ctx: BrokerContext) -> TransactionCoordinator:
    transaction_coordinator: TransactionCoordinator = ctx.broker.transaction_coordinator
    return transaction_coordinator


def fenced_as(code: int, api_version: int, first_fenced_version: int) -> int:
    """``code``, with PRODUCER_FENCED answered INVALID_PRODUCER_EPOCH below
    ``first_fenced_version`` (clients that predate KIP-588 know only that one)."""
    if code == ErrorCode.PRODUCER_FENCED and api_version < first_fenced_version:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


def txn_id_denied(ctx: BrokerContext, transactional_id: str) -> bool:
    """Whether the principal may not WRITE transactional id ``transactional_id``."""
    return not authorized(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)
