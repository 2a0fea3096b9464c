"""Raft messages survive the trip through Kafka's wire messages, both directions."""

from __future__ import annotations

from typing import Any

import pytest

from pydmq.controller import raft_wire
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages import API_SCHEMAS
from pydmq.protocol.primitives import Reader, Writer
from pydmq.protocol.records import CorruptRecordError
from pydmq.raft import messages as rm
from pydmq.raft.log import Entry, SnapshotId


def _through_codec_request(api_key: int, wire: Any) -> Any:
    version = raft_wire.API_VERSIONS[api_key]
    w = Writer()
    API_SCHEMAS[api_key].encode_request(w, wire, version)
    return API_SCHEMAS[api_key].decode_request(Reader(bytes(w.buf)), version)


def _through_codec_response(api_key: int, wire: Any) -> Any:
    version = raft_wire.API_VERSIONS[api_key]
    w = Writer()
    API_SCHEMAS[api_key].encode_response(w, wire, version)
    return API_SCHEMAS[api_key].decode_response(Reader(bytes(w.buf)), version)


def test_entries_round_trip_in_batches_per_epoch() -> None:
    entries = [
        Entry(10, 3, b"a"),
        Entry(11, 3, b""),
        Entry(12, 4, b"c" * 300),
        Entry(13, 4, b"d"),
        Entry(14, 6, b"e"),
    ]
    data = raft_wire.encode_entries(entries)
    assert raft_wire.decode_entries(data) == tuple(entries)
    assert raft_wire.decode_entries(b"") == ()
    assert raft_wire.decode_entries(None) == ()


def test_corrupt_records_are_refused() -> None:
    data = bytearray(raft_wire.encode_entries([Entry(0, 1, b"payload")]))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        raft_wire.decode_entries(bytes(data))


@pytest.mark.parametrize(
    ("request_", "from_wire"),
    [
        (
            rm.VoteRequest("c", 2, 5, 1, 4, 100, pre_vote=True),
            lambda wire, v: raft_wire.vote_from_wire(wire),
        ),
        (
            rm.BeginQuorumEpochRequest("c", 3, 1, 5),
            lambda wire, v: raft_wire.begin_from_wire(wire),
        ),
        (
            rm.EndQuorumEpochRequest("c", 1, 5, (3, 2)),
            raft_wire.end_from_wire,
        ),
        (
            rm.FetchRequest("c", 2, 5, 42, 4, max_wait_ms=500, max_bytes=4096, log_start_offset=7),
            raft_wire.fetch_from_wire,
        ),
        (
            rm.FetchSnapshotRequest("c", 2, 5, SnapshotId(40, 4), 1024, max_bytes=2048),
            lambda wire, v: raft_wire.fetch_snapshot_from_wire(wire),
        ),
    ],
)
def test_requests_round_trip(request_: rm.RaftRequest, from_wire: Any) -> None:
    api_key, wire = raft_wire.to_wire_request(request_)
    decoded = _through_codec_request(api_key, wire)
    assert from_wire(decoded, raft_wire.API_VERSIONS[api_key]) == request_


def test_fetch_request_v12_names_the_topic() -> None:
    _, wire = raft_wire.to_wire_request(rm.FetchRequest("c", 2, 5, 42, 4))
    w = Writer()
    API_SCHEMAS[1].encode_request(w, wire, 12)
    decoded = API_SCHEMAS[1].decode_request(Reader(bytes(w.buf)), 12)
    assert raft_wire.fetch_from_wire(decoded, 12).replica_id == 2


@pytest.mark.parametrize(
    ("request_", "response", "to_wire"),
    [
        (
            rm.VoteRequest("c", 2, 5, 1, 4, 100),
            rm.VoteResponse(0, 3, 5, True),
            raft_wire.vote_to_wire,
        ),
        (
            rm.VoteRequest("c", 2, 5, 1, 4, 100),
            rm.VoteResponse(int(ErrorCode.INCONSISTENT_CLUSTER_ID), -1, -1, False),
            raft_wire.vote_to_wire,
        ),
        (
            rm.BeginQuorumEpochRequest("c", 3, 1, 5),
            rm.BeginQuorumEpochResponse(int(ErrorCode.FENCED_LEADER_EPOCH), 1, 6),
            raft_wire.begin_to_wire,
        ),
        (
            rm.EndQuorumEpochRequest("c", 1, 5),
            rm.EndQuorumEpochResponse(0, -1, 5),
            raft_wire.end_to_wire,
        ),
        (
            rm.FetchRequest("c", 2, 5, 42, 4),
            rm.FetchResponse(0, 1, 5, 40, 0, records=(Entry(42, 5, b"x"), Entry(43, 5, b"y"))),
            raft_wire.fetch_to_wire,
        ),
        (
            rm.FetchRequest("c", 2, 5, 42, 4),
            rm.FetchResponse(0, 1, 5, 40, 0, diverging_epoch=rm.EpochEndOffset(4, 30)),
            raft_wire.fetch_to_wire,
        ),
        (
            rm.FetchRequest("c", 2, 5, 42, 4),
            rm.FetchResponse(0, 1, 5, 40, 35, snapshot_id=SnapshotId(35, 4)),
            raft_wire.fetch_to_wire,
        ),
        (
            rm.FetchSnapshotRequest("c", 2, 5, SnapshotId(40, 4), 0),
            rm.FetchSnapshotResponse(0, 1, 5, SnapshotId(40, 4), 10, 0, b"0123456789"),
            raft_wire.fetch_snapshot_to_wire,
        ),
    ],
)
def test_responses_round_trip(
    request_: rm.RaftRequest, response: rm.RaftResponse, to_wire: Any
) -> None:
    api_key, _ = raft_wire.to_wire_request(request_)
    decoded = _through_codec_response(api_key, to_wire(response))
    assert raft_wire.from_wire_response(request_, decoded) == response


def test_top_level_errors_stay_top_level() -> None:
    wire = raft_wire.vote_to_wire(
        rm.VoteResponse(int(ErrorCode.INCONSISTENT_VOTER_SET), -1, -1, False)
    )
    assert wire.error_code == ErrorCode.INCONSISTENT_VOTER_SET
    assert wire.topics[0].partitions[0].error_code == 0


def test_a_request_for_another_partition_is_refused() -> None:
    wire: Any = raft_wire.to_wire_request(rm.BeginQuorumEpochRequest("c", 3, 1, 5))[1]
    wire.topics[0].topic_name = "other"
    with pytest.raises(raft_wire.WireError):
        raft_wire.begin_from_wire(wire)
