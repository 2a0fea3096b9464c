"""Mapping between the Raft core's message values and the generated Kafka wire messages.

The core (:mod:`pydmq.raft`) speaks of one partition, ``__cluster_metadata``-0, with plain
frozen values; on the wire these are Kafka's Vote (52), BeginQuorumEpoch (53),
EndQuorumEpoch (54), Fetch (1), FetchSnapshot (59) and DescribeQuorum (55) messages with one
topic and one partition. Both directions of both sides live here (the driver encodes what the
core sends and decodes what comes back; the controller-listener handlers decode what peers
send and encode what the core answers), so the mapping can be tested without sockets.

Error codes: INCONSISTENT_CLUSTER_ID and INCONSISTENT_VOTER_SET go in the top-level
``error_code`` (as Kafka puts them); every other code in the partition-level one. Decoding
takes a non-zero top-level code first.

Records of the metadata log in a Fetch response (``records``): Kafka RecordBatch v2, one
record per log entry, value = the entry's payload (no key, no headers). Consecutive entries of
the same epoch share a batch whose ``base_offset`` is the first entry's offset and whose
``partition_leader_epoch`` is that epoch; a record's offset (base + delta) is its entry's
offset. Readers accept any batching (one batch per entry included), and check CRCs.

The metadata topic is named ``__cluster_metadata`` and, where a topic id is needed (Fetch
v13+), has Kafka's fixed id ``00000000-0000-0000-0000-000000000001``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Final, TypeVar

from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages import begin_quorum_epoch as bqe
from pydmq.protocol.messages import describe_quorum as dq
from pydmq.protocol.messages import end_quorum_epoch as eqe
from pydmq.protocol.messages import fetch as fw
from pydmq.protocol.messages import fetch_snapshot as fsw
from pydmq.protocol.messages import vote as vw
from pydmq.protocol.records import (
    SimpleRecord,
    build_batch,
    decode_records,
    iter_batch_headers,
    validate_crc,
)
from pydmq.raft import messages as rm
from pydmq.raft.log import Entry, SnapshotId

__all__ = [
    "API_VERSIONS",
    "METADATA_TOPIC",
    "METADATA_TOPIC_ID",
    "WireError",
    "begin_from_wire",
    "begin_to_wire",
    "decode_entries",
    "describe_quorum_to_wire",
    "encode_entries",
    "end_from_wire",
    "end_to_wire",
    "fetch_from_wire",
    "fetch_snapshot_from_wire",
    "fetch_snapshot_to_wire",
    "fetch_to_wire",
    "from_wire_response",
    "to_wire_request",
    "vote_from_wire",
    "vote_to_wire",
]

METADATA_TOPIC: Final = rm.CLUSTER_METADATA_TOPIC
METADATA_PARTITION: Final = rm.CLUSTER_METADATA_PARTITION
METADATA_TOPIC_ID: Final = uuid.UUID(int=1)  # Kafka's Uuid.METADATA_TOPIC_ID

VOTE: Final = 52
BEGIN_QUORUM_EPOCH: Final = 53
END_QUORUM_EPOCH: Final = 54
FETCH: Final = 1
FETCH_SNAPSHOT: Final = 59
DESCRIBE_QUORUM: Final = 55

# Versions the driver sends (every voter runs pydmq; no negotiation).
API_VERSIONS: Final = {
    VOTE: 2,
    BEGIN_QUORUM_EPOCH: 1,
    END_QUORUM_EPOCH: 1,
    FETCH: 17,
    FETCH_SNAPSHOT: 1,
    DESCRIBE_QUORUM: 2,
}

T = TypeVar("T")

_TOP_LEVEL_ERRORS: Final = frozenset(
    {int(ErrorCode.INCONSISTENT_CLUSTER_ID), int(ErrorCode.INCONSISTENT_VOTER_SET)}
)


class WireError(ValueError):
    """A raft message on the wire that does not name ``__cluster_metadata``-0 as expected."""


def _metadata_topics(topic_type: Callable[..., T], partition: object) -> list[T]:
    """The ``topics`` list of a Vote, BeginQuorumEpoch, EndQuorumEpoch or DescribeQuorum
    message: one ``topic_type`` named ``__cluster_metadata`` holding the one ``partition``."""
    return [topic_type(topic_name=METADATA_TOPIC, partitions=[partition])]


def _split_error(code: int) -> tuple[int, int]:
    """(top-level, partition-level) error codes for a core response's one ``error_code``."""
    return (code, 0) if code in _TOP_LEVEL_ERRORS else (0, code)


