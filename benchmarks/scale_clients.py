"""Scale of connections and consumer groups, for pydmq and Apache Kafka 4.4 in the same run.

For each broker (``--targets``, default ``kafka,pydmq``): a fresh single node, then

- **connections**: ``--idle`` plain asyncio sockets each send one ApiVersions and stay idle;
  the broker's RSS growth per connection; then another client (a process of its own, so
  this one's event loop does not colour its figures) times ``--probes`` ApiVersions and
  acks=1 Produce requests of one small record, one at a time: their p50/p99. Then
  ``--active`` more connections produce a 100-byte batch every ``--active-interval-ms``
  each (each at a random phase of it) while the other client probes again;
- **groups**: ``--groups`` classic groups of one member (JoinGroup, SyncGroup, Heartbeat,
  OffsetCommit), then as many KIP-848 groups (ConsumerGroupHeartbeat, OffsetCommit): set-up
  rate and the broker's RSS growth per group, then ``--commit-rounds`` OffsetCommits per
  group: commits/s;
- **one big group** of ``--members`` members, classic then KIP-848, over a topic of
  ``--partitions`` partitions, each member on a connection of its own and heartbeating every
  ``--heartbeat-ms``: seconds from the first join until every member holds its assignment of
  the same generation (classic) or epoch (KIP-848), the partitions covered once.

Requests are built with pydmq's own codecs (``pydmq.protocol``), not a client library: 10,000
librdkafka instances would measure librdkafka. Both brokers run with
``group.initial.rebalance.delay.ms=0`` and a 500 ms KIP-848 heartbeat interval, so the
figures are the coordinators' rather than their configured delays. The client process and
the brokers get the hard RLIMIT_NOFILE as their soft limit.

    python benchmarks/scale_clients.py                              # full sizes, both
    python benchmarks/scale_clients.py --targets pydmq --idle 2000 --groups 1000 --members 100

Prints a table and writes the figures as JSON (``--json``). A script that prints figures,
never a timed assertion (DESIGN.md section 7).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(REPO))

from benchmarks.common import single_node_process  # noqa: E402

from pydmq.groups.consumer.embedded import (  # noqa: E402
    encode_assignment,
    encode_subscription,
)
from pydmq.protocol.framing import encode_request_frame  # noqa: E402
from pydmq.protocol.headers import parse_response_header  # noqa: E402
from pydmq.protocol.messages import API_SCHEMAS  # noqa: E402
from pydmq.protocol.messages.api_versions import ApiVersionsRequest  # noqa: E402
from pydmq.protocol.messages.consumer_group_heartbeat import (  # noqa: E402
    ConsumerGroupHeartbeatRequest,
    TopicPartitions,
)
from pydmq.protocol.messages.find_coordinator import FindCoordinatorRequest  # noqa: E402
from pydmq.protocol.messages.heartbeat import HeartbeatRequest  # noqa: E402
from pydmq.protocol.messages.join_group import (  # noqa: E402
    JoinGroupRequest,
    JoinGroupRequestProtocol,
)
from pydmq.protocol.messages.offset_commit import (  # noqa: E402
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from pydmq.protocol.messages.produce import (  # noqa: E402
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from pydmq.protocol.messages.sync_group import (  # noqa: E402
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)
from pydmq.protocol.records import SimpleRecord, build_batch  # noqa: E402

API_VERSIONS, PRODUCE, JOIN, SYNC, HEARTBEAT, COMMIT, CG_HEARTBEAT = 18, 0, 11, 14, 12, 8, 68
FIND_COORDINATOR = 10
VERSIONS = {
    API_VERSIONS: 3, PRODUCE: 9, FIND_COORDINATOR: 4, JOIN: 9, SYNC: 5, HEARTBEAT: 4,
    COMMIT: 9, CG_HEARTBEAT: 0,
}  # fmt: skip
MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS = 79, 27
SMALL_TOPIC, WIDE_TOPIC = "scale-small", "scale-wide"
BROKER_PROPS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "500",
    # The groups of one member heartbeat once; their sessions outlast the phase (the largest
    # each broker allows).
    "group.consumer.session.timeout.ms": "60000",
    "offsets.topic.num.partitions": "1",
}
# pydmq caps its connections at what RLIMIT_NOFILE leaves beside its storage share (half by
# default): this run holds few segment files and 11,000+ connections, so it gives storage a
# tenth (pydmq.net.connection_quotas).
PYDMQ_PROPS = {**BROKER_PROPS, "pydmq.log.open.files.share": "0.1"}
SINGLE_SESSION_MS = 1_800_000  # group.max.session.timeout.ms
CONNECT_BATCH = 500  # connections opened at once (the listen backlog is 1,024 on pydmq)
PHASE_TIMEOUT_S = 300.0


class Wire:
    """One client connection: one request at a time, decoded with pydmq's codecs. Owned by
    the coroutine that opened it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.correlation_id = 0

    @classmethod
    async def open(cls, host: str, port: int) -> Wire:
        reader, writer = await asyncio.open_connection(host, port, limit=1 << 20)
        return cls(reader, writer)

    async def call(self, api_key: int, request: Any) -> Any:
        version = VERSIONS[api_key]
        self.correlation_id += 1
        frame = encode_request_frame(api_key, version, request, self.correlation_id, "scale")
        self.writer.write(frame)
        (size,) = struct.unpack(">i", await self.reader.readexactly(4))
        body = await self.reader.readexactly(size)
        reader = parse_response_header(body, api_key, version)
        return API_SCHEMAS[api_key].decode_response(reader, version)

    def close(self) -> None:
        self.writer.close()


