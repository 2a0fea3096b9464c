"""Partition state operations: AlterPartition (56) from leaders, ElectLeaders (43) from admins.

AlterPartition is a compare-and-set on the partition: the leader sends the leader epoch and
partition epoch it knows, and the controller refuses stale ones, so two leaders (an old one
not yet told it lost leadership, and the new one) can never both change the ISR.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from pydmq.controller.operations.common import (
    ControllerResult,
    OperationContext,
    check_broker,
    elect,
    electable_brokers,
    partition_change,
    partition_change_to,
    strategy_for,
)
from pydmq.controller.operations.reassignment import completed_reassignment
from pydmq.metadata.image import MetadataImage, PartitionRegistration, TopicImage
from pydmq.metadata.records import MetadataRecord, PartitionChangeRecord
from pydmq.protocol.errors import ErrorCode

__all__ = [
    "ELECTION_PREFERRED",
    "ELECTION_UNCLEAN",
    "AlterPartitionItem",
    "AlterPartitionItemResult",
    "AlterPartitionReply",
    "ElectionResult",
    "alter_partition",
    "elect_leaders",
]

ELECTION_PREFERRED = 0
ELECTION_UNCLEAN = 1
"""ElectLeaders election_type values (Kafka's ElectionType)."""


@dataclass(frozen=True, slots=True)
class AlterPartitionItem:
    """One partition of an AlterPartition request: the ISR its leader wants."""

    topic_id: uuid.UUID
    partition_id: int
    leader_epoch: int
    new_isr: Sequence[int]
    partition_epoch: int
    leader_recovery_state: int = 0


@dataclass(frozen=True, slots=True)
class AlterPartitionItemResult:
    """The partition's state after the request (or the error and nothing else)."""

    topic_id: uuid.UUID
    partition_id: int
    error_code: int
    leader: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1
    leader_recovery_state: int = 0


@dataclass(frozen=True, slots=True)
class AlterPartitionReply:
    error_code: int
    partitions: tuple[AlterPartitionItemResult, ...] = ()


@dataclass(frozen=True, slots=True)
class ElectionResult:
    topic: str
    partition_id: int
    error_code: int
    error_message: str | None = None


class _Refused(Exception):
    def __init__(self, error_code: ErrorCode, message: str = "") -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def _check_alter(
    image: MetadataImage,
    ctx: OperationContext,
    broker_id: int,
    topic: TopicImage,
    p: PartitionRegistration,
    item: AlterPartitionItem,
) -> None:
    if p.leader != broker_id:
        raise _Refused(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    if item.leader_epoch != p.leader_epoch:
        raise _Refused(ErrorCode.FENCED_LEADER_EPOCH)
    if item.partition_epoch != p.partition_epoch:
        raise _Refused(ErrorCode.INVALID_UPDATE_VERSION)
    new_isr = list(item.new_isr)
    if broker_id not in new_isr or len(set(new_isr)) != len(new_isr):
        raise _Refused(ErrorCode.INVALID_REQUEST, "the ISR must hold the leader, once")
    if item.leader_recovery_state not in (0, 1) or (
        item.leader_recovery_state == 1 and (p.leader_recovery_state == 0 or len(new_isr) > 1)
    ):
        raise _Refused(ErrorCode.INVALID_REQUEST, "invalid leader recovery state change")
    usable = electable_brokers(image)
    for r in new_isr:
        # Only members being added must be usable: a shrink never makes the ISR less safe.
        if r not in p.replicas or (r not in p.isr and r not in usable):
            raise _Refused(ErrorCode.INELIGIBLE_REPLICA, f"replica {r} cannot join the ISR")
    strategy = strategy_for(image, ctx, topic.name)
    if not set(p.isr) <= set(new_isr) and not strategy.may_shrink_isr_to(new_isr, p.replicas):
        raise _Refused(
            ErrorCode.INVALID_REQUEST,
            f"the {strategy.name} strategy does not allow the ISR to shrink to {new_isr}",
        )


def alter_partition(
    image: MetadataImage,
    ctx: OperationContext,
    *,
    broker_id: int,
    broker_epoch: int,
    partitions: Sequence[AlterPartitionItem],
) -> ControllerResult[AlterPartitionReply]:
    """Commit ISR changes proposed by a partition's leader.

    Per partition: UNKNOWN_TOPIC_ID / UNKNOWN_TOPIC_OR_PARTITION; NOT_LEADER_OR_FOLLOWER from
    a non-leader; FENCED_LEADER_EPOCH / INVALID_UPDATE_VERSION for stale epochs;
    INELIGIBLE_REPLICA for a non-replica, or a fenced or shutting-down broker joining;
    INVALID_REQUEST for a malformed ISR or a shrink the topic's strategy forbids. An ISR that
    now holds every replica being added completes a reassignment in the same record.
    """
    error = check_broker(image, broker_id, broker_epoch)
    if error != ErrorCode.NONE:
        return ControllerResult([], AlterPartitionReply(error))
    records: list[MetadataRecord] = []
    results: list[AlterPartitionItemResult] = []
    for item in partitions:
        topic = image.topics.by_id.get(item.topic_id)
        p = topic.partitions.get(item.partition_id) if topic is not None else None
        if topic is None or p is None:
            code = (
                ErrorCode.UNKNOWN_TOPIC_ID
                if topic is None
                else (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            )
            results.append(AlterPartitionItemResult(item.topic_id, item.partition_id, code))
            continue
        try:
            _check_alter(image, ctx, broker_id, topic, p, item)
        except _Refused as exc:
            results.append(
                AlterPartitionItemResult(item.topic_id, item.partition_id, exc.error_code)
            )
            continue
        rec = _isr_change(image, ctx, topic, item)
        after = p.merge(rec) if rec is not None else p
        if rec is not None:
            records.append(rec)
        results.append(
            AlterPartitionItemResult(
                item.topic_id,
                item.partition_id,
                ErrorCode.NONE,
                after.leader,
                after.leader_epoch,
                after.isr,
                after.partition_epoch,
                after.leader_recovery_state,
            )
        )
    return ControllerResult(records, AlterPartitionReply(ErrorCode.NONE, tuple(results)))


def _isr_change(
    image: MetadataImage, ctx: OperationContext, topic: TopicImage, item: AlterPartitionItem
) -> PartitionChangeRecord | None:
    p = topic.partitions[item.partition_id]
    proposed = PartitionRegistration(
        replicas=p.replicas,
        isr=tuple(item.new_isr),
        removing_replicas=p.removing_replicas,
        adding_replicas=p.adding_replicas,
        leader=p.leader,
        leader_recovery_state=item.leader_recovery_state,
    )
    strategy = strategy_for(image, ctx, topic.name)
    target = completed_reassignment(proposed, strategy, electable_brokers(image))
    return partition_change_to(topic.topic_id, item.partition_id, p, target)


def _elect_one(
    image: MetadataImage,
    ctx: OperationContext,
    topic: TopicImage,
    partition_id: int,
    election_type: int,
) -> tuple[PartitionChangeRecord | None, ElectionResult]:
    p = topic.partitions[partition_id]

    def result(code: ErrorCode, message: str | None = None) -> ElectionResult:
        return ElectionResult(topic.name, partition_id, code, message)

    live = electable_brokers(image)
    if election_type == ELECTION_PREFERRED:
        preferred = p.preferred_leader
        if p.leader == preferred:
            return None, result(ErrorCode.ELECTION_NOT_NEEDED)
        if preferred not in live or preferred not in p.isr:
            return None, result(
                ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                f"Failed to elect leader for partition {topic.name}-{partition_id}: the "
                f"preferred replica {preferred} is not live or not in the ISR",
            )
        rec = partition_change(topic.topic_id, partition_id, p, leader=preferred)
        return rec, result(ErrorCode.NONE)
    if p.has_leader:
        return None, result(ErrorCode.ELECTION_NOT_NEEDED)
    strategy = strategy_for(image, ctx, topic.name)
    leader, isr, lrs = elect(strategy, p, p.isr, live, True)
    if leader == -1:
        return None, result(
            ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
            f"Failed to elect leader for partition {topic.name}-{partition_id}: no live replica "
            f"the {strategy.name} strategy may elect",
        )
    rec = partition_change(
        topic.topic_id, partition_id, p, isr=isr, leader=leader, leader_recovery_state=lrs
    )
    return rec, result(ErrorCode.NONE)


def elect_leaders(
    image: MetadataImage,
    ctx: OperationContext,
    *,
    election_type: int,
    partitions: Sequence[tuple[str, int]] | None,
) -> ControllerResult[list[ElectionResult]]:
    """ElectLeaders: PREFERRED moves leadership to the first replica if it is live and in
    the ISR; UNCLEAN elects a leader for leaderless partitions, outside the ISR if the
    topic's strategy permits (the ``quorum`` strategy never does). ``partitions=None`` means
    every partition, and then only partitions where an election was attempted are reported.
    """
    if election_type not in (ELECTION_PREFERRED, ELECTION_UNCLEAN):
        raise ValueError(f"unknown election type {election_type}")
    records: list[MetadataRecord] = []
    results: list[ElectionResult] = []
    if partitions is None:
        wanted = [
            (topic, pid)
            for topic in image.topics.by_name.values()
            for pid in sorted(topic.partitions)
        ]
    else:
        wanted = []
        for name, pid in partitions:
            topic = image.topics.by_name.get(name)
            if topic is None or pid not in topic.partitions:
                results.append(
                    ElectionResult(
                        name,
                        pid,
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        "The partition does not exist.",
                    )
                )
            else:
                wanted.append((topic, pid))
    for topic, pid in wanted:
        rec, res = _elect_one(image, ctx, topic, pid, election_type)
        if rec is not None:
            records.append(rec)
        if partitions is not None or res.error_code != ErrorCode.ELECTION_NOT_NEEDED:
            results.append(res)
    return ControllerResult(records, results)
