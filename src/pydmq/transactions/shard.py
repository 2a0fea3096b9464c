"""TransactionCoordinatorShard: the transaction coordinator's state of one
``__transaction_state`` partition, hosted by the
:class:`~pydmq.coordinator.runtime.CoordinatorRuntime`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from pydmq.coordinator.timer import CoordinatorTimer
from pydmq.transactions.metadata import TransactionMetadata
from pydmq.transactions.records import TransactionRecord

__all__ = ["ShardOwner", "TransactionCoordinatorShard"]


class ShardOwner(Protocol):
    """What the shard tells the transaction coordinator that routes to it."""

    def shard_loaded(self, shard: TransactionCoordinatorShard) -> None: ...

    def shard_unloaded(self, shard: TransactionCoordinatorShard) -> None: ...


class TransactionCoordinatorShard:
    """The transactional ids of one ``__transaction_state`` partition led here (Kafka's
    TransactionStateManager's cache of one partition); owned by its runtime event queue.
    Changed only by :meth:`replay`, at load and once a write of this node is committed."""

    __slots__ = ("_owner", "_transactions", "partition", "timer")

    def __init__(
        self,
        partition: int,
        timer: CoordinatorTimer[TransactionCoordinatorShard],
        owner: ShardOwner,
    ) -> None:
        self.partition = partition
        self.timer = timer
        self._owner = owner
        self._transactions: dict[str, TransactionMetadata] = {}

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        return self._transactions.get(transactional_id)

    def __iter__(self) -> Iterator[TransactionMetadata]:
        return iter(self._transactions.values())

    def __len__(self) -> int:
        return len(self._transactions)

    def replay(self, record: TransactionRecord) -> None:
        if record.metadata is None:
            self._transactions.pop(record.transactional_id, None)
        else:
            self._transactions[record.transactional_id] = record.metadata

    def on_loaded(self) -> None:
        self._owner.shard_loaded(self)

    def on_unloaded(self) -> None:
        self._owner.shard_unloaded(self)
