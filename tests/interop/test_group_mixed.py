"""A mixed consumer group: confluent-kafka, kafka-python, aiokafka and Java in one group.

Four member processes (tests/interop/group_members/) share a 6-partition topic of 60,000
records under the classic protocol. All four offer the same assignors, ``range`` then
``roundrobin`` (the only two the four clients have in common), so the broker selects
``range``. Every member writes each record it consumes (partition, offset, value, the
generation it was consumed in) and every rebalance callback to its own file, then commits
synchronously after each batch; consumption is throttled so the run lasts long enough to
kill a member in the middle.

Shown:
* every record is consumed at least once; within one generation no partition is consumed
  by two members and a member only consumes partitions assigned to it in that generation;
  the generations' assignments are disjoint; one generation has all four members sharing
  the six partitions;
* SIGKILL of one member: the survivors get its partitions within session timeout +
  rebalance time (measured and printed), they resume exactly at the offsets it committed,
  and no record is skipped (duplicates only across generations).

Also: a Java static member (group.instance.id) killed and restarted within the session
timeout gets its partitions back without the other member (librdkafka) rebalancing.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .group_members.harness import (
    Member,
    assignments_by_generation,
    spawn,
    stop,
    wait_for,
)
from .support import java_ready, unique_topic

pytestmark = pytest.mark.interop

PARTITIONS = 6
COUNT = int(os.environ.get("PYDMQ_GROUP_MIXED_COUNT", "60000"))
PER_PARTITION = COUNT // PARTITIONS
SESSION_MS = 6000  # the broker's default group.min.session.timeout.ms
HEARTBEAT_MS = 1000
RATE = 1500.0  # records/s per member: the run must outlast joining, the kill and its handover
KINDS = ("ck", "kp", "aio", "java")
VICTIM = os.environ.get("PYDMQ_GROUP_MIXED_VICTIM", "java")
STRATEGY = "range,roundrobin"


@pytest.fixture(scope="module", autouse=True)
def _java_built() -> None:
    reason = java_ready()
    if reason:
        pytest.fail(f"Java interop client unavailable: {reason}")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """Member event files and logs; pytest keeps the last runs' tmp_path for inspection."""
    return tmp_path


def create_topic(bootstrap: str) -> str:
    topic = unique_topic("mixed")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(60)
    return topic


def produce(bootstrap: str, topic: str, count: int) -> None:
    """Value i (decimal) goes to partition i % 6, so it sits at offset i // 6."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True})
    for i in range(count):
        while True:
            try:
                p.produce(topic, value=b"%d" % i, partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.05)
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(60) == 0


def committed(bootstrap: str, group: str, topic: str, parts: set[int]) -> dict[int, int]:
    """The group's committed offsets (OffsetFetch from a consumer that does not join)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        got = c.committed([TopicPartition(topic, p) for p in sorted(parts)], timeout=15)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in got}


def full_generation(members: list[Member]) -> tuple[int, dict[str, set[int]]] | None:
    """The newest generation in which every one of ``members`` was assigned partitions and
    together they hold all six."""
    per = {m.name: assignments_by_generation(m) for m in members}
    common = set.intersection(*(set(g) for g in per.values()))
    for gen in sorted(common, reverse=True):
        parts = {name: per[name][gen] for name in per}
        if all(parts.values()) and set().union(*parts.values()) == set(range(PARTITIONS)):
            return gen, parts
    return None


def check_records(members: list[Member]) -> tuple[int, dict[tuple[int, int], int]]:
    """Content, ownership per generation, disjoint assignments. Returns (total deliveries,
    deliveries per (partition, offset))."""
    seen: dict[tuple[int, int], int] = defaultdict(int)
    owner: dict[tuple[int, int], str] = {}  # (generation, partition) -> member
    assigned: dict[int, dict[str, set[int]]] = defaultdict(dict)
    total = 0
    for m in members:
        by_gen = assignments_by_generation(m)
        for gen, parts in by_gen.items():
            assigned[gen][m.name] = parts
        for r in m.records():
            total += 1
            p, o, g = r["p"], r["o"], r["g"]
            assert int(r["v"]) == o * PARTITIONS + p, f"{m.name}: wrong value {r}"
            assert g > 0, f"{m.name} consumed outside a generation: {r}"
            assert p in by_gen.get(g, set()), (
                f"{m.name} consumed partition {p} in generation {g} "
                f"but was assigned {sorted(by_gen.get(g, set()))}"
            )
            other = owner.setdefault((g, p), m.name)
            assert other == m.name, (
                f"partition {p} consumed by {other} and {m.name} in the same generation {g}"
            )
            seen[(p, o)] += 1
    for gen, parts in assigned.items():
        flat = [p for ps in parts.values() for p in ps]
        assert len(flat) == len(set(flat)), f"generation {gen}: overlapping assignments {parts}"
    return total, seen


