"""Kafka Connect 4.4 in distributed mode against pydmq: one node and a 3-node cluster.

The worker (``org.apache.kafka.connect.cli.ConnectDistributed``, from compat/connect/lib,
resolved from Maven Central by scripts/test) runs as a child process with its REST API on a
free loopback port. It creates its three internal topics (configs, offsets, status: Connect
requires them ``cleanup.policy=compact`` and refuses to start otherwise), joins its group
(a classic group of protocol type "connect"), and runs a source connector created through
REST: compat/connect/src/LineFileSourceConnector.java, which copies the lines of a file into
a topic (Connect creates that topic too, ``topic.creation.default.*``) and stores the byte
position after each line as its source offset.

The scenario: N lines are written, a consumer reads exactly those N lines once each, in
order; the worker is stopped with SIGTERM (it commits its offsets on the way out), M lines
are appended, a new worker starts from the same group and topics and resumes from the stored
offset: once it is stopped again the topic ends at offset N + M and holds every line once,
in order. DescribeConfigs then shows the three internal topics compacted and the workers'
logs hold no "not compacted" refusal; and a worker given an offset topic created beforehand
with ``cleanup.policy=delete`` logs that refusal (so the check is not vacuous: Connect reads
the policy from pydmq's DescribeConfigs answer). Durations are printed, not asserted.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pydmq.testing.cluster import FAST_FAILOVER, ClusterProcess, free_ports

from .conftest import BrokerProcess, ExternalBroker
from .support import REPO_ROOT, unique_topic

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

CONNECT_DIR = REPO_ROOT / "compat" / "connect"
CONNECTOR_CLASS = "LineFileSourceConnector"
FIRST_LINES = 300  # N: written before the first worker starts
MORE_LINES = 200  # M: appended while no worker runs
DEADLINE = 90.0  # s: a wedge, not a speed bound
# TopicAdmin.verifyTopicCleanupPolicyOnlyCompact's refusal, as Connect 4.4 words it
NOT_COMPACTED = "to guarantee consistency and durability of"


def connect_ready() -> str | None:
    """None when the worker's jars and the test connector are built, else why not."""
    if shutil.which("java") is None:
        return "java not on PATH"
    if not list((CONNECT_DIR / "lib").glob("connect-runtime-*.jar")):
        return "compat/connect/lib has no connect-runtime jar: run ./scripts/test"
    if not (CONNECT_DIR / "target" / f"{CONNECTOR_CLASS}.class").exists():
        return f"compat/connect/target/{CONNECTOR_CLASS}.class missing: run ./scripts/test"
    return None


@pytest.fixture(scope="module", autouse=True)
def _connect_built() -> None:
    reason = connect_ready()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"Kafka Connect unavailable in CI: {reason}")
        pytest.skip(f"Kafka Connect unavailable: {reason}")


