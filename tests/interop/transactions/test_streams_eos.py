"""Kafka Streams exactly_once_v2 across a SIGKILL: the counts stay exact.

compat/streams/src/WordCountEos.java (Kafka Streams 4.4 from Maven Central, resolved and
compiled by scripts/test) counts words: lines in, a repartition topic keyed by word, a
persistent count store with its changelog topic, and every new count out. The test produces
:data:`LINES` known lines at a steady pace, SIGKILLs the Streams JVM once part of the output is
committed (its open transaction is then aborted when the restarted instance, with the same
state directory and so the same transactional id, initialises its producer), restarts it,
and reads the output with a read_committed consumer until every word has reached its count.
Record caching is off, so each input word yields one output update: the committed output of
a word must be exactly ``1, 2, ..., n`` -- a repeat is a double count, a gap a lost update.

Targets: the reference Kafka 4.4; pydmq on one node; a 3-node pydmq cluster where a broker is
also SIGKILLed while Streams runs (and started again before Streams restarts). The pydmq
variants carry the ``transactions`` marker (see conftest.py). Durations are printed.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import OFFSET_BEGINNING, Producer, TopicPartition  # noqa: E402

from ..support import REPO_ROOT  # noqa: E402
from .clients import (  # noqa: E402
    create_topics,
    has_open_transaction,
    poll_records,
    read_to_end,
    reader,
    unique,
)
from .targets import KAFKA, PYDMQ, PYDMQ_CLUSTER, Target, running_target  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.timeout(600)]

STREAMS_DIR = REPO_ROOT / "compat" / "streams"
APP_CLASS = "WordCountEos"
PARTITIONS = 3
LINES = 3000
WORDS_PER_LINE = 5
VOCABULARY = 40
PRODUCE_SECONDS = 10.0  # input spread over this long, so the kill lands mid-run
DEADLINE = 240.0  # s: a wedge, not a speed bound
SETTLE = 1.0  # s a paused app is left before its output is inspected (a commit completes)


def streams_ready() -> str | None:
    if shutil.which("java") is None:
        return "java not on PATH"
    if not list((STREAMS_DIR / "lib").glob("kafka-streams-*.jar")):
        return "compat/streams/lib has no kafka-streams jar: run ./scripts/test"
    if not (STREAMS_DIR / "target" / f"{APP_CLASS}.class").exists():
        return f"compat/streams/target/{APP_CLASS}.class missing: run ./scripts/test"
    return None


@pytest.fixture(scope="module", autouse=True)
def _streams_built() -> None:
    reason = streams_ready()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"Kafka Streams unavailable in CI: {reason}")
        pytest.skip(f"Kafka Streams unavailable: {reason}")


def line(i: int) -> str:
    """Input line ``i``: WORDS_PER_LINE words of the vocabulary, a pure function of i."""
    return " ".join(
        f"w{(i * 7 + j * 13 + i // 11) % VOCABULARY:02d}" for j in range(WORDS_PER_LINE)
    )


def expected_counts() -> Counter[str]:
    return Counter(word for i in range(LINES) for word in line(i).split())


class StreamsApp:
    """One WordCountEos JVM, owned by the test; only its PID is signalled."""

    def __init__(self, work_dir: Path, target: Target, app_id: str, topics: tuple[str, str]):
        self.log_path = work_dir / "streams.log"
        self.args = [
            target.bootstrap,
            app_id,
            *topics,
            str(work_dir / "state"),
            str(target.replication),
        ]
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0

    def start(self) -> None:
        self.started_at = len(self.log_text())
        cmd = [
            "java",
            "-Xmx384m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp",
            f"{STREAMS_DIR / 'target'}{os.pathsep}{STREAMS_DIR / 'lib'}{os.sep}*",
            APP_CLASS,
            *self.args,
        ]
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + DEADLINE
        while "STATE RUNNING" not in self.log_text()[self.started_at :]:
            self.check_alive()
            assert time.monotonic() < deadline, f"Streams not RUNNING\n{self.log_tail()}"
            time.sleep(0.2)

    def check_alive(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"Streams exited {self.proc.returncode}\n{self.log_tail()}")
        assert "STATE ERROR" not in self.log_text()[self.started_at :], self.log_tail()

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        """SIGTERM (Streams closes, committing); SIGKILL only if it wedges."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.kill()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, size: int = 6000) -> str:
        return f"--- {self.log_path} (tail) ---\n{self.log_text()[-size:]}"