def test_mixed_group_four_clients_sigkill_handover(broker, workdir: Path) -> None:
    bootstrap = broker.bootstrap
    topic = create_topic(bootstrap)
    t0 = time.monotonic()
    produce(bootstrap, topic, COUNT)
    produce_s = time.monotonic() - t0
    group = unique_topic("mixed-group")
    stop_file = workdir / "stop"
    members: list[Member] = []
    try:
        for kind in KINDS:
            members.append(
                spawn(
                    kind,
                    kind,
                    workdir,
                    bootstrap=bootstrap,
                    topic=topic,
                    group=group,
                    strategy=STRATEGY,
                    stop_file=stop_file,
                    session_ms=SESSION_MS,
                    heartbeat_ms=HEARTBEAT_MS,
                    rate=RATE,
                )
            )
        by_name = {m.name: m for m in members}
        victim = by_name[VICTIM]
        survivors = [m for m in members if m is not victim]
        started = time.monotonic()

        gen4, parts4 = wait_for(
            "a generation with all four members", lambda: full_generation(members), 90, members
        )
        all_four_s = time.monotonic() - started

        def victim_committed_in_gen4() -> bool:
            # 300 records consumed in the four-member generation, then a commit
            n = 0
            for e in victim.events():
                if e["e"] == "m" and e["g"] == gen4:
                    n += 1
                elif e["e"] == "c" and e["g"] == gen4 and n >= 300:
                    return True
            return False

        wait_for(f"{VICTIM} to consume and commit", victim_committed_in_gen4, 60, members)
        victim.kill()
        killed_at_ms = time.time_ns() // 1_000_000
        victim_parts = parts4[victim.name]
        at_kill = committed(bootstrap, group, topic, victim_parts)
        consumed_before = len({(r["p"], r["o"]) for m in members for r in m.records()})
        assert consumed_before < COUNT, "everything was consumed before the kill: raise COUNT"

        def handed_over() -> tuple[int, dict[str, set[int]]] | None:
            got = full_generation(survivors)
            return got if got and got[0] > gen4 else None

        gen3, parts3 = wait_for(
            "the survivors to take over the killed member's partitions",
            handed_over,
            SESSION_MS / 1000 + 60,
            survivors,
        )

        def all_consumed() -> bool:
            return len({(r["p"], r["o"]) for m in members for r in m.records()}) >= COUNT

        wait_for("every record to be consumed", all_consumed, 180, survivors, interval=0.5)
        consume_s = time.monotonic() - started
    finally:
        stop(members, stop_file)

    total, seen = check_records(members)
    missing = [
        (p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION) if (p, o) not in seen
    ]
    assert not missing, f"{len(missing)} records never consumed, e.g. {missing[:5]}"
    assert len(seen) == COUNT
    for m in members:
        assert m.records(), f"{m.name} consumed nothing"

    # Handover: the survivors' first assignment after the kill (any generation after the
    # four-member one; a client may rejoin once more right after it) that holds a victim
    # partition, and their first record of each victim partition: exactly at its committed
    # offset.
    handover_ms = (
        min(
            e["t"]
            for m in survivors
            for e in m.rebalances()
            if e["e"] == "a" and e["g"] > gen4 and set(e["p"]) & victim_parts
        )
        - killed_at_ms
    )
    first_after: dict[int, dict] = {}
    for m in survivors:
        for r in m.records():
            if (
                r["p"] in victim_parts
                and r["g"] > gen4
                and (r["p"] not in first_after or r["o"] < first_after[r["p"]]["o"])
            ):
                first_after[r["p"]] = r
    victim_max = defaultdict(lambda: -1)
    for r in victim.records():
        victim_max[r["p"]] = max(victim_max[r["p"]], r["o"])
    assert max(at_kill.values()) > 0, f"nothing committed for {sorted(victim_parts)}"
    for p in victim_parts:
        resume_at = max(at_kill[p], 0)  # nothing committed yet: auto.offset.reset=earliest
        if resume_at < PER_PARTITION:
            assert p in first_after, f"partition {p} never consumed after the kill"
            assert first_after[p]["o"] == resume_at, (
                f"partition {p}: resumed at {first_after[p]['o']}, committed {at_kill[p]}"
            )
    resume_ms = min(r["t"] for r in first_after.values()) - killed_at_ms if first_after else -1
    duplicates = total - COUNT
    redelivered_victim = sum(max(0, victim_max[p] + 1 - max(at_kill[p], 0)) for p in victim_parts)
    print(
        f"\nmixed group ({', '.join(KINDS)}), {COUNT} records, strategy {STRATEGY}:"
        f"\n  produce {produce_s:.1f}s; four members stable after {all_four_s:.1f}s"
        f" (generation {gen4}: { ({k: sorted(v) for k, v in parts4.items()}) })"
        f"\n  SIGKILL {VICTIM} after {consumed_before} records; its partitions"
        f" {sorted(victim_parts)} committed at {dict(sorted(at_kill.items()))}"
        f"\n  handover (kill -> a survivor assigned its partitions):"
        f" {handover_ms} ms = session timeout {SESSION_MS} ms"
        f" + {handover_ms - SESSION_MS} ms detection/rebalance;"
        f" first record from them {resume_ms} ms after the kill"
        f"\n  survivors' generation {gen3}: { ({k: sorted(v) for k, v in parts3.items()}) }"
        f"\n  all {COUNT} consumed after {consume_s:.1f}s; {total} deliveries,"
        f" {duplicates} duplicates ({redelivered_victim} = victim's uncommitted tail)"
        f"; per member: { {m.name: len(m.records()) for m in members} }"
    )


