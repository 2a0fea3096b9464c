"""No single request wedges a node: a broker process under ``ulimit -n 1024``.

Measured on af52f34: one open descriptor per segment file made CreateTopics fail with EMFILE
at about 4,000 partitions (here, under 1,024 descriptors, within the first 1,000-partition
topic), left the topic half-created and the broker unable to restart; 10,000 partitions held
the event loop ~2.5 s; 1,000 auto-created names per Metadata request held it 9-65 s.

The broker child runs under ``prlimit --nofile=1024``. The test creates 14,000 partitions
(four topics of 1,000 and one of 10,000, the most one request may create) while a second
connection keeps sending ApiVersions, auto-creates 1,000 topics with one Metadata request,
produces to 600 partitions (more active segments than the descriptor budget of 512), is
refused beyond ``pydmq.max.broker.partitions`` and beyond the per-request limit without
leaving anything behind, restarts and reads everything back, and restarts again after a
SIGKILL in the middle of creating another 10,000 partitions. Round-trip figures are printed;
the only timing assertion is a wedge bound.
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.api_versions import ApiVersionsRequest
from pydmq.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from pydmq.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from pydmq.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from pydmq.protocol.records import SimpleRecord, build_batch, iter_records
from pydmq.testing.process import BrokerProcess
from support.broker_checks import LATEST, list_offset, produce_raw
from support.raw_client import RawClient

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

NOFILE = 1024
NODE_LIMIT = 16_000
SMALL_TOPICS = 4
SMALL = 1_000
WIDE = 10_000
AUTO_NAMES = 1_000
SAMPLE = 600
WEDGE_S = 5.0  # a stalled loop, not a slow one: generous so that it cannot flake


class LimitedBroker(BrokerProcess):
    """``python -m pydmq serve`` under ``prlimit --nofile=N:N`` (this process keeps its own)."""

    def __init__(self, data_dir: Path, nofile: int, **kwargs: object) -> None:
        super().__init__(data_dir, **kwargs)  # type: ignore[arg-type]
        self.nofile = nofile

    def command(self) -> list[str]:
        return ["prlimit", f"--nofile={self.nofile}:{self.nofile}", "--", *super().command()]


class Pinger(threading.Thread):
    """A second client: ApiVersions round trips back to back on its own connection."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(name="pinger", daemon=True)
        self.bootstrap = bootstrap
        self.samples: list[tuple[float, float]] = []  # (sent at, round trip s)
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with RawClient(self.bootstrap, timeout=30) as client:
                while not self.stopping.is_set():
                    sent = time.monotonic()
                    client.request(18, 3, ApiVersionsRequest(client_software_name="ping"))
                    self.samples.append((sent, time.monotonic() - sent))
        except BaseException as exc:
            self.error = exc

    def window(self, start: float, end: float) -> list[float]:
        """Round trips that overlapped [start, end]."""
        return [rtt for sent, rtt in list(self.samples) if sent <= end and sent + rtt >= start]

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)
        assert self.error is None, f"the pinging connection failed: {self.error!r}"


def report(label: str, rtts: list[float], elapsed: float) -> float:
    """Print p50/p99/max of a window; returns the max."""
    assert rtts, f"{label}: no round trip overlapped the window"
    ordered = sorted(rtts)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    print(
        f"\n{label}: {elapsed:.2f} s; ApiVersions of another connection: {len(ordered)} round "
        f"trips, p50 {statistics.median(ordered) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
        f"max {ordered[-1] * 1000:.1f} ms"
    )
    return ordered[-1]


def create(client: RawClient, name: str, partitions: int) -> tuple[int, str | None]:
    request = CreateTopicsRequest(
        topics=[CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)],
        timeout=60_000,
    )
    (result,) = client.request(19, 7, request, timeout=120).body.topics
    return int(result.error_code), result.error_message


def metadata(client: RawClient, names: list[str] | None, auto: bool) -> dict[str, tuple[int, int]]:
    """name -> (error code, partition count)."""
    topics = None if names is None else [MetadataRequestTopic(name=n) for n in names]
    body = client.request(
        3, 12, MetadataRequest(topics=topics, allow_auto_topic_creation=auto), timeout=120
    ).body
    return {t.name: (int(t.error_code), len(t.partitions)) for t in body.topics}


def fetch_values(client: RawClient, topic: str, partition: int) -> list[bytes | None]:
    request = FetchRequest(
        max_wait=0,
        topics=[
            FetchTopic(
                topic=topic,
                partitions=[FetchPartition(partition=partition, partition_max_bytes=1 << 20)],
            )
        ],
    )
    (t,) = client.request(1, 12, request).body.responses
    (p,) = t.partitions
    assert p.error_code == 0, f"fetch {topic}-{partition}: error {p.error_code}"
    return [r.value for r in iter_records(bytes(p.records or b""))]


def partition_dirs(data_dir: Path, topic: str) -> list[str]:
    return [n for n in os.listdir(data_dir) if n.rsplit("-", 1)[0] == topic]


