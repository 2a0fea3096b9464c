"""One chaos run, start to verdict: cluster up, workload, faults, heal, drain, compare, check."""

from __future__ import annotations

import contextlib
import random
import re
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydmq.chaos.checker import Report, check
from pydmq.chaos.clients import (
    SHARE,
    CommitSampler,
    GroupMember,
    ProducerWorker,
    ReaderWorker,
    read_deliveries,
)
from pydmq.chaos.faults import FAULT_KINDS, REPLICATION_FACTOR, STORAGE_FAULT_KINDS, Nemesis
from pydmq.chaos.history import History, TopicPartitionKey
from pydmq.chaos.observer import Observer
from pydmq.chaos.security import (
    create_workload_acls,
    harness_client_kwargs,
    harness_config,
    secured,
)
from pydmq.chaos.share_checker import ShareReport, check_shares, read_share_events
from pydmq.chaos.storage import storage_faults_unavailable
from pydmq.chaos.topology import ChaosCluster
from pydmq.testing.cluster import replica_batches, replica_headers

__all__ = ["ChaosConfig", "RunResult", "run", "uses_storage_faults"]

GROUP = "chaos-group"
SHARE_GROUP = "chaos-share-group"


@dataclass(slots=True)
class ChaosConfig:
    duration: float = 60.0
    seed: int = 1
    base_dir: Path | None = None  # None: a temporary directory, removed unless keep
    keep: bool = False
    nodes: int = 3
    partitions_per_topic: int = 3
    producers: int = 3
    rate: float = 150.0  # records/s per producer
    acks: str = "all"  # "1" disables idempotence: a demonstration that the checker sees loss
    readers: int = 1
    members: int = 2
    kinds: Sequence[str] = FAULT_KINDS  # a kind listed twice comes up twice per round
    node_disk_mb: int = 512  # each node's tmpfs, when storage faults are among the kinds
    # Both built-in replication strategies, each its own RF=3, min.insync.replicas=2 topic.
    strategies: Sequence[str] = ("isr", "quorum")
    sasl: bool = False  # every listener SASL_PLAINTEXT, ACLs on (pydmq.chaos.security)
    share_members: int = 2  # members of a share group (KIP-932) reading every topic


@dataclass(slots=True)
class RunResult:
    report: Report
    summary: dict[str, Any] = field(default_factory=dict)
    share: ShareReport | None = None  # None: no share members

    @property
    def ok(self) -> bool:
        share_ok = self.share is None or self.share.ok
        return self.report.ok and share_ok and not self.summary.get("harness_errors")


def uses_storage_faults(kinds: Iterable[str]) -> bool:
    return bool(set(kinds) & set(STORAGE_FAULT_KINDS))


def _create_topics(bootstrap: str, config: ChaosConfig) -> list[str]:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient(
        {"bootstrap.servers": bootstrap, "client.id": "chaos-admin", **harness_config()}
    )
    topics = [f"chaos-{s}" for s in config.strategies]
    new = [
        NewTopic(
            f"chaos-{s}",
            config.partitions_per_topic,
            REPLICATION_FACTOR,
            config={
                "min.insync.replicas": "2",
                "pydmq.replication.strategy": s,
                # Segment fsyncs every second, so EIO on fsync meets real fsyncs.
                **({"flush.ms": "1000"} if "eio_fsync" in config.kinds else {}),
            },
        )
        for s in config.strategies
    ]
    for future in admin.create_topics(new, request_timeout=20).values():
        future.result(30)
    return topics


