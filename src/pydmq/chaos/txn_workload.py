"""The transactional workload: consume-transform-produce with a group, multi-partition
transactions, aborts and fencings, recorded as a :class:`~pydmq.chaos.txn_history.TxnHistory`
for :func:`~pydmq.chaos.txn_checker.check_transactions`.

:func:`run_txn_workload` seeds an input topic with self-checking values, then one worker
(the caller's thread) reads it as a member of a consumer group (read_committed) and, per
batch, writes two records per input to two different output partitions in one transaction
with the member's positions sent to it (KIP-98/KIP-447's exactly-once loop). Every
``abort_every``-th transaction is aborted, every ``fence_every``-th is left open while a new
producer instance with the same transactional id initialises (the next incarnation): the old
one is fenced, its commit fails and the broker aborts its transaction; after either, the
member rewinds to the group's committed offsets and processes the batch again. A failed
commit (faults) makes the transaction indeterminate and the producer is replaced the same
way. Two assigned readers, read_committed and read_uncommitted, read the output throughout
(threads; librdkafka does the I/O in its own threads). At the end, once no transaction is
open on the output, both isolation levels drain it from offset 0.

Needs confluent-kafka (the ``chaos`` extra). Every wait is bounded by ``timeout``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    NewTopic,
    OffsetSpec,
)

from pydmq.chaos.history import TopicPartitionKey, decode_value, encode_value
from pydmq.chaos.txn_history import (
    Isolation,
    Transaction,
    TxnHistory,
    TxnRead,
    TxnWrite,
    txn_value,
)

__all__ = ["TxnWorkloadConfig", "create_workload_topics", "run_txn_workload"]

INPUT_WRITER = "in"
STUCK_GRACE = 15.0  # seconds past a call's own timeout before it counts as stuck
# what OffsetFetch answers while a fault moves the group's coordinator
_COORDINATOR_MOVING = frozenset(
    (
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._WAIT_COORD,
    )
)


class _StuckClient(Exception):
    """A librdkafka call that outlived its own timeout (see ``_Worker._send_offsets``)."""


@dataclass(frozen=True, slots=True)
class TxnWorkloadConfig:
    """The workload's shape. Topic names are ``<prefix>-in`` and ``<prefix>-out``; the
    transactional id and the group are ``<prefix>-tid`` and ``<prefix>-group``."""

    prefix: str
    inputs: int = 120
    partitions: int = 3
    replication: int = 1
    batch: int = 4
    abort_every: int = 5
    fence_every: int = 7
    transaction_timeout_ms: int = 10_000
    timeout: float = 120.0
    create_topics: bool = True  # False: the caller made them (see create_workload_topics)


class _Reader(threading.Thread):
    """An assigned consumer of every output partition at one isolation level, recording
    what it is returned until :meth:`finish`."""

    def __init__(
        self, name: str, bootstrap: str, topic: str, partitions: int, isolation: Isolation
    ):
        super().__init__(name=name, daemon=True)
        self.topic = topic
        self.partitions = partitions
        self.isolation: Isolation = isolation
        self.reads: list[TxnRead] = []
        self.ends: dict[TopicPartitionKey, int] = {}
        self.error: str | None = None
        self._finishing = threading.Event()
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"{name}-unused",
                "client.id": name,
                "enable.auto.commit": False,
                "isolation.level": isolation,
            }
        )

    def run(self) -> None:
        consumer = self._consumer
        try:
            consumer.assign(
                [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)]
            )
            while not self._finishing.is_set():
                for msg in consumer.consume(500, 0.2):
                    at = time.monotonic()
                    if msg.error() is not None:
                        continue  # transient (leader moves): the next poll goes on
                    partition, offset = msg.partition(), msg.offset()
                    assert partition is not None and offset is not None
                    self.reads.append(
                        TxnRead(
                            self.name,
                            self.isolation,
                            (self.topic, partition),
                            offset,
                            msg.value(),
                            at,
                        )
                    )
            got = consumer.position([TopicPartition(self.topic, p) for p in range(self.partitions)])
            self.ends = {(self.topic, tp.partition): max(tp.offset, 0) for tp in got}
        except KafkaException as exc:
            self.error = f"{self.name}: {exc}"
        finally:
            consumer.close()

    def finish(self, timeout: float) -> None:
        self._finishing.set()
        self.join(timeout)


class _Worker:
    """The consume-transform-produce member and its transactional producer (replaced by
    the next incarnation when fenced or failed); runs in the caller's thread."""

    def __init__(
        self,
        bootstrap: str,
        config: TxnWorkloadConfig,
        on_progress: Callable[[int], None] | None,
    ) -> None:
        self.bootstrap = bootstrap
        self.config = config
        self.on_progress = on_progress
        self.source = f"{config.prefix}-in"
        self.sink = f"{config.prefix}-out"
        self.tid = f"{config.prefix}-tid"
        self.incarnation = -1
        self.transactions: list[Transaction] = []
        self.errors: list[str] = []
        self.committed_inputs: set[int] = set()
        self.abandoned: list[Producer] = []  # stuck in librdkafka (see _send_offsets)
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"{config.prefix}-group",
                "client.id": f"{config.prefix}-member",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            }
        )
        self.producer = self._new_producer()

    def _new_producer(self) -> Producer:
        self.incarnation += 1
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": self.tid,
                "client.id": f"{self.config.prefix}-producer-{self.incarnation}",
                "transaction.timeout.ms": self.config.transaction_timeout_ms,
                "linger.ms": 5,
            }
        )
        producer.init_transactions(self.config.timeout)
        return producer

    def run(self) -> None:
        deadline = time.monotonic() + self.config.timeout
        self.consumer.subscribe([self.source])
        try:
            while len(self.committed_inputs) < self.config.inputs:
                if time.monotonic() > deadline:
                    self.errors.append(
                        f"worker: {len(self.committed_inputs)} of {self.config.inputs} "
                        "inputs committed by the deadline"
                    )
                    return
                batch = [m for m in self.consumer.consume(self.config.batch, 0.5) if _usable(m)]
                if batch:
                    self._transaction(batch)
        finally:
            self.consumer.close()

    def _transaction(self, batch: list[Message]) -> None:
        seq = sum(1 for t in self.transactions if t.incarnation == self.incarnation)
        txn = Transaction(self.tid, self.incarnation, seq, [], time.monotonic())
        self.transactions.append(txn)
        number = len(self.transactions)
        inputs: list[int] = []
        try:
            self.producer.begin_transaction()
            for msg in batch:
                decoded = decode_value(msg.value())
                assert decoded is not None and decoded[0] == INPUT_WRITER, msg.value()
                i = decoded[1]
                inputs.append(i)
                for copy, partition in (("a", i), ("b", i + 1)):
                    tp = (self.sink, partition % self.config.partitions)
                    value = txn_value(self.tid, self.incarnation, seq, len(txn.writes))
                    txn.writes.append(TxnWrite(tp, value, f"{INPUT_WRITER}:{i}#{copy}"))
                    self.producer.produce(self.sink, value, partition=tp[1])
            self.producer.flush(self.config.timeout)
            self._send_offsets(batch)
        except KafkaException as exc:
            self._failed(txn, exc)
            return
        except _StuckClient as stuck:
            self._abandon(txn, str(stuck))
            return
        if number % self.config.fence_every == 0:
            self._fence(txn)
        elif number % self.config.abort_every == 0:
            self._complete(txn, commit=False)
        else:
            self._complete(txn, commit=True)
        if txn.outcome == "committed":
            self.committed_inputs.update(inputs)
            if self.on_progress is not None:
                self.on_progress(len(self.committed_inputs))
        else:
            self._rewind()

    def _send_offsets(self, batch: list[Message]) -> None:
        """send_offsets_to_transaction, from a thread of its own: librdkafka may never return
        from it once the group coordinator it cached has left the Metadata answers (a killed
        broker), whatever its timeout (librdkafka #5456, #5511). Past the timeout and a grace
        period the call is given up for stuck (:class:`_StuckClient`)."""
        outcome: list[BaseException | None] = []
        producer, offsets = self.producer, _next_offsets(batch)
        group = self.consumer.consumer_group_metadata()

        def call() -> None:
            try:
                producer.send_offsets_to_transaction(offsets, group, self.config.timeout)
                outcome.append(None)
            except BaseException as exc:  # handed to the worker's thread
                outcome.append(exc)

        thread = threading.Thread(target=call, name=f"{self.tid}-send-offsets", daemon=True)
        thread.start()
        thread.join(self.config.timeout + STUCK_GRACE)
        if thread.is_alive():
            raise _StuckClient(
                f"send_offsets_to_transaction did not return within {self.config.timeout:.0f} "
                f"+ {STUCK_GRACE:.0f} s (librdkafka #5456/#5511)"
            )
        if outcome and outcome[0] is not None:
            raise outcome[0]

    def _abandon(self, txn: Transaction, why: str) -> None:
        """The producer is stuck inside librdkafka: it is left to its thread (never destroyed,
        which would wait on the same stuck state), the transaction is indeterminate, and the
        next incarnation fences it."""
        txn.error = why
        self.errors.append(f"{self.tid}/{txn.incarnation}/{txn.seq}: {why}")
        self.abandoned.append(self.producer)
        self.producer = self._new_producer()
        self._rewind()

    def _complete(self, txn: Transaction, commit: bool) -> None:
        try:
            if commit:
                txn.commit_requested_at = time.monotonic()
                self.producer.commit_transaction(self.config.timeout)
                txn.outcome = "committed"
            else:
                self.producer.abort_transaction(self.config.timeout)
                txn.outcome = "aborted"
        except KafkaException as exc:
            self._failed(txn, exc)

    def _fence(self, txn: Transaction) -> None:
        """A second instance of the transactional id fences this one mid-transaction."""
        fenced = self.producer
        self.producer = self._new_producer()
        txn.commit_requested_at = time.monotonic()
        try:
            fenced.commit_transaction(self.config.timeout)
            txn.outcome = "committed"  # a zombie's commit: the checker will say
        except KafkaException as exc:
            txn.error = _name(exc)

    def _failed(self, txn: Transaction, exc: KafkaException) -> None:
        """The transaction's fate is unknown (indeterminate) unless an abort succeeds;
        a producer that cannot go on is replaced by the next incarnation."""
        txn.error = _name(exc)
        error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        if error is not None and error.txn_requires_abort():
            try:
                self.producer.abort_transaction(self.config.timeout)
                txn.outcome = "aborted"
                self._rewind()
                return
            except KafkaException as again:
                txn.error += f", then abort: {_name(again)}"
        self.errors.append(f"{self.tid}/{txn.incarnation}/{txn.seq}: {txn.error}")
        self.producer = self._new_producer()
        self._rewind()

    def _rewind(self) -> None:
        """Back to the group's committed offsets (what the next transaction must redo); a
        coordinator moving under a fault is waited out (bounded by ``timeout``)."""
        assignment = self.consumer.assignment()
        if not assignment:
            return
        deadline = time.monotonic() + self.config.timeout
        while True:
            try:
                committed = self.consumer.committed(assignment, self.config.timeout)
                break
            except KafkaException as exc:
                error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
                moving = error is not None and (
                    error.retriable() or error.code() in _COORDINATOR_MOVING
                )
                if not moving or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        for tp in committed:
            offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            self.consumer.seek(TopicPartition(tp.topic, tp.partition, offset))