@pytest.fixture
def broker() -> Iterator[LimitedBroker]:
    root = Path(tempfile.mkdtemp(prefix="pydmq-admission-"))
    proc = LimitedBroker(
        root / "data",
        NOFILE,
        overrides={
            "num.partitions": 1,
            "auto.create.topics.enable": "true",
            "pydmq.max.broker.partitions": NODE_LIMIT,
            "offsets.topic.num.partitions": 1,
        },
        log_path=root / "broker.log",
    )
    (root / "data").mkdir()
    proc.start(timeout=60)
    try:
        yield proc
    finally:
        proc.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_thousands_of_partitions_under_a_low_descriptor_limit(broker: LimitedBroker) -> None:
    pinger = Pinger(broker.bootstrap)
    pinger.start()
    worst = 0.0
    with RawClient(broker.bootstrap, timeout=60) as client:
        for i in range(SMALL_TOPICS):
            assert create(client, f"small-{i}", SMALL) == (ErrorCode.NONE, None)
        start = time.monotonic()
        assert create(client, "wide", WIDE) == (ErrorCode.NONE, None)
        end = time.monotonic()
        worst = max(
            worst,
            report("CreateTopics of 10,000 partitions", pinger.window(start, end), end - start),
        )

        names = [f"auto-{i}" for i in range(AUTO_NAMES)]
        start = time.monotonic()
        answers = metadata(client, names, auto=True)
        end = time.monotonic()
        worst = max(
            worst,
            report("Metadata auto-creating 1,000 topics", pinger.window(start, end), end - start),
        )
        # As Kafka 4.4: the request that creates a topic answers it as being created; the
        # next one finds it.
        assert {answers[n] for n in names} == {(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0)}
        answers = metadata(client, names, auto=False)
        assert {answers[n] for n in names} == {(ErrorCode.NONE, 1)}

        # Refused beyond the node's limit and beyond the request limit, leaving nothing.
        code, message = create(client, "over", 1_500)
        assert code == ErrorCode.POLICY_VIOLATION and message is not None
        assert f"limit of {NODE_LIMIT} (pydmq.max.broker.partitions)" in message
        code, message = create(client, "huge", 1_000_000)
        assert code == ErrorCode.POLICY_VIOLATION and message is not None
        assert "1000000 partitions exceed the limit of 10000 partitions per request" in message
        for name in ("over", "huge"):
            assert (
                metadata(client, [name], auto=False)[name][0]
                == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
            assert partition_dirs(broker.data_dir, name) == []

        # More partitions written than descriptors in the budget: segments are closed (and
        # synced) by the LRU and reopened on the next use.
        sample = [(f"small-{i % SMALL_TOPICS}", i * 7 % SMALL) for i in range(SAMPLE // 2)]
        sample += [("wide", i * 13 % WIDE) for i in range(SAMPLE // 2)]
        for topic, partition in sample:
            value = f"{topic}/{partition}".encode()
            batch = build_batch([SimpleRecord(None, value)])
            result = produce_raw(client, topic, batch, partition=partition)
            assert result.error_code == 0, f"produce {topic}-{partition}: {result.error_code}"
    pinger.stop()
    assert worst < WEDGE_S, f"another connection waited {worst:.1f} s"

    stopping = time.monotonic()
    broker.stop()
    started = time.monotonic()
    broker.start(timeout=120)
    print(
        f"\nrestart with {SMALL_TOPICS * SMALL + WIDE + AUTO_NAMES + 1} partitions under "
        f"ulimit -n {NOFILE}: stopped in {started - stopping:.2f} s, listening again after "
        f"{time.monotonic() - started:.2f} s"
    )
    with RawClient(broker.bootstrap, timeout=60) as client:
        for topic, partition in sample:
            assert list_offset(client, topic, partition, LATEST) == 1
        for topic, partition in sample[::10]:
            assert fetch_values(client, topic, partition) == [f"{topic}/{partition}".encode()]
        everything = metadata(client, None, auto=False)
        assert everything["wide"] == (ErrorCode.NONE, WIDE)
        assert (
            sum(count for _, count in everything.values())
            == SMALL_TOPICS * SMALL + WIDE + AUTO_NAMES
        )
        assert "over" not in everything and "huge" not in everything


def test_a_restart_after_sigkill_in_the_middle_of_a_creation(broker: LimitedBroker) -> None:
    with RawClient(broker.bootstrap, timeout=60) as client:
        assert create(client, "before", 500) == (ErrorCode.NONE, None)
        batch = build_batch([SimpleRecord(None, b"kept")])
        assert produce_raw(client, "before", batch, partition=42).error_code == 0
    sender = RawClient(broker.bootstrap, timeout=60)
    request = CreateTopicsRequest(
        topics=[CreatableTopic(name="doomed", num_partitions=WIDE, replication_factor=1)],
        timeout=60_000,
    )
    from support.raw_client import encode_request_frame

    sender.send(encode_request_frame(19, 7, request, 1))
    time.sleep(0.2)  # somewhere in the middle of opening 10,000 partitions (or just after)
    broker.kill(signal.SIGKILL)
    sender.close()
    broker.start(timeout=120)
    with RawClient(broker.bootstrap, timeout=60) as client:
        doomed = metadata(client, ["doomed"], auto=False)["doomed"]
        # All or nothing: the topic is either wholly there or absent (and creatable again).
        assert doomed in ((ErrorCode.NONE, WIDE), (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0))
        if doomed[0] != ErrorCode.NONE:
            assert partition_dirs(broker.data_dir, "doomed") == []
            assert create(client, "doomed", WIDE) == (ErrorCode.NONE, None)
        assert fetch_values(client, "before", 42) == [b"kept"]
    broker.restart(timeout=120)
    with RawClient(broker.bootstrap, timeout=60) as client:
        assert metadata(client, ["doomed"], auto=False)["doomed"] == (ErrorCode.NONE, WIDE)
        assert fetch_values(client, "before", 42) == [b"kept"]
