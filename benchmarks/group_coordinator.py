"""Group coordinator micro-benchmarks, in process: ``python benchmarks/group_coordinator.py``.

A :class:`~pydmq.groups.coordinator.GroupCoordinator` over an in-memory ``__consumer_offsets``
of one partition that commits at append time (a single node), called directly, no sockets:

- ``commit_offsets``: an OffsetCommit of one partition by a simple consumer;
- ``steady heartbeat``: a ConsumerGroupHeartbeat of a stable KIP-848 member (no records);
- ``rebalance``: ``--members`` KIP-848 members join a group over a topic of
  ``--partitions`` partitions, then heartbeat (acknowledging revocations) until every member
  is stable at the group's epoch: milliseconds for the whole convergence, and how many
  heartbeats it took;
- ``load``: replaying the partition the rebalance wrote into a new coordinator;
- ``classic rebalance``: ``--classic-groups`` classic groups of ``--classic-members``
  members each, every member joining (JoinGroup) then syncing (SyncGroup) until Stable, then
  one heartbeat each: milliseconds for all of it;
- ``classic load``: replaying the partition those groups wrote (their members are restored).

Prints the median and the minimum over ``--rounds`` rounds, in CPU time of the process (the
machine may be shared); nothing is asserted. It measures whichever pydmq is importable, so
the same script compares two source trees, alternating:

    PYTHONPATH=/path/to/old/src python benchmarks/group_coordinator.py
    PYTHONPATH=src python benchmarks/group_coordinator.py

A script that prints figures, never a timed assertion (DESIGN.md section 7).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import statistics
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydmq.groups.api import CommitRequest, GroupConfig, JoinRequest
from pydmq.groups.coordinator import GroupCoordinator
from pydmq.protocol.records import Record


def _consumer_api() -> Any:
    """The module with HeartbeatRequest (it moved with issue 16's consumer groups split)."""
    for name in ("pydmq.groups.consumer.api", "pydmq.groups.consumer.coordinator"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ImportError("no KIP-848 heartbeat request type")


HeartbeatRequest = _consumer_api().HeartbeatRequest


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: list[int]


@dataclass
class Topics:
    by_name: dict[str, Topic] = field(default_factory=dict)

    def get(self, name: str) -> Topic | None:
        return self.by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return next((t for t in self.by_name.values() if t.topic_id == topic_id), None)

    def __iter__(self) -> Iterator[Topic]:
        return iter(list(self.by_name.values()))


class MemoryLog:
    """``__consumer_offsets`` as one partition in memory, committed at append."""

    num_partitions = 1

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []

    def partition_for(self, group_id: str) -> int:
        return 0

    def append(self, partition: int, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        self.records.extend(records)

    def replay_partition(self, partition: int) -> Iterator[Record]:
        for offset, (key, value) in enumerate(self.records):
            yield Record(offset, 0, key, value, ())


def make(log: MemoryLog, topics: Topics) -> GroupCoordinator:
    config = GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=10)
    coordinator = GroupCoordinator(config, log, topics=topics)
    coordinator.load()
    return coordinator


def heartbeat(c: GroupCoordinator, request: Any) -> Any:
    answer = c.consumer_group_heartbeat(request)
    return answer.result() if isinstance(answer, asyncio.Future) else answer


def per_call_us(fn: Callable[[], object], calls: int) -> float:
    started = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - started) / calls * 1e6


def bench_commit(calls: int) -> float:
    c = make(MemoryLog(), Topics())
    request = CommitRequest("simple", "", None, -1, -1, {("t", 0): (5, -1, "")}, 9)
    value = per_call_us(lambda: c.commit_offsets(request), calls)
    c.stop()
    return value


def bench_steady(calls: int) -> float:
    topics = Topics({"t": Topic("t", uuid.uuid4(), list(range(8)))})
    c = make(MemoryLog(), topics)
    join = HeartbeatRequest(
        "g", "m", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=["t"], topic_partitions={}
    )
    epoch = heartbeat(c, join).member_epoch
    steady = HeartbeatRequest("g", "m", epoch)
    value = per_call_us(lambda: heartbeat(c, steady), calls)
    c.stop()
    return value


def bench_rebalance(members: int, partitions: int) -> tuple[float, int, MemoryLog, Topics]:
    topics = Topics({"t": Topic("t", uuid.uuid4(), list(range(partitions)))})
    log = MemoryLog()
    c = make(log, topics)
    epochs = dict.fromkeys((f"m{i}" for i in range(members)), 0)
    owned: dict[str, dict[uuid.UUID, list[int]]] = {m: {} for m in epochs}
    beats = 0
    started = time.process_time()
    for member in epochs:
        join = HeartbeatRequest(
            "g",
            member,
            0,
            rebalance_timeout_ms=30_000,
            subscribed_topic_names=["t"],
            topic_partitions={},
        )
        answer = heartbeat(c, join)
        beats += 1
        epochs[member] = answer.member_epoch
        if answer.assignment is not None:
            owned[member] = {t: sorted(ps) for t, ps in answer.assignment.items()}
    for _ in range(20):
        for member in epochs:
            answer = heartbeat(
                c, HeartbeatRequest("g", member, epochs[member], topic_partitions=owned[member])
            )
            beats += 1
            epochs[member] = answer.member_epoch
            if answer.assignment is not None:
                owned[member] = {t: sorted(ps) for t, ps in answer.assignment.items()}
        if (
            len(set(epochs.values())) == 1
            and sum(len(ps) for parts in owned.values() for ps in parts.values()) == partitions
        ):
            break
    elapsed = (time.process_time() - started) * 1000
    c.stop()
    return elapsed, beats, log, topics


def bench_load(log: MemoryLog, topics: Topics) -> float:
    started = time.process_time()
    c = make(log, topics)
    elapsed = (time.process_time() - started) * 1000
    c.stop()
    return elapsed


async def bench_classic(groups: int, members: int) -> tuple[float, MemoryLog]:
    log = MemoryLog()
    c = make(log, Topics())
    started = time.process_time()
    for g in range(groups):
        group_id = f"classic-{g}"
        joins = [
            JoinRequest(
                group_id=group_id,
                member_id="",
                group_instance_id=None,
                require_known_member_id=False,
                client_id=f"client-{m}",
                client_host="/127.0.0.1",
                rebalance_timeout_ms=30_000,
                session_timeout_ms=30_000,
                protocol_type="consumer",
                protocols=[("range", b"subscription"), ("roundrobin", b"subscription")],
            )
            for m in range(members)
        ]
        joined = await asyncio.gather(*(c.join_group(j) for j in joins))
        generation, leader = joined[0].generation_id, joined[0].leader_id
        assignments = {j.member_id: b"assignment" for j in joined}
        await asyncio.gather(
            *(
                c.sync_group(
                    group_id,
                    generation,
                    j.member_id,
                    None,
                    None,
                    None,
                    assignments if j.member_id == leader else {},
                )
                for j in joined
            )
        )
        for j in joined:
            c.heartbeat(group_id, generation, j.member_id, None)
    elapsed = (time.process_time() - started) * 1000
    c.stop()
    return elapsed, log


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--members", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--classic-groups", type=int, default=200)
    parser.add_argument("--classic-members", type=int, default=5)
    args = parser.parse_args()

    async def run() -> None:
        commits, steadies, rebalances, loads = [], [], [], []
        classics, classic_loads = [], []
        beats = records = classic_records = 0
        for _ in range(args.rounds):
            commits.append(bench_commit(args.calls))
            steadies.append(bench_steady(args.calls))
            elapsed, beats, log, topics = bench_rebalance(args.members, args.partitions)
            rebalances.append(elapsed)
            records = len(log.records)
            loads.append(bench_load(log, topics))
            elapsed, log = await bench_classic(args.classic_groups, args.classic_members)
            classics.append(elapsed)
            classic_records = len(log.records)
            classic_loads.append(bench_load(log, Topics()))

        def show(name: str, values: list[float], unit: str) -> None:
            print(
                f"{name:<34} median {statistics.median(values):9.1f} {unit}"
                f"   min {min(values):9.1f} {unit}"
            )

        show("commit_offsets (1 partition)", commits, "us")
        show("steady heartbeat (KIP-848)", steadies, "us")
        show(f"rebalance {args.members} members/{args.partitions} p", rebalances, "ms")
        print(f"{'':<34} {beats} heartbeats, {records} records written")
        show(f"load of those {records} records", loads, "ms")
        show(
            f"classic {args.classic_groups} groups x {args.classic_members} members",
            classics,
            "ms",
        )
        show(f"load of those {classic_records} records", classic_loads, "ms")

    asyncio.run(run())


if __name__ == "__main__":
    main()