def _drain(
    bootstrap: str, partitions: Sequence[TopicPartitionKey], timeout: float = 120.0
) -> dict[TopicPartitionKey, list[tuple[int, bytes | None]]]:
    """Every partition from offset 0 up to its high watermark, with a fresh consumer."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CkTopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "chaos-drain",
            "group.id": "chaos-drain",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            **harness_config(),
        }
    )
    try:
        ends = {}
        for topic, p in partitions:
            _, high = consumer.get_watermark_offsets(CkTopicPartition(topic, p), timeout=20)
            ends[(topic, p)] = high
        consumer.assign([CkTopicPartition(t, p, 0) for t, p in partitions])
        out: dict[TopicPartitionKey, list[tuple[int, bytes | None]]] = {tp: [] for tp in ends}
        deadline = time.monotonic() + timeout
        while any((out[tp][-1][0] + 1 if out[tp] else 0) < ends[tp] for tp in ends):
            if time.monotonic() > deadline:
                raise TimeoutError(f"drain stalled: high watermarks {ends}")
            for m in consumer.consume(10000, 1.0):
                name, partition, offset = m.topic(), m.partition(), m.offset()
                if m.error() is None and name is not None and partition is not None:
                    key = (name, partition)
                    if offset is not None and offset < ends[key]:
                        out[key].append((offset, m.value()))
        return out
    finally:
        consumer.close()


def compare_replicas(
    data_dirs: dict[int, Path], high_watermarks: dict[TopicPartitionKey, int]
) -> dict[TopicPartitionKey, str]:
    """Offline, after a graceful stop: below the high watermark every replica must hold the
    same batches (offset, size and CRC) and cover every offset."""
    problems: dict[TopicPartitionKey, str] = {}
    for tp, hw in high_watermarks.items():
        committed: dict[int, list[tuple[int, int, int]]] = {}
        for node_id, data_dir in data_dirs.items():
            batches = [b for b in replica_batches(data_dir, *tp) if b[0] < hw]
            committed[node_id] = batches
            end = batches[-1][0] + batches[-1][1] + 1 if batches else 0
            if end < hw:
                problems[tp] = f"node {node_id} ends at {end} below the high watermark {hw}"
        if tp in problems:
            continue
        reference_node, reference = next(iter(committed.items()))
        for node_id, batches in committed.items():
            if batches != reference:
                at = next(
                    (i for i, (a, b) in enumerate(zip(batches, reference, strict=False)) if a != b),
                    min(len(batches), len(reference)),
                )
                mine = batches[at] if at < len(batches) else None
                theirs = reference[at] if at < len(reference) else None
                problems[tp] = (
                    f"node {node_id} differs from node {reference_node} at batch {at}: "
                    f"{mine} vs {theirs} (base offset, last offset delta, crc)"
                )
                break
    return problems


_SEQUENCE_ERROR = re.compile(
    r"refused with (OUT_OF_ORDER_SEQUENCE_NUMBER|UNKNOWN_PRODUCER_ID|"
    r"INVALID_PRODUCER_EPOCH|DUPLICATE_SEQUENCE_NUMBER)"
)


def _sequence_errors(log_paths: Iterable[Path]) -> dict[str, int]:
    """How often the nodes refused an idempotent batch, by error (from the produce handler's
    warnings): the answers that make librdkafka bump its producer epoch."""
    counts: Counter[str] = Counter()
    for path in log_paths:
        with contextlib.suppress(OSError):
            counts.update(m.group(1) for m in _SEQUENCE_ERROR.finditer(path.read_text()))
    return dict(sorted(counts.items()))


def _batch_producers(
    data_dir: Path, high_watermarks: dict[TopicPartitionKey, int]
) -> dict[TopicPartitionKey, list[tuple[int, int, int, int]]]:
    """(base offset, last offset, producer id, producer epoch) of every committed batch of
    one replica, offline: the checker tells a client's epoch-bump resend from a duplicate."""
    return {
        tp: [
            (h.base_offset, h.base_offset + h.last_offset_delta, h.producer_id, h.producer_epoch)
            for h in replica_headers(data_dir, *tp)
            if h.base_offset < hw
        ]
        for tp, hw in high_watermarks.items()
    }


def run(config: ChaosConfig, log: Callable[[str], None] = print) -> RunResult:
    with secured(config.sasl):
        return _run(config, log)


