"""Load from confluent-kafka (librdkafka): producers and consumers in their own processes.

Every producer and consumer runs in a child process started with ``multiprocessing``'s
*spawn* context, so each has its own interpreter (own GIL, own core) and the parent only
orchestrates. Children send one result dict back over a pipe; every wait is bounded and a
child still running when its measurement ends (or fails, or is interrupted) is terminated
-- only that PID.

Modes (each a public function taking a bootstrap address, a topic that already exists and
the :class:`~benchmarks.omb.workloads.Workload`):

* :func:`max_rate_produce` -- records as fast as librdkafka takes them (``linger.ms=5``,
  ``batch.size=128 KiB``, no compression) for a duration or a record count. Records go in
  with ``produce_batch`` from pre-built dicts (no Python work per record); 1 in
  ``MAX_RATE_PROBE_EVERY`` records carries a delivery callback whose latency is delivery
  report minus enqueue time. The records counted are the ones the broker acknowledged:
  the sum of the partitions' high watermarks after ``flush()``.
* :func:`fixed_rate_produce` -- ``rate`` records/s for ``duration`` seconds. Latency of a
  probed record is its delivery-report time minus its *intended* send time
  ``start + i / rate`` (corrected for coordinated omission: when the generator or the broker
  stalls, the records that should have gone out meanwhile are charged the wait). The
  result says whether the generator fell behind the schedule by more than 1 %.
* :func:`consume` -- one consumer (``assign``, no group) reads N records from offset 0.
* :func:`end_to_end` -- a producer at a fixed rate writes each record's intended send time
  (``time.time_ns()``, big-endian) into the value's first 8 bytes; a consumer in another
  process reports receive time minus that stamp.
* :func:`backlog` -- produce ``backlog_bytes`` first, then time consuming all of it.
* :func:`enqueue_ceiling` -- the producer loop against an unreachable broker: how many
  records/s one Python process can hand to librdkafka at all (the generator's ceiling).

Every result has the client process's CPU: ``client_cpu_util`` (all threads, 1.0 = one
core) and ``client_main_thread_util`` (the Python thread); a main thread near 1.0 means the
generator, not the broker, was the limit (``client_bound``).
"""

from __future__ import annotations

import functools
import math
import multiprocessing
import resource
import struct
import time
import traceback
import uuid
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from types import TracebackType
from typing import Any

from benchmarks.omb.workloads import Workload, keys, payloads

__all__ = [
    "ConsumeSpec",
    "ProduceSpec",
    "backlog",
    "consume",
    "end_to_end",
    "enqueue_ceiling",
    "fell_behind",
    "fixed_rate_produce",
    "intended_send_time",
    "max_rate_produce",
    "percentiles",
    "probe_stride",
]

CHUNK = 500  # records per produce_batch call
MAX_RATE_PROBE_EVERY = 100  # 1 record in 100 carries a delivery callback at max rate
PROBES_PER_SECOND = 20_000  # target latency samples per second at a fixed rate
BEHIND_TOLERANCE = 0.01  # a fixed-rate run more than 1 % short of its rate fell behind
CLIENT_BOUND_UTIL = 0.9  # main thread busier than this: the client is the bottleneck
WARMUP_TIMEOUT_S = 30.0
UNREACHABLE = "127.0.0.1:9"  # discard port: nothing listens, librdkafka just queues


# -- pure helpers: percentiles, schedule, coordinated omission ----------------------------------


def percentiles(samples: Iterable[float], scale: float = 1.0) -> dict[str, float]:
    """Nearest-rank p50/p95/p99/p99.9, max and mean of ``samples`` times ``scale``, keyed
    ``latency_<p>_ms``; NaN for every figure when there is no sample."""
    ordered = sorted(samples)
    count = len(ordered)
    figures: dict[str, float] = {"latency_samples": float(count)}
    for label, q in (("p50", 50.0), ("p95", 95.0), ("p99", 99.0), ("p999", 99.9)):
        figures[f"latency_{label}_ms"] = nearest_rank(ordered, q) * scale
    figures["latency_max_ms"] = (ordered[-1] if ordered else math.nan) * scale
    figures["latency_mean_ms"] = (sum(ordered) / count if count else math.nan) * scale
    return figures


