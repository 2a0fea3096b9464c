"""Hostile clients against a live broker process (loopback, every case bounded in time).

Cases (issue 5): 1,000 connections at once; slow-loris clients trickling a valid request one
byte per 0.2 s while a well-behaved client is served; 1,000 pipelined requests on one
connection answered in order; a client that sends large Fetch requests and never reads its
responses (broker RSS stays bounded, others are served); requests just at and just over
``socket.request.max.bytes`` (set to 1 MiB here). Each case prints its figures (``-s``).

Single malformed inputs are covered by test_bad_input.py; this file is about load shapes.
"""

from __future__ import annotations

import contextlib
import resource
import selectors
import shutil
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydmq.protocol.messages.api_versions import ApiVersionsRequest
from pydmq.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from pydmq.protocol.messages.metadata import MetadataRequest
from pydmq.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pydmq.protocol.records import SimpleRecord, build_batch
from pydmq.testing.process import BrokerProcess
from support.broker_checks import assert_serves, create_topic, produce_raw, rss_kib, unique_topic
from support.raw_client import RawClient, decode_response_frame, encode_request_frame

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

MAX_REQUEST = 1024 * 1024
CONNECTIONS = 1000
# ApiVersions v3+ requires a client software name and version (else INVALID_REQUEST, as Kafka).
API_VERSIONS = ApiVersionsRequest(client_software_name="hostile", client_software_version="1.0")
API_VERSIONS_FRAME = encode_request_frame(18, 3, API_VERSIONS, 7, "hostile")


