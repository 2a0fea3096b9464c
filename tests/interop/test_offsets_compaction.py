"""``__consumer_offsets`` stays bounded under many commits and loads back the last ones
(issue 17; the small version of ``benchmarks/offsets_compaction.py``).

A broker process with one ``__consumer_offsets`` partition of 1 MiB segments (the smallest
``offsets.topic.segment.bytes`` Kafka 4 accepts) and a cleaner backing off 100 ms receives
20,000 OffsetCommit requests of one group (4 partitions each, ~7 MB of records) over one raw
pipelined connection. Without compaction the partition would hold every commit; the cleaner
keeps it to a few segments. After a restart, OffsetFetch answers the last committed offsets.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages import offset_commit as oc
from pydmq.protocol.messages import offset_fetch as of
from support.broker_checks import create_topic
from support.raw_client import RawClient, decode_response_frame, encode_request_frame

from .conftest import BrokerProcess, start_broker

pytestmark = [pytest.mark.interop, pytest.mark.timeout(240)]

GROUP = "offsets-compaction"
TOPIC = "committed"
PARTITIONS = 4
COMMITS = 20_000
WINDOW = 64
SEGMENT_BYTES = 1 << 20
# What the commits write (~350 bytes per request's batch): ~7 MB uncompacted.
UNCOMPACTED_BYTES = 6 * SEGMENT_BYTES
BOUND_BYTES = 3 * SEGMENT_BYTES  # the active segment and what the cleaner leaves


@pytest.fixture
def broker() -> Iterator[BrokerProcess]:
    root = Path(tempfile.mkdtemp(prefix="pydmq-offsets-compaction-"))
    b = start_broker(
        root,
        {
            "offsets.topic.num.partitions": "1",
            "offsets.topic.segment.bytes": str(SEGMENT_BYTES),
            "log.cleaner.backoff.ms": "100",
        },
    )
    if not isinstance(b, BrokerProcess):
        pytest.skip("needs a pydmq broker process (its data directory is measured)")
    try:
        yield b
    finally:
        b.stop()
        shutil.rmtree(root, ignore_errors=True)


def partition_bytes(b: BrokerProcess) -> int:
    total = 0
    for path in (Path(b.data_dir) / "__consumer_offsets-0").glob("*.log"):
        with contextlib.suppress(FileNotFoundError):  # a swap removed it meanwhile
            total += path.stat().st_size
    return total


def commit_frame(client: RawClient, offset: int) -> bytes:
    request = oc.OffsetCommitRequest(
        group_id=GROUP,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[
            oc.OffsetCommitRequestTopic(
                name=TOPIC,
                partitions=[
                    oc.OffsetCommitRequestPartition(partition_index=p, committed_offset=offset)
                    for p in range(PARTITIONS)
                ],
            )
        ],
    )
    return encode_request_frame(oc.API_KEY, 8, request, client.next_correlation_id())


def commit_all(client: RawClient) -> None:
    """COMMITS commits of offsets 0..COMMITS-1, WINDOW requests in flight."""
    for start in range(0, COMMITS, WINDOW):
        offsets = range(start, min(start + WINDOW, COMMITS))
        client.send(b"".join(commit_frame(client, offset) for offset in offsets))
        for _ in offsets:
            frame = client.read_frame()
            assert frame is not None, "the broker closed the connection"
            body = decode_response_frame(frame, oc.API_KEY, 8).body
            codes = {p.error_code for t in body.topics for p in t.partitions}
            assert codes == {ErrorCode.NONE}, codes


def fetch_offsets(client: RawClient) -> dict[int, int] | None:
    request = of.OffsetFetchRequest(
        group_id=GROUP,
        topics=[of.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=list(range(PARTITIONS)))],
    )
    body = client.request(of.API_KEY, 7, request).body
    if body.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
        return None
    assert body.error_code == ErrorCode.NONE
    return {p.partition_index: p.committed_offset for t in body.topics for p in t.partitions}


def test_many_commits_stay_bounded_and_read_back_after_a_restart(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap, timeout=30) as client:
        assert create_topic(client, TOPIC, PARTITIONS) == ErrorCode.NONE
        commit_all(client)
    deadline = time.monotonic() + 60
    while partition_bytes(broker) > BOUND_BYTES and time.monotonic() < deadline:
        time.sleep(0.2)  # the cleaner's next pass (100 ms backoff)
    size = partition_bytes(broker)
    print(f"__consumer_offsets-0 after {COMMITS} commits: {size} bytes")
    assert size <= BOUND_BYTES, f"{size} bytes: the cleaner did not compact the partition"
    assert "cleaned __consumer_offsets-0" in broker.log_tail(1 << 20)
    broker.restart()
    expected = {p: COMMITS - 1 for p in range(PARTITIONS)}
    with RawClient(broker.bootstrap, timeout=30) as client:
        deadline = time.monotonic() + 30
        while (answer := fetch_offsets(client)) is None:
            assert time.monotonic() < deadline, "the partition did not load within 30 s"
            time.sleep(0.05)
    assert answer == expected