# -- records framing -----------------------------------------------------------------------------


def encode_entries(entries: Sequence[Entry]) -> bytes:
    """Entries as consecutive RecordBatch v2 batches, one batch per run of equal epochs."""
    out = bytearray()
    run: list[Entry] = []
    for entry in entries:
        if run and (entry.epoch != run[0].epoch or entry.offset != run[-1].offset + 1):
            out += _batch(run)
            run = []
        run.append(entry)
    if run:
        out += _batch(run)
    return bytes(out)


def _batch(run: list[Entry]) -> bytes:
    return build_batch(
        [SimpleRecord(None, e.payload, (), 0) for e in run],
        base_offset=run[0].offset,
        partition_leader_epoch=run[0].epoch,
    )


def decode_entries(data: bytes | bytearray | memoryview | None) -> tuple[Entry, ...]:
    """Entries of :func:`encode_entries` bytes; raises CorruptRecordError on bad bytes."""
    if not data:
        return ()
    out: list[Entry] = []
    for header in iter_batch_headers(data):
        validate_crc(data, header)
        for record in decode_records(data, header):
            out.append(
                Entry(record.offset, header.partition_leader_epoch, bytes(record.value or b""))
            )
    return tuple(out)


# -- client side: core request -> wire request, wire response -> core response -------------------


def to_wire_request(request: rm.RaftRequest) -> tuple[int, object]:
    """``(api_key, wire request)`` for a request the core wants sent."""
    match request:
        case rm.VoteRequest():
            return VOTE, vw.VoteRequest(
                cluster_id=request.cluster_id,
                voter_id=request.voter_id,
                topics=_metadata_topics(
                    vw.TopicData,
                    vw.PartitionData(
                        partition_index=METADATA_PARTITION,
                        replica_epoch=request.replica_epoch,
                        replica_id=request.replica_id,
                        last_offset_epoch=request.last_offset_epoch,
                        last_offset=request.last_offset,
                        pre_vote=request.pre_vote,
                    ),
                ),
            )
        case rm.BeginQuorumEpochRequest():
            return BEGIN_QUORUM_EPOCH, bqe.BeginQuorumEpochRequest(
                cluster_id=request.cluster_id,
                voter_id=request.voter_id,
                topics=_metadata_topics(
                    bqe.TopicData,
                    bqe.PartitionData(
                        partition_index=METADATA_PARTITION,
                        leader_id=request.leader_id,
                        leader_epoch=request.leader_epoch,
                    ),
                ),
            )
        case rm.EndQuorumEpochRequest():
            return END_QUORUM_EPOCH, eqe.EndQuorumEpochRequest(
                cluster_id=request.cluster_id,
                topics=_metadata_topics(
                    eqe.TopicData,
                    eqe.PartitionData(
                        partition_index=METADATA_PARTITION,
                        leader_id=request.leader_id,
                        leader_epoch=request.leader_epoch,
                        preferred_successors=list(request.preferred_successors),
                        preferred_candidates=[
                            eqe.ReplicaInfo(candidate_id=c) for c in request.preferred_successors
                        ],
                    ),
                ),
            )
        case rm.FetchRequest():
            return FETCH, fw.FetchRequest(
                replica_id=request.replica_id,
                replica_state=fw.ReplicaState(replica_id=request.replica_id, replica_epoch=-1),
                max_wait=request.max_wait_ms,
                min_bytes=1,
                max_bytes=request.max_bytes,
                cluster_id=request.cluster_id,
                topics=[
                    fw.FetchTopic(
                        topic=METADATA_TOPIC,
                        topic_id=METADATA_TOPIC_ID,
                        partitions=[
                            fw.FetchPartition(
                                partition=METADATA_PARTITION,
                                current_leader_epoch=request.current_leader_epoch,
                                fetch_offset=request.fetch_offset,
                                last_fetched_epoch=request.last_fetched_epoch,
                                log_start_offset=request.log_start_offset,
                                partition_max_bytes=request.max_bytes,
                            )
                        ],
                    )
                ],
            )
        case rm.FetchSnapshotRequest():
            return FETCH_SNAPSHOT, fsw.FetchSnapshotRequest(
                cluster_id=request.cluster_id,
                replica_id=request.replica_id,
                max_bytes=request.max_bytes,
                topics=[
                    fsw.TopicSnapshot(
                        name=METADATA_TOPIC,
                        partitions=[
                            fsw.PartitionSnapshot(
                                partition=METADATA_PARTITION,
                                current_leader_epoch=request.current_leader_epoch,
                                snapshot_id=fsw.SnapshotId(
                                    end_offset=request.snapshot_id.end_offset,
                                    epoch=request.snapshot_id.epoch,
                                ),
                                position=request.position,
                            )
                        ],
                    )
                ],
            )
    raise TypeError(f"not a raft request: {request!r}")


