"""The KRaft RPCs the Raft core sends and receives, as plain values.

The core speaks only of the single partition ``__cluster_metadata``-0, so each message here is
the per-partition part of Kafka's request/response folded together with the top-level fields
that matter (``cluster_id``, ``replica_id``...). Field names are Kafka's, in snake_case, as in
the generated codecs of ``pydmq.protocol.messages.{vote, begin_quorum_epoch, end_quorum_epoch,
fetch, fetch_snapshot, describe_quorum}``; the driver maps one onto the other field by field.
Where Kafka uses ``-1`` for "unknown" (leader ids, timestamps), so do these values, so that the
mapping stays mechanical.

Error codes are :class:`pydmq.protocol.errors.ErrorCode` values. A response carries one
``error_code``: the driver puts INCONSISTENT_CLUSTER_ID and INCONSISTENT_VOTER_SET in the
top-level field (as Kafka does) and every other code in the partition-level one.

Log entries travel as :class:`Entry` tuples; on the wire each entry is one record of a
RecordBatch v2 whose ``base_offset`` is the entry's offset, ``partition_leader_epoch`` its
epoch and value its payload. Snapshot chunks are opaque bytes of the snapshot file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydmq.protocol.errors import ErrorCode
from pydmq.raft.log import Entry, SnapshotId

__all__ = [
    "CLUSTER_METADATA_PARTITION",
    "CLUSTER_METADATA_TOPIC",
    "BeginQuorumEpochRequest",
    "BeginQuorumEpochResponse",
    "DescribeQuorumResult",
    "EndQuorumEpochRequest",
    "EndQuorumEpochResponse",
    "EpochEndOffset",
    "FetchRequest",
    "FetchResponse",
    "FetchSnapshotRequest",
    "FetchSnapshotResponse",
    "RaftRequest",
    "RaftResponse",
    "ReplicaState",
    "VoteRequest",
    "VoteResponse",
]

CLUSTER_METADATA_TOPIC = "__cluster_metadata"
CLUSTER_METADATA_PARTITION = 0

_NONE = int(ErrorCode.NONE)


@dataclass(frozen=True, slots=True)
class VoteRequest:
    """Vote (52): a candidate asks for a vote, or a prospective for a pre-vote (KIP-996).

    ``replica_epoch`` is the candidate's epoch (for a pre-vote: the prospective's current
    epoch, which it has not bumped), ``replica_id`` the candidate, ``voter_id`` the receiver,
    ``last_offset_epoch``/``last_offset`` the epoch of the candidate's last entry and its log
    end offset.
    """

    cluster_id: str | None
    voter_id: int
    replica_epoch: int
    replica_id: int
    last_offset_epoch: int
    last_offset: int
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class VoteResponse:
    """Vote answer; ``leader_id``/``leader_epoch`` are what the voter knows (-1 = no leader)."""

    error_code: int
    leader_id: int
    leader_epoch: int
    vote_granted: bool


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    """BeginQuorumEpoch (53): a new leader tells a voter it won ``leader_epoch``."""

    cluster_id: str | None
    voter_id: int
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    """BeginQuorumEpoch answer with the receiver's view of the leader."""

    error_code: int
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    """EndQuorumEpoch (54): a resigning leader asks voters to elect a successor now.

    ``preferred_successors`` are sorted by how far each voter's log got, best first; a voter
    waits longer before its election the further down the list it is, so the most caught-up
    voter usually wins.
    """

    cluster_id: str | None
    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    """EndQuorumEpoch answer with the receiver's view of the leader."""

    error_code: int
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """Fetch (1) of ``__cluster_metadata``-0 by a voter from the leader.

    ``fetch_offset`` is the follower's log end offset and ``last_fetched_epoch`` the epoch of
    its last entry: the leader checks the pair against its own log and answers with a
    diverging epoch when they disagree. ``max_wait_ms`` is the long-poll time (the codec's
    ``max_wait``).
    """

    cluster_id: str | None
    replica_id: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int = 0
    max_bytes: int = 1 << 20
    log_start_offset: int = -1


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """Where the leader's log stops having entries of ``epoch`` (Kafka's DivergingEpoch)."""

    epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """Fetch answer. At most one of ``diverging_epoch``, ``snapshot_id`` and ``records``.

    ``diverging_epoch``: the follower must truncate to where its log agrees with the leader's
    and fetch again. ``snapshot_id``: the follower's fetch offset is below the leader's log
    start; it must fetch that snapshot with FetchSnapshot.
    """

    error_code: int
    leader_id: int
    leader_epoch: int
    high_watermark: int = -1
    log_start_offset: int = -1
    diverging_epoch: EpochEndOffset | None = None
    snapshot_id: SnapshotId | None = None
    records: tuple[Entry, ...] = ()


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    """FetchSnapshot (59): read ``max_bytes`` of snapshot ``snapshot_id`` from ``position``."""

    cluster_id: str | None
    replica_id: int
    current_leader_epoch: int
    snapshot_id: SnapshotId
    position: int
    max_bytes: int = 1 << 20


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    """One chunk of a snapshot: ``unaligned_records`` at ``position`` of ``size`` bytes."""

    error_code: int
    leader_id: int
    leader_epoch: int
    snapshot_id: SnapshotId | None = None
    size: int = -1
    position: int = -1
    unaligned_records: bytes = b""


@dataclass(frozen=True, slots=True)
class ReplicaState:
    """DescribeQuorum's view of one replica, as the leader last saw it (-1 = never)."""

    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int = -1
    last_caught_up_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class DescribeQuorumResult:
    """DescribeQuorum (55) for ``__cluster_metadata``-0; only the leader answers NONE."""

    error_code: int
    leader_id: int
    leader_epoch: int
    high_watermark: int
    current_voters: tuple[ReplicaState, ...] = field(default=())
    observers: tuple[ReplicaState, ...] = field(default=())

    @property
    def ok(self) -> bool:
        """True when the answer came from the leader."""
        return self.error_code == _NONE


RaftRequest = (
    VoteRequest
    | BeginQuorumEpochRequest
    | EndQuorumEpochRequest
    | FetchRequest
    | FetchSnapshotRequest
)
RaftResponse = (
    VoteResponse
    | BeginQuorumEpochResponse
    | EndQuorumEpochResponse
    | FetchResponse
    | FetchSnapshotResponse
)
