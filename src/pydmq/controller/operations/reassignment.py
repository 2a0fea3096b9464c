"""Partition reassignment (KIP-455): AlterPartitionReassignments (45) and
ListPartitionReassignments (46).

A reassignment to ``target`` first widens the replica set to ``target + removing`` with
``adding_replicas`` (in target, not yet replicas) and ``removing_replicas`` (replicas not in
target) recorded on the partition. The new replicas fetch from the leader; once every adding
replica is in the ISR (AlterPartition from the leader), the controller finishes: replicas =
target, the removed replicas leave the ISR, and the leader moves if it was being removed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from pydmq.controller.operations.common import (
    ControllerResult,
    OperationContext,
    elect,
    electable_brokers,
    find_partition,
    partition_change_to,
    strategy_for,
)
from pydmq.metadata.image import MetadataImage, PartitionRegistration
from pydmq.metadata.records import NO_LEADER, MetadataRecord
from pydmq.protocol.errors import ErrorCode
from pydmq.replication.strategy import ReplicationStrategy

__all__ = [
    "OngoingReassignment",
    "ReassignmentRequest",
    "ReassignmentResult",
    "alter_partition_reassignments",
    "completed_reassignment",
    "list_partition_reassignments",
]


@dataclass(frozen=True, slots=True)
class ReassignmentRequest:
    """Move a partition to ``replicas``; ``None`` cancels its ongoing reassignment."""

    topic: str
    partition_id: int
    replicas: Sequence[int] | None


@dataclass(frozen=True, slots=True)
class ReassignmentResult:
    topic: str
    partition_id: int
    error_code: int
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    topic: str
    partition_id: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


def _with_valid_leader(
    p: PartitionRegistration, strategy: ReplicationStrategy, live: Collection[int]
) -> PartitionRegistration:
    """``p`` with a leader that is still a replica and in the ISR, elected if needed."""
    if p.leader != NO_LEADER and p.leader in p.replicas and p.leader in p.isr:
        return p
    leader, isr, lrs = elect(strategy, p, p.isr, live, False)
    return dataclasses.replace(p, leader=leader, isr=isr, leader_recovery_state=lrs)


def completed_reassignment(
    p: PartitionRegistration, strategy: ReplicationStrategy, live: Collection[int]
) -> PartitionRegistration:
    """``p`` with its reassignment finished if every adding replica is in the ISR and some
    ISR member stays; else ``p`` unchanged. Epochs are not touched (replay bumps them)."""
    if not p.is_reassigning or not set(p.adding_replicas) <= set(p.isr):
        return p
    removing = set(p.removing_replicas)
    isr = tuple(r for r in p.isr if r not in removing)
    if not isr:
        return p
    done = dataclasses.replace(
        p,
        replicas=tuple(r for r in p.replicas if r not in removing),
        isr=isr,
        removing_replicas=(),
        adding_replicas=(),
    )
    return _with_valid_leader(done, strategy, live)


def _reassign(
    p: PartitionRegistration,
    target: Sequence[int] | None,
    strategy: ReplicationStrategy,
    live: Collection[int],
) -> PartitionRegistration:
    original = tuple(r for r in p.replicas if r not in p.adding_replicas)
    goal = original if target is None else tuple(target)
    adding = tuple(r for r in goal if r not in original)
    removing = tuple(r for r in original if r not in goal)
    replicas = goal + removing
    moved = dataclasses.replace(
        p,
        replicas=replicas,
        isr=tuple(r for r in p.isr if r in replicas),
        adding_replicas=adding,
        removing_replicas=removing,
    )
    if not moved.is_reassigning:
        return _with_valid_leader(moved, strategy, live)
    return completed_reassignment(moved, strategy, live)


def _check_target(image: MetadataImage, target: Sequence[int]) -> str | None:
    if not target:
        return "The replica list is empty."
    if len(set(target)) != len(target):
        return "The replica list contains duplicates."
    unknown = [r for r in target if r not in image.brokers]
    if unknown:
        return f"The replica list names broker {unknown[0]}, which is not registered."
    return None


def alter_partition_reassignments(
    image: MetadataImage, ctx: OperationContext, reassignments: Sequence[ReassignmentRequest]
) -> ControllerResult[list[ReassignmentResult]]:
    """Start, replace or cancel reassignments. Errors per partition:
    UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS."""
    live = electable_brokers(image)
    records: list[MetadataRecord] = []
    results: list[ReassignmentResult] = []
    for req in reassignments:

        def fail(code: ErrorCode, message: str, req: ReassignmentRequest = req) -> None:
            results.append(ReassignmentResult(req.topic, req.partition_id, code, message))

        found = find_partition(image, req.topic, req.partition_id)
        if found is None:
            fail(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
            continue
        topic, p = found
        if req.replicas is None and not p.is_reassigning:
            fail(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No reassignment is in progress.")
            continue
        problem = None if req.replicas is None else _check_target(image, req.replicas)
        if problem is not None:
            fail(ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem)
            continue
        strategy = strategy_for(image, ctx, topic.name)
        target = _reassign(p, req.replicas, strategy, live)
        rec = partition_change_to(topic.topic_id, req.partition_id, p, target)
        if rec is not None:
            records.append(rec)
        results.append(ReassignmentResult(req.topic, req.partition_id, ErrorCode.NONE))
    return ControllerResult(records, results)


def list_partition_reassignments(
    image: MetadataImage, partitions: Sequence[tuple[str, int]] | None = None
) -> ControllerResult[list[OngoingReassignment]]:
    """Ongoing reassignments among ``partitions`` (all when None); unknown ones are skipped."""
    if partitions is None:
        candidates = [
            (topic, pid) for topic in image.topics.by_name.values() for pid in topic.partitions
        ]
    else:
        candidates = []
        for name, pid in partitions:
            found = find_partition(image, name, pid)
            if found is not None:
                candidates.append((found[0], pid))
    out = [
        OngoingReassignment(topic.name, pid, p.replicas, p.adding_replicas, p.removing_replicas)
        for topic, pid in candidates
        if (p := topic.partitions[pid]).is_reassigning
    ]
    return ControllerResult([], out)
