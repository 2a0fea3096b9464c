"""What a Raft leader knows about its voters: their log end offsets and last fetch times.

From this the leader derives its high watermark (the offset a majority of voters has reached)
and the check-quorum verdict (has a majority fetched recently, or is this leader cut off and
must resign so that the rest can elect another).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["LeaderProgress", "ReplicaProgress", "majority"]


def majority(voter_count: int) -> int:
    """Votes (or replicas) that make a majority of ``voter_count``."""
    return voter_count // 2 + 1


@dataclass(slots=True)
class ReplicaProgress:
    """A voter as the leader sees it; -1 means "not seen in this epoch"."""

    end_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1


class LeaderProgress:
    """Per-voter fetch state of one leadership (one epoch). Owned by the Raft core."""

    __slots__ = ("began_ms", "begin_acked", "epoch_start_offset", "local_id", "replicas")

    def __init__(
        self, local_id: int, voters: Sequence[int], epoch_start_offset: int, now_ms: int
    ) -> None:
        self.local_id = local_id
        self.epoch_start_offset = epoch_start_offset
        self.began_ms = now_ms
        self.replicas = {v: ReplicaProgress() for v in voters if v != local_id}
        # Voters that acknowledged BeginQuorumEpoch or fetched: no need to tell them again.
        self.begin_acked: set[int] = set()

    def update_fetch(
        self, replica_id: int, fetch_offset: int | None, leader_end: int, now_ms: int
    ) -> None:
        """Record a fetch; ``fetch_offset`` None when it was not validated (diverging)."""
        progress = self.replicas.get(replica_id)
        if progress is None:
            return
        progress.last_fetch_ms = now_ms
        self.begin_acked.add(replica_id)
        if fetch_offset is not None:
            progress.end_offset = fetch_offset
            if fetch_offset >= leader_end:
                progress.last_caught_up_ms = now_ms

    def touch(self, replica_id: int, now_ms: int) -> None:
        """A voter talked to us in this epoch (FetchSnapshot): it counts for check-quorum."""
        progress = self.replicas.get(replica_id)
        if progress is not None:
            progress.last_fetch_ms = now_ms
            self.begin_acked.add(replica_id)

    def high_watermark_candidate(self, local_end: int) -> int | None:
        """The offset a majority has reached, if it commits an entry of this epoch."""
        ends = sorted([local_end, *(p.end_offset for p in self.replicas.values())], reverse=True)
        hw = ends[majority(len(ends)) - 1]
        # Raft's commit rule: only an entry of the leader's own epoch is committed by counting
        # replicas; earlier entries commit with it (Raft paper section 5.4.2).
        return hw if hw > self.epoch_start_offset else None

    def quorum_lost_at(self, fetch_timeout_ms: int) -> int | None:
        """When check-quorum fails if no more fetches arrive; None for a lone voter."""
        contact = self.quorum_contact_ms()
        return None if contact is None else contact + fetch_timeout_ms

    def quorum_contact_ms(self) -> int | None:
        """When a majority of voters (this leader included) last showed they hear it: the
        latest time by which enough followers had fetched (or leadership began, if later).
        None for a lone voter, which never loses contact."""
        needed = majority(len(self.replicas) + 1) - 1
        if needed == 0:
            return None
        recent = sorted((p.last_fetch_ms for p in self.replicas.values()), reverse=True)
        return max(self.began_ms, recent[needed - 1])

    def successors(self) -> tuple[int, ...]:
        """Voters ordered by how far their log got, best first (EndQuorumEpoch)."""
        ranked = sorted(self.replicas.items(), key=lambda kv: (-kv[1].end_offset, kv[0]))
        return tuple(voter for voter, _ in ranked)