def _run(config: ChaosConfig, log: Callable[[str], None]) -> RunResult:
    temp = config.base_dir is None
    base = Path(tempfile.mkdtemp(prefix="pydmq-chaos-")) if temp else Path(config.base_dir)  # type: ignore[arg-type]
    rng = random.Random(config.seed)
    storage = uses_storage_faults(config.kinds)
    if storage and (missing := storage_faults_unavailable()) is not None:
        raise RuntimeError(f"storage faults {list(STORAGE_FAULT_KINDS)} unavailable: {missing}")
    cluster = ChaosCluster(
        config.nodes,
        base,
        disk_mb=config.node_disk_mb if storage else None,
        failpoints=storage,
    )
    log(f"chaos: seed {config.seed}, {config.duration:.0f} s, data in {base}")
    cluster.start()
    harness_errors: list[str] = []
    ok = False
    producers: list[ProducerWorker] = []
    readers: list[ReaderWorker] = []
    members: list[GroupMember] = []
    share_members: list[GroupMember] = []
    try:
        topics = _create_topics(cluster.bootstrap, config)
        if config.sasl:
            acls = create_workload_acls([cluster.direct_address(i) for i in cluster.node_ids])
            log(f"chaos: SASL on every listener; the workload's {acls} ACLs on every node")
        partitions = [(t, p) for t in topics for p in range(config.partitions_per_topic)]
        addresses = {i: cluster.direct_address(i) for i in cluster.node_ids}
        nemesis_ref: list[Nemesis] = []
        observer = Observer(
            addresses, topics, lambda: nemesis_ref[0].avoid() if nemesis_ref else set()
        )
        observer.start()
        members = [
            GroupMember(f"member-{i}", cluster.bootstrap, GROUP, topics, base)
            for i in range(config.members)
        ]
        share_members = [
            GroupMember(f"share-member-{i}", cluster.bootstrap, SHARE_GROUP, topics, base, SHARE)
            for i in range(config.share_members)
        ]
        producers = [
            ProducerWorker(
                f"producer-{i}",
                cluster.bootstrap,
                partitions,
                config.rate,
                rng.randrange(2**32),
                config.acks,
            )
            for i in range(config.producers)
        ]
        readers = [
            ReaderWorker(f"reader-{i}", cluster.bootstrap, partitions)
            for i in range(config.readers)
        ]
        sampler = CommitSampler(cluster.bootstrap, GROUP, partitions)
        nemesis = Nemesis(
            cluster,
            observer,
            members + share_members,
            [p.client_name for p in producers]
            + [r.client_name for r in readers]
            + [m.name for m in members + share_members],
            rng,
            config.kinds,
            log=log,
        )
        nemesis_ref.append(nemesis)
        if not _wait(lambda: observer.healthy(REPLICATION_FACTOR), 60):
            raise RuntimeError("topics never got a full ISR")
        if share_members and not _wait(lambda: _share_group_from_zero(cluster, partitions), 60):
            raise RuntimeError("the share group's start offsets could not be set to 0")

        started = time.monotonic()
        for worker in [*producers, *readers]:
            worker.start()
        for member in members + share_members:
            member.start()
        sampler.start()
        if not _wait(lambda: all(_acked(p) > 0 for p in producers), 60):
            harness_errors.append("producers got no acknowledgement within 60 s of starting")
        log("chaos: workload running, injecting faults")
        nemesis.run_until(started + config.duration)

        log("chaos: healing")
        nemesis.heal_everything()
        if not nemesis.wait_healthy():
            harness_errors.append("the cluster did not recover a full ISR after healing")
        time.sleep(2.0)  # acknowledgements after the heal, on the healed cluster
        for producer in producers:
            producer.stop_event.set()
        for producer in producers:
            producer.join(120)
            if producer.is_alive():
                harness_errors.append(f"{producer.client_name} did not finish flushing")
        ended = time.monotonic()

        final_log = _drain(cluster.bootstrap, partitions)
        ends = {tp: (entries[-1][0] + 1 if entries else 0) for tp, entries in final_log.items()}
        if not _wait(lambda: _caught_up(sampler, ends), 90):
            harness_errors.append("the group did not commit up to the high watermarks")
        for member in members:
            member.stop()
        share_finished = not share_members or _wait(
            lambda: _share_caught_up(cluster.bootstrap, ends), 120
        )
        if not share_finished:
            harness_errors.append("the share group did not accept every record (see clients)")
        for member in share_members:
            member.stop()
        sampler.stop_event.set()
        sampler.join(10)
        final_committed = sampler.sample()
        if not _wait(lambda: all(_reader_caught_up(r, ends) for r in readers), 60):
            harness_errors.append("a reader did not reach the high watermarks (see clients)")
        for reader in readers:
            reader.stop_event.set()
        for reader in readers:
            reader.join(30)
        for producer in producers:
            stuck = _silent_tail(producer, ended)
            if stuck is not None:
                harness_errors.append(
                    f"{producer.client_name} got no acknowledgement in the last {stuck:.0f} s "
                    "of the run (a stuck client; see clients)"
                )
        observer.stop_event.set()
        observer.join(10)

        log("chaos: stopping the cluster to compare replicas offline")
        cluster.stop()
        data_dirs = {i: cluster.cluster.node(i).data_dir for i in cluster.node_ids}
        mismatches = compare_replicas(data_dirs, ends)
        batch_producers = _batch_producers(data_dirs[min(data_dirs)], ends)
        cluster.release_disks(keep=bool(mismatches) or config.keep)
        history = History(
            started_at=started,
            ended_at=ended,
            partitions=partitions,
            writes=[w for p in producers for w in p.writes],
            reads=[r for reader in readers for r in reader.reads],
            deliveries=[d for m in members for d in read_deliveries(m.name, m.files)],
            committed=sampler.samples,
            final_log=final_log,
            final_committed=final_committed,
            faults=nemesis.faults,
            elections=observer.elections,
            replica_mismatches=mismatches,
            batch_producers=batch_producers,
            client_errors=[e for p in producers for e in p.errors]
            + [e for r in readers for e in r.errors][:20],
        )
        report = check(history)
        share_report = None
        if share_members:
            events = [e for m in share_members for e in read_share_events(m.name, m.files)]
            share_report = check_shares(events, final_log, share_finished)
        clients = _client_figures(producers, readers, ends)
        summary = {
            "seed": config.seed,
            "duration_s": config.duration,
            "nodes": config.nodes,
            "topics": topics,
            "producers": config.producers,
            "rate_per_producer": config.rate,
            "acks": config.acks,
            "readers": config.readers,
            "members": config.members,
            "share_members": config.share_members,
            "clients": clients,
            "unhealthy": nemesis.unhealthy,
            "broker_sequence_errors": _sequence_errors(
                cluster.cluster.node(i).log_path for i in cluster.node_ids
            ),
            "harness_errors": harness_errors,
            "data_dir": str(base) if config.keep or not temp else None,
        }
        result = RunResult(report, summary, share_report)
        ok = result.ok
        return result
    finally:
        for producer in producers:
            producer.stop_event.set()
        for reader in readers:
            reader.stop_event.set()
        for member in members + share_members:
            member.stop(5)
        cluster.stop()
        cluster.release_disks()
        if temp and ok and not config.keep:
            shutil.rmtree(base, ignore_errors=True)