def api_versions() -> ApiVersionsRequest:
    return ApiVersionsRequest(client_software_name="scale", client_software_version="1")


def produce_request(batch: bytes, acks: int = 1) -> ProduceRequest:
    data = PartitionProduceData(index=0, records=batch)
    topic = TopicProduceData(name=SMALL_TOPIC, partition_data=[data])
    return ProduceRequest(acks=acks, timeout=30_000, topic_data=[topic])


def small_batch() -> bytes:
    return build_batch([SimpleRecord(None, b"x" * 100, (), int(time.time() * 1000))])


def rss_kib(pid: int) -> int:
    """Resident set size of process ``pid`` in KiB (/proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


async def settle_rss(pid: int) -> int:
    """The broker's RSS once it has had a moment to finish what the last requests started."""
    await asyncio.sleep(2.0)
    return rss_kib(pid)


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def gather_bounded(jobs: Sequence[Callable[[], Awaitable[Any]]], width: int) -> list[Any]:
    """Run ``jobs`` at most ``width`` at a time; their results in order."""
    out: list[Any] = [None] * len(jobs)
    for start in range(0, len(jobs), width):
        chunk = jobs[start : start + width]
        out[start : start + len(chunk)] = await asyncio.gather(*(job() for job in chunk))
    return out


# -- connections --------------------------------------------------------------------------
async def open_idle(host: str, port: int, count: int) -> list[Wire]:
    """``count`` connections that each sent one ApiVersions and then stay idle."""

    async def one() -> Wire:
        wire = await Wire.open(host, port)
        await wire.call(API_VERSIONS, api_versions())
        return wire

    return await gather_bounded([one] * count, CONNECT_BATCH)