def from_wire_response(request: rm.RaftRequest, response: object) -> rm.RaftResponse:
    """The core's value for ``response`` to ``request`` (raises WireError if malformed)."""
    match request:
        case rm.VoteRequest():
            assert isinstance(response, vw.VoteResponse)
            part = _first_partition(response.topics)
            if response.error_code or part is None:
                return rm.VoteResponse(
                    response.error_code or ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1, False
                )
            assert isinstance(part, vw.PartitionDataResponse)
            return rm.VoteResponse(
                part.error_code, part.leader_id, part.leader_epoch, part.vote_granted
            )
        case rm.BeginQuorumEpochRequest():
            assert isinstance(response, bqe.BeginQuorumEpochResponse)
            part = _first_partition(response.topics)
            if response.error_code or part is None:
                return rm.BeginQuorumEpochResponse(
                    response.error_code or ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1
                )
            assert isinstance(part, bqe.PartitionDataResponse)
            return rm.BeginQuorumEpochResponse(part.error_code, part.leader_id, part.leader_epoch)
        case rm.EndQuorumEpochRequest():
            assert isinstance(response, eqe.EndQuorumEpochResponse)
            part = _first_partition(response.topics)
            if response.error_code or part is None:
                return rm.EndQuorumEpochResponse(
                    response.error_code or ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1
                )
            assert isinstance(part, eqe.PartitionDataResponse)
            return rm.EndQuorumEpochResponse(part.error_code, part.leader_id, part.leader_epoch)
        case rm.FetchRequest():
            assert isinstance(response, fw.FetchResponse)
            fpart = _first_partition(response.responses)
            if response.error_code or fpart is None:
                return rm.FetchResponse(
                    response.error_code or ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1
                )
            assert isinstance(fpart, fw.PartitionData)
            diverging = None
            if fpart.diverging_epoch.epoch >= 0 and fpart.diverging_epoch.end_offset >= 0:
                diverging = rm.EpochEndOffset(
                    fpart.diverging_epoch.epoch, fpart.diverging_epoch.end_offset
                )
            snapshot = None
            if fpart.snapshot_id.end_offset >= 0 and fpart.snapshot_id.epoch >= 0:
                snapshot = SnapshotId(fpart.snapshot_id.end_offset, fpart.snapshot_id.epoch)
            return rm.FetchResponse(
                error_code=fpart.error_code,
                leader_id=fpart.current_leader.leader_id,
                leader_epoch=fpart.current_leader.leader_epoch,
                high_watermark=fpart.high_watermark,
                log_start_offset=fpart.log_start_offset,
                diverging_epoch=diverging,
                snapshot_id=snapshot,
                records=decode_entries(fpart.records),
            )
        case rm.FetchSnapshotRequest():
            assert isinstance(response, fsw.FetchSnapshotResponse)
            spart = _first_partition(response.topics)
            if response.error_code or spart is None:
                return rm.FetchSnapshotResponse(
                    response.error_code or ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1
                )
            assert isinstance(spart, fsw.PartitionSnapshotResponse)
            return rm.FetchSnapshotResponse(
                error_code=spart.error_code,
                leader_id=spart.current_leader.leader_id,
                leader_epoch=spart.current_leader.leader_epoch,
                snapshot_id=SnapshotId(spart.snapshot_id.end_offset, spart.snapshot_id.epoch),
                size=spart.size,
                position=spart.position,
                unaligned_records=bytes(spart.unaligned_records or b""),
            )
    raise TypeError(f"not a raft request: {request!r}")


