"""The quorum state a voter must never forget: its epoch, its vote in it, the leader it knows.

Raft's safety rests on two promises kept across crashes: a voter never goes back to an older
epoch, and votes at most once per epoch. So the Raft core writes the state *before* it sends
any message that depends on it (a vote granted, a candidacy, a leadership), and the stores
here return only once the write is durable. Kafka keeps the same facts in its
``quorum-state`` file. A write that fails (a full disk, an I/O error) raises the OSError and
leaves the file as it was; the core changes its state only after the write returned, so
nothing that depends on the new state is sent.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Protocol

from pydmq.failpoints import failpoint
from pydmq.storage.checkpoint import read_checkpoint_file, write_atomically

__all__ = [
    "FileQuorumStateStore",
    "MemoryQuorumStateStore",
    "QuorumState",
    "QuorumStateStore",
]

_VERSION = 0


@dataclass(frozen=True, slots=True)
class QuorumState:
    """The durable part of a voter's Raft state; ``None`` ids are unknown/not voted."""

    epoch: int = 0
    voted_id: int | None = None
    leader_id: int | None = None


class QuorumStateStore(Protocol):
    """Where a voter keeps its :class:`QuorumState`; ``write`` is durable when it returns."""

    def read(self) -> QuorumState: ...

    def write(self, state: QuorumState) -> None: ...


class MemoryQuorumStateStore:
    """A store in memory: survives a simulated crash (the object outlives the core)."""

    def __init__(self, state: QuorumState | None = None) -> None:
        self._state = state or QuorumState()
        self.writes = 0

    def read(self) -> QuorumState:
        return self._state

    def write(self, state: QuorumState) -> None:
        self._state = state
        self.writes += 1


class FileQuorumStateStore:
    """A store in one small JSON file, replaced atomically (temp, fsync, rename, fsync dir)."""

    def __init__(self, path: str) -> None:
        self._path = path
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)

    def read(self) -> QuorumState:
        """The last state written; the initial state if there is no file yet.

        A file that exists but does not parse is an error, not a fresh start: forgetting a vote
        or an epoch could elect two leaders in one epoch.
        """
        data = read_checkpoint_file(self._path)
        if data is None:
            return QuorumState()
        try:
            doc = json.loads(data)
            if doc.get("data_version") != _VERSION:
                raise ValueError(f"unknown data_version {doc.get('data_version')!r}")
            epoch = doc["leader_epoch"]
            voted = doc["voted_id"]
            leader = doc["leader_id"]
            if not isinstance(epoch, int) or epoch < 0:
                raise ValueError(f"bad leader_epoch {epoch!r}")
            for value in (voted, leader):
                if not isinstance(value, int):
                    raise ValueError(f"bad replica id {value!r}")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"corrupt quorum state file {self._path}: {exc}") from exc
        return QuorumState(
            epoch=epoch,
            voted_id=voted if voted >= 0 else None,
            leader_id=leader if leader >= 0 else None,
        )

    def write(self, state: QuorumState) -> None:
        doc = {
            "data_version": _VERSION,
            "leader_epoch": state.epoch,
            "leader_id": -1 if state.leader_id is None else state.leader_id,
            "voted_id": -1 if state.voted_id is None else state.voted_id,
        }
        failpoint("quorum_state.write")
        write_atomically(self._path, json.dumps(doc, sort_keys=True).encode())