def nearest_rank(ordered: Sequence[float], q: float) -> float:
    """The ``q``-th percentile of sorted ``ordered`` by nearest rank (NaN if empty)."""
    if not ordered:
        return math.nan
    rank = math.ceil(q / 100.0 * len(ordered))
    return ordered[min(max(rank, 1), len(ordered)) - 1]


def intended_send_time(start: float, index: int, rate: float) -> float:
    """When record ``index`` of a schedule of ``rate`` records/s from ``start`` was due."""
    return start + index / rate


def corrected_latencies(
    start: float, rate: float, deliveries: Iterable[tuple[int, float]]
) -> list[float]:
    """Latency of each ``(index, delivered_at)``: delivery minus *intended* send time."""
    return [done - intended_send_time(start, index, rate) for index, done in deliveries]


def probe_stride(rate: float, per_second: int = PROBES_PER_SECOND) -> int:
    """Probe every n-th record so that a run at ``rate`` yields about ``per_second``
    latency samples per second (every record at low rates)."""
    return max(1, int(rate // per_second))


def fell_behind(
    target_rate: float, achieved_rate: float, tolerance: float = BEHIND_TOLERANCE
) -> bool:
    return achieved_rate < target_rate * (1.0 - tolerance)


# -- client configuration ---------------------------------------------------------------------


# What the consume mode reads is written with these on top of producer_config: batches wait
# until they hold batch.size bytes, so every target stores the same batch layout. With the
# 5 ms linger the layout depends on how fast the broker acknowledges (on pydmq at max rate,
# 1,134 records per 100 B batch against 1,184 with full batches).
FULL_BATCHES: dict[str, object] = {"linger.ms": 1000}


def producer_config(bootstrap: str, acks: str) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap,
        "acks": acks,
        # The Java producer's default with acks=all; nothing to deduplicate with acks=1.
        "enable.idempotence": acks == "all",
        "linger.ms": 5,
        "batch.size": 128 * 1024,
        "compression.type": "none",
        "partitioner": "murmur2_random",  # the Java client's key -> partition mapping
        "message.timeout.ms": 60_000,
        "log_level": 3,
    }


def consumer_config(bootstrap: str) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": f"omb-{uuid.uuid4().hex[:8]}",  # never joined: partitions are assigned
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "fetch.max.bytes": 52_428_800,
        "max.partition.fetch.bytes": 1_048_576,
        "queued.min.messages": 500_000,
        "fetch.queue.backoff.ms": 10,
        "log_level": 3,
    }


# -- specs handed to child processes ----------------------------------------------------------


@dataclass(frozen=True)
class ProduceSpec:
    bootstrap: str
    topic: str
    workload: Workload
    duration_s: float | None = None  # stop after this long ...
    records: int | None = None  # ... or after this many records
    rate: float | None = None  # None: as fast as librdkafka takes them
    stamp: bool = False  # first 8 value bytes = intended send time (time.time_ns)
    timeout_s: float = 600.0
    count_acked: bool = True  # read the high watermarks after flush()
    extra_config: tuple[tuple[str, object], ...] = ()


@dataclass(frozen=True)
class ConsumeSpec:
    bootstrap: str
    topic: str
    workload: Workload
    records: int | None = None  # None: as many as the producer reports (end-to-end)
    timeout_s: float = 600.0
    stamped: bool = False  # decode send stamps (end-to-end)
    sample_stride: int = 1


# -- CPU accounting in a child -----------------------------------------------------------------


class CpuClock:
    """Wall time, whole-process CPU (every librdkafka thread) and the main thread's CPU."""

    def __init__(self) -> None:
        self.wall = time.perf_counter()
        self.process = self._process_cpu()
        self.thread = time.thread_time()

    @staticmethod
    def _process_cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    def figures(self) -> dict[str, float]:
        wall = max(time.perf_counter() - self.wall, 1e-9)
        process = self._process_cpu() - self.process
        thread = time.thread_time() - self.thread
        return {
            "client_cpu_s": process,
            "client_cpu_util": process / wall,
            "client_main_thread_util": thread / wall,
            "client_bound": float(thread / wall >= CLIENT_BOUND_UTIL),
        }


