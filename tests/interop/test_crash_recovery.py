"""SIGKILL the broker process while a confluent-kafka producer streams, restart it, check the log.

The broker runs as a child process (``python -m pydmq serve``) with small segments so that the
crash lands among several segments and index entries. A producer streams records with unique
sequential values ``i`` (key ``k<i>``, partition ``i % 3``); after ``KILL_AFTER`` acknowledged
deliveries a killer thread SIGKILLs the broker, waits a moment and restarts it on the same port
and data directory. The producer keeps retrying and finishes. Then:

* every acknowledged record is in the log, at the offset its delivery report gave;
* offsets are contiguous from 0, the order per partition is the produce order;
* with idempotence (acks=all; librdkafka's ``enable.idempotence=true``) nothing is duplicated:
  the producer state (pid, epoch, last sequences) survived the crash;
* with acks=1 (librdkafka refuses acks=1 together with idempotence, Java silently turns
  idempotence off) retries may duplicate a batch whose response was lost, as in Kafka: only
  such adjacent re-sends are tolerated;
* ListOffsets earliest/latest agree with a full read;
* a second SIGKILL + restart without producers reads back identically, and fetches starting
  at sampled offsets inside batches return that offset first (indexes agree with segments).
"""

from __future__ import annotations

import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydmq.testing.process import BrokerProcess
from support.broker_checks import EARLIEST, LATEST, create_topic, list_offset, unique_topic
from support.raw_client import RawClient

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.interop, pytest.mark.timeout(150)]

PARTITIONS = 3
TOTAL = 60_000
KILL_AFTER = 20_000
DOWN_SECONDS = 1.0
PRODUCE_DEADLINE = 60.0


@pytest.fixture
def broker() -> Iterator[BrokerProcess]:
    root = Path(tempfile.mkdtemp(prefix="pydmq-crash-"))
    proc = BrokerProcess(
        root / "data",
        overrides={
            "num.partitions": PARTITIONS,
            "log.segment.bytes": 256 * 1024,
            "log.index.interval.bytes": 4096,
        },
        log_path=root / "broker.log",
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()
        shutil.rmtree(root, ignore_errors=True)


def _log_tail(broker: BrokerProcess) -> str:
    try:
        return broker.log_path.read_text(errors="replace")[-4000:]
    except OSError:
        return "(no log)"


class Killer(threading.Thread):
    """Waits for the trigger, SIGKILLs our broker PID, waits, restarts on the same port."""

    def __init__(self, broker: BrokerProcess) -> None:
        super().__init__(name="broker-killer", daemon=True)
        self.broker = broker
        self.trigger = threading.Event()
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.killed_at_acks = -1
        self.acks = 0

    def run(self) -> None:
        try:
            if not self.trigger.wait(PRODUCE_DEADLINE):
                raise TimeoutError("kill trigger never fired")
            self.killed_at_acks = self.acks
            self.broker.kill(signal.SIGKILL)  # waits for that PID to exit
            time.sleep(DOWN_SECONDS)
            self.broker.start(timeout=30)
        except BaseException as exc:
            self.error = exc
        finally:
            self.done.set()


def _produce_with_crash(
    broker: BrokerProcess, topic: str, config: dict[str, object]
) -> tuple[dict[int, int], list[str], Killer]:
    """Stream TOTAL records; returns ({i: offset} of acknowledged ones, delivery errors, killer)."""
    killer = Killer(broker)
    killer.start()
    acked: dict[int, int] = {}
    errors: list[str] = []
    fatal: list[str] = []

    def on_error(err) -> None:  # type: ignore[no-untyped-def]
        if err.fatal():
            fatal.append(str(err))

    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "linger.ms": 5,
            "batch.num.messages": 500,
            "message.timeout.ms": 60_000,
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 500,
            "retry.backoff.ms": 50,
            "retry.backoff.max.ms": 500,
            "socket.connection.setup.timeout.ms": 5_000,
            "error_cb": on_error,
            **config,
        }
    )

    def on_delivery(err, msg) -> None:  # type: ignore[no-untyped-def]
        i = int(msg.value())
        if err is not None:
            errors.append(f"{i}: {err}")
            return
        if i in acked:
            errors.append(f"{i}: delivered twice")
        acked[i] = msg.offset()
        killer.acks = len(acked)
        if len(acked) >= KILL_AFTER:
            killer.trigger.set()

    deadline = time.monotonic() + PRODUCE_DEADLINE
    for i in range(TOTAL):
        while True:
            try:
                producer.produce(
                    topic,
                    key=b"k%d" % i,
                    value=b"%d" % i,
                    partition=i % PARTITIONS,
                    on_delivery=on_delivery,
                )
                break
            except BufferError:
                producer.poll(0.05)
                assert time.monotonic() < deadline, "producer queue never drained"
        if i % 500 == 0:
            producer.poll(0)
            # Pace the stream a little so the kill lands mid-stream, not after the last send.
            if killer.trigger.is_set() and not killer.done.is_set():
                time.sleep(0.001)
        assert not fatal, f"fatal producer error: {fatal}"
    remaining = producer.flush(max(1.0, deadline - time.monotonic()))
    assert killer.done.wait(30), "killer thread did not finish"
    if killer.error is not None:
        raise AssertionError(f"restart failed: {killer.error}\n{_log_tail(broker)}")
    assert remaining == 0, f"{remaining} records still queued at the deadline; errors {errors[:5]}"
    assert not fatal, f"fatal producer error: {fatal}"
    assert killer.killed_at_acks >= KILL_AFTER
    assert killer.killed_at_acks < TOTAL, "the kill happened after every record was acknowledged"
    return acked, errors, killer


