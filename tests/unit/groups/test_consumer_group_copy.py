"""A write on a KIP-848 group is computed on a copy of the group (``GroupChange``); the copy
clones only the members the write changes (issue 21: cloning all 1,000 members of a group
for every heartbeat that wrote was a sixth of a 1,000-member rebalance), and the committed
group stays as it was until the records are replayed on it."""

from __future__ import annotations

import pytest

from pydmq.groups.consumer import group as group_module
from pydmq.groups.consumer import records as rec
from pydmq.groups.consumer.group import ConsumerGroup, ConsumerGroupMember
from pydmq.groups.consumer.replay import GroupChange, replay

pytestmark = pytest.mark.timeout(30)

MEMBERS = 1_000


def _metadata(*names: str) -> rec.MemberMetadataValue:
    return rec.MemberMetadataValue(None, None, "client", "/127.0.0.1", 30_000, names, None, None)


def _group() -> ConsumerGroup:
    groups: dict[str, ConsumerGroup] = {}
    for i in range(MEMBERS):
        replay(groups, rec.member_metadata_record("g", f"m{i}", _metadata("orders")))
    return groups["g"]


def test_a_write_clones_only_the_members_it_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    committed = _group()
    clones: list[str] = []
    original = ConsumerGroupMember.clone

    def counting(self: ConsumerGroupMember) -> ConsumerGroupMember:
        clones.append(self.member_id)
        return original(self)

    monkeypatch.setattr(group_module.ConsumerGroupMember, "clone", counting)
    change = GroupChange("g", committed)
    change.emit(rec.member_metadata_record("g", "m7", _metadata("payments")))
    change.emit(rec.member_metadata_record("g", "m8", None))
    assert clones == ["m7"]
    written = change.group
    assert written.members["m7"].subscribed_topic_names == ("payments",)
    assert "m8" not in written.members
    assert written.subscribed_topic_names([]) == {"orders", "payments"}
    # The committed group has none of it until the records are replayed on it.
    assert committed.members["m7"].subscribed_topic_names == ("orders",)
    assert "m8" in committed.members
    assert committed.subscribed_topic_names([]) == {"orders"}
    groups = {"g": committed}
    for record in change.records:
        replay(groups, record)
    assert committed.members["m7"].subscribed_topic_names == ("payments",)
    assert len(committed.members) == MEMBERS - 1


def test_a_member_changed_twice_in_one_write_is_cloned_once() -> None:
    committed = _group()
    change = GroupChange("g", committed)
    change.emit(rec.member_metadata_record("g", "m1", _metadata("a")))
    first = change.group.members["m1"]
    change.emit(rec.member_metadata_record("g", "m1", _metadata("b")))
    assert change.group.members["m1"] is first
    assert first.subscribed_topic_names == ("b",)
    assert committed.members["m1"].subscribed_topic_names == ("orders",)