# -- producing ---------------------------------------------------------------------------------


def record_ring(workload: Workload, length: int) -> list[dict[str, bytes]]:
    """``length`` pre-built message dicts cycling through the payload (and key) pools."""
    values = payloads(workload.record_size)
    pool = keys() if workload.keyed else []
    ring: list[dict[str, bytes]] = []
    for i in range(length):
        message = {"value": values[i % len(values)]}
        if pool:
            message["key"] = pool[i % len(pool)]
        ring.append(message)
    return ring


class Probes:
    """Delivery callbacks of probed records: latency samples and delivery errors."""

    def __init__(self) -> None:
        self.samples = array("d")
        self.errors = 0
        self.first_error = ""

    def callback(self, sent_at: float) -> Callable[[Any, Any], None]:
        return functools.partial(self.delivered, sent_at)

    def delivered(self, sent_at: float, err: Any, msg: Any) -> None:
        if err is None:
            self.samples.append(time.perf_counter() - sent_at)
        else:
            self.errors += 1
            self.first_error = self.first_error or str(err)


def enqueue(producer: Any, topic: str, batch: list[dict[str, Any]], deadline: float) -> int:
    """Hand ``batch`` to librdkafka, waiting while its queue is full; returns the number of
    queue-full retries. Any other per-message error is fatal."""
    from confluent_kafka import KafkaError

    retries = 0
    pending = batch
    while True:
        if producer.produce_batch(topic, pending) == len(pending):
            return retries
        failed = [(m, m.pop("_error", None)) for m in pending]
        pending = [m for m, err in failed if err is not None]
        for _, err in failed:
            if err is not None and err.code() != KafkaError._QUEUE_FULL:
                raise RuntimeError(f"produce to {topic} failed: {err}")
        if time.perf_counter() > deadline:
            raise TimeoutError(f"librdkafka's queue stayed full until the deadline ({topic})")
        retries += 1
        producer.poll(0.001)


def probed(batch: list[dict[str, Any]], positions: Iterable[int], callbacks: Iterable[Any]) -> None:
    """Replace ``batch[pos]`` by a copy carrying a delivery callback (the ring stays clean)."""
    for pos, callback in zip(positions, callbacks, strict=False):
        batch[pos] = {**batch[pos], "callback": callback}


def warm_up(producer: Any, spec: ProduceSpec) -> None:
    """One record per partition, flushed: metadata and a connection to every leader."""
    values = payloads(spec.workload.record_size, count=1)
    zero = bytes(8) + values[0][8:]  # a send stamp of 0: end-to-end consumers skip it
    for partition in range(spec.workload.partitions):
        producer.produce(spec.topic, zero, partition=partition)
    if producer.flush(WARMUP_TIMEOUT_S) != 0:
        raise TimeoutError(f"warm-up records to {spec.topic} were not delivered")


def max_rate_loop(
    producer: Any, spec: ProduceSpec, probes: Probes, deadline: float
) -> dict[str, float]:
    """Enqueue as fast as librdkafka accepts, until the duration or record count is reached."""
    ring = record_ring(spec.workload, 20 * CHUNK)
    limit = spec.records if spec.records is not None else math.inf
    stop_at = time.perf_counter() + spec.duration_s if spec.duration_s else math.inf
    sent = retries = 0
    while sent < limit and time.perf_counter() < stop_at:
        offset = sent % len(ring)
        batch = ring[offset : offset + int(min(CHUNK, limit - sent))]
        positions = range(0, len(batch), MAX_RATE_PROBE_EVERY)
        now = time.perf_counter()
        probed(batch, positions, (probes.callback(now) for _ in positions))
        retries += enqueue(producer, spec.topic, batch, deadline)
        sent += len(batch)
        producer.poll(0)
    return {"enqueued": float(sent), "queue_full_waits": float(retries)}


