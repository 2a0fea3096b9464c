"""The workload of a chaos run: producers, assigned readers, group members, a commit sampler.

Producers and readers are threads of the runner (librdkafka does the I/O in its own threads);
group members are processes (:mod:`.member`) so the nemesis can ``kill -9`` them. Every client
sets ``client.id`` to its name, which is how the proxy tells whose link to cut.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydmq.chaos.history import (
    CommittedSample,
    Delivery,
    Read,
    TopicPartitionKey,
    Write,
    encode_value,
)
from pydmq.chaos.security import harness_client_kwargs, workload_config
from pydmq.client import KafkaClient
from pydmq.client.admin import offset_fetch

__all__ = [
    "CLASSIC",
    "SHARE",
    "CommitSampler",
    "GroupMember",
    "ProducerWorker",
    "ReaderWorker",
    "read_deliveries",
]


# librdkafka debug contexts for the runner's clients (e.g. "eos,protocol,msg"), logged to
# <PYDMQ_CHAOS_LOG_DIR or cwd>/<client>.librdkafka.log: for post-mortems of stuck clients.
DEBUG_ENV = "PYDMQ_CHAOS_CLIENT_DEBUG"


def client_logging(name: str) -> dict[str, Any]:
    """Extra librdkafka config routing a client's log lines to its own file."""
    contexts = os.environ.get(DEBUG_ENV, "")
    if not contexts:
        return {}
    logger = logging.getLogger(f"pydmq.chaos.client.{name}")
    logger.propagate = False
    if not logger.handlers:
        folder = Path(os.environ.get("PYDMQ_CHAOS_LOG_DIR", "."))
        handler = logging.FileHandler(folder / f"{name}.librdkafka.log")
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
    return {"debug": contexts, "logger": logger}


class ProducerWorker(threading.Thread):
    """An idempotent acks=all producer writing ``rate`` records/s round-robin over partitions
    (``acks="1"``: a plain acks=1 producer, to show what acks=1 loses).

        A fatal error (the idempotent session cannot go on) recreates the producer under a new
        writer name, so sequence numbers stay per idempotent session.
    """

    def __init__(
        self,
        name: str,
        bootstrap: str,
        partitions: Sequence[TopicPartitionKey],
        rate: float,
        seed: int,
        acks: str = "all",
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.acks = acks
        self.client_name = name
        self.bootstrap = bootstrap
        self.partitions = list(partitions)
        self.rate = rate
        self.rng = random.Random(seed)
        self.stop_event = threading.Event()
        self.writes: list[Write] = []
        self.errors: list[str] = []
        self.incarnation = 0
        self._fatal = threading.Event()

    def _producer(self) -> Any:
        from confluent_kafka import Producer

        def on_error(err: Any) -> None:
            if err.fatal():
                self.errors.append(f"{self.client_name}: fatal {err}")
                self._fatal.set()

        return Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "client.id": self.client_name,
                "log.connection.close": False,
                "acks": self.acks,
                # librdkafka's idempotence needs acks=all; acks=1 runs show what it costs.
                "enable.idempotence": self.acks == "all",
                "linger.ms": 5,
                "message.timeout.ms": 60000,
                "request.timeout.ms": 5000,
                "retry.backoff.ms": 50,
                "retry.backoff.max.ms": 500,
                "reconnect.backoff.ms": 50,
                "reconnect.backoff.max.ms": 500,
                "topic.metadata.refresh.interval.ms": 1000,
                "error_cb": on_error,
                **workload_config(),
                **client_logging(self.client_name),
            }
        )

    def run(self) -> None:
        from confluent_kafka import KafkaError

        definitely_not_sent = {KafkaError._PURGE_QUEUE}

        def report(write: Write, err: Any, msg: Any) -> None:
            if err is None:
                write.outcome = "acked"
                write.offset = msg.offset()
                write.acked_at = time.monotonic()
            else:
                write.outcome = "failed" if err.code() in definitely_not_sent else "indeterminate"
                write.error = str(err)

        producer = self._producer()
        writer = f"{self.client_name}.{self.incarnation}"
        seq = 0
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self.stop_event.is_set():
            if self._fatal.is_set():
                producer.flush(5)
                self._fatal.clear()
                self.incarnation += 1
                producer = self._producer()
                writer, seq = f"{self.client_name}.{self.incarnation}", 0
            topic, partition = self.partitions[seq % len(self.partitions)]
            write = Write(writer, seq, topic, partition, time.monotonic())
            self.writes.append(write)
            try:
                producer.produce(
                    topic,
                    encode_value(writer, seq),
                    partition=partition,
                    on_delivery=lambda err, msg, w=write: report(w, err, msg),
                )
            except BufferError:
                write.outcome = "failed"
                write.error = "local queue full"
            except Exception as exc:  # recorded, the run goes on
                write.outcome = "failed"
                write.error = repr(exc)
            seq += 1
            producer.poll(0)
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                producer.poll(delay)
            elif delay < -1.0:
                next_at = time.monotonic()  # fell behind (a pause): do not burst to catch up
        left = producer.flush(90)
        if left:
            self.errors.append(f"{self.client_name}: {left} records unreported after flush")


