"""Fuzzing every request decoder and the request-header parser.

For every (API key, version) of ``API_SCHEMAS``: random bytes, mutations of a valid encoding
(every field populated, lists of two) and a deterministic sweep (every truncation, and 0x00 /
0x7F / 0x80 / 0xFF at every position). Only :class:`pydmq.protocol.errors.ProtocolError`
subclasses may escape; each input finishes in under two seconds and its peak of Python
allocations (tracemalloc) stays under ``memory_bound(len(input))``.
"""

from __future__ import annotations

import struct
import time
import tracemalloc
from collections.abc import Iterator

import pytest
from fuzz_harness import (
    PAIRS,
    Budget,
    fuzz_settings,
    pair_selector,
    run,
    valid_request_body,
    valid_request_frame,
)
from hypothesis import given
from hypothesis import strategies as st

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def budget() -> Iterator[Budget]:
    """Time checks only (tracemalloc slows decoding ~5x; the memory test below traces)."""
    yield Budget(trace=False)


@pytest.fixture
def traced_budget() -> Iterator[Budget]:
    tracemalloc.start()
    try:
        yield Budget(trace=True)
    finally:
        tracemalloc.stop()


@st.composite
def mutated(draw: st.DrawFn, seed: bytes) -> bytes:
    """A valid encoding with a few byte-level edits (the classic mutation operators)."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate", "dup"]))
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip" and data:
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and data:
            data[pos] = draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF]))
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del data[pos : pos + draw(st.integers(1, 8))]
        elif op == "truncate":
            del data[pos:]
        elif op == "dup":
            end = pos + draw(st.integers(1, 16))
            data[pos:pos] = data[pos:end]
    return bytes(data)


_BODIES = {pair: valid_request_body(*pair) for pair in PAIRS}
_FRAMES = {pair: valid_request_frame(*pair) for pair in PAIRS}


@fuzz_settings(1500)
@given(pair=st.sampled_from(PAIRS), body=st.binary(max_size=300))
def test_random_request_bodies(budget: Budget, pair: tuple[int, int], body: bytes) -> None:
    budget.check("request_body", pair_selector(*pair) + body)


@fuzz_settings(1500)
@given(data=st.sampled_from(PAIRS).flatmap(lambda p: st.tuples(st.just(p), mutated(_BODIES[p]))))
def test_mutated_request_bodies(budget: Budget, data: tuple[tuple[int, int], bytes]) -> None:
    pair, body = data
    budget.check("request_body", pair_selector(*pair) + body)


@fuzz_settings(1000)
@given(data=st.sampled_from(PAIRS).flatmap(lambda p: mutated(_FRAMES[p])))
def test_mutated_request_frames(budget: Budget, data: bytes) -> None:
    budget.check("request_frame", data)


@fuzz_settings(300)
@given(data=st.binary(max_size=200))
def test_random_request_frames(budget: Budget, data: bytes) -> None:
    budget.check("request_frame", data)


def test_sweep_every_truncation_and_hostile_byte() -> None:
    """Deterministic: every prefix of every valid body, and four hostile bytes everywhere."""
    count = 0
    for pair, body in _BODIES.items():
        selector = pair_selector(*pair)
        for end in range(len(body)):
            run("request_body", selector + body[:end])
            count += 1
        for pos in range(len(body)):
            for value in (0x00, 0x7F, 0x80, 0xFF):
                if body[pos] != value:
                    run("request_body", selector + body[:pos] + bytes([value]) + body[pos + 1 :])
                    count += 1
    assert count > 10_000


# Bodies of 16 KB built to make decoders allocate as much as possible per input byte: runs of
# tiny array elements, huge declared lengths, varint continuation bytes.
_N = 16384
_PATTERNS = [
    b"\x00" * _N,
    b"\x01" * _N,
    b"\x02" * _N,
    b"\x80" * _N,
    b"\xff" * _N,
    struct.pack(">i", _N // 4) + b"\x00" * (_N - 4),
    struct.pack(">i", 0x7FFFFFFF) + b"\x00" * (_N - 4),
    b"\xff\x7f" + b"\x01" * (_N - 2),
    struct.pack(">i", _N // 5) + b"\x00" * (_N - 4),
]


def test_large_inputs_memory_is_bounded(traced_budget: Budget) -> None:
    """Every pair, each 16 KB pattern after its valid prefix: allocation stays proportional."""
    budget = traced_budget
    for pair, body in _BODIES.items():
        selector = pair_selector(*pair)
        for pattern in _PATTERNS:
            budget.check("request_body", selector + body[: len(body) // 2] + pattern)
    print(
        f"\nrequest decoders, 16 KB hostile inputs: worst peak {budget.worst_peak / 1e6:.2f} MB, "
        f"worst {budget.worst_ratio:.0f} B allocated per input byte, "
        f"slowest {budget.slowest * 1000:.1f} ms (traced)"
    )


def test_decoding_cost_per_byte() -> None:
    """Untraced CPU cost of the worst pattern (arrays of empty structs), 64 KB bodies."""
    body = struct.pack(">i", 65536 // 5) + b"\x00" * 65532
    worst = 0.0
    for pair in PAIRS:
        started = time.perf_counter()
        run("request_body", pair_selector(*pair) + body)
        worst = max(worst, time.perf_counter() - started)
    print(f"\nrequest decoders, 64 KB of empty structs: worst {worst * 1000:.0f} ms")
    assert worst < 2.0