async def probe(bootstrap: str, count: int) -> dict[str, float]:
    """Another client's ApiVersions and Produce latencies (ms), run in a process of its own."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--probe", bootstrap, "--probes", str(count),
        stdout=subprocess.PIPE,
    )  # fmt: skip
    out, _ = await proc.communicate()
    return dict(json.loads(out))


async def run_probe(bootstrap: str, count: int) -> dict[str, float]:
    """The ``--probe`` process: ``count`` ApiVersions then ``count`` Produce, one at a time."""
    host, port = bootstrap.rsplit(":", 1)
    wire = await Wire.open(host, int(port))
    figures: dict[str, float] = {}
    batch = small_batch()
    for name, api_key, request in (
        ("api_versions", API_VERSIONS, api_versions()),
        ("produce", PRODUCE, produce_request(batch)),
    ):
        samples = []
        for _ in range(count):
            started = time.perf_counter()
            await wire.call(api_key, request)
            samples.append((time.perf_counter() - started) * 1000)
            await asyncio.sleep(0.002)
        figures[f"{name}_p50_ms"] = statistics.median(samples)
        figures[f"{name}_p99_ms"] = percentile(samples, 0.99)
    wire.close()
    return figures


async def active_load(
    host: str, port: int, count: int, interval_s: float, stop: asyncio.Event
) -> list[int]:
    """``count`` connections producing one small batch every ``interval_s`` until ``stop``;
    how many each produced."""
    wires = await gather_bounded([lambda: Wire.open(host, port)] * count, CONNECT_BATCH)
    batch = small_batch()

    async def produce(wire: Wire) -> int:
        sent = 0
        # Each at its own phase of the interval, as independent clients are: in lockstep,
        # every interval would start with a burst of ``count`` requests on both brokers.
        await asyncio.sleep(random.uniform(0, interval_s))
        while not stop.is_set():
            await wire.call(PRODUCE, produce_request(batch))
            sent += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval_s)
        wire.close()
        return sent

    return list(await asyncio.gather(*(produce(w) for w in wires)))


async def connections(bootstrap: str, pid: int, args: argparse.Namespace) -> dict[str, float]:
    host, port = bootstrap.rsplit(":", 1)
    out: dict[str, float] = {}
    before = await settle_rss(pid)
    started = time.perf_counter()
    idle = await open_idle(host, int(port), args.idle)
    out["idle_open_s"] = time.perf_counter() - started
    after = await settle_rss(pid)
    out["rss_per_idle_connection_kib"] = (after - before) / max(1, args.idle)
    out.update({f"idle_{k}": v for k, v in (await probe(bootstrap, args.probes)).items()})
    stop = asyncio.Event()
    load = asyncio.create_task(
        active_load(host, int(port), args.active, args.active_interval_ms / 1000, stop)
    )
    await asyncio.sleep(2.0)  # the active connections are open and producing
    started = time.perf_counter()
    out.update({f"active_{k}": v for k, v in (await probe(bootstrap, args.probes)).items()})
    stop.set()
    produced = sum(await load)
    out["active_produce_per_s"] = produced / (time.perf_counter() - started + 2.0)
    for wire in idle:
        wire.close()
    return out


# -- groups of one member ------------------------------------------------------------------
def commit_request(group: str, generation: int, member: str, offset: int) -> OffsetCommitRequest:
    partition = OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)
    topic = OffsetCommitRequestTopic(name=SMALL_TOPIC, partitions=[partition])
    return OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member,
        retention_time=-1, topics=[topic],
    )  # fmt: skip


def classic_join(group: str, member: str, topic: str, session_ms: int = 30_000) -> JoinGroupRequest:
    protocol = JoinGroupRequestProtocol(name="range", metadata=encode_subscription([topic]))
    return JoinGroupRequest(
        group_id=group, session_timeout=session_ms, rebalance_timeout=60_000, member_id=member,
        protocol_type="consumer", protocols=[protocol],
    )  # fmt: skip


def check(error_code: int, what: str) -> None:
    if error_code != 0:
        raise RuntimeError(f"{what}: error {error_code}")


@dataclass
class Member:
    """One member of a group of one: its group, id and generation (or epoch)."""

    group: str
    member_id: str = ""
    generation: int = -1


async def classic_single(wire: Wire, group: str) -> Member:
    """Join ``group`` alone (classic), sync, heartbeat and commit once."""
    # These members heartbeat once: a session outlasting the phase keeps them in the group
    answer = await wire.call(JOIN, classic_join(group, "", SMALL_TOPIC, SINGLE_SESSION_MS))
    if answer.error_code == MEMBER_ID_REQUIRED:
        retry = classic_join(group, answer.member_id, SMALL_TOPIC, SINGLE_SESSION_MS)
        answer = await wire.call(JOIN, retry)
    check(answer.error_code, f"JoinGroup {group}")
    member = Member(group, answer.member_id, answer.generation_id)
    assignment = SyncGroupRequestAssignment(
        member_id=member.member_id, assignment=encode_assignment([(SMALL_TOPIC, [0])])
    )
    synced = await wire.call(
        SYNC,
        SyncGroupRequest(
            group_id=group, generation_id=member.generation, member_id=member.member_id,
            protocol_type="consumer", protocol_name="range", assignments=[assignment],
        ),
    )  # fmt: skip
    check(synced.error_code, f"SyncGroup {group}")
    beat = await wire.call(
        HEARTBEAT,
        HeartbeatRequest(
            group_id=group, generation_id=member.generation, member_id=member.member_id
        ),
    )
    check(beat.error_code, f"Heartbeat {group}")
    await commit(wire, member, 0)
    return member


async def consumer_single(wire: Wire, group: str) -> Member:
    """Join ``group`` alone (KIP-848), heartbeat its assignment back and commit once."""
    answer = await wire.call(
        CG_HEARTBEAT,
        ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=str(uuid.uuid4()), member_epoch=0,
            rebalance_timeout=60_000, subscribed_topic_names=[SMALL_TOPIC],
            topic_partitions=[],
        ),
    )  # fmt: skip
    check(answer.error_code, f"ConsumerGroupHeartbeat {group}")
    member = Member(group, answer.member_id, answer.member_epoch)
    owned = answer.assignment.topic_partitions if answer.assignment else []
    again = await wire.call(
        CG_HEARTBEAT,
        ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=member.member_id, member_epoch=member.generation,
            topic_partitions=owned,
        ),
    )  # fmt: skip
    check(again.error_code, f"ConsumerGroupHeartbeat {group}")
    member.generation = again.member_epoch
    await commit(wire, member, 0)
    return member


async def commit(wire: Wire, member: Member, offset: int) -> None:
    answer = await wire.call(
        COMMIT, commit_request(member.group, member.generation, member.member_id, offset)
    )
    for topic in answer.topics:
        for partition in topic.partitions:
            check(partition.error_code, f"OffsetCommit {member.group}")


async def many_groups(
    bootstrap: str, pid: int, args: argparse.Namespace, kind: str
) -> dict[str, float]:
    """``--groups`` groups of one member of ``kind`` (classic or consumer) over ``--width``
    connections: set-up rate, RSS per group, then commit throughput."""
    host, port = bootstrap.rsplit(":", 1)
    wires = [await Wire.open(host, int(port)) for _ in range(args.width)]
    join = classic_single if kind == "classic" else consumer_single
    names = [f"{kind}-{i}" for i in range(args.groups)]
    before = await settle_rss(pid)
    started = time.perf_counter()

    async def lane(index: int) -> list[Member]:
        return [await join(wires[index], g) for g in names[index :: args.width]]

    lanes = await asyncio.gather(*(lane(i) for i in range(args.width)))
    out = {f"{kind}_groups_per_s": args.groups / (time.perf_counter() - started)}
    out[f"{kind}_rss_per_group_kib"] = (await settle_rss(pid) - before) / args.groups

    async def commits(index: int) -> None:
        for offset in range(1, args.commit_rounds + 1):
            for member in lanes[index]:
                await commit(wires[index], member, offset)

    started = time.perf_counter()
    await asyncio.gather(*(commits(i) for i in range(args.width)))
    total = args.groups * args.commit_rounds
    out[f"{kind}_commits_per_s"] = total / (time.perf_counter() - started)
    for wire in wires:
        wire.close()
    return out


# -- one big group -------------------------------------------------------------------------
@dataclass
class BigGroup:
    """What the members of one big group hold, for the convergence check."""

    partitions: int
    held: dict[int, tuple[int, frozenset[int]]] = field(default_factory=dict)
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def update(self, index: int, generation: int, owned: frozenset[int]) -> None:
        self.held[index] = (generation, owned)

    def converged(self, members: int) -> bool:
        """Every member reported, all at one generation (epoch), every partition held once,
        and balanced (sizes within one): a member holding nothing while another holds all
        is a target not computed yet (Kafka 4.4 delays it by its assignment interval)."""
        if len(self.held) < members:
            return False
        generations = {g for g, _ in self.held.values()}
        if len(generations) != 1:
            return False
        owned = [p for _, parts in self.held.values() for p in parts]
        sizes = [len(parts) for _, parts in self.held.values()]
        return (
            len(owned) == self.partitions
            and len(set(owned)) == self.partitions
            and max(sizes) - min(sizes) <= 1
        )


def round_robin(member_ids: Sequence[str], partitions: int) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {m: [] for m in member_ids}
    for p in range(partitions):
        out[member_ids[p % len(member_ids)]].append(p)
    return out


async def classic_member(
    wire: Wire, index: int, state: BigGroup, group: str, beat_s: float
) -> None:
    """A classic member: join (rejoining on any error), the leader assigns round-robin, sync,
    then heartbeat until the group converged."""
    member_id = ""
    while not state.done.is_set():
        answer = await wire.call(JOIN, classic_join(group, member_id, WIDE_TOPIC))
        member_id = answer.member_id or member_id
        if answer.error_code in (MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS):
            continue
        check(answer.error_code, "JoinGroup")
        assignments = []
        if answer.leader == member_id:
            plan = round_robin([m.member_id for m in answer.members], state.partitions)
            assignments = [
                SyncGroupRequestAssignment(
                    member_id=m, assignment=encode_assignment([(WIDE_TOPIC, parts)])
                )
                for m, parts in plan.items()
            ]
        synced = await wire.call(
            SYNC,
            SyncGroupRequest(
                group_id=group, generation_id=answer.generation_id, member_id=member_id,
                protocol_type="consumer", protocol_name="range", assignments=assignments,
            ),
        )  # fmt: skip
        if synced.error_code != 0:
            continue
        state.update(index, answer.generation_id, decode_owned(synced.assignment))
        while not state.done.is_set():
            await asyncio.sleep(beat_s)
            beat = await wire.call(
                HEARTBEAT,
                HeartbeatRequest(
                    group_id=group, generation_id=answer.generation_id, member_id=member_id
                ),
            )
            if beat.error_code != 0:
                break


def decode_owned(assignment: bytes) -> frozenset[int]:
    """The partitions of a ConsumerProtocolAssignment v0 of one topic."""
    if not assignment:
        return frozenset()
    (topics,) = struct.unpack_from(">i", assignment, 2)
    position, owned = 6, set[int]()
    for _ in range(topics):
        (length,) = struct.unpack_from(">h", assignment, position)
        position += 2 + length
        (count,) = struct.unpack_from(">i", assignment, position)
        owned.update(struct.unpack_from(f">{count}i", assignment, position + 4))
        position += 4 + 4 * count
    return frozenset(owned)


async def consumer_member(
    wire: Wire, index: int, state: BigGroup, group: str, beat_s: float
) -> None:
    """A KIP-848 member: heartbeat every ``beat_s``, owning at once what it is assigned."""
    member_id, epoch = str(uuid.uuid4()), 0
    owned: list[TopicPartitions] = []
    while not state.done.is_set():
        answer = await wire.call(
            CG_HEARTBEAT,
            ConsumerGroupHeartbeatRequest(
                group_id=group, member_id=member_id, member_epoch=epoch,
                rebalance_timeout=60_000,
                subscribed_topic_names=[WIDE_TOPIC] if epoch == 0 else None,
                topic_partitions=owned,
            ),
        )  # fmt: skip
        check(answer.error_code, "ConsumerGroupHeartbeat")
        member_id, epoch = answer.member_id or member_id, answer.member_epoch
        if answer.assignment is not None:
            owned = answer.assignment.topic_partitions
        state.update(index, epoch, frozenset(p for t in owned for p in t.partitions))
        await asyncio.sleep(beat_s)


async def big_group(
    bootstrap: str, pid: int, args: argparse.Namespace, kind: str
) -> dict[str, float]:
    """One group of ``--members`` members of ``kind``: seconds to converge, RSS growth."""
    host, port = bootstrap.rsplit(":", 1)
    wires = await gather_bounded([lambda: Wire.open(host, int(port))] * args.members, 200)
    state = BigGroup(args.partitions)
    member = classic_member if kind == "classic" else consumer_member
    before = await settle_rss(pid)
    started = time.perf_counter()
    tasks = [
        asyncio.create_task(member(w, i, state, f"big-{kind}", args.heartbeat_ms / 1000))
        for i, w in enumerate(wires)
    ]
    out: dict[str, float] = {}
    while time.perf_counter() - started < PHASE_TIMEOUT_S:
        if state.converged(args.members):
            out[f"big_{kind}_converge_s"] = time.perf_counter() - started
            break
        failed = next((t for t in tasks if t.done() and t.exception()), None)
        if failed is not None:
            raise RuntimeError(f"{kind} member failed") from failed.exception()
        await asyncio.sleep(0.02)
    else:
        out[f"big_{kind}_converge_s"] = float("nan")
    state.done.set()
    out[f"big_{kind}_rss_kib"] = float(rss_kib(pid) - before)
    await asyncio.wait(tasks, timeout=30)
    for wire in wires:
        wire.close()
    return out


# -- the run ------------------------------------------------------------------------------
def create_topics(bootstrap: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    deadline = time.monotonic() + 120
    for name, count in ((SMALL_TOPIC, 1), (WIDE_TOPIC, partitions)):
        while True:
            try:
                admin.create_topics([NewTopic(name, count, 1)])[name].result(60)
                break
            except Exception as exc:
                if "already exists" in str(exc).lower():
                    break
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)


async def coordinator_ready(bootstrap: str) -> None:
    """FindCoordinator until the group coordinator is there (Kafka creates
    ``__consumer_offsets`` on the first one and answers COORDINATOR_NOT_AVAILABLE meanwhile)."""
    host, port = bootstrap.rsplit(":", 1)
    wire = await Wire.open(host, int(port))
    deadline = time.monotonic() + 60
    request = FindCoordinatorRequest(key_type=0, coordinator_keys=["classic-0"])
    while (await wire.call(FIND_COORDINATOR, request)).coordinators[0].error_code != 0:
        if time.monotonic() > deadline:
            raise RuntimeError("no group coordinator within 60 s")
        await asyncio.sleep(0.2)
    await asyncio.sleep(1.0)  # Kafka: the partition's coordinator finishes loading
    wire.close()


async def measure(
    bootstrap: str, pid: int, args: argparse.Namespace, target: str
) -> dict[str, float]:
    out: dict[str, float] = {"rss_start_kib": float(rss_kib(pid))}
    phases: list[Callable[[], Awaitable[dict[str, float]]]] = []
    if args.idle or args.active:
        phases.append(lambda: connections(bootstrap, pid, args))
    for kind in ("classic", "consumer"):
        if args.groups:
            phases.append(partial(many_groups, bootstrap, pid, args, kind))
    for kind in ("classic", "consumer"):
        if args.members:
            phases.append(partial(big_group, bootstrap, pid, args, kind))
    if args.groups or args.members:
        await coordinator_ready(bootstrap)
    for phase in phases:
        figures = await phase()
        print(f"{target}: {json.dumps(figures)}", flush=True)
        out.update(figures)
    return out


def raise_nofile() -> None:
    """The hard RLIMIT_NOFILE as the soft one (the brokers, children, inherit it)."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def table(results: dict[str, dict[str, float]]) -> str:
    targets = list(results)
    keys = list(dict.fromkeys(k for r in results.values() for k in r))
    lines = [f"{'figure':40}" + "".join(f"{t:>14}" for t in targets)]
    if {"pydmq", "kafka"} <= set(targets):
        lines[0] += f"{'pydmq/kafka':>14}"
    for key in keys:
        row = f"{key:40}" + "".join(f"{results[t].get(key, float('nan')):14,.2f}" for t in targets)
        if {"pydmq", "kafka"} <= set(targets):
            ours, theirs = results["pydmq"].get(key), results["kafka"].get(key)
            ratio = ours / theirs if ours is not None and theirs else float("nan")
            row += f"{ratio:14.2f}"
        lines.append(row)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", default="kafka,pydmq")
    parser.add_argument("--idle", type=int, default=10_000)
    parser.add_argument("--active", type=int, default=1_000)
    parser.add_argument("--active-interval-ms", type=float, default=1000.0)
    parser.add_argument("--probes", type=int, default=500)
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--commit-rounds", type=int, default=3)
    parser.add_argument("--width", type=int, default=50, help="connections for the groups")
    parser.add_argument("--members", type=int, default=1_000)
    parser.add_argument("--partitions", type=int, default=1_000)
    parser.add_argument("--heartbeat-ms", type=float, default=500.0)
    parser.add_argument("--json", default="scale_clients.json")
    parser.add_argument("--probe", help=argparse.SUPPRESS)  # the other client's process
    args = parser.parse_args()
    if args.probe:
        print(json.dumps(asyncio.run(run_probe(args.probe, args.probes))))
        return
    raise_nofile()
    workdir = Path(tempfile.mkdtemp(prefix="pydmq-scale-clients-"))
    results: dict[str, dict[str, float]] = {}
    try:
        for target in args.targets.split(","):
            props = PYDMQ_PROPS if target == "pydmq" else BROKER_PROPS
            with single_node_process(target, workdir, props) as (bootstrap, pid):
                create_topics(bootstrap, args.partitions)
                results[target] = asyncio.run(measure(bootstrap, pid, args, target))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(table(results))
    sizes = {k: getattr(args, k) for k in ("idle", "active", "groups", "members", "partitions")}
    Path(args.json).write_text(json.dumps({"sizes": sizes, "results": results}, indent=2))


if __name__ == "__main__":
    main()
