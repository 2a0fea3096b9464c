"""Replica placement: which brokers host the replicas of new partitions, and in what order.

The controller calls a placer when it creates topics or partitions without a manual
assignment. The first replica of each list is the partition's preferred leader, so a placer
decides leader balance as well as spread. Placers are registered through the
``pydmq_register_replica_placers`` hook as :class:`ReplicaPlacerSpec` objects; the built-in
``striped`` placer is Kafka's rack-aware round robin.

Sans-IO and deterministic for a given ``start`` (the controller's task owns the placer).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "InvalidReplicationFactorError",
    "PlacementBroker",
    "ReplicaPlacer",
    "ReplicaPlacerSpec",
    "StripedReplicaPlacer",
]


class InvalidReplicationFactorError(ValueError):
    """More replicas asked for than there are usable brokers (Kafka:
    INVALID_REPLICATION_FACTOR)."""


class PlacementBroker(Protocol):
    """What a placer may know about a broker (a BrokerRegistration fits)."""

    @property
    def id(self) -> int: ...

    @property
    def rack(self) -> str | None: ...


class ReplicaPlacer(Protocol):
    """Chooses replica lists for new partitions.

    ``place`` returns one replica list per entry of ``partitions`` (partition ids, so that
    partitions added later continue the stripe), each of ``replication_factor`` distinct
    broker ids taken from ``brokers`` (the usable ones: unfenced, not shutting down).
    ``start`` fixes the otherwise random stripe origin (tests, reproducible layouts). Raises
    :class:`InvalidReplicationFactorError` when ``replication_factor`` is not in
    ``1..len(brokers)``.
    """

    def place(
        self,
        partitions: range | Sequence[int],
        replication_factor: int,
        brokers: Sequence[PlacementBroker],
        start: int | None = None,
    ) -> list[list[int]]: ...


@dataclass(frozen=True, slots=True)
class ReplicaPlacerSpec:
    """A named replica placer; ``factory()`` builds one for the controller."""

    name: str
    factory: Callable[[], ReplicaPlacer]
    description: str = ""


def _rack_alternating(brokers: Sequence[PlacementBroker]) -> list[tuple[int, str | None]]:
    """Brokers ordered so that consecutive entries are on different racks where possible.

    Racks in name order (no rack sorts first and counts as one rack), brokers by id within a
    rack, then taken one per rack in turn: racks a=[1, 2], b=[3] -> 1, 3, 2.
    """
    by_rack: dict[str, list[int]] = {}
    for b in sorted(brokers, key=lambda b: b.id):
        by_rack.setdefault(b.rack or "", []).append(b.id)
    rack_of = {b.id: b.rack for b in brokers}
    queues = [by_rack[r] for r in sorted(by_rack)]
    out: list[tuple[int, str | None]] = []
    for i in range(max(map(len, queues), default=0)):
        out.extend((q[i], rack_of[q[i]]) for q in queues if i < len(q))
    return out


class StripedReplicaPlacer:
    """Kafka's rack-aware striped placement.

    Leaders go round robin over the rack-alternating broker list from a start index, so each
    broker leads an equal share (±1) of the partitions. Followers of a partition start one
    position after its leader, shifted by a per-stripe offset (so a broker's followers spread
    over the others instead of always being its neighbours), and skip brokers on a rack that
    already holds a replica until every rack holds one.
    """

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()

    def place(
        self,
        partitions: range | Sequence[int],
        replication_factor: int,
        brokers: Sequence[PlacementBroker],
        start: int | None = None,
    ) -> list[list[int]]:
        n = len(brokers)
        if not 0 < replication_factor <= n:
            raise InvalidReplicationFactorError(
                f"Unable to replicate the partition {replication_factor} time(s): The target "
                f"replication factor of {replication_factor} cannot be reached because only "
                f"{n} broker(s) are registered."
            )
        ordered = _rack_alternating(brokers)
        rack_count = len({rack or "" for _, rack in ordered})
        first = self._rng.randrange(n) if start is None else start
        base_shift = self._rng.randrange(n) if start is None else start
        out: list[list[int]] = []
        for pid in partitions:
            leader = (pid + first) % n
            shift = base_shift + pid // n
            out.append(self._replicas(ordered, leader, shift, replication_factor, rack_count))
        return out

    @staticmethod
    def _replicas(
        ordered: list[tuple[int, str | None]],
        leader: int,
        shift: int,
        replication_factor: int,
        rack_count: int,
    ) -> list[int]:
        n = len(ordered)
        chosen = [ordered[leader][0]]
        racks = {ordered[leader][1] or ""}
        skipped: list[int] = []
        # Followers: positions leader+1+((shift+k) mod (n-1)) for k = 0..n-2 visit every
        # other broker once. A broker on a rack that already has a replica is set aside and
        # used, in visit order, only when no unused rack is left.
        for k in range(n - 1):
            if len(chosen) == replication_factor:
                break
            broker_id, rack = ordered[(leader + 1 + (shift + k) % (n - 1)) % n]
            if (rack or "") in racks and len(racks) < rack_count:
                skipped.append(broker_id)
                continue
            chosen.append(broker_id)
            racks.add(rack or "")
        for broker_id in skipped:
            if len(chosen) == replication_factor:
                break
            chosen.append(broker_id)
        return chosen