def _usable(msg: Message) -> bool:
    err = msg.error()
    return err is None


def _name(exc: KafkaException) -> str:
    if exc.args and isinstance(exc.args[0], KafkaError):
        return str(exc.args[0].name())
    return str(exc)


def _next_offsets(batch: list[Message]) -> list[TopicPartition]:
    """The position after the batch in each of its partitions (what the group commits)."""
    after: dict[tuple[str, int], int] = {}
    for msg in batch:
        topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
        assert topic is not None and partition is not None and offset is not None
        after[(topic, partition)] = max(after.get((topic, partition), 0), offset + 1)
    return [TopicPartition(t, p, o) for (t, p), o in sorted(after.items())]


def create_workload_topics(bootstrap: str, config: TxnWorkloadConfig, retry: bool = False) -> None:
    """``<prefix>-in`` and ``<prefix>-out``. With ``retry``, a refusal that a node coming back
    ends (INVALID_REPLICATION_FACTOR while one is down, a controller moving) is retried until
    ``config.timeout``; an existing topic counts as made."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    missing = [f"{config.prefix}-in", f"{config.prefix}-out"]
    deadline = time.monotonic() + config.timeout
    while missing:
        futures = admin.create_topics(
            [NewTopic(n, config.partitions, config.replication) for n in missing]
        )
        failed: list[str] = []
        for name in missing:
            try:
                futures[name].result(config.timeout)
            except KafkaException as exc:
                code = exc.args[0].code() if exc.args else None
                if code == KafkaError.TOPIC_ALREADY_EXISTS:
                    continue
                if not retry or time.monotonic() > deadline:
                    raise
                failed.append(name)
        missing = failed
        if missing:
            time.sleep(0.5)


def _seed(bootstrap: str, config: TxnWorkloadConfig) -> None:
    """The inputs: value ``encode_value("in", i)`` on partition ``i % partitions``."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    failed: list[str] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(str(err))

    for i in range(config.inputs):
        topic = f"{config.prefix}-in"
        producer.produce(
            topic,
            encode_value(INPUT_WRITER, i),
            partition=i % config.partitions,
            on_delivery=report,
        )
    left = producer.flush(config.timeout)
    if left or failed:
        raise RuntimeError(f"seeding the inputs: {left} undelivered, errors {failed[:3]}")