class OutputWatch:
    """A read_committed consumer of the output topic, polled by the test's thread: the
    committed values of each word, in order."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer = reader(bootstrap, "read_committed")
        self.consumer.assign(
            [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)]
        )
        self.values: dict[str, list[int]] = defaultdict(list)
        self.total = 0

    def poll(self, seconds: float) -> None:
        for seen in poll_records(self.consumer, seconds):
            assert seen.key is not None and seen.value is not None, seen
            self.values[seen.key].append(int(seen.value))
            self.total += 1

    def wait_for(self, total: int, app: StreamsApp, what: str) -> None:
        deadline = time.monotonic() + DEADLINE
        while self.total < total:
            app.check_alive()
            assert time.monotonic() < deadline, f"{what}: {self.total} of {total}"
            self.poll(0.5)

    def close(self) -> None:
        self.consumer.close()


def kill_inside_transaction(
    app: StreamsApp, watch: OutputWatch, bootstrap: str, topic: str
) -> None:
    """SIGKILL the app while its current transaction has output records in the log.

    The app is paused (SIGSTOP) and given SETTLE seconds, so that a commit it had already
    sent completes; if the output topic still has an open transaction then, it is the app's
    own (no commit of it can be under way): SIGKILL. Otherwise it resumes and runs a little.
    """
    deadline = time.monotonic() + DEADLINE
    while True:
        app.check_alive()
        app.pause()
        time.sleep(SETTLE)
        if has_open_transaction(bootstrap, topic, PARTITIONS):
            app.kill()
            return
        app.resume()
        assert time.monotonic() < deadline, "never caught the app inside a transaction"
        watch.poll(0.2)


def produce_input(bootstrap: str, topic: str, failures: list[str]) -> None:
    """Produce the LINES input lines over PRODUCE_SECONDS (idempotent, acks=all)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            failures.append(str(err))

    began = time.monotonic()
    for i in range(LINES):
        producer.produce(topic, line(i).encode(), on_delivery=on_delivery)
        producer.poll(0)
        pause = began + PRODUCE_SECONDS * (i + 1) / LINES - time.monotonic()
        if pause > 0:
            time.sleep(pause)
    remaining = producer.flush(DEADLINE)
    if remaining:
        failures.append(f"{remaining} input lines not delivered")


@pytest.fixture
def work_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="pydmq-streams-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize(
    "target_name",
    [
        pytest.param(KAFKA, id=KAFKA),
        pytest.param(PYDMQ, id=PYDMQ, marks=pytest.mark.transactions),
        pytest.param(PYDMQ_CLUSTER, id=PYDMQ_CLUSTER, marks=pytest.mark.transactions),
    ],
)
def test_word_count_exactly_once_across_sigkill(target_name: str, work_dir: Path) -> None:
    with running_target(target_name) as target:
        run_word_count(target, work_dir)


def run_word_count(target: Target, work_dir: Path) -> None:
    began = time.monotonic()
    expected = expected_counts()
    total_words = sum(expected.values())
    app_id = unique("wordcount")
    input_topic, output_topic = f"{app_id}-lines", f"{app_id}-counts"
    create_topics(target.bootstrap, [input_topic, output_topic], PARTITIONS, target.replication)

    app = StreamsApp(work_dir, target, app_id, (input_topic, output_topic))
    watch = OutputWatch(target.bootstrap, output_topic)
    failures: list[str] = []
    feeder = threading.Thread(
        target=produce_input, args=(target.bootstrap, input_topic, failures), daemon=True
    )
    try:
        app.start()
        feeder.start()
        if target.cluster is not None:
            watch.wait_for(total_words // 5, app, "before the broker kill")
            target.kill_broker(2)
            print(f"\nbroker 2 SIGKILLed at {watch.total} committed updates")
        watch.wait_for(total_words // 3, app, "before the Streams kill")
        kill_inside_transaction(app, watch, target.bootstrap, output_topic)
        killed_at = watch.total
        if target.cluster is not None:
            target.restart_broker(2)
        app.start()
        feeder.join(DEADLINE)
        assert not feeder.is_alive() and not failures, failures
        watch.wait_for(total_words, app, "after the restart")
        app.stop()
        # nothing more can be committed: a double count would show as extra updates
        watch.poll(2.0)
    finally:
        app.kill()
        watch.close()

    wrong = {
        word: watch.values.get(word, [])
        for word, count in expected.items()
        if watch.values.get(word, []) != list(range(1, count + 1))
    }
    assert not wrong, {w: (v[:5], "...", v[-5:], len(v), expected[w]) for w, v in wrong.items()}
    assert set(watch.values) == set(expected)

    uncommitted, _ = read_to_end(target.bootstrap, output_topic, PARTITIONS, "read_uncommitted")
    # the killed transaction's output was in the log: aborted, seen only read_uncommitted
    assert len(uncommitted) > total_words, "the kill did not land inside a transaction"
    print(
        f"\nStreams exactly_once_v2 on {target.name}: {LINES} lines, {total_words} words, "
        f"Streams SIGKILLed at {killed_at} committed updates; read_uncommitted sees "
        f"{len(uncommitted)} records ({len(uncommitted) - total_words} from aborted "
        f"transactions); {time.monotonic() - began:.1f} s in all"
    )
