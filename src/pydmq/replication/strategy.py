"""Replication strategies: who counts for the high watermark, how far the ISR may shrink, and
whom the controller may elect.

A strategy is chosen per topic by the ``pydmq.replication.strategy`` config and registered
through the ``pydmq_register_replication_strategies`` hook as a
:class:`ReplicationStrategySpec`. The core (``Partition`` on the brokers, the controller's
elections) resolves the object once per partition and calls its methods directly: they sit on
the produce path (``high_watermark``) and must be pure, cheap and deterministic.

Built-ins:

- ``isr``: Apache Kafka's rules. ``min.insync.replicas`` is the topic's; the high watermark is
  the smallest log end offset in the ISR; the ISR may shrink to the leader alone; the leader is
  the first live replica (in replica order, so the preferred replica first) that is in the ISR,
  or with unclean election allowed the first live replica.
- ``quorum``: majority rules on the same machinery. The minimum ISR is a majority of the
  replicas whatever the config says, and the ISR never shrinks below a majority. Since the high
  watermark is still the minimum over the ISR, a committed write is on a majority and on every
  ISR member, so electing from the ISR (never unclean) cannot lose it; the price is that a
  partition with a minority alive stops accepting ``acks=all`` writes, as a Raft group would.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = [
    "ISR_STRATEGY",
    "IsrStrategy",
    "QuorumStrategy",
    "ReplicationStrategy",
    "ReplicationStrategySpec",
    "builtin_replication_strategies",
]


@runtime_checkable
class ReplicationStrategy(Protocol):
    """Rules of one replication flavour. Stateless; shared by every partition that uses it."""

    name: str

    def min_insync_replicas(self, replicas: Sequence[int], configured: int) -> int:
        """How many ISR members an ``acks=all`` produce needs (NOT_ENOUGH_REPLICAS below).

        :param replicas: the partition's assigned replicas.
        :param configured: the topic's ``min.insync.replicas``.
        """
        ...

    def high_watermark(
        self, leader_leo: int, isr_leos: Mapping[int, int], replicas: Sequence[int]
    ) -> int:
        """The offset below which every record is committed, given the leader's log end offset
        and the log end offset of each member of the (maximal) ISR, the leader included.

        An ISR member whose position is unknown (a new leader's followers) has ``-1``. The
        leader only ever moves its high watermark forward, so a smaller answer is ignored.
        """
        ...

    def may_shrink_isr_to(self, new_isr: Sequence[int], replicas: Sequence[int]) -> bool:
        """Whether the ISR may become ``new_isr`` (a subset of the current one)."""
        ...

    def elect_leader(
        self,
        replicas: Sequence[int],
        isr: Sequence[int],
        live: Collection[int],
        unclean_allowed: bool,
    ) -> int:
        """The replica the controller makes leader, or ``-1`` when none may lead."""
        ...


ReplicationStrategyFactory = Callable[[], ReplicationStrategy]


@dataclass(frozen=True, slots=True)
class ReplicationStrategySpec:
    """What a plugin returns from ``pydmq_register_replication_strategies``.

    ``name`` is the value of the ``pydmq.replication.strategy`` topic config; ``factory()``
    builds the strategy object once per process.
    """

    name: str
    factory: ReplicationStrategyFactory
    description: str = ""


def _clean_leader(replicas: Sequence[int], isr: Sequence[int], live: Collection[int]) -> int:
    """Kafka's clean election: the first replica (in assignment order) that is live and in
    the ISR, else -1."""
    return next((replica for replica in replicas if replica in live and replica in isr), -1)


def _min_leo(leader_leo: int, isr_leos: Mapping[int, int]) -> int:
    high_watermark = leader_leo
    for leo in isr_leos.values():
        if leo < high_watermark:
            high_watermark = leo
    return high_watermark


class IsrStrategy:
    """Apache Kafka's in-sync replica rules."""

    name = "isr"

    def min_insync_replicas(self, replicas: Sequence[int], configured: int) -> int:
        # Not capped by the replica count, as in Kafka: min.insync.replicas above the
        # replication factor makes acks=all writes fail, which is what the user asked for.
        return configured

    def high_watermark(
        self, leader_leo: int, isr_leos: Mapping[int, int], replicas: Sequence[int]
    ) -> int:
        return _min_leo(leader_leo, isr_leos)

    def may_shrink_isr_to(self, new_isr: Sequence[int], replicas: Sequence[int]) -> bool:
        return len(new_isr) >= 1

    def elect_leader(
        self,
        replicas: Sequence[int],
        isr: Sequence[int],
        live: Collection[int],
        unclean_allowed: bool,
    ) -> int:
        leader = _clean_leader(replicas, isr, live)
        if leader == -1 and unclean_allowed:
            return next((replica for replica in replicas if replica in live), -1)
        return leader


class QuorumStrategy:
    """Majority rules: the ISR is always a majority, so a committed write is on a majority."""

    name = "quorum"

    @staticmethod
    def majority(replicas: Sequence[int]) -> int:
        return len(replicas) // 2 + 1

    def min_insync_replicas(self, replicas: Sequence[int], configured: int) -> int:
        return self.majority(replicas)

    def high_watermark(
        self, leader_leo: int, isr_leos: Mapping[int, int], replicas: Sequence[int]
    ) -> int:
        return _min_leo(leader_leo, isr_leos)

    def may_shrink_isr_to(self, new_isr: Sequence[int], replicas: Sequence[int]) -> bool:
        return len(new_isr) >= self.majority(replicas)

    def elect_leader(
        self,
        replicas: Sequence[int],
        isr: Sequence[int],
        live: Collection[int],
        unclean_allowed: bool,
    ) -> int:
        # Never unclean: a replica outside the ISR may miss committed writes.
        return _clean_leader(replicas, isr, live)


ISR_STRATEGY: ReplicationStrategy = IsrStrategy()
"""The default strategy object (single-node partitions use it without the plugin host)."""


def builtin_replication_strategies() -> list[ReplicationStrategySpec]:
    return [
        ReplicationStrategySpec("isr", IsrStrategy, "Apache Kafka's ISR rules (the default)"),
        ReplicationStrategySpec(
            "quorum", QuorumStrategy, "majority ISR: min ISR and ISR floor are a majority"
        ),
    ]