def _wait_stable(bootstrap: str, topic: str, config: TxnWorkloadConfig) -> None:
    """Until no transaction is open on ``topic`` (LSO == high watermark everywhere)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    specs = {
        TopicPartition(topic, p): OffsetSpec.latest()  # type: ignore[no-untyped-call]
        for p in range(config.partitions)
    }
    deadline = time.monotonic() + config.timeout
    while True:
        ends: list[dict[int, int]] = []
        try:
            for level in (IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED):
                futures = admin.list_offsets(specs, isolation_level=level)
                ends.append(
                    {tp.partition: f.result(config.timeout).offset for tp, f in futures.items()}
                )
        except KafkaException:
            # a leader moving under a fault (FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, ...):
            # asked again until the deadline
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
            continue
        if ends[0] == ends[1]:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic}: transactions still open at the end: {ends}")
        time.sleep(0.2)


def _drain(
    bootstrap: str, topic: str, config: TxnWorkloadConfig, isolation: Isolation
) -> dict[TopicPartitionKey, list[tuple[int, bytes | None]]]:
    """Every record of ``topic`` returned at ``isolation``, from offset 0 to the end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{config.prefix}-drain",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )
    log: dict[TopicPartitionKey, list[tuple[int, bytes | None]]] = {
        (topic, p): [] for p in range(config.partitions)
    }
    try:
        consumer.assign(
            [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(config.partitions)]
        )
        at_end: set[int] = set()
        deadline = time.monotonic() + config.timeout
        while len(at_end) < config.partitions:
            if time.monotonic() > deadline:
                raise RuntimeError(f"draining {topic} ({isolation}): ends reached {at_end}")
            for msg in consumer.consume(500, 0.5):
                partition, offset, err = msg.partition(), msg.offset(), msg.error()
                assert partition is not None
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        at_end.add(partition)
                    continue
                assert offset is not None
                at_end.discard(partition)
                log[(topic, partition)].append((offset, msg.value()))
    finally:
        consumer.close()
    return log


