#!/usr/bin/env python3
"""Capture golden Kafka frames from real clients talking to a pydmq broker (DESIGN.md §7).

A pydmq broker process listens on a private port; a recording TCP proxy on loopback sits in
front of it, and the broker advertises the PROXY's address (``advertised.listeners``) so every
client connection, including the ones opened from Metadata, goes through the proxy.

The proxy forwards bytes unchanged in both directions and splits each stream into
size-prefixed frames: client->broker frames are requests, broker->client frames are responses,
matched by correlation id. For every (client, api_key, api_version) the FIRST request and
its response are kept, written as

    tests/unit/protocol/golden/<client>/<api_name>_v<version>.request.bin
    tests/unit/protocol/golden/<client>/<api_name>_v<version>.response.bin

(the frame without its 4-byte size prefix), plus ``tests/unit/protocol/golden/index.json``.
Frames above 64 KiB are skipped (a later, smaller frame of that kind is kept instead).

Clients driven, each through a short representative session with a few small records:
confluent-kafka, kafka-python, aiokafka, kcat and the Java kafka-clients (via
compat/java/target/InteropClient.class). Group-coordinator steps (subscribe, commit) are
optional: a failure there is printed and the rest of the capture goes on.

kcat produces with zstd: Debian's kcat 1.7.1 (librdkafka 2.0.2) sends gzip/snappy/lz4 batches
UNCOMPRESSED to pydmq (attributes 0), while confluent-kafka's librdkafka 2.16 compresses all
four codecs; zstd is the one codec that gives a compressed kcat frame.

Usage: .venv/bin/python scripts/capture_golden_frames.py [--out DIR] [--only client,...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from pydmq.protocol.messages import API_SCHEMAS  # noqa: E402
from pydmq.testing.process import BrokerProcess, free_port  # noqa: E402

DEFAULT_OUT = ROOT / "tests" / "unit" / "protocol" / "golden"
JAVA_DIR = ROOT / "compat" / "java"
MAX_FRAME = 64 * 1024
PARTITIONS = 3
CLIENTS = ("confluent_kafka", "kafka_python", "aiokafka", "kcat", "java")

_SIZE = struct.Struct(">i")
_REQ_HEAD = struct.Struct(">hhi")


# --------------------------------------------------------------------------- recording


@dataclass
class Capture:
    client: str
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    request: bytes
    response: bytes | None = None
    done: bool = False  # the response arrived (or will never come: connection closed)


@dataclass
class Recorder:
    """Keeps the first complete (request, response) pair per (client, api_key, version)."""

    captures: dict[tuple[str, int, int], Capture] = field(default_factory=dict)
    skipped_large: dict[tuple[str, int, int], int] = field(default_factory=dict)
    seen: dict[tuple[str, int, int], int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on_request(self, client: str, frame: bytes) -> Capture | None:
        if len(frame) < 10:
            return None
        key, version, corr = _REQ_HEAD.unpack_from(frame, 0)
        (client_len,) = struct.unpack_from(">h", frame, 8)
        client_id = (
            None if client_len < 0 else frame[10 : 10 + client_len].decode("utf-8", "replace")
        )
        triple = (client, key, version)
        with self.lock:
            self.seen[triple] = self.seen.get(triple, 0) + 1
            if triple in self.captures:
                return None
            if len(frame) > MAX_FRAME:
                self.skipped_large[triple] = self.skipped_large.get(triple, 0) + 1
                return None
            cap = Capture(client, key, version, corr, client_id, bytes(frame))
            self.captures[triple] = cap
            return cap

    def on_response(self, cap: Capture, frame: bytes) -> None:
        triple = (cap.client, cap.api_key, cap.api_version)
        with self.lock:
            if len(frame) > MAX_FRAME:
                # Give a later, smaller exchange of the same kind the chance to be kept.
                self.skipped_large[triple] = self.skipped_large.get(triple, 0) + 1
                if self.captures.get(triple) is cap:
                    del self.captures[triple]
                return
            cap.response = bytes(frame)
            cap.done = True

    def on_closed(self, pending: list[Capture]) -> None:
        """Requests that never got a response: acks=0 Produce keeps its request alone."""
        with self.lock:
            for cap in pending:
                triple = (cap.client, cap.api_key, cap.api_version)
                if cap.api_key == 0 and _produce_acks(cap.request) == 0:
                    cap.done = True
                elif self.captures.get(triple) is cap:
                    del self.captures[triple]


def _produce_acks(frame: bytes) -> int | None:
    try:
        from pydmq.protocol.headers import parse_request_header
        from pydmq.protocol.primitives import Reader

        header, pos = parse_request_header(memoryview(frame))
        req = API_SCHEMAS[0].decode_request(Reader(memoryview(frame), pos), header.api_version)
        return int(req.acks)
    except Exception:
        return None


def _split_frames(buf: bytearray) -> list[bytes]:
    frames = []
    while len(buf) >= 4:
        (size,) = _SIZE.unpack_from(buf, 0)
        if size < 0 or len(buf) < 4 + size:
            break
        frames.append(bytes(buf[4 : 4 + size]))
        del buf[: 4 + size]
    return frames


class RecordingProxy:
    """An asyncio TCP proxy on its own thread; ``label`` tags connections at accept time."""

    def __init__(self, recorder: Recorder, upstream_port: int) -> None:
        self.recorder = recorder
        self.upstream_port = upstream_port
        self.label = "unlabelled"
        self.port = 0
        self.connections = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> RecordingProxy:
        ready = threading.Event()

        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            async with server:
                await self._stop.wait()

        self._thread = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise TimeoutError("proxy did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        label = self.label
        self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return
        pending: dict[int, Capture] = {}

        async def pump(
            src: asyncio.StreamReader,
            dst: asyncio.StreamWriter,
            on_frame: Callable[[bytes], None],
        ) -> None:
            buf = bytearray()
            try:
                while True:
                    data = await src.read(65536)
                    if not data:
                        break
                    dst.write(data)
                    buf += data
                    for frame in _split_frames(buf):
                        on_frame(frame)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                if not dst.is_closing():
                    dst.close()

        def on_request(frame: bytes) -> None:
            cap = self.recorder.on_request(label, frame)
            if cap is not None:
                pending[cap.correlation_id] = cap

        def on_response(frame: bytes) -> None:
            if len(frame) < 4:
                return
            (corr,) = _SIZE.unpack_from(frame, 0)
            cap = pending.pop(corr, None)
            if cap is not None:
                self.recorder.on_response(cap, frame)

        await asyncio.gather(
            pump(reader, up_writer, on_request),
            pump(up_reader, writer, on_response),
        )
        self.recorder.on_closed(list(pending.values()))


# --------------------------------------------------------------------------- sessions

TS_BASE = 1_700_000_000_000


def _records(n: int, tag: str) -> list[tuple[bytes, bytes, list[tuple[str, bytes]]]]:
    """Small but compressible records: clients send tiny batches uncompressed otherwise."""
    return [
        (
            f"k-{i}".encode(),
            f"{tag}-value-{i}-{'abcdefghij' * 8}".encode(),
            [("idx", str(i).encode())],
        )
        for i in range(n)
    ]


def _optional(step: str, fn: Callable[[], object]) -> None:
    """Group-coordinator steps: captured when the broker serves them, never fatal."""
    try:
        fn()
    except Exception as exc:
        print(f"    optional step {step!r} failed: {exc!r}", flush=True)


def _poll_group_confluent(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "gf-ck-group",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([topic])
        got, deadline = 0, time.monotonic() + 20
        while got < 6 and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                got += 1
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def session_confluent_kafka(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicCollection, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

    topic, doomed = "gf-ck", "gf-ck-doomed"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics(
        [NewTopic(topic, PARTITIONS, 1), NewTopic(doomed, 1, 1)], operation_timeout=30
    ).values():
        fut.result(30)
    admin.describe_topics(TopicCollection([topic])).get(topic).result(30)  # type: ignore[union-attr]
    admin.list_topics(timeout=30)
    admin.describe_cluster().result(30)
    for fut in admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values():
        fut.result(30)
    for fut in admin.delete_topics([doomed], operation_timeout=30).values():
        fut.result(30)

    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "compression.type": codec,
                "linger.ms": 5,
            }
        )
        for i, (k, v, h) in enumerate(_records(4, codec)):
            producer.produce(
                topic, v, k, partition=i % PARTITIONS, headers=h, timestamp=TS_BASE + i
            )
        assert producer.flush(30) == 0

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "gf-ck-group",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    found = consumer.offsets_for_times(
        [TopicPartition(topic, p, TS_BASE + 1) for p in range(PARTITIONS)], timeout=30
    )
    consumer.assign([TopicPartition(topic, tp.partition, max(tp.offset, 0)) for tp in found])
    got = 0
    deadline = time.monotonic() + 30
    while got < 6 and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and msg.error() is None:
            got += 1
    consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    consumer.close()
    _optional("group consumer", lambda: _poll_group_confluent(bootstrap, topic))


def session_kafka_python(bootstrap: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

    topic, doomed = "gf-kp", "gf-kp-doomed"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1), NewTopic(doomed, 1, 1)])
    admin.list_topics()
    admin.describe_topics([topic])
    admin.describe_cluster()
    admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    admin.delete_topics([doomed])

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", compression_type="gzip")
    for i, (k, v, h) in enumerate(_records(6, "kp")):
        producer.send(
            topic, v, k, headers=h, partition=i % PARTITIONS, timestamp_ms=TS_BASE + i
        ).get(30)
    producer.flush()
    producer.close()

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    consumer.offsets_for_times(dict.fromkeys(tps, TS_BASE + 1))
    consumer.end_offsets(tps)
    got = 0
    deadline = time.monotonic() + 40
    while got < 6 and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=1000).values():
            got += len(batch)
    consumer.close()

    def group() -> None:
        grouped = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id="gf-kp-group",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        try:
            got, deadline = 0, time.monotonic() + 20
            while got < 6 and time.monotonic() < deadline:
                for batch in grouped.poll(timeout_ms=1000).values():
                    got += len(batch)
            grouped.commit()
        finally:
            grouped.close()
        admin.list_groups()
        admin.describe_groups(["gf-kp-group"])
        admin.list_group_offsets("gf-kp-group")

    _optional("group consumer", group)
    admin.close()


def session_aiokafka(bootstrap: str) -> None:
    topic = "gf-aio"

    async def run() -> None:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
        from aiokafka.structs import TopicPartition

        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, enable_idempotence=True, compression_type="lz4"
        )
        await producer.start()
        try:
            for i, (k, v, h) in enumerate(_records(6, "aio")):
                await producer.send_and_wait(
                    topic, v, k, partition=i % PARTITIONS, timestamp_ms=TS_BASE + i, headers=h
                )
        finally:
            await producer.stop()

        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
            consumer.assign(tps)
            got = 0
            deadline = time.monotonic() + 40
            while got < 6 and time.monotonic() < deadline:
                for batch in (await consumer.getmany(timeout_ms=1000)).values():
                    got += len(batch)
            await consumer.offsets_for_times(dict.fromkeys(tps, TS_BASE + 1))
            await consumer.end_offsets(tps)
        finally:
            await consumer.stop()

    async def group() -> None:
        from aiokafka import AIOKafkaConsumer

        grouped = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id="gf-aio-group",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await grouped.start()
        try:
            got, deadline = 0, time.monotonic() + 20
            while got < 6 and time.monotonic() < deadline:
                for batch in (await grouped.getmany(timeout_ms=1000)).values():
                    got += len(batch)
            await grouped.commit()
        finally:
            await grouped.stop()

    asyncio.run(run())
    _optional("group consumer", lambda: asyncio.run(group()))


def session_kcat(bootstrap: str) -> None:
    topic = "gf-kcat"  # auto-created by Metadata (kcat has no admin API)
    lines = b"".join(k + b":" + v + b"\n" for k, v, _ in _records(6, "kcat"))
    base = ["kcat", "-b", bootstrap]
    subprocess.run(
        [*base, "-P", "-t", topic, "-K:", "-z", "zstd", "-H", "src=kcat"],
        input=lines,
        check=True,
        timeout=60,
    )
    subprocess.run(
        [*base, "-C", "-t", topic, "-o", "beginning", "-c", "6", "-e", "-q"],
        check=True,
        timeout=60,
        capture_output=True,
    )
    subprocess.run([*base, "-L", "-t", topic], check=True, timeout=60, capture_output=True)


def _java(args: list[str]) -> None:
    classpath = f"{JAVA_DIR / 'target'}:{JAVA_DIR / 'lib'}/*"
    cmd = [
        "java",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp",
        classpath,
        "InteropClient",
        *args,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"InteropClient {args[0]} failed:\n{proc.stderr[-3000:]}")


def session_java(bootstrap: str) -> None:
    topic = "gf-java"
    common = ["--bootstrap", bootstrap, "--topic", topic]
    _java(["create-topic", *common, "--partitions", str(PARTITIONS)])
    _java(
        [
            "produce",
            *common,
            "--count",
            "6",
            "--partitions",
            str(PARTITIONS),
            "--base-ts",
            str(TS_BASE),
            "--compression",
            "zstd",
        ]
    )
    _java(["consume", *common, "--count", "2", "--partition", "0", "--offset", "0"])
    _optional(
        "group consumer",
        lambda: _java(
            [
                "consume",
                *common,
                "--count",
                "6",
                "--group",
                "gf-java-group",
                "--timeout-ms",
                "20000",
            ]
        ),
    )
    _java(["list-offsets", *common, "--spec", "latest"])
    _java(["offsets-for-times", *common, "--query", f"0:{TS_BASE + 1},1:{TS_BASE + 1}"])


SESSIONS: dict[str, Callable[[str], None]] = {
    "confluent_kafka": session_confluent_kafka,
    "kafka_python": session_kafka_python,
    "aiokafka": session_aiokafka,
    "kcat": session_kcat,
    "java": session_java,
}


def client_version(client: str) -> str:
    try:
        if client == "confluent_kafka":
            import confluent_kafka

            ck, lib = confluent_kafka.version(), confluent_kafka.libversion()
            ck = ck[0] if isinstance(ck, tuple) else ck
            return f"{ck} (librdkafka {lib[0] if isinstance(lib, tuple) else lib})"
        if client == "kafka_python":
            import kafka

            return str(kafka.__version__)
        if client == "aiokafka":
            import aiokafka

            return str(aiokafka.__version__)
        if client == "kcat":
            out = subprocess.run(["kcat", "-V"], capture_output=True, text=True).stdout
            line = next((x for x in out.splitlines() if x.startswith("Version")), "")
            return line.split("(")[0].replace("Version", "").strip() + (
                " (librdkafka " + line.split("librdkafka ")[1].split()[0] + ")"
                if "librdkafka " in line
                else ""
            )
        if client == "java":
            jars = sorted((JAVA_DIR / "lib").glob("kafka-clients-*.jar"))
            return jars[0].stem.removeprefix("kafka-clients-") if jars else "unknown"
    except Exception as exc:  # a version string must never stop a capture
        return f"unknown ({exc})"
    return "unknown"


# --------------------------------------------------------------------------- main


def write_out(recorder: Recorder, out: Path, clients: list[str]) -> list[dict[str, object]]:
    index: list[dict[str, object]] = []
    versions = {c: client_version(c) for c in clients}
    for client in clients:
        shutil.rmtree(out / client, ignore_errors=True)
    for (client, key, version), cap in sorted(recorder.captures.items()):
        if not cap.done or client not in clients:
            continue
        name = API_SCHEMAS[key].name if key in API_SCHEMAS else f"api{key}"
        stem = f"{name}_v{version}"
        folder = out / client
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{stem}.request.bin").write_bytes(cap.request)
        if cap.response is not None:
            (folder / f"{stem}.response.bin").write_bytes(cap.response)
        index.append(
            {
                "client": client,
                "client_version": versions[client],
                "client_id": cap.client_id,
                "api_key": key,
                "api_name": name,
                "api_version": version,
                "correlation_id": cap.correlation_id,
                "request_file": f"{client}/{stem}.request.bin",
                "request_size": len(cap.request),
                "response_file": (
                    f"{client}/{stem}.response.bin" if cap.response is not None else None
                ),
                "response_size": len(cap.response) if cap.response is not None else None,
            }
        )
    old: list[dict[str, object]] = []
    index_path = out / "index.json"
    if index_path.exists():
        old = [e for e in json.loads(index_path.read_text()) if e["client"] not in clients]
    merged = sorted(
        old + index,
        key=lambda e: (str(e["client"]), int(e["api_key"]), int(e["api_version"])),  # type: ignore[call-overload]
    )
    index_path.write_text(json.dumps(merged, indent=1) + "\n")
    return merged


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--only", default=",".join(CLIENTS), help="comma-separated clients")
    args = parser.parse_args()
    clients = [c for c in args.only.split(",") if c]
    unknown = set(clients) - set(SESSIONS)
    if unknown:
        parser.error(f"unknown clients: {sorted(unknown)}")

    recorder = Recorder()
    broker_port = free_port()
    proxy = RecordingProxy(recorder, broker_port).start()
    bootstrap = f"127.0.0.1:{proxy.port}"
    with tempfile.TemporaryDirectory(prefix="pydmq-golden-") as tmp:
        broker = BrokerProcess(
            Path(tmp) / "data",
            port=broker_port,
            overrides={
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}",
                "num.partitions": PARTITIONS,
                "auto.create.topics.enable": "true",
                "offsets.topic.replication.factor": 1,
                "group.initial.rebalance.delay.ms": 0,
            },
            log_path=Path(tmp) / "broker.log",
        )
        broker.start()
        failures = []
        try:
            for client in clients:
                proxy.label = client
                started = time.monotonic()
                print(f"[{client}] session via {bootstrap} ...", flush=True)
                try:
                    SESSIONS[client](bootstrap)
                except Exception as exc:
                    failures.append(client)
                    print(f"[{client}] session FAILED: {exc!r}", flush=True)
                time.sleep(0.5)  # let the last responses of closing connections drain
                print(f"[{client}] done in {time.monotonic() - started:.1f} s", flush=True)
        finally:
            broker.stop()
            proxy.stop()
            if failures:
                print((Path(tmp) / "broker.log").read_text()[-3000:])

    index = write_out(recorder, args.out, clients)
    total = sum(int(e["request_size"]) + int(e["response_size"] or 0) for e in index)  # type: ignore[call-overload]
    for e in index:
        print(
            f"{e['client']:16} {e['api_name']:24} v{e['api_version']:<3}"
            f" req {e['request_size']:>6} resp {e['response_size']}"
        )
    for triple, n in sorted(recorder.skipped_large.items()):
        print(f"skipped {n} frame(s) over {MAX_FRAME} bytes for {triple}")
    print(f"{len(index)} exchanges, {total} bytes in {args.out}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