def _first_partition(topics: Sequence[object]) -> object | None:
    """The first partition of a response's topics (the one a raft response carries), if any."""
    for topic in topics:
        partitions: Sequence[object] = getattr(topic, "partitions", ())
        if partitions:
            return partitions[0]
    return None


# -- server side: wire request -> core request, core response -> wire response -------------------


def _partition_of(topics: Sequence[object], version_has_ids: bool = False) -> object:
    """The one ``__cluster_metadata``-0 partition a raft request must carry."""
    for topic in topics:
        name = (
            getattr(topic, "topic_name", None)
            or getattr(topic, "topic", None)
            or getattr(topic, "name", None)
        )
        topic_id = getattr(topic, "topic_id", None)
        if name == METADATA_TOPIC or (version_has_ids and topic_id == METADATA_TOPIC_ID):
            for part in getattr(topic, "partitions", ()):
                index = getattr(part, "partition_index", getattr(part, "partition", None))
                if index == METADATA_PARTITION:
                    return part
    raise WireError(f"request does not name {METADATA_TOPIC}-{METADATA_PARTITION}")


def vote_from_wire(request: vw.VoteRequest) -> rm.VoteRequest:
    part = _partition_of(request.topics)
    assert isinstance(part, vw.PartitionData)
    return rm.VoteRequest(
        cluster_id=request.cluster_id,
        voter_id=request.voter_id,
        replica_epoch=part.replica_epoch,
        replica_id=part.replica_id,
        last_offset_epoch=part.last_offset_epoch,
        last_offset=part.last_offset,
        pre_vote=part.pre_vote,
    )


def vote_to_wire(response: rm.VoteResponse) -> vw.VoteResponse:
    top, partition = _split_error(response.error_code)
    return vw.VoteResponse(
        error_code=top,
        topics=_metadata_topics(
            vw.TopicDataResponse,
            vw.PartitionDataResponse(
                partition_index=METADATA_PARTITION,
                error_code=partition,
                leader_id=response.leader_id,
                leader_epoch=response.leader_epoch,
                vote_granted=response.vote_granted,
            ),
        ),
    )


def begin_from_wire(request: bqe.BeginQuorumEpochRequest) -> rm.BeginQuorumEpochRequest:
    part = _partition_of(request.topics)
    assert isinstance(part, bqe.PartitionData)
    return rm.BeginQuorumEpochRequest(
        cluster_id=request.cluster_id,
        voter_id=request.voter_id,
        leader_id=part.leader_id,
        leader_epoch=part.leader_epoch,
    )


def begin_to_wire(response: rm.BeginQuorumEpochResponse) -> bqe.BeginQuorumEpochResponse:
    top, partition = _split_error(response.error_code)
    return bqe.BeginQuorumEpochResponse(
        error_code=top,
        topics=_metadata_topics(
            bqe.TopicDataResponse,
            bqe.PartitionDataResponse(
                partition_index=METADATA_PARTITION,
                error_code=partition,
                leader_id=response.leader_id,
                leader_epoch=response.leader_epoch,
            ),
        ),
    )


def end_from_wire(request: eqe.EndQuorumEpochRequest, version: int) -> rm.EndQuorumEpochRequest:
    part = _partition_of(request.topics)
    assert isinstance(part, eqe.PartitionData)
    if version >= 1:
        successors = tuple(c.candidate_id for c in part.preferred_candidates)
    else:
        successors = tuple(part.preferred_successors)
    return rm.EndQuorumEpochRequest(
        cluster_id=request.cluster_id,
        leader_id=part.leader_id,
        leader_epoch=part.leader_epoch,
        preferred_successors=successors,
    )


def end_to_wire(response: rm.EndQuorumEpochResponse) -> eqe.EndQuorumEpochResponse:
    top, partition = _split_error(response.error_code)
    return eqe.EndQuorumEpochResponse(
        error_code=top,
        topics=_metadata_topics(
            eqe.TopicDataResponse,
            eqe.PartitionDataResponse(
                partition_index=METADATA_PARTITION,
                error_code=partition,
                leader_id=response.leader_id,
                leader_epoch=response.leader_epoch,
            ),
        ),
    )