class ConnectWorker:
    """One Connect worker JVM in distributed mode, owned by the test that starts it.

    Its log (slf4j-simple, info) goes to ``log_path``; ``stop`` sends SIGTERM to its PID and
    waits for the JVM to exit (Connect stops its tasks and commits their offsets first).
    """

    def __init__(
        self, work_dir: Path, name: str, bootstrap: str, replication: int, prefix: str
    ) -> None:
        self.work_dir = work_dir
        self.port = free_ports(1)[0]
        self.log_path = work_dir / f"{name}.log"
        self.props_path = work_dir / f"{name}.properties"
        self.props_path.write_text(
            "\n".join(
                f"{k}={v}"
                for k, v in worker_config(bootstrap, replication, self.port, prefix).items()
            )
            + "\n"
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Spawn the JVM and wait until its REST API answers."""
        self.spawn()
        deadline = time.monotonic() + DEADLINE
        while True:
            self.check_alive()
            try:
                self.request("GET", "/")
                return
            except (OSError, urllib.error.URLError):
                if time.monotonic() > deadline:
                    raise AssertionError(f"Connect REST not up\n{self.log_tail()}") from None
                time.sleep(0.5)

    def spawn(self) -> None:
        cmd = [
            "java",
            "-Xmx512m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
            "-cp",
            f"{CONNECT_DIR / 'target'}{os.pathsep}{CONNECT_DIR / 'lib'}{os.sep}*",
            "org.apache.kafka.connect.cli.ConnectDistributed",
            str(self.props_path),
        ]
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )

    def kill(self) -> None:
        """SIGKILL and reap, if it still runs (a worker whose outcome is already known)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def check_alive(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"Connect exited {self.proc.returncode}\n{self.log_tail()}")

    def stop(self) -> None:
        """SIGTERM, then wait for the exit; SIGKILL (and fail) only if it wedges."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(f"Connect ignored SIGTERM\n{self.log_tail()}") from None
        # the JVM exits 143 (128 + SIGTERM) once its shutdown hook has stopped the herder
        assert code in (0, 128 + signal.SIGTERM), f"exit {code}\n{self.log_tail()}"

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            text = resp.read()
        return json.loads(text) if text else None

    def retry(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """The request, repeated while the worker answers 409/5xx (not joined yet, or a
        rebalance in progress: Connect's answers until the herder has an assignment)."""
        deadline = time.monotonic() + DEADLINE
        while True:
            self.check_alive()
            try:
                return self.request(method, path, body)
            except urllib.error.HTTPError as e:
                if e.code not in (404, 409, 500, 503) or time.monotonic() > deadline:
                    raise AssertionError(
                        f"{method} {path}: {e.code} {e.read()!r}\n{self.log_tail()}"
                    ) from None
            time.sleep(0.5)

    def wait_running(self, connector: str) -> None:
        """Until the connector and its single task report RUNNING."""
        deadline = time.monotonic() + DEADLINE
        while True:
            status = self.retry("GET", f"/connectors/{connector}/status")
            tasks = status.get("tasks", [])
            if tasks and tasks[0]["state"] == "FAILED":
                raise AssertionError(f"task failed: {tasks[0].get('trace')}")
            if status["connector"]["state"] == "RUNNING" and [t["state"] for t in tasks] == [
                "RUNNING"
            ]:
                return
            assert time.monotonic() < deadline, f"not running: {status}\n{self.log_tail()}"
            time.sleep(0.5)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, size: int = 6000) -> str:
        return f"--- {self.log_path} (tail) ---\n{self.log_text()[-size:]}"


def internal_topics(prefix: str) -> list[str]:
    """The worker's config, offset and status topics."""
    return [f"{prefix}-configs", f"{prefix}-offsets", f"{prefix}-status"]


def worker_config(bootstrap: str, replication: int, port: int, prefix: str) -> dict[str, str]:
    """A distributed worker of group ``prefix`` storing its state in ``prefix``'s topics."""
    configs, offsets, status = internal_topics(prefix)
    return {
        "bootstrap.servers": bootstrap,
        "group.id": prefix,
        "config.storage.topic": configs,
        "offset.storage.topic": offsets,
        "status.storage.topic": status,
        "config.storage.replication.factor": str(replication),
        "offset.storage.replication.factor": str(replication),
        "status.storage.replication.factor": str(replication),
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        "listeners": f"http://127.0.0.1:{port}",
        "plugin.discovery": "service_load",
        "offset.flush.interval.ms": "1000",
        # a loaded CI machine must not turn a graceful stop into an abandoned task (whose
        # last offsets would go uncommitted: Connect then copies lines twice, by design)
        "offset.flush.timeout.ms": "30000",
        "task.shutdown.graceful.timeout.ms": "30000",
        "scheduled.rebalance.max.delay.ms": "0",
        "exactly.once.source.support": "disabled",
    }


def read_topic(bootstrap: str, topic: str, count: int) -> list[str]:
    """The first ``count`` values of partition 0, read from the beginning."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{topic}",
            "enable.auto.commit": False,
        }
    )
    values: list[str] = []
    offsets: list[int] = []
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + DEADLINE
        while len(values) < count:
            assert time.monotonic() < deadline, f"read {len(values)} of {count} lines"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            offset, value = msg.offset(), msg.value()
            assert offset is not None and value is not None, msg
            offsets.append(offset)
            values.append(value.decode())
    finally:
        consumer.close()
    assert offsets == list(range(len(offsets)))
    return values


def end_offset(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"end-{topic}"})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    finally:
        consumer.close()
    return int(high)


def lines(start: int, stop: int) -> list[str]:
    return [f"line-{i:06d} {'x' * (i % 37)}" for i in range(start, stop)]


def append_lines(path: Path, new: list[str]) -> None:
    with path.open("a") as f:
        f.writelines(f"{line}\n" for line in new)


def run_connect_scenario(bootstrap: str, replication: int, work_dir: Path, label: str) -> None:
    began = time.monotonic()
    source = work_dir / "source.txt"
    prefix = unique_topic("connect")
    topic = f"{prefix}-lines"
    connector = f"{prefix}-lines"
    append_lines(source, lines(0, FIRST_LINES))

    first = ConnectWorker(work_dir, "worker-1", bootstrap, replication, prefix)
    try:
        first.start()
        # PUT .../config creates the connector and is idempotent, so it can be retried
        first.retry(
            "PUT",
            f"/connectors/{connector}/config",
            {
                "connector.class": CONNECTOR_CLASS,
                "tasks.max": "1",
                "file": str(source),
                "topic": topic,
                "topic.creation.default.replication.factor": str(replication),
                "topic.creation.default.partitions": "1",
            },
        )
        first.wait_running(connector)
        assert read_topic(bootstrap, topic, FIRST_LINES) == lines(0, FIRST_LINES)
    finally:
        first.stop()
    first_run = time.monotonic() - began

    append_lines(source, lines(FIRST_LINES, FIRST_LINES + MORE_LINES))
    total = FIRST_LINES + MORE_LINES
    second = ConnectWorker(work_dir, "worker-2", bootstrap, replication, prefix)
    try:
        second.start()
        second.wait_running(connector)
        assert read_topic(bootstrap, topic, total) == lines(0, total)
    finally:
        second.stop()
    # both workers are gone: nothing can land any more, the topic's end is final
    assert end_offset(bootstrap, topic) == total, "a line was copied twice"

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for internal in internal_topics(prefix):
        resource = ConfigResource(ConfigResource.Type.TOPIC, internal)
        described = admin.describe_configs([resource])[resource].result(30)
        assert described["cleanup.policy"].value == "compact", internal
    for worker in (first, second):
        assert NOT_COMPACTED not in worker.log_text(), worker.log_tail()
    print(
        f"\nKafka Connect {label}: {FIRST_LINES} lines in {first_run:.1f} s (worker start"
        f" included), restart + {MORE_LINES} lines, {time.monotonic() - began:.1f} s in all"
    )


@pytest.fixture
def work_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="pydmq-connect-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_connect_distributed_single_node(
    broker: BrokerProcess | ExternalBroker, work_dir: Path
) -> None:
    run_connect_scenario(broker.bootstrap, 1, work_dir, "single node")


def test_connect_distributed_three_node_cluster(work_dir: Path) -> None:
    cluster = ClusterProcess(3, work_dir / "cluster", FAST_FAILOVER)
    cluster.start()
    try:
        cluster.wait_for_brokers(3, timeout=30)
        run_connect_scenario(cluster.bootstrap, 3, work_dir, "3-node cluster")
    finally:
        cluster.stop()


def test_connect_refuses_an_offset_topic_that_is_not_compacted(
    broker: BrokerProcess | ExternalBroker, work_dir: Path
) -> None:
    """The negative of the check above: an offset topic created beforehand with
    cleanup.policy=delete is read through DescribeConfigs and refused, with the message the
    scenario looks for."""
    prefix = unique_topic("connect")
    offsets = internal_topics(prefix)[1]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    created = admin.create_topics([NewTopic(offsets, 1, 1, config={"cleanup.policy": "delete"})])
    created[offsets].result(30)
    worker = ConnectWorker(work_dir, "worker", broker.bootstrap, 1, prefix)
    worker.spawn()
    try:
        deadline = time.monotonic() + DEADLINE
        while NOT_COMPACTED not in worker.log_text():
            assert time.monotonic() < deadline, f"no refusal\n{worker.log_tail()}"
            time.sleep(0.5)
    finally:
        worker.kill()
    assert f"Topic '{offsets}' supplied via the 'offset.storage.topic'" in worker.log_text()
