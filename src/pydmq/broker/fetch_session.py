"""Fetch sessions (KIP-227): incremental fetches that name only what changed.

Session ids and epochs follow Kafka: (id 0, epoch -1) is a sessionless full fetch,
(id 0, epoch 0) opens a session, (id X, epoch -1) closes X, (id X, epoch 0) replaces X by a
new one, (id X, epoch N>0) is an incremental fetch that must carry the next epoch.
"""

from __future__ import annotations

import itertools
import random
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field

from pydmq.protocol.errors import ErrorCode

__all__ = ["CachedPartition", "FetchSession", "FetchSessionCache", "SessionError"]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_IDLE_EVICTION_MS = 120_000


@dataclass(slots=True)
class CachedPartition:
    """A partition in a session: what the client asked for and what it was last told."""

    topic: str
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int
    # what the last response told the client; -1 forces inclusion in the next one
    high_watermark: int = -1
    last_stable_offset: int = -1
    reported_log_start_offset: int = -1

    def maybe_update_response(self, high_watermark: int, lso: int, log_start: int) -> bool:
        """Record what is sent; True if the client has not seen these values yet."""
        changed = (
            high_watermark != self.high_watermark
            or lso != self.last_stable_offset
            or log_start != self.reported_log_start_offset
        )
        self.high_watermark = high_watermark
        self.last_stable_offset = lso
        self.reported_log_start_offset = log_start
        return changed


Key = tuple[str, int]


@dataclass(slots=True)
class FetchSession:
    """One client's session; partitions kept in the order they were added (Kafka's order)."""

    session_id: int
    epoch: int
    partitions: OrderedDict[Key, CachedPartition] = field(default_factory=OrderedDict)
    last_used_ms: int = 0

    def next_epoch(self) -> None:
        self.epoch = 1 if self.epoch >= 2**31 - 1 else self.epoch + 1


class SessionError(Exception):
    """FETCH_SESSION_ID_NOT_FOUND or INVALID_FETCH_SESSION_EPOCH for the whole response."""

    def __init__(self, error_code: int) -> None:
        super().__init__(ErrorCode(error_code).name)
        self.error_code = error_code


class FetchSessionCache:
    """Bounded cache of sessions (``max.incremental.fetch.session.cache.slots``)."""

    def __init__(self, max_slots: int) -> None:
        self.max_slots = max_slots
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._ids = itertools.count(random.randint(1, 1 << 20))

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int, epoch: int) -> FetchSession:
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionError(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            raise SessionError(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        self._sessions.move_to_end(session_id)
        session.last_used_ms = _now_ms()
        return session

    def remove(self, session_id: int) -> None:
        self._sessions.pop(session_id, None)

    def create(self) -> FetchSession | None:
        """A new session, or None when the cache is full of recently used sessions."""
        if self.max_slots <= 0:
            return None
        if len(self._sessions) >= self.max_slots:
            self.evict_expired()
            if len(self._sessions) >= self.max_slots:
                oldest_id, oldest = next(iter(self._sessions.items()))
                if _now_ms() - oldest.last_used_ms < _IDLE_EVICTION_MS // 4:
                    return None
                del self._sessions[oldest_id]
        session_id = next(self._ids) & 0x7FFFFFFF or next(self._ids)
        session = FetchSession(session_id, 1, last_used_ms=_now_ms())
        self._sessions[session_id] = session
        return session

    def evict_expired(self) -> None:
        horizon = _now_ms() - _IDLE_EVICTION_MS
        for session_id in [s for s, v in self._sessions.items() if v.last_used_ms < horizon]:
            del self._sessions[session_id]

    def forget_topic(self, topic: str) -> None:
        for session in self._sessions.values():
            for key in [k for k in session.partitions if k[0] == topic]:
                del session.partitions[key]


def _now_ms() -> int:
    return int(time.monotonic() * 1000)
