"""How leadership of an internal topic's partitions elects and resigns its coordinator.

A broker in a cluster learns from LeaderAndIsr and StopReplica which partitions it leads
(``BrokerCluster.leadership_listeners``: called with ``(partition, is_leader)``). For the
topic of a coordinator on the runtime (``__consumer_offsets``, ``__transaction_state``,
``__share_group_state``), :func:`coordinator_leadership_listener` turns that into
``on_elected(partition, leader_epoch)`` or ``on_resigned(partition, leader_epoch)`` at the
leader epoch the replica has now (None when the replica is gone). Owned by the event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from pydmq.storage.api import TopicPartition

__all__ = ["ElectedCoordinator", "HostedReplicas", "coordinator_leadership_listener"]


class _LedReplica(Protocol):
    @property
    def leader_epoch(self) -> int: ...


class HostedReplicas(Protocol):
    """The replica manager, as the listener reads it."""

    def get(self, tp: TopicPartition) -> _LedReplica | None: ...


class ElectedCoordinator(Protocol):
    """A coordinator whose shards follow the leadership of its topic's partitions."""

    def on_elected(self, partition: int, leader_epoch: int) -> object: ...

    def on_resigned(self, partition: int, leader_epoch: int | None = None) -> None: ...


def coordinator_leadership_listener(
    topic: str, coordinator: ElectedCoordinator, replicas: HostedReplicas
) -> Callable[[TopicPartition, bool], None]:
    """A leadership listener electing or resigning ``coordinator`` for ``topic``'s
    partitions (other topics are ignored)."""

    def listener(tp: TopicPartition, is_leader: bool) -> None:
        if tp.topic != topic:
            return
        replica = replicas.get(tp)
        if is_leader and replica is not None:
            coordinator.on_elected(tp.partition, replica.leader_epoch)
        else:
            coordinator.on_resigned(tp.partition, None if replica is None else replica.leader_epoch)

    return listener