def run_txn_workload(
    bootstrap: str,
    config: TxnWorkloadConfig,
    on_progress: Callable[[int], None] | None = None,
) -> TxnHistory:
    """Run the workload once against ``bootstrap`` and return what it observed.

    ``on_progress(inputs_committed)`` is called after every committed transaction (the
    caller's hook to inject a fault mid-run)."""
    started = time.monotonic()
    if config.create_topics:
        create_workload_topics(bootstrap, config)
    _seed(bootstrap, config)
    sink = f"{config.prefix}-out"
    readers = [
        _Reader(f"{config.prefix}-{level}", bootstrap, sink, config.partitions, level)
        for level in ("read_committed", "read_uncommitted")
    ]
    for reader in readers:
        reader.start()
    worker = _Worker(bootstrap, config, on_progress)
    try:
        worker.run()
    finally:
        for reader in readers:
            reader.finish(config.timeout)
    _wait_stable(bootstrap, sink, config)
    errors = worker.errors + [r.error for r in readers if r.error]
    return TxnHistory(
        started_at=started,
        ended_at=time.monotonic(),
        partitions=[(sink, p) for p in range(config.partitions)],
        transactions=worker.transactions,
        reads=[read for reader in readers for read in reader.reads],
        reader_ends={reader.name: reader.ends for reader in readers},
        final_committed=_drain(bootstrap, sink, config, "read_committed"),
        final_uncommitted=_drain(bootstrap, sink, config, "read_uncommitted"),
        client_errors=errors,
    )