def _raise_nofile(wanted: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        new = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    # The child inherits this process's limits: raise them before it starts.
    _raise_nofile(4 * CONNECTIONS)
    root = Path(tempfile.mkdtemp(prefix="pydmq-hostile-"))
    proc = BrokerProcess(
        root / "data",
        overrides={
            "num.partitions": 1,
            "auto.create.topics.enable": "true",
            "socket.request.max.bytes": MAX_REQUEST,
        },
        log_path=root / "broker.log",
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def healthy(broker: BrokerProcess) -> Iterator[BrokerProcess]:
    assert_serves(broker.bootstrap)
    yield broker
    assert broker.process is not None and broker.process.poll() is None, (
        f"broker process died; log tail:\n{broker.log_tail()}"
    )
    assert_serves(broker.bootstrap)


def _api_versions_latency(bootstrap: str) -> float:
    with RawClient(bootstrap, timeout=10) as client:
        started = time.perf_counter()
        assert client.request(18, 3, API_VERSIONS).body.error_code == 0
        return time.perf_counter() - started


def _read_exact(sock: socket.socket, n: int, deadline: float) -> bytes:
    out = bytearray()
    while len(out) < n:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed by the broker")
        out += chunk
    return bytes(out)


# -- 1,000 connections at once ---------------------------------------------------------------


def test_thousand_connections_at_once(healthy: BrokerProcess) -> None:
    limit = _raise_nofile(4 * CONNECTIONS)
    if limit < CONNECTIONS + 64:
        pytest.skip(f"RLIMIT_NOFILE hard limit {limit} is below {CONNECTIONS + 64}")
    rss_before = rss_kib(healthy.pid)
    socks: list[socket.socket] = []
    started = time.monotonic()
    try:
        for _ in range(CONNECTIONS):
            sock = socket.create_connection((healthy.host, healthy.port), timeout=10)
            socks.append(sock)
        connected = time.monotonic() - started
        for sock in socks:
            sock.sendall(API_VERSIONS_FRAME)
        # Read every answer with one selector; bounded by a deadline.
        pending: dict[socket.socket, bytearray] = {s: bytearray() for s in socks}
        sel = selectors.DefaultSelector()
        for sock in socks:
            sock.setblocking(False)
            sel.register(sock, selectors.EVENT_READ)
        deadline = time.monotonic() + 30
        answered = 0
        while pending and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=1):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                data = sock.recv(65536)
                assert data, "broker closed one of the 1,000 connections"
                buf = pending[sock]
                buf += data
                if len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
                    response = decode_response_frame(bytes(buf[4:]), 18, 3)
                    assert response.correlation_id == 7 and response.body.error_code == 0
                    sel.unregister(sock)
                    del pending[sock]
                    answered += 1
        sel.close()
        elapsed = time.monotonic() - started
        rss_during = rss_kib(healthy.pid)
        latency = _api_versions_latency(healthy.bootstrap)  # one more, while all are open
    finally:
        for sock in socks:
            sock.close()
    assert answered == CONNECTIONS, f"only {answered} of {CONNECTIONS} answered"
    print(
        f"\n1,000 connections: connected in {connected:.2f} s, all answered in {elapsed:.2f} s; "
        f"broker RSS {rss_before / 1024:.0f} -> {rss_during / 1024:.0f} MiB; "
        f"a new client's ApiVersions with 1,000 open: {latency * 1000:.1f} ms"
    )
    # Was ~250 KiB per connection with a 256 KiB receive buffer each; now ~20 KiB.
    per_connection = (rss_during - rss_before) / CONNECTIONS
    assert per_connection < 64, f"{per_connection:.0f} KiB of broker RSS per idle connection"


# -- slow loris --------------------------------------------------------------------------------


def test_slow_loris_does_not_delay_others(healthy: BrokerProcess) -> None:
    """50 clients each trickle a Metadata request byte by byte (one byte per 0.2 s each)."""
    frame = encode_request_frame(3, 12, MetadataRequest(topics=None), 11, "loris")
    lorises = [
        socket.create_connection((healthy.host, healthy.port), timeout=10) for _ in range(50)
    ]
    stop = threading.Event()
    sent = [0]

    def trickle() -> None:
        for i in range(len(frame)):
            if stop.is_set():
                return
            for sock in lorises:
                sock.sendall(frame[i : i + 1])
            sent[0] = i + 1
            time.sleep(0.2)

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    latencies: list[float] = []
    try:
        while thread.is_alive() and len(latencies) < 200:
            latencies.append(_api_versions_latency(healthy.bootstrap))
            time.sleep(0.05)
        thread.join(len(frame) * 0.2 + 10)
        assert sent[0] == len(frame)
        deadline = time.monotonic() + 10
        for sock in lorises:  # every loris is answered once its last byte arrived
            (size,) = struct.unpack(">i", _read_exact(sock, 4, deadline))
            body = _read_exact(sock, size, deadline)
            assert decode_response_frame(body, 3, 12).correlation_id == 11
    finally:
        stop.set()
        for sock in lorises:
            sock.close()
    p50 = statistics.median(latencies) * 1000
    worst = max(latencies) * 1000
    print(
        f"\nslow loris ({len(frame)} bytes at 5 B/s, 50 clients): {len(latencies)} normal "
        f"requests meanwhile, latency p50 {p50:.1f} ms, max {worst:.1f} ms"
    )
    assert worst < 1000, f"a well-behaved request took {worst:.0f} ms during the slow loris"


# -- pipelining --------------------------------------------------------------------------------


def test_thousand_pipelined_requests_answered_in_order(healthy: BrokerProcess) -> None:
    topic = unique_topic("pipe")
    with RawClient(healthy.bootstrap) as admin:
        assert create_topic(admin, topic) == 0
    batch = build_batch([SimpleRecord(b"k", b"v" * 100)])
    produce = ProduceRequest(
        acks=1,
        timeout=10_000,
        topic_data=[
            TopicProduceData(
                name=topic, partition_data=[PartitionProduceData(index=0, records=batch)]
            )
        ],
    )
    kinds = [(18, 3, API_VERSIONS), (3, 12, MetadataRequest(topics=None)), (0, 9, produce)]
    frames = [
        (cid, *kinds[cid % 3][:2], encode_request_frame(*kinds[cid % 3], cid, "pipe"))
        for cid in range(1, 1001)
    ]
    stream = b"".join(f[3] for f in frames)
    with RawClient(healthy.bootstrap, timeout=30) as client:
        started = time.monotonic()
        sender = threading.Thread(target=client.send, args=(stream,), daemon=True)
        sender.start()  # the broker may stop reading while we have not read: send meanwhile
        offsets = []
        for cid, key, version, _ in frames:
            frame = client.read_frame(30)
            assert frame is not None, f"closed before the answer to request {cid}"
            response = decode_response_frame(frame, key, version)
            assert response.correlation_id == cid, f"answer {response.correlation_id} for {cid}"
            if key == 0:
                (p,) = response.body.responses[0].partition_responses
                assert p.error_code == 0
                offsets.append(p.base_offset)
        sender.join(10)
        elapsed = time.monotonic() - started
    assert offsets == list(range(len(offsets))), "produce offsets out of order"
    print(f"\n1,000 pipelined requests: all answered in order in {elapsed:.2f} s")


# -- a client that never reads -----------------------------------------------------------------


FLOOD_CAP = 200_000  # ~20 MB of Fetch requests: more than loopback socket buffers hold


def test_client_that_never_reads_large_fetches(healthy: BrokerProcess) -> None:
    topic = unique_topic("noread")
    with RawClient(healthy.bootstrap, timeout=30) as admin:
        assert create_topic(admin, topic) == 0
        value = bytes(range(256)) * 2000  # 512 KB, incompressible enough; not compressed
        for _ in range(16):  # 8 MiB in the log
            assert (
                produce_raw(admin, topic, build_batch([SimpleRecord(None, value)])).error_code == 0
            )
    fetch = FetchRequest(
        replica_id=-1,
        max_wait=0,
        min_bytes=1,
        max_bytes=64 * 1024 * 1024,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchTopic(
                topic=topic,
                partitions=[
                    FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=64 << 20)
                ],
            )
        ],
    )
    frame = encode_request_frame(1, 12, fetch, 1, "noread")
    rss_before = rss_kib(healthy.pid)
    hostile = socket.create_connection((healthy.host, healthy.port), timeout=10)
    hostile.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sent = [0]
    stop = threading.Event()

    def flood() -> None:
        hostile.settimeout(2.0)
        with contextlib.suppress(OSError):
            while not stop.is_set() and sent[0] < FLOOD_CAP:
                hostile.sendall(frame)  # blocks (times out) once the broker stops reading
                sent[0] += 1

    thread = threading.Thread(target=flood, daemon=True)
    thread.start()
    latencies = []
    peak = rss_before
    try:
        for _ in range(40):  # 8 s of well-behaved traffic while the flood stands
            latencies.append(_api_versions_latency(healthy.bootstrap))
            peak = max(peak, rss_kib(healthy.pid))
            time.sleep(0.2)
        with RawClient(healthy.bootstrap, timeout=10) as other:
            response = other.request(1, 12, fetch)
            (p,) = response.body.responses[0].partitions
            assert p.error_code == 0 and p.records is not None and len(p.records) > 8_000_000
        peak = max(peak, rss_kib(healthy.pid))
    finally:
        stop.set()
        hostile.close()
        thread.join(10)
    grown = peak - rss_before
    print(
        f"\nnever-reading client: {sent[0]} Fetch requests (8 MiB responses) sent before the "
        f"broker stopped reading; broker RSS {rss_before / 1024:.0f} MiB, peak +{grown / 1024:.1f} MiB; "
        f"others' ApiVersions p50 {statistics.median(latencies) * 1000:.1f} ms, "
        f"max {max(latencies) * 1000:.1f} ms"
    )
    assert sent[0] < FLOOD_CAP, "20 MB of requests never met back-pressure"
    assert grown < 100 * 1024, f"broker RSS grew by {grown} KiB"
    assert max(latencies) < 1.0