class StampedRecords:
    """Records whose value begins with the intended send time (``time.time_ns``, 8 bytes
    big-endian); the rest of each value and the keys come from the pre-built pools."""

    def __init__(self, workload: Workload, rate: float, start_ns: int) -> None:
        self.tails = [value[8:] for value in payloads(workload.record_size)]
        self.keys = keys() if workload.keyed else []
        self.interval_ns = 1e9 / rate
        self.start_ns = start_ns
        self.pack = struct.Struct(">q").pack

    def batch(self, first: int, count: int) -> list[dict[str, Any]]:
        indexes = range(first, first + count)
        tails, pack, start, interval = self.tails, self.pack, self.start_ns, self.interval_ns
        values = [pack(start + int(i * interval)) + tails[i % len(tails)] for i in indexes]
        if not self.keys:
            return [{"value": value} for value in values]
        pool = self.keys
        return [
            {"value": v, "key": pool[i % len(pool)]} for v, i in zip(values, indexes, strict=True)
        ]


def pace(producer: Any, wait: float) -> None:
    """Sleep until the next record is due, serving delivery reports while waiting."""
    if wait >= 0.001:
        producer.poll(wait)  # whole milliseconds; returns early to serve a delivery report
    elif wait > 0:
        time.sleep(wait)


def fixed_rate_loop(
    producer: Any, spec: ProduceSpec, probes: Probes, deadline: float
) -> dict[str, float]:
    """``rate`` records/s for ``duration_s``; probes are charged from their intended time."""
    assert spec.rate is not None and spec.duration_s is not None
    rate = spec.rate
    total = max(1, int(rate * spec.duration_s))
    stride = probe_stride(rate)
    ring = record_ring(spec.workload, 20 * CHUNK)
    give_up = time.perf_counter() + 2 * spec.duration_s + 10
    start = time.perf_counter()
    stamped = StampedRecords(spec.workload, rate, time.time_ns()) if spec.stamp else None
    sent = retries = 0
    max_lag = 0.0
    while sent < total:
        now = time.perf_counter()
        due = min(total, int((now - start) * rate) + 1)
        if due <= sent:
            pace(producer, intended_send_time(start, sent, rate) - now)
            continue
        if now > give_up:
            break
        count = min(due - sent, CHUNK)
        max_lag = max(max_lag, now - intended_send_time(start, sent, rate))
        if stamped is not None:
            batch = stamped.batch(sent, count)
        else:
            offset = sent % len(ring)
            batch = (
                ring[offset : offset + count]
                if offset + count <= len(ring)
                else [ring[(sent + k) % len(ring)] for k in range(count)]
            )
            first = -(-sent // stride) * stride  # the first multiple of stride >= sent
            indexes = range(first, sent + count, stride)
            probed(
                batch,
                (i - sent for i in indexes),
                (probes.callback(intended_send_time(start, i, rate)) for i in indexes),
            )
        retries += enqueue(producer, spec.topic, batch, deadline)
        sent += count
        producer.poll(0)
    send_seconds = max(time.perf_counter() - start, sent / rate)
    achieved = sent / send_seconds
    return {
        "enqueued": float(sent),
        "queue_full_waits": float(retries),
        "target_rate": rate,
        "achieved_rate": achieved,
        "behind_pct": max(0.0, (1.0 - achieved / rate) * 100.0),
        "behind": float(fell_behind(rate, achieved) or sent < total),
        "max_send_lag_ms": max_lag * 1000.0,
        "probe_stride": float(stride),
    }


def acked_records(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> int:
    """Sum of the partitions' high watermarks (records the broker acknowledged)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(consumer_config(bootstrap))
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1]
            for p in range(partitions)
        )
    finally:
        consumer.close()


def produce_child(
    spec: ProduceSpec, warm: Any = None, go: Any = None, total: Any = None
) -> dict[str, float]:
    """A producer process: warm up, (wait for ``go``), run the loop, flush, count acks."""
    from confluent_kafka import Producer

    deadline = time.perf_counter() + spec.timeout_s
    producer = Producer(
        {**producer_config(spec.bootstrap, spec.workload.acks), **dict(spec.extra_config)}
    )
    warm_up(producer, spec)
    if warm is not None:
        warm.set()
    if go is not None and not go.wait(WARMUP_TIMEOUT_S):
        raise TimeoutError("the consumer never became ready")
    probes = Probes()
    clock = CpuClock()
    loop = fixed_rate_loop if spec.rate else max_rate_loop
    figures = loop(producer, spec, probes, deadline)
    left = producer.flush(max(1.0, deadline - time.perf_counter()))
    elapsed = time.perf_counter() - clock.wall
    figures.update(clock.figures())
    if total is not None:
        total.value = int(figures["enqueued"])
    figures.update(delivery_figures(spec, figures["enqueued"], elapsed, left, probes))
    return figures


def delivery_figures(
    spec: ProduceSpec, enqueued: float, elapsed: float, left: int, probes: Probes
) -> dict[str, float]:
    """Throughput of what the broker acknowledged, and the probes' latency."""
    figures: dict[str, float] = {"seconds": elapsed, "undelivered": float(left)}
    figures["delivery_errors"] = float(probes.errors)
    if spec.count_acked:
        end_offsets = acked_records(spec.bootstrap, spec.topic, spec.workload.partitions)
        records = float(end_offsets - spec.workload.partitions)
        figures["end_offsets"] = float(end_offsets)
    else:
        records = enqueued - left
    figures["records"] = records
    figures["bytes"] = records * spec.workload.record_size
    figures["records_per_s"] = records / elapsed
    figures["mb_per_s"] = figures["bytes"] / elapsed / 1e6
    figures.update(percentiles(probes.samples, scale=1000.0))
    return figures


def ceiling_child(workload: Workload, records: int) -> dict[str, float]:
    """The max-rate loop into a producer whose broker never answers: enqueue cost only."""
    from confluent_kafka import Producer

    config = {
        **producer_config(UNREACHABLE, workload.acks),
        "queue.buffering.max.messages": records + CHUNK,
        "queue.buffering.max.kbytes": 2_097_151,
        "log_level": 0,
    }
    producer = Producer(config)
    spec = ProduceSpec(UNREACHABLE, "omb-ceiling", workload, records=records, count_acked=False)
    clock = CpuClock()
    figures = max_rate_loop(producer, spec, Probes(), time.perf_counter() + 120)
    elapsed = time.perf_counter() - clock.wall
    figures.update(clock.figures())
    producer.purge()
    producer.flush(0)
    figures.update(
        records=float(records),
        bytes=float(records * workload.record_size),
        seconds=elapsed,
        records_per_s=records / elapsed,
        mb_per_s=records * workload.record_size / elapsed / 1e6,
    )
    return figures


# -- consuming ---------------------------------------------------------------------------------


def next_messages(consumer: Any, wait: float) -> list[Any]:
    """Whatever is buffered now (no waiting for a full batch); else block for one record."""
    messages: list[Any] = consumer.consume(10_000, 0)
    if messages:
        return messages
    one = consumer.poll(wait)
    return [one] if one is not None else []


def good(messages: list[Any]) -> int:
    """How many of ``messages`` are records, not errors."""
    return sum(1 for m in messages if m.error() is None)


def assigned_consumer(spec: ConsumeSpec) -> Any:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(consumer_config(spec.bootstrap))
    parts = [
        TopicPartition(spec.topic, p, OFFSET_BEGINNING) for p in range(spec.workload.partitions)
    ]
    consumer.assign(parts)
    return consumer


def consume_child(spec: ConsumeSpec) -> dict[str, float]:
    """Read ``spec.records`` records from offset 0 as fast as possible."""
    assert spec.records is not None
    clock = CpuClock()
    consumer = assigned_consumer(spec)
    deadline = clock.wall + spec.timeout_s
    seen = 0
    last = clock.wall
    while seen < spec.records and time.perf_counter() < deadline:
        messages = next_messages(consumer, 0.1)
        if messages:
            seen += good(messages)
            last = time.perf_counter()
    figures = clock.figures()
    consumer.close()
    elapsed = max(last - clock.wall, 1e-9)
    figures.update(
        records=float(seen),
        expected=float(spec.records),
        bytes=float(seen * spec.workload.record_size),
        seconds=elapsed,
        records_per_s=seen / elapsed,
        mb_per_s=seen * spec.workload.record_size / elapsed / 1e6,
    )
    return figures


def send_stamps(
    messages: list[Any], received_ns: int, stride: int, count: int, samples: array[int]
) -> None:
    """Append receive time minus send stamp for every ``stride``-th record (by ``count``)."""
    for index, message in enumerate(messages, count):
        if index % stride or message.error() is not None:
            continue
        stamp = int.from_bytes(message.value()[:8], "big")
        if stamp:  # warm-up records carry 0
            samples.append(received_ns - stamp)


def e2e_consume_child(
    spec: ConsumeSpec, warm: Any, go: Any, total: Any, done: Any
) -> dict[str, float]:
    """Consume while a producer writes stamped records; ``go`` once its warm-up arrived."""
    consumer = assigned_consumer(spec)
    partitions = spec.workload.partitions
    samples: array[int] = array("q")
    clock = CpuClock()
    deadline = clock.wall + spec.timeout_s
    seen = 0
    while time.perf_counter() < deadline:
        messages = next_messages(consumer, 0.05)
        received_ns = time.time_ns()
        send_stamps(messages, received_ns, spec.sample_stride, seen, samples)
        seen += good(messages)
        if seen >= partitions and warm.is_set() and not go.is_set():
            go.set()
        if done.is_set() and seen >= total.value + partitions:
            break
    figures = clock.figures()
    consumer.close()
    figures.update(percentiles(samples, scale=1e-6))
    figures.update(records=float(seen - partitions), expected=float(total.value))
    return figures


# -- child processes ---------------------------------------------------------------------------


def child_main(fn: Callable[..., dict[str, float]], conn: Connection, *args: Any) -> None:
    """Entry point of every child: run ``fn`` and send ``("ok", result)`` or the traceback."""
    try:
        conn.send(("ok", fn(*args)))
    except BaseException:
        conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()


class Children:
    """The child processes of one measurement; leaving the block terminates any still alive."""

    def __init__(self) -> None:
        self.ctx = multiprocessing.get_context("spawn")
        self.processes: list[Any] = []

    def __enter__(self) -> Children:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop_all()

    def start(self, fn: Callable[..., dict[str, float]], *args: Any) -> Connection:
        receiver, sender = self.ctx.Pipe(duplex=False)
        process = self.ctx.Process(target=child_main, args=(fn, sender, *args), daemon=True)
        process.start()
        sender.close()
        self.processes.append(process)
        return receiver

    def result(self, conn: Connection, deadline: float) -> dict[str, float]:
        """The child's result, or an error when it failed, died or overran ``deadline``."""
        if not conn.poll(max(0.0, deadline - time.monotonic())):
            raise TimeoutError("a load-generator process did not finish in time")
        try:
            status, payload = conn.recv()
        except EOFError:
            raise RuntimeError("a load-generator process died without a result") from None
        if status != "ok":
            raise RuntimeError(f"load-generator process failed:\n{payload}")
        return dict(payload)

    def stop_all(self) -> None:
        for process in self.processes:
            if process.is_alive():
                process.terminate()  # SIGTERM to this child's PID only
        for process in self.processes:
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join(5)
        self.processes = []


def run_one(fn: Callable[..., dict[str, float]], *args: Any, timeout: float) -> dict[str, float]:
    with Children() as children:
        conn = children.start(fn, *args)
        return children.result(conn, time.monotonic() + timeout)


# -- the modes ---------------------------------------------------------------------------------

GRACE_S = 60.0  # on top of a child's own deadline before the parent gives up on it


def max_rate_produce(
    bootstrap: str,
    topic: str,
    workload: Workload,
    *,
    duration_s: float | None = None,
    records: int | None = None,
    timeout_s: float = 600.0,
    extra_config: Mapping[str, object] | None = None,
) -> dict[str, float]:
    """Produce as fast as possible for ``duration_s`` or ``records`` records."""
    if (duration_s is None) == (records is None):
        raise ValueError("give exactly one of duration_s and records")
    spec = ProduceSpec(
        bootstrap,
        topic,
        workload,
        duration_s=duration_s,
        records=records,
        timeout_s=timeout_s,
        extra_config=tuple((extra_config or {}).items()),
    )
    return run_one(produce_child, spec, timeout=timeout_s + GRACE_S)


def fixed_rate_produce(
    bootstrap: str,
    topic: str,
    workload: Workload,
    rate: float,
    duration_s: float,
    timeout_s: float = 600.0,
) -> dict[str, float]:
    """``rate`` records/s for ``duration_s``; coordinated-omission-corrected latency."""
    spec = ProduceSpec(
        bootstrap, topic, workload, duration_s=duration_s, rate=rate, timeout_s=timeout_s
    )
    return run_one(produce_child, spec, timeout=timeout_s + GRACE_S)


def consume(
    bootstrap: str, topic: str, workload: Workload, records: int, timeout_s: float = 600.0
) -> dict[str, float]:
    """One consumer reads ``records`` records (all partitions, from offset 0)."""
    spec = ConsumeSpec(bootstrap, topic, workload, records=records, timeout_s=timeout_s)
    return run_one(consume_child, spec, timeout=timeout_s + GRACE_S)


def end_to_end(
    bootstrap: str,
    topic: str,
    workload: Workload,
    rate: float,
    duration_s: float,
    timeout_s: float = 600.0,
) -> dict[str, float]:
    """Producer and consumer processes at ``rate`` records/s: receive minus send stamp."""
    produce_spec = ProduceSpec(
        bootstrap,
        topic,
        workload,
        duration_s=duration_s,
        rate=rate,
        stamp=True,
        timeout_s=timeout_s,
    )
    consume_spec = ConsumeSpec(
        bootstrap,
        topic,
        workload,
        timeout_s=timeout_s,
        stamped=True,
        sample_stride=probe_stride(rate),
    )
    with Children() as children:
        warm, go, done = children.ctx.Event(), children.ctx.Event(), children.ctx.Event()
        total = children.ctx.Value("q", 0)
        consumer = children.start(e2e_consume_child, consume_spec, warm, go, total, done)
        producer = children.start(produce_child, produce_spec, warm, go, total)
        deadline = time.monotonic() + timeout_s + GRACE_S
        try:
            sent = children.result(producer, deadline)
        finally:
            done.set()
        received = children.result(consumer, deadline)
    return end_to_end_figures(sent, received, workload)


def end_to_end_figures(
    sent: dict[str, float], received: dict[str, float], workload: Workload
) -> dict[str, float]:
    figures = {k: v for k, v in received.items() if k.startswith("latency_")}
    figures.update(
        records=received["records"],
        expected=received["expected"],
        bytes=received["records"] * workload.record_size,
        seconds=sent["seconds"],
        target_rate=sent["target_rate"],
        achieved_rate=sent["achieved_rate"],
        behind=sent["behind"],
        behind_pct=sent["behind_pct"],
        records_per_s=received["records"] / max(sent["seconds"], 1e-9),
    )
    figures["mb_per_s"] = figures["records_per_s"] * workload.record_size / 1e6
    for side, result in (("producer", sent), ("consumer", received)):
        for key in ("client_cpu_util", "client_main_thread_util", "client_bound"):
            figures[f"{side}_{key}"] = result[key]
    figures["client_bound"] = max(sent["client_bound"], received["client_bound"])
    return figures


def backlog(
    bootstrap: str,
    topic: str,
    workload: Workload,
    backlog_bytes: int,
    timeout_s: float | None = None,
) -> dict[str, float]:
    """Write ``backlog_bytes`` of records, then time reading all of them from offset 0."""
    records = max(1, backlog_bytes // workload.record_size)
    timeout = timeout_s if timeout_s is not None else 300.0 + backlog_bytes / 2e6
    written = max_rate_produce(bootstrap, topic, workload, records=records, timeout_s=timeout)
    expected = int(written["end_offsets"])
    read = consume(bootstrap, topic, workload, expected, timeout_s=timeout)
    read.update(
        backlog_produce_records_per_s=written["records_per_s"],
        backlog_produce_mb_per_s=written["mb_per_s"],
        backlog_produce_seconds=written["seconds"],
    )
    return read


def enqueue_ceiling(
    workload: Workload, records: int = 300_000, timeout_s: float = 120.0
) -> dict[str, float]:
    """Records/s one producer process hands to librdkafka with no broker in the way."""
    plain = replace(workload, acks="1")  # no idempotence handshake to wait for
    return run_one(ceiling_child, plain, records, timeout=timeout_s)
