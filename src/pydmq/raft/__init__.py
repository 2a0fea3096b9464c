"""KRaft-style Raft for the ``__cluster_metadata`` log: sans-IO core, log and quorum state.

Reading order: :mod:`.messages` (the RPCs), :mod:`.log` (entries, snapshots, the log port),
:mod:`.state` (durable epoch and vote), :mod:`.core` (the state machine a driver runs).
Nothing here does network I/O or uses asyncio; only :mod:`.file_log` and
:class:`.state.FileQuorumStateStore` touch files.
"""

from __future__ import annotations

from pydmq.raft.core import (
    PARKED,
    NotLeaderError,
    Outbound,
    Parked,
    RaftConfig,
    RaftCore,
    RaftStateError,
    Role,
)
from pydmq.raft.file_log import FileRaftLog
from pydmq.raft.log import Entry, MemoryRaftLog, RaftLog, SnapshotId
from pydmq.raft.state import (
    FileQuorumStateStore,
    MemoryQuorumStateStore,
    QuorumState,
    QuorumStateStore,
)

__all__ = [
    "PARKED",
    "Entry",
    "FileQuorumStateStore",
    "FileRaftLog",
    "MemoryQuorumStateStore",
    "MemoryRaftLog",
    "NotLeaderError",
    "Outbound",
    "Parked",
    "QuorumState",
    "QuorumStateStore",
    "RaftConfig",
    "RaftCore",
    "RaftLog",
    "RaftStateError",
    "Role",
    "SnapshotId",
]