def fetch_from_wire(request: fw.FetchRequest, version: int) -> rm.FetchRequest:
    part = _partition_of(request.topics, version_has_ids=version >= 13)
    assert isinstance(part, fw.FetchPartition)
    replica_id = request.replica_state.replica_id if version >= 15 else request.replica_id
    return rm.FetchRequest(
        cluster_id=request.cluster_id,
        replica_id=replica_id,
        current_leader_epoch=part.current_leader_epoch,
        fetch_offset=part.fetch_offset,
        last_fetched_epoch=part.last_fetched_epoch,
        max_wait_ms=max(0, request.max_wait),
        max_bytes=max(1, min(request.max_bytes, part.partition_max_bytes)),
        log_start_offset=part.log_start_offset,
    )


def fetch_to_wire(response: rm.FetchResponse) -> fw.FetchResponse:
    top, partition = _split_error(response.error_code)
    data = fw.PartitionData(
        partition_index=METADATA_PARTITION,
        error_code=partition,
        high_watermark=response.high_watermark,
        last_stable_offset=response.high_watermark,
        log_start_offset=response.log_start_offset,
        records=encode_entries(response.records),
        current_leader=fw.LeaderIdAndEpoch(
            leader_id=response.leader_id, leader_epoch=response.leader_epoch
        ),
    )
    if response.diverging_epoch is not None:
        data.diverging_epoch = fw.EpochEndOffset(
            epoch=response.diverging_epoch.epoch, end_offset=response.diverging_epoch.end_offset
        )
    if response.snapshot_id is not None:
        data.snapshot_id = fw.SnapshotId(
            end_offset=response.snapshot_id.end_offset, epoch=response.snapshot_id.epoch
        )
    return fw.FetchResponse(
        error_code=top,
        responses=[
            fw.FetchableTopicResponse(
                topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID, partitions=[data]
            )
        ],
    )


def fetch_snapshot_from_wire(request: fsw.FetchSnapshotRequest) -> rm.FetchSnapshotRequest:
    part = _partition_of(request.topics)
    assert isinstance(part, fsw.PartitionSnapshot)
    return rm.FetchSnapshotRequest(
        cluster_id=request.cluster_id,
        replica_id=request.replica_id,
        current_leader_epoch=part.current_leader_epoch,
        snapshot_id=SnapshotId(part.snapshot_id.end_offset, part.snapshot_id.epoch),
        position=part.position,
        max_bytes=max(1, request.max_bytes),
    )


def fetch_snapshot_to_wire(response: rm.FetchSnapshotResponse) -> fsw.FetchSnapshotResponse:
    top, partition = _split_error(response.error_code)
    snapshot_id = response.snapshot_id or SnapshotId(-1, -1)
    return fsw.FetchSnapshotResponse(
        error_code=top,
        topics=[
            fsw.TopicSnapshotResponse(
                name=METADATA_TOPIC,
                partitions=[
                    fsw.PartitionSnapshotResponse(
                        index=METADATA_PARTITION,
                        error_code=partition,
                        snapshot_id=fsw.SnapshotId(
                            end_offset=snapshot_id.end_offset, epoch=snapshot_id.epoch
                        ),
                        size=response.size,
                        position=response.position,
                        unaligned_records=response.unaligned_records,
                        current_leader=fsw.LeaderIdAndEpoch(
                            leader_id=response.leader_id, leader_epoch=response.leader_epoch
                        ),
                    )
                ],
            )
        ],
    )


def describe_quorum_to_wire(result: rm.DescribeQuorumResult) -> dq.DescribeQuorumResponse:
    def state(s: rm.ReplicaState) -> dq.ReplicaState:
        return dq.ReplicaState(
            replica_id=s.replica_id,
            log_end_offset=s.log_end_offset,
            last_fetch_timestamp=s.last_fetch_timestamp,
            last_caught_up_timestamp=s.last_caught_up_timestamp,
        )

    return dq.DescribeQuorumResponse(
        error_code=0,
        topics=_metadata_topics(
            dq.TopicDataResponse,
            dq.PartitionDataResponse(
                partition_index=METADATA_PARTITION,
                error_code=result.error_code,
                leader_id=result.leader_id,
                leader_epoch=result.leader_epoch,
                high_watermark=result.high_watermark,
                current_voters=[state(s) for s in result.current_voters],
                observers=[state(s) for s in result.observers],
            ),
        ),
    )
