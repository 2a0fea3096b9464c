"""Share group membership (sans-IO): joins, the simple assignment, fencing, leave, session
expiry on an injected clock; and share session epochs."""

from __future__ import annotations

import uuid

import pytest

from pydmq.protocol.errors import ErrorCode
from pydmq.shares.group import ShareGroupHeartbeatResult, ShareGroups
from pydmq.shares.sessions import ShareSessionCache

pytestmark = pytest.mark.timeout(10)

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = {"one": (T1, 1), "four": (T2, 4)}


def _topics(name: str) -> tuple[uuid.UUID, int] | None:
    return TOPICS.get(name)


def _beat(
    groups: ShareGroups, member: str, epoch: int, now: int, topics: list[str] | None
) -> ShareGroupHeartbeatResult:
    return groups.heartbeat("g", member, epoch, None, topics, "c", "/h", _topics, now)


def test_simple_assignment_shares_small_topics_and_spreads_large_ones() -> None:
    groups = ShareGroups(session_timeout_ms=1000, heartbeat_interval_ms=100)
    a = _beat(groups, "a", 0, 0, ["one", "four"])
    assert a.error_code == 0 and a.assignment == {T1: [0], T2: [0, 1, 2, 3]}
    b = _beat(groups, "b", 0, 0, ["one", "four"])
    assert b.assignment == {T1: [0], T2: [1, 3]}
    # a's assignment changed: its next heartbeat answers it, with the new epoch.
    again = _beat(groups, "a", a.member_epoch, 10, None)
    assert again.assignment == {T1: [0], T2: [0, 2]}
    assert again.member_epoch == b.member_epoch == groups.groups["g"].group_epoch
    assert _beat(groups, "a", again.member_epoch, 20, None).assignment is None


def test_fencing_unknown_member_leave_and_expiry() -> None:
    groups = ShareGroups(session_timeout_ms=1000, heartbeat_interval_ms=100)
    removed: list[str] = []
    groups.on_member_removed = lambda group_id, member_id: removed.append(member_id)
    a = _beat(groups, "a", 0, 0, ["one"])
    b = _beat(groups, "b", 0, 500, ["one"])
    assert _beat(groups, "a", a.member_epoch + 5, 600, None).error_code == (
        ErrorCode.FENCED_MEMBER_EPOCH
    )
    assert _beat(groups, "x", 3, 600, None).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert _beat(groups, "b", b.member_epoch, 1200, None).error_code == 0  # a expired at 1000
    assert removed == ["a"] and list(groups.groups["g"].members) == ["b"]
    assert _beat(groups, "b", -1, 1300, None).member_epoch == -1
    assert removed == ["a", "b"] and groups.groups["g"].state == "Empty"
    assert groups.delete("g") == ErrorCode.NONE and groups.delete("g") == (
        ErrorCode.GROUP_ID_NOT_FOUND
    )


def test_share_session_epochs() -> None:
    cache = ShareSessionCache(max_sessions=1)
    assert cache.check("g", "m", 1) == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert cache.check("g", "m", 0) == ErrorCode.NONE
    session = cache.update("g", "m", 0, added=[(T1, 0)], forgotten=[])
    assert session is not None and session.epoch == 1
    assert cache.check("g", "other", 0) == ErrorCode.SHARE_SESSION_LIMIT_REACHED
    assert cache.check("g", "m", 2) == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    cache.update("g", "m", 1, added=[(T2, 3)], forgotten=[(T1, 0)])
    assert session.epoch == 2 and session.partitions == {(T2, 3)}
    closed = cache.update("g", "m", -1, added=[], forgotten=[])
    assert closed is session and cache.get("g", "m") is None
