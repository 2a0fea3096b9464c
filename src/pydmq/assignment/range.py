"""The ``range`` server-side assignor: per topic, consecutive ranges, co-partitioned.

For each topic, its subscribers sorted by (instance id or member id) share the partitions in
consecutive ranges: with ``n`` partitions and ``k`` subscribers each gets ``n // k`` and the
first ``n % k`` one more. Topics with the same partition count and the same subscribers are
therefore co-partitioned (partition ``i`` of each goes to the same member). Not sticky.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from pydmq.assignment.api import AssignmentSpec, MemberAssignment

__all__ = ["RangeAssignor"]


class RangeAssignor:
    name = "range"

    def assign(self, spec: AssignmentSpec) -> Mapping[str, MemberAssignment]:
        result: dict[str, dict[uuid.UUID, frozenset[int]]] = {m: {} for m in spec.members}
        for topic_id, topic in spec.topics.items():
            subscribers = sorted(
                (m for m, s in spec.members.items() if topic_id in s.subscribed_topic_ids),
                key=lambda m: (spec.members[m].instance_id or m, m),
            )
            if not subscribers:
                continue
            share, extra = divmod(topic.partitions, len(subscribers))
            start = 0
            for i, member_id in enumerate(subscribers):
                size = share + (1 if i < extra else 0)
                if size:
                    result[member_id][topic_id] = frozenset(range(start, start + size))
                start += size
        return result
