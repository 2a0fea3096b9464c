"""The transaction coordinator's configuration and the answers of its operations."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydmq.storage.api import TopicPartition

if TYPE_CHECKING:
    from pydmq.config.broker import BrokerConfig

__all__ = [
    "DescribedTransaction",
    "ListedTransaction",
    "ProducerIdAndEpoch",
    "TransactionConfig",
]


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    """The ``transaction.*`` broker configs the coordinator uses (Kafka's names)."""

    max_timeout_ms: int = 900000
    abort_timed_out_interval_ms: int = 10000
    id_expiration_ms: int = 7 * 24 * 3600 * 1000
    remove_expired_interval_ms: int = 3600000

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> TransactionConfig:
        return cls(
            max_timeout_ms=config.get_int("transaction.max.timeout.ms"),
            abort_timed_out_interval_ms=config.get_int(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms"
            ),
            id_expiration_ms=config.get_int("transactional.id.expiration.ms"),
            remove_expired_interval_ms=config.get_int(
                "transaction.remove.expired.transaction.cleanup.interval.ms"
            ),
        )


@dataclass(frozen=True, slots=True)
class ProducerIdAndEpoch:
    """An operation's error code with the producer id and epoch it answers (-1 when none)."""

    error_code: int
    producer_id: int = -1
    producer_epoch: int = -1

    @classmethod
    def error(cls, code: int) -> ProducerIdAndEpoch:
        return cls(code)


@dataclass(frozen=True, slots=True)
class DescribedTransaction:
    """One transactional id as DescribeTransactions answers it."""

    transactional_id: str
    error_code: int
    state: str = ""
    timeout_ms: int = 0
    start_timestamp: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    partitions: tuple[TopicPartition, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class ListedTransaction:
    """One transactional id as ListTransactions answers it."""

    transactional_id: str
    producer_id: int
    state: str
