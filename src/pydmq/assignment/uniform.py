"""The ``uniform`` server-side assignor (the default): balanced and sticky.

1. Every partition whose owner in the previous target still exists and still subscribes to
   its topic stays where it is.
2. Every other partition (in topic-name, partition order) goes to the subscribed member with
   the fewest partitions (ties: member id order).
3. While some member A has at least two partitions more than a member B that subscribes to
   one of A's topics, A's highest such partition moves to B (most loaded A and least loaded B
   first).

With identical subscriptions the result is balanced within one partition and moves the
fewest partitions needed. With different subscriptions it balances greedily (step 3 is a
local search, not an optimum), as Kafka's uniform assignor does for the heterogeneous case
in spirit, not in detail.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from pydmq.assignment.api import AssignmentSpec, MemberAssignment

__all__ = ["UniformAssignor"]

Partition = tuple[str, uuid.UUID, int]  # (topic name, topic id, partition) sorts by name


class UniformAssignor:
    name = "uniform"

    def assign(self, spec: AssignmentSpec) -> Mapping[str, MemberAssignment]:
        members = sorted(spec.members)
        owned: dict[str, set[Partition]] = {m: set() for m in members}
        subscribers: dict[uuid.UUID, list[str]] = {}
        for m in members:
            for topic_id in spec.members[m].subscribed_topic_ids:
                if topic_id in spec.topics:
                    subscribers.setdefault(topic_id, []).append(m)
        taken: set[Partition] = set()
        for m in members:
            sub = spec.members[m]
            for topic_id, partitions in sub.current.items():
                topic = spec.topics.get(topic_id)
                if topic is None or topic_id not in sub.subscribed_topic_ids:
                    continue
                for p in partitions:
                    key = (topic.name, topic_id, p)
                    if 0 <= p < topic.partitions and key not in taken:
                        taken.add(key)
                        owned[m].add(key)
        every = sorted(
            (t.name, tid, p)
            for tid, t in spec.topics.items()
            if tid in subscribers
            for p in range(t.partitions)
        )
        for key in every:
            if key in taken:
                continue
            candidates = subscribers[key[1]]
            target = min(candidates, key=lambda m: (len(owned[m]), m))
            owned[target].add(key)
            taken.add(key)
        self._balance(spec, members, owned)
        return {
            m: {
                tid: frozenset(p for _, t, p in parts if t == tid)
                for tid in {t for _, t, _ in parts}
            }
            for m, parts in owned.items()
        }

    @staticmethod
    def _balance(
        spec: AssignmentSpec, members: list[str], owned: dict[str, set[Partition]]
    ) -> None:
        limit = sum(len(v) for v in owned.values()) * max(len(members), 1) + 1
        for _ in range(limit):
            by_load = sorted(members, key=lambda m: (len(owned[m]), m))
            moved = False
            for heavy in reversed(by_load):
                for light in by_load:
                    if len(owned[heavy]) - len(owned[light]) <= 1:
                        break
                    topics = spec.members[light].subscribed_topic_ids
                    movable = [k for k in owned[heavy] if k[1] in topics]
                    if movable:
                        key = max(movable)
                        owned[heavy].discard(key)
                        owned[light].add(key)
                        moved = True
                        break
                if moved:
                    break
            if not moved:
                return