def _read_all(
    bootstrap: str, topic: str, expect_end: dict[int, int], timeout: float = 40.0
) -> dict[int, list[tuple[int, bytes, bytes]]]:
    """Every (offset, key, value) of every partition, up to ``expect_end``."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "crash-reader",
            "enable.auto.commit": False,
            "fetch.max.bytes": 8 << 20,
            "max.partition.fetch.bytes": 4 << 20,
        }
    )
    out: dict[int, list[tuple[int, bytes, bytes]]] = {p: [] for p in range(PARTITIONS)}
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + timeout
        done = {p for p in range(PARTITIONS) if expect_end[p] == 0}
        while len(done) < PARTITIONS and time.monotonic() < deadline:
            for msg in consumer.consume(2000, 0.5):
                if msg.error():
                    raise AssertionError(f"consumer error {msg.error()}")
                p = msg.partition()
                out[p].append((msg.offset(), msg.key(), msg.value()))
                if msg.offset() + 1 >= expect_end[p]:
                    done.add(p)
        assert len(done) == PARTITIONS, (
            f"read {[len(out[p]) for p in range(PARTITIONS)]} of {expect_end} before the deadline"
        )
    finally:
        consumer.close()
    return out


def _offsets(bootstrap: str, topic: str) -> tuple[dict[int, int], dict[int, int]]:
    with RawClient(bootstrap, timeout=10) as client:
        earliest = {p: list_offset(client, topic, p, EARLIEST) for p in range(PARTITIONS)}
        latest = {p: list_offset(client, topic, p, LATEST) for p in range(PARTITIONS)}
    return earliest, latest


def _check_log(
    log: dict[int, list[tuple[int, bytes, bytes]]],
    acked: dict[int, int],
    *,
    allow_adjacent_duplicates: bool,
) -> int:
    """Checks contiguity, order, acked presence at their offsets; returns the duplicate count."""
    duplicates = 0
    for p, entries in log.items():
        offsets = [o for o, _k, _v in entries]
        assert offsets == list(range(len(entries))), f"partition {p}: offsets not contiguous from 0"
        seen: set[int] = set()
        last = -1
        for offset, key, value in entries:
            i = int(value)
            assert key == b"k%d" % i and i % PARTITIONS == p, (p, offset, key, value)
            if i in seen:
                duplicates += 1
                assert allow_adjacent_duplicates, (
                    f"partition {p}: record {i} duplicated at offset {offset}"
                )
                continue
            assert i > last, (
                f"partition {p}: record {i} at offset {offset} after {last} (order broken)"
            )
            seen.add(i)
            last = i
    by_offset = {(int(v) % PARTITIONS, o): int(v) for p, es in log.items() for o, _k, v in es}
    missing = [i for i, off in acked.items() if by_offset.get((i % PARTITIONS, off)) != i]
    assert not missing, (
        f"{len(missing)} acknowledged records are not at their acknowledged offset, e.g. "
        f"{[(i, acked[i], by_offset.get((i % PARTITIONS, acked[i]))) for i in sorted(missing)[:5]]}"
    )
    return duplicates


def _check_index_reads(
    bootstrap: str, topic: str, log: dict[int, list[tuple[int, bytes, bytes]]], samples: int = 15
) -> None:
    """Fetches starting at sampled offsets (mostly inside batches) return exactly that record first."""
    rnd = random.Random(1234)
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "crash-index",
            "enable.auto.commit": False,
            # Each pick is a new assignment: without this, every one waits out a fetch wait.
            "fetch.wait.max.ms": 10,
        }
    )
    try:
        for p, entries in log.items():
            if not entries:
                continue
            picks = sorted(
                {0, len(entries) - 1, *(rnd.randrange(len(entries)) for _ in range(samples))}
            )
            for offset in picks:
                consumer.assign([confluent_kafka.TopicPartition(topic, p, offset)])
                deadline = time.monotonic() + 10
                msg = None
                while time.monotonic() < deadline:
                    msg = consumer.poll(0.5)
                    if msg is not None and not msg.error():
                        break
                assert msg is not None and not msg.error(), f"no record at {p}/{offset}"
                assert (msg.offset(), msg.value()) == (offset, entries[offset][2]), (p, offset)
    finally:
        consumer.close()


def _crash_scenario(broker: BrokerProcess, config: dict[str, object], *, idempotent: bool) -> None:
    topic = unique_topic("crash")
    with RawClient(broker.bootstrap) as client:
        assert create_topic(client, topic, PARTITIONS) == 0
    first_pid = broker.pid
    acked, errors, killer = _produce_with_crash(broker, topic, config)
    assert broker.pid != first_pid, "the broker was not restarted"
    assert not errors, f"{len(errors)} delivery errors, e.g. {errors[:5]}"
    assert len(acked) == TOTAL

    earliest, latest = _offsets(broker.bootstrap, topic)
    assert earliest == {p: 0 for p in range(PARTITIONS)}
    log = _read_all(broker.bootstrap, topic, latest)
    assert {p: len(es) for p, es in log.items()} == latest, (
        "ListOffsets latest disagrees with a full read"
    )
    duplicates = _check_log(log, acked, allow_adjacent_duplicates=not idempotent)
    if not idempotent:
        # Only re-sends of batches in flight at the crash (at most a few thousand records).
        assert duplicates <= 5_000, f"{duplicates} duplicates"
    assert sum(latest.values()) == TOTAL + duplicates

    # A second crash without producers: the same bytes come back, and the indexes agree.
    broker.kill(signal.SIGKILL)
    broker.start(timeout=30)
    earliest2, latest2 = _offsets(broker.bootstrap, topic)
    assert (earliest2, latest2) == (earliest, latest)
    again = _read_all(broker.bootstrap, topic, latest2)
    assert again == log, "the log reads differently after a second SIGKILL + restart"
    _check_index_reads(broker.bootstrap, topic, again)
    sys.stderr.write(
        f"\n[crash] killed at {killer.killed_at_acks} acks; per-partition ends {latest}; "
        f"duplicates {duplicates}\n"
    )


def test_sigkill_mid_stream_idempotent_acks_all(broker: BrokerProcess) -> None:
    _crash_scenario(broker, {"acks": "all", "enable.idempotence": True}, idempotent=True)


def test_sigkill_mid_stream_acks_1(broker: BrokerProcess) -> None:
    _crash_scenario(
        broker,
        {"acks": "1", "enable.idempotence": False, "max.in.flight.requests.per.connection": 1},
        idempotent=False,
    )


def _produce_acked(bootstrap: str, topic: str, start: int, count: int) -> dict[int, int]:
    acked: dict[int, int] = {}
    errors: list[str] = []

    def on_delivery(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is not None:
            errors.append(str(err))
        else:
            acked[int(msg.value())] = msg.offset()

    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "enable.idempotence": True,
            "message.timeout.ms": 30_000,
            "batch.num.messages": 200,
        }
    )
    for i in range(start, start + count):
        while True:
            try:
                producer.produce(
                    topic,
                    key=b"k%d" % i,
                    value=b"%d" % i,
                    partition=i % PARTITIONS,
                    on_delivery=on_delivery,
                )
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(30) == 0
    assert not errors, errors[:5]
    assert len(acked) == count
    return acked


def test_torn_tails_and_lost_indexes_are_recovered(broker: BrokerProcess) -> None:
    """Simulate what a crash can leave behind, then restart.

    Partition 0 gets a partial batch appended to its active segment, partition 1 a whole
    batch whose CRC does not match, partition 2 a run of zero bytes (a preallocated tail).
    The LMDB index environment is deleted as well. Recovery must truncate the three tails,
    rebuild the indexes from the segments, and keep every acknowledged record.
    """
    from pydmq.protocol.records import SimpleRecord, build_batch

    topic = unique_topic("torn")
    with RawClient(broker.bootstrap) as client:
        assert create_topic(client, topic, PARTITIONS, {"internal.segment.bytes": "16384"}) == 0
    acked = _produce_acked(broker.bootstrap, topic, 0, 15_000)
    _, latest = _offsets(broker.bootstrap, topic)
    assert sum(latest.values()) == 15_000
    before = _read_all(broker.bootstrap, topic, latest)
    broker.kill(signal.SIGKILL)

    def active_segment(p: int) -> Path:
        segments = sorted((broker.data_dir / f"{topic}-{p}").glob("*.log"))
        assert len(segments) > 1, f"expected several segments in partition {p}: {segments}"
        return segments[-1]

    sizes = {}
    garbage_batch = build_batch([SimpleRecord(b"torn", b"x" * 100)], base_offset=latest[0])
    tails = {
        0: garbage_batch[:40],
        1: bytearray(build_batch([SimpleRecord(b"bad", b"y" * 100)], base_offset=latest[1])),
        2: b"\x00" * 4096,
    }
    tails[1][-1] ^= 0xFF
    for p, tail in tails.items():
        seg = active_segment(p)
        sizes[p] = seg.stat().st_size
        with open(seg, "ab") as f:
            f.write(bytes(tail))
    index_env = broker.data_dir / ".index.lmdb"
    assert index_env.is_dir(), f"no LMDB index environment in {broker.data_dir}"
    shutil.rmtree(index_env)

    broker.start(timeout=30)
    earliest2, latest2 = _offsets(broker.bootstrap, topic)
    assert earliest2 == {p: 0 for p in range(PARTITIONS)}
    assert latest2 == latest, f"log end offsets after recovery {latest2} != {latest}"
    for p in tails:
        assert active_segment(p).stat().st_size == sizes[p], (
            f"partition {p}: torn tail not truncated"
        )
    after = _read_all(broker.bootstrap, topic, latest2)
    assert after == before
    _check_log(after, acked, allow_adjacent_duplicates=False)
    _check_index_reads(broker.bootstrap, topic, after, samples=10)

    # Appends continue at the recovered log end, with no gap.
    more = _produce_acked(broker.bootstrap, topic, 15_000, 300)
    for i, offset in more.items():
        assert offset >= latest[i % PARTITIONS]
    _, latest3 = _offsets(broker.bootstrap, topic)
    final = _read_all(broker.bootstrap, topic, latest3)
    _check_log(final, {**acked, **more}, allow_adjacent_duplicates=False)


def test_producer_state_survives_sigkill_and_restart(broker: BrokerProcess) -> None:
    """Deterministic: retries of the last five batches are recognised after SIGKILL (state
    rebuilt from the log) and after a clean restart (state from the snapshot); a sequence gap
    and an older epoch are still refused."""
    from pydmq.protocol.records import SimpleRecord, build_batch
    from support.broker_checks import init_producer_id, produce_raw

    topic = unique_topic("pstate")
    with RawClient(broker.bootstrap) as client:
        assert create_topic(client, topic, 1) == 0
        pid, epoch = init_producer_id(client)

        def batch(seq: int, ep: int) -> bytes:
            return build_batch(
                [SimpleRecord(b"k", b"%d" % (seq + j)) for j in range(3)],
                producer_id=pid,
                producer_epoch=ep,
                base_sequence=seq,
            )

        sent = [batch(3 * k, epoch + 1) for k in range(7)]  # epoch bump at the first batch
        for k, data in enumerate(sent):
            p = produce_raw(client, topic, data, acks=1)
            assert (p.error_code, p.base_offset) == (0, 3 * k)

    for how in ("SIGKILL", "SIGTERM"):
        if how == "SIGKILL":
            broker.kill(signal.SIGKILL)
            broker.start(timeout=30)
        else:
            broker.restart(timeout=30)
        with RawClient(broker.bootstrap) as client:
            assert list_offset(client, topic) == 21, how
            for k in range(2, 7):  # the last five batches
                p = produce_raw(client, topic, sent[k], acks=1)
                assert (p.error_code, p.base_offset) == (0, 3 * k), (
                    f"after {how}: retry of batch {k}: {p}"
                )
            assert list_offset(client, topic) == 21, f"after {how}: a retry was appended again"
            p = produce_raw(client, topic, batch(24, epoch + 1), acks=1)
            assert p.error_code == 45, f"after {how}: sequence gap accepted: {p}"
            p = produce_raw(client, topic, batch(21, epoch), acks=1)
            assert p.error_code == 47, f"after {how}: older epoch accepted: {p}"
            assert list_offset(client, topic) == 21
    with RawClient(broker.bootstrap) as client:
        p = produce_raw(client, topic, batch(21, epoch + 1), acks=1)
        assert (p.error_code, p.base_offset) == (0, 21)
