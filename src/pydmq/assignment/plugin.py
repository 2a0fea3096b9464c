"""The built-in assignors and replica placer, registered through the same hook a third party uses."""

from __future__ import annotations

from pydmq.assignment.api import GroupAssignorSpec
from pydmq.assignment.placement import ReplicaPlacerSpec, StripedReplicaPlacer
from pydmq.assignment.range import RangeAssignor
from pydmq.assignment.uniform import UniformAssignor
from pydmq.plugins.markers import hookimpl

__all__ = [
    "BUILTIN_ASSIGNORS",
    "builtin_assignors",
    "pydmq_register_group_assignors",
    "pydmq_register_replica_placers",
]


def builtin_assignors() -> list[GroupAssignorSpec]:
    return [
        GroupAssignorSpec("uniform", UniformAssignor(), "balanced and sticky (the default)"),
        GroupAssignorSpec("range", RangeAssignor(), "per-topic ranges, co-partitioned"),
    ]


BUILTIN_ASSIGNORS: tuple[str, ...] = ("uniform", "range")


@hookimpl
def pydmq_register_group_assignors() -> list[GroupAssignorSpec]:
    return builtin_assignors()


@hookimpl
def pydmq_register_replica_placers() -> list[ReplicaPlacerSpec]:
    return [ReplicaPlacerSpec("striped", StripedReplicaPlacer, "rack-aware round robin (Kafka's)")]
