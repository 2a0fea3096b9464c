"""Cooperative-sticky rebalancing (KIP-429) with librdkafka and Java members.

A producer keeps writing to all six partitions (about 1,200 records/s). A first member
(partition.assignment.strategy=cooperative-sticky, or Java's CooperativeStickyAssignor) owns
all six partitions and keeps up with them (committing after every batch); then a second
member joins. Under the cooperative protocol the first
member's rebalance callbacks must list only the partitions that move: it never revokes (or
loses) a partition it keeps, keeps consuming those partitions while the group rebalances (no
stop-the-world), its offsets on them run on without a gap or a re-read, and the newcomer
starts each moved partition exactly where the first member stopped (nothing skipped).

Cases: librdkafka + librdkafka, Java + Java, librdkafka then Java and Java then librdkafka
in one group (both speak the same "cooperative-sticky" protocol), and kafka-python's
cooperative-sticky assignor.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from .group_members.harness import Member, spawn, stop, wait_for
from .support import java_ready, unique_topic
from .test_group_mixed import create_topic

pytestmark = pytest.mark.interop

PARTITIONS = 6
PRODUCE_EVERY = 0.005  # one record per partition every 5 ms
ALL = set(range(PARTITIONS))


@pytest.fixture(scope="module", autouse=True)
def _java_built() -> None:
    reason = java_ready()
    if reason:
        pytest.fail(f"Java interop client unavailable: {reason}")


@pytest.fixture
def topic(broker) -> Iterator[str]:
    """A fresh topic with a producer writing value i to partition i % 6 (offset i // 6)."""
    name = create_topic(broker.bootstrap)
    done = threading.Event()
    errors: list[object] = []

    def run() -> None:
        p = Producer(
            {"bootstrap.servers": broker.bootstrap, "linger.ms": 2, "enable.idempotence": True}
        )
        i = 0
        while not done.is_set():
            for _ in range(PARTITIONS):
                p.produce(
                    name,
                    value=b"%d" % i,
                    partition=i % PARTITIONS,
                    on_delivery=lambda err, _m: err and errors.append(err),
                )
                i += 1
            p.poll(0)
            time.sleep(PRODUCE_EVERY)
        p.flush(30)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        yield name
    finally:
        done.set()
        t.join(40)
    assert not errors, errors[:3]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """Member event files and logs; pytest keeps the last runs' tmp_path for inspection."""
    return tmp_path


def _offsets_by_partition(m: Member) -> dict[int, list[tuple[int, int]]]:
    out: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for r in m.records():
        assert int(r["v"]) == r["o"] * PARTITIONS + r["p"], f"{m.name}: wrong value {r}"
        out[r["p"]].append((r["o"], r["t"]))
    return out


@pytest.mark.parametrize(
    "first,second",
    [("ck", "ck"), ("java", "java"), ("ck", "java"), ("java", "ck"), ("kp", "kp")],
)
def test_cooperative_sticky_second_member_joins(
    broker, topic: str, workdir: Path, first: str, second: str
) -> None:
    group = unique_topic(f"coop-{first}-{second}")
    stop_file = workdir / "stop"

    def member(kind: str, name: str) -> Member:
        return spawn(
            kind,
            name,
            workdir,
            bootstrap=broker.bootstrap,
            topic=topic,
            group=group,
            strategy="cooperative-sticky",
            stop_file=stop_file,
        )

    members: list[Member] = []
    try:
        a = member(first, "a")
        members.append(a)
        wait_for(
            "the first member to own all partitions and consume",
            lambda: a.owned() == ALL and {r["p"] for r in a.records()} == ALL,
            60,
            members,
        )
        b_started_ms = time.time_ns() // 1_000_000
        b = member(second, "b")
        members.append(b)
        wait_for(
            "the second member to get partitions",
            lambda: b.owned() and not (a.owned() & b.owned()) and a.owned() | b.owned() == ALL,
            60,
            members,
        )
        b_assigned_ms = time.time_ns() // 1_000_000
        moved_seen = b.owned()
        # both keep consuming for a while after the rebalance: the newcomer from every
        # partition it got, the first member for another half second
        wait_for(
            "the second member to consume",
            lambda: (
                {r["p"] for r in b.records()} >= moved_seen
                and any(r["t"] > b_assigned_ms + 500 for r in a.records())
            ),
            30,
            members,
        )
    finally:
        stop(members, stop_file)

    retained = ALL - moved_seen
    assert retained, "the first member kept nothing"
    # The first member's callbacks after its initial assignment: only deltas of moved
    # partitions, never a retained one, and no 'lost'.
    a_events = a.rebalances()
    first_full = next(i for i, e in enumerate(a_events) if e["e"] == "a" and set(e["p"]) == ALL)
    assert not any(e["e"] in ("r", "l") for e in a_events[:first_full]), a_events
    later = a_events[first_full + 1 :]
    revoked = [e for e in later if e["e"] == "r" and e["p"]]
    lost = [e for e in later if e["e"] == "l" and e["p"]]
    assert not lost, f"first member lost partitions: {lost}"
    closing = [e for e in revoked if e["t"] > b_assigned_ms + 500]  # close() revokes the rest
    during = [e for e in revoked if e not in closing]
    assert during, f"the first member revoked nothing: {a_events}"
    for e in during:
        assert not set(e["p"]) & retained, f"retained partitions revoked: {e} (kept {retained})"
    assert set().union(*(set(e["p"]) for e in during)) == moved_seen, (during, moved_seen)
    assert not [e for e in later if e["e"] == "a" and e["p"] and e["t"] <= b_assigned_ms], (
        "the first member was re-assigned partitions it already owned (eager?)"
    )
    # The second member got exactly the moved partitions and was never revoked anything.
    b_events = b.rebalances()
    b_first = next(e for e in b_events if e["e"] == "a" and e["p"])
    assert set(b_first["p"]) == moved_seen, b_events

    a_offsets = _offsets_by_partition(a)
    b_offsets = _offsets_by_partition(b)
    # Retained partitions: the first member's offsets run on with no gap or re-read.
    for p in retained:
        offs = [o for o, _ in a_offsets[p]]
        assert offs == list(range(offs[0], offs[0] + len(offs))), f"partition {p} not contiguous"
        assert offs[0] == 0
    # Moved partitions: the newcomer starts at the first member's last commit, so nothing is
    # skipped; records after that commit are read again (a commit can fail with
    # REBALANCE_IN_PROGRESS while the group completes the rebalance, as in Kafka).
    reread = 0
    for p in moved_seen:
        a_last = max(o for o, _ in a_offsets[p]) if a_offsets[p] else -1
        b_first_off = min(o for o, _ in b_offsets[p])
        assert b_first_off <= a_last + 1, (
            f"partition {p}: a stopped at {a_last}, b from {b_first_off}"
        )
        reread += a_last + 1 - b_first_off
    failed_commits = [e for e in a.events() if e["e"] == "cf"]

    # No stop-the-world: the first member consumed retained partitions between its
    # revocation of the moved partitions and the newcomer's assignment.
    revoke_ms = during[0]["t"]
    assign_ms = b_first["t"]
    in_window = [t for p in retained for _, t in a_offsets[p] if revoke_ms <= t <= assign_ms]
    before = [t for p in retained for _, t in a_offsets[p] if b_started_ms <= t < revoke_ms]
    gaps = sorted(
        {t for p in retained for _, t in a_offsets[p] if b_started_ms <= t <= assign_ms + 1000}
    )
    max_gap, gap_at = max(
        ((y - x, x - revoke_ms) for x, y in itertools.pairwise(gaps)), default=(-1, 0)
    )
    print(
        f"\ncooperative-sticky {first} + {second}: kept {sorted(retained)}, moved"
        f" {sorted(moved_seen)}; second member started -> first revoke"
        f" {revoke_ms - b_started_ms} ms, revoke -> newcomer assigned {assign_ms - revoke_ms} ms;"
        f" first member consumed {len(before)} records of retained partitions before and"
        f" {len(in_window)} records during that window (largest pause {max_gap} ms,"
        f" starting {gap_at} ms after the revoke); newcomer re-read {reread} records"
        f" ({len(failed_commits)} failed commits of the first member);"
        f" callbacks of the first member: {[(e['e'], e['g'], e['p']) for e in a_events]}"
    )
    assert in_window or assign_ms - revoke_ms < 300, "first member stopped consuming"
