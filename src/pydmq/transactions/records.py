"""The records of ``__transaction_state`` as the coordinator handles them, and their serde.

A :class:`TransactionRecord` is one transactional id's metadata (None: the tombstone of an
expired id). Writes replay it as built (with the in-memory ``last_producer_epoch``); the load
decodes it from Kafka's layout (:mod:`pydmq.transactions.generated_records`). The value is
written at version 0, Kafka's version for transactions v1, and at the flexible version 1 once
the id's client uses transactions v2 (only version 1 holds ``client_transaction_version``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pydmq.coordinator.api import CoordinatorRecord
from pydmq.protocol.errors import MalformedFrameError
from pydmq.transactions import generated_records as gen
from pydmq.transactions.metadata import TransactionMetadata

__all__ = ["TransactionRecord", "TransactionRecordSerde"]

log = logging.getLogger(__name__)

_TRANSACTIONS_V2 = 2


@dataclass(frozen=True, slots=True)
class TransactionRecord:
    """The metadata of ``transactional_id`` (None: a tombstone, the id expired)."""

    transactional_id: str
    metadata: TransactionMetadata | None


class TransactionRecordSerde:
    """:class:`TransactionRecord` <-> ``__transaction_state`` key and value bytes."""

    def serialize(self, record: TransactionRecord) -> CoordinatorRecord:
        key = gen.TransactionLogKey(record.transactional_id).encode()
        md = record.metadata
        if md is None:
            return key, None
        version = 1 if md.client_transaction_version >= _TRANSACTIONS_V2 else 0
        return key, md.to_value().encode(version)

    def deserialize(self, key: bytes | None, value: bytes | None) -> TransactionRecord | None:
        if key is None:
            return None
        try:
            transactional_id = gen.decode_key(key).transactional_id
            if value is None:
                return TransactionRecord(transactional_id, None)
            decoded = gen.decode_transaction_log_value(value)
        except MalformedFrameError as exc:
            log.warning("skipping undecodable __transaction_state record: %s", exc)
            return None
        return TransactionRecord(
            transactional_id, TransactionMetadata.from_value(transactional_id, decoded)
        )
