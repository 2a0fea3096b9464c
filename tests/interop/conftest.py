"""Fixtures for interop tests: a pydmq broker running as a real subprocess.

``broker`` (module scope: one broker per client file) starts

    python -m pydmq serve --listeners PLAINTEXT://127.0.0.1:<free port> --log-dirs <tmp>
                          --override num.partitions=3 ...

waits (bounded) until the port accepts connections and always stops that one process at
teardown.

Set ``PYDMQ_TEST_BOOTSTRAP=host:port`` to aim the tests at an already running broker
instead (e.g. the reference Apache Kafka from ``compat/kafka/start.sh``, started with
``KAFKA_EXTRA_PROPS=num.partitions=3``). Tests that need ``restart()``/``kill()`` are
skipped in that mode.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pydmq.testing.process import BrokerProcess as LibraryBrokerProcess

from .support import PARTITIONS

START_TIMEOUT = float(os.environ.get("PYDMQ_TEST_START_TIMEOUT", "15"))

# Broker settings every interop test relies on (Kafka property names, DESIGN.md §6).
DEFAULT_OVERRIDES = {
    "num.partitions": str(PARTITIONS),  # kcat has no admin API: it relies on auto-creation
    "auto.create.topics.enable": "true",
    "offsets.topic.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "0",
}


class BrokerProcess(LibraryBrokerProcess):
    """The library's broker child process with the interop defaults and a log beside it."""

    external = False

    def __init__(self, data_dir: Path, overrides: dict[str, str] | None = None) -> None:
        super().__init__(
            data_dir,
            overrides=dict(DEFAULT_OVERRIDES, **(overrides or {})),
            log_path=data_dir.parent / f"{data_dir.name}.broker.log",
        )

    def start(self, timeout: float = START_TIMEOUT) -> BrokerProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        super().start(timeout)
        return self


class ExternalBroker:
    """A broker that someone else runs (PYDMQ_TEST_BOOTSTRAP)."""

    external = True
    pid = None
    data_dir = None

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.host, _, port = bootstrap.rpartition(":")
        self.port = int(port)

    def restart(self) -> None:
        pytest.skip("external broker (PYDMQ_TEST_BOOTSTRAP): cannot restart it")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        pytest.skip("external broker (PYDMQ_TEST_BOOTSTRAP): cannot signal it")

    def log_tail(self, n: int = 4000) -> str:
        return "(external broker)"


def start_broker(tmp_root: Path, overrides: dict[str, str] | None = None):
    ext = os.environ.get("PYDMQ_TEST_BOOTSTRAP")
    if ext:
        return ExternalBroker(ext)
    b = BrokerProcess(tmp_root / "data", overrides)
    b.start()
    return b


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest) -> Iterator[BrokerProcess | ExternalBroker]:
    tmp_root = Path(tempfile.mkdtemp(prefix="pydmq-interop-"))
    b = start_broker(tmp_root)
    try:
        yield b
    finally:
        if isinstance(b, BrokerProcess):
            b.stop()
            if getattr(request.module, "_pydmq_failed", False):
                sys.stderr.write(
                    f"\n--- pydmq broker log ({b.log_path}) tail ---\n{b.log_tail()}\n"
                )
            shutil.rmtree(b.data_dir, ignore_errors=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed and item.module is not None:
        item.module._pydmq_failed = True  # type: ignore[attr-defined]


# -- compatibility matrix ------------------------------------------------------------------
# Every interop test outcome is recorded (with the client versions of this run) so that
# COMPAT.md is generated from tests that really ran: scripts/compat_matrix.py.

COMPAT_RESULTS = Path(os.environ.get("PYDMQ_COMPAT_RESULTS", "build/compat-results.jsonl"))


def _client_versions() -> dict[str, str]:
    import importlib.metadata as md

    versions: dict[str, str] = {}
    for dist, name in (
        ("confluent-kafka", "confluent-kafka"),
        ("kafka-python", "kafka-python"),
        ("aiokafka", "aiokafka"),
    ):
        with contextlib.suppress(md.PackageNotFoundError):
            versions[name] = md.version(dist)
    try:
        import confluent_kafka

        versions["confluent-kafka"] += f" (librdkafka {confluent_kafka.libversion()[0]})"
    except (ImportError, KeyError):
        pass
    if shutil.which("kcat"):
        out = subprocess.run(["kcat", "-V"], capture_output=True, text=True, check=False)
        lines = (out.stdout or out.stderr).splitlines()
        version = next((line.strip() for line in lines if line.strip().startswith("Version")), "")
        versions["kcat"] = version.split(" (", 1)[0].removeprefix("Version ") or "unknown"
        if "librdkafka" in version:
            tail = version.split("librdkafka", 1)[1].split()
            versions["kcat"] += f" (librdkafka {tail[0] if tail else '?'})"
    with contextlib.suppress(md.PackageNotFoundError):
        versions["spark"] = "pyspark " + md.version("pyspark")
    jars = sorted(
        (Path(__file__).resolve().parents[2] / "compat/java/lib").glob("kafka-clients-*.jar")
    )
    if jars:
        versions["java"] = "kafka-clients " + jars[-1].stem.removeprefix("kafka-clients-")
    return versions


_compat_started = False


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    import json

    global _compat_started
    if not _compat_started:  # this conftest is not loaded early enough for sessionstart
        _compat_started = True
        COMPAT_RESULTS.parent.mkdir(parents=True, exist_ok=True)
        with COMPAT_RESULTS.open("w") as out:
            out.write(json.dumps({"versions": _client_versions()}) + "\n")
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        with COMPAT_RESULTS.open("a") as out:
            out.write(json.dumps({"nodeid": report.nodeid, "outcome": report.outcome}) + "\n")
