"""Helpers shared by the transaction handlers: the coordinator of a request's broker, and the
error codes older request versions answer instead of PRODUCER_FENCED (KIP-588)."""

from __future__ import annotations

from pydmq.broker.context import BrokerContext
from pydmq.protocol.errors import ErrorCode
from pydmq.transactions.coordinator import TransactionCoordinator

__all__ = ["coordinator", "fenced_as"]


def coordinator(ctx: BrokerContext) -> TransactionCoordinator:
    transaction_coordinator: TransactionCoordinator = ctx.broker.transaction_coordinator
    return transaction_coordinator


def fenced_as(code: int, api_version: int, first_fenced_version: int) -> int:
    """``code``, with PRODUCER_FENCED answered INVALID_PRODUCER_EPOCH below
    ``first_fenced_version`` (clients that predate KIP-588 know only that one)."""
    if code == ErrorCode.PRODUCER_FENCED and api_version < first_fenced_version:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code