# -- socket.request.max.bytes ----------------------------------------------------------------


def _produce_frame_of_size(topic: str, size: int) -> bytes:
    """A Produce v9 frame whose size prefix is exactly ``size`` (the bytes after it)."""
    value_len = size - 200
    for _ in range(5):
        batch = build_batch([SimpleRecord(None, b"x" * value_len)])
        request = ProduceRequest(
            acks=1,
            timeout=10_000,
            topic_data=[
                TopicProduceData(
                    name=topic, partition_data=[PartitionProduceData(index=0, records=batch)]
                )
            ],
        )
        frame = encode_request_frame(0, 9, request, 5, "max")
        diff = size - (len(frame) - 4)
        if diff == 0:
            return frame
        value_len += diff
    raise AssertionError("could not hit the exact frame size")


@pytest.mark.parametrize(("delta", "served"), [(-1, True), (0, True), (1, False)])
def test_request_size_limit(healthy: BrokerProcess, delta: int, served: bool) -> None:
    topic = unique_topic("maxreq")
    with RawClient(healthy.bootstrap) as admin:
        assert create_topic(admin, topic, configs={"max.message.bytes": str(2 * MAX_REQUEST)}) == 0
    frame = _produce_frame_of_size(topic, MAX_REQUEST + delta)
    assert struct.unpack_from(">i", frame)[0] == MAX_REQUEST + delta
    with RawClient(healthy.bootstrap, timeout=15) as client:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            client.send(frame)
        if served:
            answer = client.read_frame()
            assert answer is not None, "a request within socket.request.max.bytes was refused"
            response = decode_response_frame(answer, 0, 9)
            assert response.correlation_id == 5
            assert response.body.responses[0].partition_responses[0].error_code == 0
        else:
            assert client.wait_closed(5), "a request over socket.request.max.bytes was served"
