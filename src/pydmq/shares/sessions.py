"""Share sessions (KIP-932): which partitions a member's ShareFetch requests cover, and the
session epoch that orders them, sans-IO.

A session is keyed by (group id, member id). Epoch 0 opens a session (replacing an existing
one) with the request's partitions; -1 closes it (the request only acknowledges); any other
epoch must be the session's next one: the request's partitions join the session, its
forgotten ones leave it, and the epoch moves on. A request with no session is answered
SHARE_SESSION_NOT_FOUND, one with the wrong epoch INVALID_SHARE_SESSION_EPOCH; a new session
beyond ``share.max.share.sessions`` (Kafka's ``group.share.max.share.sessions``) gets
SHARE_SESSION_LIMIT_REACHED. Owned by the broker's event loop.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from pydmq.protocol.errors import ErrorCode

__all__ = [
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "SharePartitionKey",
    "ShareSession",
    "ShareSessionCache",
]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1

# (topic id, partition index)
SharePartitionKey = tuple[uuid.UUID, int]


@dataclass(slots=True)
class ShareSession:
    """One member's share session: its partitions and the epoch its next request carries."""

    group_id: str
    member_id: str
    epoch: int = 1
    partitions: set[SharePartitionKey] = field(default_factory=set)


class ShareSessionCache:
    """The share sessions of this node (see the module)."""

    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}
        # (group id, share-partition) -> how many of the group's sessions read it
        self._readers: Counter[tuple[str, SharePartitionKey]] = Counter()

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def readers(self, group_id: str, key: SharePartitionKey) -> int:
        """How many of ``group_id``'s share sessions here read the share-partition ``key``."""
        return self._readers.get((group_id, key), 0)

    def sessions_of(self, group_id: str) -> list[ShareSession]:
        return [s for s in self._sessions.values() if s.group_id == group_id]

    def check(self, group_id: str, member_id: str, epoch: int) -> ErrorCode:
        """Whether a request with ``epoch`` may be served (ShareAcknowledge uses this alone:
        it never opens a session)."""
        if epoch == INITIAL_EPOCH:
            if (group_id, member_id) in self._sessions:
                return ErrorCode.NONE
            if len(self._sessions) >= self.max_sessions:
                return ErrorCode.SHARE_SESSION_LIMIT_REACHED
            return ErrorCode.NONE
        session = self._sessions.get((group_id, member_id))
        if session is None:
            # Closing a session that is gone already (the member left the group first) is
            # not an error: its acknowledgements are still applied, as Kafka answers them.
            return ErrorCode.NONE if epoch == FINAL_EPOCH else ErrorCode.SHARE_SESSION_NOT_FOUND
        if epoch != FINAL_EPOCH and epoch != session.epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH
        return ErrorCode.NONE

    def update(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        added: Iterable[SharePartitionKey],
        forgotten: Iterable[SharePartitionKey],
    ) -> ShareSession | None:
        """Apply a checked request (see :meth:`check`): open, advance or close the session.
        Returns the session to serve (the closed one for the final epoch)."""
        key = (group_id, member_id)
        if epoch == FINAL_EPOCH:
            return self.remove(group_id, member_id)
        if epoch == INITIAL_EPOCH:
            self.remove(group_id, member_id)
            session = ShareSession(group_id, member_id)
            self._sessions[key] = session
        else:
            session = self._sessions[key]
            session.epoch = 1 if session.epoch == _MAX_EPOCH else session.epoch + 1
        for tp in added:
            if tp not in session.partitions:
                session.partitions.add(tp)
                self._readers[(group_id, tp)] += 1
        for tp in forgotten:
            if tp in session.partitions:
                session.partitions.discard(tp)
                self._unread(group_id, tp)
        return session

    def remove(self, group_id: str, member_id: str) -> ShareSession | None:
        """Drop a member's session (it left the group)."""
        session = self._sessions.pop((group_id, member_id), None)
        if session is not None:
            for tp in session.partitions:
                self._unread(group_id, tp)
        return session

    def _unread(self, group_id: str, tp: SharePartitionKey) -> None:
        count = self._readers[(group_id, tp)] - 1
        if count > 0:
            self._readers[(group_id, tp)] = count
        else:
            del self._readers[(group_id, tp)]
