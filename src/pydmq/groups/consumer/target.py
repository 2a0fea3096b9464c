"""The target assignment of a KIP-848 consumer group, computed as records (sans-IO).

:func:`subscription_metadata` resolves what the members subscribe to over the broker's topics
(as Kafka's coordinator, a regex is matched against every topic, internal ones included).
:func:`compute_target` runs the group's assignor (:meth:`ConsumerGroupServices.assignor_for`)
and emits the members' new targets and the target assignment epoch into a
:class:`~pydmq.groups.consumer.replay.GroupChange`.
"""

from __future__ import annotations

import logging
import uuid

from pydmq.assignment.api import (
    AssignmentSpec,
    InvalidAssignmentError,
    MemberSubscription,
    TopicMetadata,
    validate_assignment,
)
from pydmq.groups.consumer.api import ConsumerGroupServices
from pydmq.groups.consumer.group import ConsumerGroup
from pydmq.groups.consumer.records import target_epoch_record, target_member_record
from pydmq.groups.consumer.replay import GroupChange

__all__ = ["compute_target", "subscription_metadata"]

log = logging.getLogger(__name__)


def subscription_metadata(
    services: ConsumerGroupServices, group: ConsumerGroup
) -> dict[str, tuple[uuid.UUID, int]]:
    """Topic name -> (topic id, partition count) of every existing topic the group's members
    subscribe to, by name or by regex."""
    topics = services.topics
    all_names = [t.name for t in topics] if group.has_regex_subscriptions else []
    out: dict[str, tuple[uuid.UUID, int]] = {}
    for name in group.subscribed_topic_names(all_names):
        info = topics.get(name)
        if info is not None:
            out[name] = (info.topic_id, len(info.partitions))
    return out


def compute_target(services: ConsumerGroupServices, change: GroupChange) -> None:
    """Emit the target assignment of the group's epoch; on an assignor failure, nothing (the
    previous target stays, the group stays Assigning)."""
    group = change.group
    name = services.assignor_for(group)
    spec_assignor = services.assignors.get(name)
    topics = {
        tid: TopicMetadata(tid, topic, n) for topic, (tid, n) in group.subscription_metadata.items()
    }
    members = {
        m.member_id: MemberSubscription(
            m.member_id,
            m.instance_id,
            m.rack_id,
            frozenset(
                tid
                for topic, (tid, _) in group.subscription_metadata.items()
                if m.subscribes_to(topic)
            ),
            group.target.get(m.member_id, {}),
        )
        for m in group.members.values()
    }
    spec = AssignmentSpec(members, topics)
    if spec_assignor is None:
        log.error("consumer group %s: no assignor available", group.group_id)
        return
    try:
        result = validate_assignment(spec, spec_assignor.assignor.assign(spec))
    except (InvalidAssignmentError, Exception):
        log.exception(
            "consumer group %s: assignor %s failed; keeping the previous target",
            group.group_id,
            name,
        )
        return
    changed = [(m, parts) for m, parts in result.items() if group.target.get(m) != parts]
    epoch = group.group_epoch
    for member_id, parts in changed:
        change.emit(target_member_record(group.group_id, member_id, parts))
    change.emit(target_epoch_record(group.group_id, epoch))