def _client_figures(
    producers: Sequence[ProducerWorker],
    readers: Sequence[ReaderWorker],
    ends: dict[TopicPartitionKey, int],
) -> dict[str, Any]:
    """Per producer: outcomes and the most frequent errors; per reader: how far it got."""
    out: dict[str, Any] = {}
    for producer in producers:
        outcomes = Counter(w.outcome for w in producer.writes)
        errors = Counter(w.error for w in producer.writes if w.error)
        out[producer.client_name] = {
            "incarnations": producer.incarnation + 1,
            **outcomes,
            "errors": dict(errors.most_common(5)),
        }
    for reader in readers:
        last: dict[TopicPartitionKey, int] = {}
        for r in reader.reads:
            last[(r.topic, r.partition)] = max(last.get((r.topic, r.partition), -1), r.offset)
        out[reader.client_name] = {
            "reads": len(reader.reads),
            "behind": {
                f"{t}-{p}": end - 1 - last.get((t, p), -1) for (t, p), end in sorted(ends.items())
            },
        }
    return out


def _reader_caught_up(reader: ReaderWorker, ends: dict[TopicPartitionKey, int]) -> bool:
    return all(end == 0 or reader.last_offset.get(tp, -1) >= end - 1 for tp, end in ends.items())


def _silent_tail(producer: ProducerWorker, ended: float, limit: float = 30.0) -> float | None:
    """Seconds without any acknowledgement before ``ended``, if more than ``limit``."""
    last = max((w.acked_at for w in producer.writes if w.acked_at is not None), default=None)
    if last is None or ended - last <= limit:
        return None
    return ended - last


def _acked(producer: ProducerWorker) -> int:
    return sum(1 for w in producer.writes[-2000:] if w.outcome == "acked")


def _caught_up(sampler: CommitSampler, ends: dict[TopicPartitionKey, int]) -> bool:
    committed = sampler.sample()
    return all(committed.get(tp, 0) >= end for tp, end in ends.items() if end > 0)


def _share_group_from_zero(cluster: ChaosCluster, partitions: Sequence[TopicPartitionKey]) -> bool:
    """The share group starts at offset 0 of every partition (AlterShareGroupOffsets; the
    group is empty and unknown yet), so no record produced before its members' first fetch
    is skipped."""
    from pydmq.client import KafkaClient
    from pydmq.client.share_admin import alter_share_group_offsets

    with KafkaClient(
        cluster.bootstrap, client_id="chaos-observer", timeout=5.0, **harness_client_kwargs()
    ) as client:
        codes = alter_share_group_offsets(client, SHARE_GROUP, {tp: 0 for tp in partitions})
    return all(code == 0 for code in codes.values())


def _share_caught_up(bootstrap: str, ends: dict[TopicPartitionKey, int]) -> bool:
    """Whether the share group's start offset reached the end of every partition (every
    record accepted, or archived past the delivery limit)."""
    from pydmq.client import KafkaClient
    from pydmq.client.share_admin import share_group_offsets

    with KafkaClient(
        bootstrap, client_id="chaos-observer", timeout=5.0, **harness_client_kwargs()
    ) as client:
        starts = share_group_offsets(client, SHARE_GROUP)
    return all(starts.get(tp, (-1, -1))[0] >= end for tp, end in ends.items() if end > 0)


def _wait(check_fn: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check_fn():
                return True
        except Exception:  # retried until the deadline
            pass
        time.sleep(0.2)
    return False
