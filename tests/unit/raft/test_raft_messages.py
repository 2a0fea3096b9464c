"""The Raft core's messages use the generated codecs' field names, so mapping is mechanical."""

from __future__ import annotations

import dataclasses

import pytest

from pydmq.protocol.messages import (
    begin_quorum_epoch,
    describe_quorum,
    end_quorum_epoch,
    fetch,
    fetch_snapshot,
    vote,
)
from pydmq.raft import messages
from pydmq.raft.log import SnapshotId

# Ours -> the codec's, where the codec dropped Kafka's unit suffix.
RENAMED = {"max_wait_ms": "max_wait"}

CASES: list[tuple[type, tuple[type, ...]]] = [
    (messages.VoteRequest, (vote.VoteRequest, vote.PartitionData)),
    (messages.VoteResponse, (vote.VoteResponse, vote.PartitionDataResponse)),
    (
        messages.BeginQuorumEpochRequest,
        (begin_quorum_epoch.BeginQuorumEpochRequest, begin_quorum_epoch.PartitionData),
    ),
    (
        messages.BeginQuorumEpochResponse,
        (begin_quorum_epoch.BeginQuorumEpochResponse, begin_quorum_epoch.PartitionDataResponse),
    ),
    (
        messages.EndQuorumEpochRequest,
        (end_quorum_epoch.EndQuorumEpochRequest, end_quorum_epoch.PartitionData),
    ),
    (
        messages.EndQuorumEpochResponse,
        (end_quorum_epoch.EndQuorumEpochResponse, end_quorum_epoch.PartitionDataResponse),
    ),
    (messages.FetchRequest, (fetch.FetchRequest, fetch.FetchPartition)),
    (messages.FetchResponse, (fetch.FetchResponse, fetch.PartitionData, fetch.LeaderIdAndEpoch)),
    (messages.EpochEndOffset, (fetch.EpochEndOffset,)),
    (SnapshotId, (fetch.SnapshotId, fetch_snapshot.SnapshotId)),
    (
        messages.FetchSnapshotRequest,
        (fetch_snapshot.FetchSnapshotRequest, fetch_snapshot.PartitionSnapshot),
    ),
    (
        messages.FetchSnapshotResponse,
        (
            fetch_snapshot.FetchSnapshotResponse,
            fetch_snapshot.PartitionSnapshotResponse,
            fetch_snapshot.LeaderIdAndEpoch,
        ),
    ),
    (messages.ReplicaState, (describe_quorum.ReplicaState,)),
    (
        messages.DescribeQuorumResult,
        (describe_quorum.DescribeQuorumResponse, describe_quorum.PartitionDataResponse),
    ),
]


def _codec_fields(classes: tuple[type, ...]) -> set[str]:
    names: set[str] = set()
    for cls in classes:
        names.update(getattr(cls, "__slots__", ()))
        names.update(getattr(cls, "__annotations__", {}))
    return names


@pytest.mark.parametrize(("ours", "codec"), CASES, ids=[c[0].__name__ for c in CASES])
def test_fields_map_one_to_one_onto_the_codecs(ours: type, codec: tuple[type, ...]) -> None:
    available = _codec_fields(codec)
    for f in dataclasses.fields(ours):
        assert RENAMED.get(f.name, f.name) in available, f"{ours.__name__}.{f.name}"


def test_messages_are_frozen_values() -> None:
    request = messages.VoteRequest("c", 1, 2, 3, 1, 10, pre_vote=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.replica_epoch = 5  # type: ignore[misc]
    assert request == messages.VoteRequest("c", 1, 2, 3, 1, 10, True)
    assert messages.DescribeQuorumResult(0, 1, 2, 3).ok