def test_java_static_member_restart_gets_partitions_back_without_rebalance(
    broker, workdir: Path
) -> None:
    """Java member "static-a" (group.instance.id, the group leader: it joins first) and a
    librdkafka member share a topic; the Java process is SIGKILLed and restarted with the same
    instance id well within its session timeout. The restarted member gets the same
    partitions in the same generation, and the librdkafka member sees no rebalance."""
    bootstrap = broker.bootstrap
    topic = create_topic(bootstrap)
    produce(bootstrap, topic, 6000)
    group = unique_topic("static-java")
    stop_file = workdir / "stop"
    common = dict(
        bootstrap=bootstrap,
        topic=topic,
        group=group,
        strategy="range",
        stop_file=stop_file,
        session_ms=15000,
    )
    members: list[Member] = []
    try:
        a = spawn("java", "a", workdir, instance_id="static-a", **common)
        members.append(a)
        wait_for("the static member's assignment", lambda: a.owned(), 60, members)
        b = spawn("ck", "b", workdir, **common)
        members.append(b)

        def shared() -> tuple[int, set[int], set[int]] | None:
            ra, rb = a.rebalances(), b.rebalances()
            if not ra or not rb or ra[-1]["e"] != "a" or rb[-1]["e"] != "a":
                return None
            gen = ra[-1]["g"]
            pa, pb = a.owned(), b.owned()
            if gen == rb[-1]["g"] and pa and pb and pa | pb == set(range(PARTITIONS)):
                return gen, pa, pb
            return None

        gen, parts_a, parts_b = wait_for("a shared generation", shared, 60, members)
        wait_for("the topic to be consumed", lambda: len(a.records()) + len(b.records()) >= 6000,
                 60, members)  # fmt: skip
        b_events = len(b.rebalances())
        a.kill()
        killed = time.monotonic()
        a2 = spawn("java", "a2", workdir, instance_id="static-a", **common)
        members.append(a2)
        first = wait_for(
            "the restarted static member's assignment",
            lambda: next((e for e in a2.rebalances() if e["e"] == "a"), None),
            30,
            [b, a2],
        )
        back_s = time.monotonic() - killed
        time.sleep(3)  # librdkafka heartbeats every second: a rebalance would show by now
        b_after = b.rebalances()[b_events:]
    finally:
        stop(members, stop_file)
    print(
        f"\nstatic Java member restart: generation {gen}, a {sorted(parts_a)}, b"
        f" {sorted(parts_b)}; restarted member assigned {first['p']} in generation"
        f" {first['g']} {back_s:.1f}s after the kill (JVM start included);"
        f" librdkafka member's callbacks meanwhile: {b_after}"
    )
    assert set(first["p"]) == parts_a and first["g"] == gen, first
    assert b_after == [], f"the other member rebalanced: {b_after}"
