"""The pure helpers of benchmarks/omb/restart.py: sizes, the load plan, JVM heap and profile parsing."""

from __future__ import annotations

from types import ModuleType

import pytest


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    pytest.importorskip("confluent_kafka")
    from benchmarks.omb import restart

    return restart


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4096", 4096),
        ("200MB", 200_000_000),
        ("200mb", 200_000_000),
        ("200M", 200_000_000),
        ("16kb", 16_000),
        ("8KiB", 8192),
        ("10GiB", 10 * 2**30),
        ("1.5GB", 1_500_000_000),
        (" 2 TiB ", 2 * 2**40),
    ],
)
def test_parse_size(bench: ModuleType, text: str, expected: int) -> None:
    assert bench.parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "MB", "ten GB", "5 PB", "-1MB"])
def test_parse_size_rejects(bench: ModuleType, text: str) -> None:
    with pytest.raises(ValueError):
        bench.parse_size(text)


def test_plan_spreads_evenly_in_batch_sized_rounds(bench: ModuleType) -> None:
    plan = bench.plan_load(10 * 2**30, 1000, 8192, 1_000_000)
    assert plan.records_per_partition == 10 * 2**30 // (8192 * 1000)
    assert plan.total_records == plan.records_per_partition * 1000
    assert plan.total_bytes <= 10 * 2**30
    assert plan.chunk * 8192 <= 1_000_000  # a round's records fit one producer batch
    rounds = list(plan.rounds())
    assert sum(rounds) == plan.records_per_partition
    assert all(0 < n <= plan.chunk for n in rounds)


def test_plan_has_at_least_one_record_per_partition(bench: ModuleType) -> None:
    plan = bench.plan_load(1000, 1000, 16384, 1_000_000)
    assert plan.records_per_partition == 1
    assert list(plan.rounds()) == [1]
    assert bench.plan_load(10, 2, 2_000_000, 1_000_000).chunk == 1


def test_parse_heap_info(bench: ModuleType) -> None:
    jdk17 = (
        "12345:\n garbage-first heap   total 262144K, used 51234K [0x00000000c0000000, "
        "0x0000000100000000)\n  region size 1024K, 44 young (45056K), 3 survivors (3072K)\n"
    )
    assert bench.parse_heap_info(jdk17) == {"heap_total_mb": 256.0, "heap_used_mb": 51234 / 1024}
    jdk21 = " garbage-first heap   total reserved 1048576K, committed 262144K, used 20480K [0x0)\n"
    assert bench.parse_heap_info(jdk21) == {
        "heap_total_mb": 1024.0,
        "heap_committed_mb": 256.0,
        "heap_used_mb": 20.0,
    }
    assert bench.parse_heap_info("attach failed") == {}


def test_summarize_collapsed(bench: ModuleType) -> None:
    lines = [
        "<module> (pydmq/__main__.py:1);main (pydmq/cli/__init__.py:10);"
        "load (pydmq/engines/segment/loader.py:97) 6",
        "<module> (pydmq/__main__.py:1);main (pydmq/cli/__init__.py:10);"
        "load (pydmq/engines/segment/loader.py:120);recover (pydmq/engines/segment/segment.py:300) 3",
        "<module> (pydmq/__main__.py:1);fact (x.py:1);fact (x.py:2) 1",
        "not a profile line",
    ]
    total, ranked = bench.summarize_collapsed(lines, top=10)
    assert total == 10
    shares = {name: (incl, own) for name, incl, own in ranked}
    assert shares["pydmq/__main__.py:<module>"] == (1.0, 0.0)
    assert shares["pydmq/engines/segment/loader.py:load"] == (0.9, 0.6)  # two lines, one function
    assert shares["pydmq/engines/segment/segment.py:recover"] == (0.3, 0.3)
    assert shares["x.py:fact"] == (0.1, 0.1)  # recursion counted once per stack
    assert ranked[0][0] == "pydmq/__main__.py:<module>"
    assert bench.summarize_collapsed([]) == (0, [])


def test_summarize_collapsed_excludes_stacks(bench: ModuleType) -> None:
    lines = [
        "main (a.py:1);Broker.start (pydmq/broker/server.py:5);load (l.py:2) 3",
        "main (a.py:1);Broker.stop (pydmq/broker/server.py:9);fsync (c.py:3) 5",
        "main (a.py:1) 2",
    ]
    total, ranked = bench.summarize_collapsed(lines, exclude=("Broker.stop",))
    assert total == 5
    shares = {name: incl for name, incl, _ in ranked}
    assert shares == {
        "a.py:main": 1.0,
        "pydmq/broker/server.py:Broker.start": 0.6,
        "l.py:load": 0.6,
    }
