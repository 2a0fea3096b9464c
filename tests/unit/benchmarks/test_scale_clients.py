"""benchmarks/scale_clients.py's own logic: the assignments it decodes, the round-robin plan
its classic leader sends, and when it calls a big group converged."""

from __future__ import annotations

import pytest
from benchmarks.scale_clients import BigGroup, decode_owned, percentile, round_robin

from pydmq.groups.consumer.embedded import encode_assignment

pytestmark = pytest.mark.timeout(30)


def test_a_consumer_protocol_assignment_decodes_to_its_partitions() -> None:
    assert decode_owned(encode_assignment([("scale-wide", [0, 3, 7])])) == {0, 3, 7}
    assert decode_owned(encode_assignment([("a", [1]), ("b", [2, 5])])) == {1, 2, 5}
    assert decode_owned(b"") == frozenset()


def test_round_robin_gives_every_partition_once() -> None:
    plan = round_robin(["m1", "m2", "m3"], 7)
    assert plan == {"m1": [0, 3, 6], "m2": [1, 4], "m3": [2, 5]}


def test_a_big_group_converges_on_one_generation_covering_every_partition_once() -> None:
    state = BigGroup(partitions=4)
    state.update(0, 2, frozenset({0, 1}))
    assert not state.converged(2)  # a member has not reported
    state.update(1, 1, frozenset({2, 3}))
    assert not state.converged(2)  # two generations
    state.update(1, 2, frozenset({1, 2, 3}))
    assert not state.converged(2)  # partition 1 twice
    state.update(1, 2, frozenset({2, 3}))
    assert state.converged(2)
    state.update(0, 2, frozenset({0, 1, 2, 3}))
    state.update(1, 2, frozenset())
    assert not state.converged(2)  # all on one member: no target for the other yet


def test_percentile_takes_the_sample_at_the_rank() -> None:
    assert percentile(list(range(100)), 0.99) == 99
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0