class ReaderWorker(threading.Thread):
    """An assigned consumer (no group) reading every partition from offset 0, continuously."""

    def __init__(self, name: str, bootstrap: str, partitions: Sequence[TopicPartitionKey]):
        super().__init__(name=name, daemon=True)
        self.client_name = name
        self.bootstrap = bootstrap
        self.partitions = list(partitions)
        self.stop_event = threading.Event()
        self.reads: list[Read] = []
        self.errors: list[str] = []
        self.last_offset: dict[TopicPartitionKey, int] = {}

    def run(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "client.id": self.client_name,
                "log.connection.close": False,
                "group.id": f"{self.client_name}-unused",
                "enable.auto.commit": False,
                "enable.partition.eof": False,
                "topic.metadata.refresh.interval.ms": 1000,
                **workload_config(),
                **client_logging(self.client_name),
            }
        )
        consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in self.partitions])
        try:
            while not self.stop_event.is_set():
                now = time.monotonic()
                for m in consumer.consume(1000, 0.2):
                    err = m.error()
                    if err is not None:
                        if err.code() != KafkaError._PARTITION_EOF and len(self.errors) < 100:
                            self.errors.append(f"{self.client_name}: {err}")
                        continue
                    topic, partition, offset = m.topic(), m.partition(), m.offset()
                    if topic is not None and partition is not None and offset is not None:
                        self.reads.append(
                            Read(self.client_name, topic, partition, offset, m.value(), now)
                        )
                        self.last_offset[(topic, partition)] = offset
        finally:
            consumer.close()


CLASSIC = "pydmq.chaos.member"
SHARE = "pydmq.chaos.share_member"


class GroupMember:
    """One :mod:`.member` process (a consumer group's) or :mod:`.share_member` process (a share
    group's: ``module`` :data:`SHARE`); every start writes a new output file."""

    def __init__(
        self,
        name: str,
        bootstrap: str,
        group: str,
        topics: Sequence[str],
        out: Path,
        module: str = CLASSIC,
    ):
        self.name = name
        self.module = module
        self.bootstrap = bootstrap
        self.group = group
        self.topics = list(topics)
        self.out_dir = out
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.files: list[Path] = []

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        path = self.out_dir / f"{self.name}.{self.starts}.txt"
        self.starts += 1
        self.files.append(path)
        log = open(self.out_dir / f"{self.name}.log", "ab")  # noqa: SIM115 - child's stderr
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                self.module,
                self.bootstrap,
                self.group,
                ",".join(self.topics),
                self.name,
                str(path),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        log.close()

    def kill(self) -> None:
        if self.process is not None and self.running:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self, timeout: float = 20.0) -> None:
        if self.process is None:
            return
        if self.running:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.send_signal(signal.SIGKILL)
                self.process.wait(10)
        self.process = None


def read_deliveries(member: str, paths: Sequence[Path]) -> list[Delivery]:
    """Parse a member's output files; a torn last line (``kill -9`` mid-write) is skipped."""
    out: list[Delivery] = []
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            parts = line.split(" ")
            if len(parts) != 4:
                continue
            topic, partition, offset, value = parts
            try:
                raw = None if value == "-" else bytes.fromhex(value)
                out.append(Delivery(member, topic, int(partition), int(offset), raw))
            except ValueError:
                continue
    return out


class CommitSampler(threading.Thread):
    """Reads the group's committed offsets every ``interval`` through the proxy (as
    ``chaos-observer``, a client the nemesis never isolates)."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        partitions: Sequence[TopicPartitionKey],
        interval: float = 1.0,
    ) -> None:
        super().__init__(name="chaos-commit-sampler", daemon=True)
        self.bootstrap = bootstrap
        self.group = group
        self.partitions = list(partitions)
        self.interval = interval
        self.stop_event = threading.Event()
        self.samples: list[CommittedSample] = []
        self.errors = 0

    def sample(self) -> dict[TopicPartitionKey, int]:
        wanted: dict[str, list[int]] = {}
        for topic, partition in self.partitions:
            wanted.setdefault(topic, []).append(partition)
        with KafkaClient(
            self.bootstrap, client_id="chaos-observer", timeout=2.0, **harness_client_kwargs()
        ) as client:
            committed = offset_fetch(client, self.group, wanted)
        now = time.monotonic()
        out: dict[TopicPartitionKey, int] = {}
        for tp, c in committed.items():
            if c.offset >= 0:
                out[tp] = c.offset
                self.samples.append(CommittedSample(now, tp[0], tp[1], c.offset))
        return out

    def run(self) -> None:
        while not self.stop_event.wait(self.interval):
            try:
                self.sample()
            except Exception:  # a node down or a coordinator moving
                self.errors += 1
