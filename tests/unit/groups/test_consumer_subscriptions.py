"""What a KIP-848 group's members subscribe to is counted as they join, change and leave
(issue 21): a heartbeat reads the group's subscribed topics without visiting every member,
so its cost stays flat in the size of the group (a 1,000-member group heartbeated 1,000
times visited a million members)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pydmq.groups.consumer import records as rec
from pydmq.groups.consumer.group import ConsumerGroup, ConsumerGroupMember
from pydmq.groups.consumer.replay import replay

pytestmark = pytest.mark.timeout(30)

TOPICS = ["orders", "payments", "refunds", "audit"]


def _metadata(names: tuple[str, ...], regex: str | None = None) -> rec.MemberMetadataValue:
    return rec.MemberMetadataValue(None, None, "client", "/127.0.0.1", 30_000, names, regex, None)


def _join(
    groups: dict[str, ConsumerGroup], member: str, *names: str, regex: str | None = None
) -> None:
    replay(groups, rec.member_metadata_record("g", member, _metadata(names, regex)))


def _leave(groups: dict[str, ConsumerGroup], member: str) -> None:
    replay(groups, rec.member_metadata_record("g", member, None))


class _NoScan(dict[str, ConsumerGroupMember]):
    """The members of a group, refusing to be walked."""

    def values(self) -> Any:
        raise AssertionError("walked every member")

    def items(self) -> Any:
        raise AssertionError("walked every member")

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("walked every member")


def test_subscribed_topics_follow_joins_changes_and_leaves() -> None:
    groups: dict[str, ConsumerGroup] = {}
    _join(groups, "a", "orders", "payments")
    _join(groups, "b", "payments")
    _join(groups, "c", regex="ref.*")
    group = groups["g"]
    assert group.has_regex_subscriptions
    assert group.subscribed_topic_names(TOPICS) == {"orders", "payments", "refunds"}
    _join(groups, "b", "audit")  # b changes its subscription
    _leave(groups, "a")
    assert group.subscribed_topic_names(TOPICS) == {"audit", "refunds"}
    _join(groups, "c", "orders")  # c drops its regex
    assert not group.has_regex_subscriptions
    assert group.subscribed_topic_names(TOPICS) == {"audit", "orders"}
    copy = group.copy()
    _leave(groups, "b")
    assert group.subscribed_topic_names(TOPICS) == {"orders"}
    assert copy.subscribed_topic_names(TOPICS) == {"audit", "orders"}  # counts were copied


def test_reading_the_subscriptions_visits_no_member() -> None:
    groups: dict[str, ConsumerGroup] = {}
    for i in range(1_000):
        _join(groups, f"m{i}", TOPICS[i % 2], regex="aud.*" if i == 7 else None)
    group = groups["g"]
    group.members = _NoScan(group.members)
    assert group.has_regex_subscriptions
    assert group.subscribed_topic_names(TOPICS) == {"orders", "payments", "audit"}
