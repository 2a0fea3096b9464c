"""The striped replica placer: distinct replicas, rack awareness, leader balance; its hook."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pydmq.assignment.placement import (
    InvalidReplicationFactorError,
    ReplicaPlacerSpec,
    StripedReplicaPlacer,
)
from pydmq.plugins.host import DuplicateRegistrationError, PluginHost
from pydmq.plugins.markers import hookimpl


@dataclass(frozen=True)
class Broker:
    id: int
    rack: str | None = None


def placer(seed: int = 0) -> StripedReplicaPlacer:
    return StripedReplicaPlacer(random.Random(seed))


def test_without_racks_is_kafkas_stripe() -> None:
    brokers = [Broker(i) for i in (3, 1, 4, 2)]
    layout = placer().place(range(6), 3, brokers, start=0)
    assert layout == [[1, 2, 3], [2, 3, 4], [3, 4, 1], [4, 1, 2], [1, 3, 4], [2, 4, 1]]


def test_every_rack_gets_a_replica_before_one_repeats() -> None:
    brokers = [Broker(1, "a"), Broker(2, "a"), Broker(3, "b"), Broker(4, "b"), Broker(5, "c")]
    racks = {b.id: b.rack for b in brokers}
    for replicas in placer().place(range(50), 3, brokers):
        assert len({racks[r] for r in replicas}) == 3
    for replicas in placer().place(range(50), 4, brokers):
        assert len(set(replicas)) == 4
        assert {racks[r] for r in replicas} == {"a", "b", "c"}


def test_leaders_are_balanced_and_alternate_racks() -> None:
    brokers = [Broker(i, "ab"[i % 2]) for i in range(1, 7)]
    layout = placer(7).place(range(60), 3, brokers)
    leaders = Counter(r[0] for r in layout)
    assert set(leaders.values()) == {10}
    racks = [brokers[r[0] - 1].rack for r in layout]
    assert all(racks[i] != racks[i + 1] for i in range(len(racks) - 1))


def test_followers_spread_over_the_other_brokers() -> None:
    brokers = [Broker(i) for i in range(1, 6)]
    layout = placer().place(range(40), 2, brokers, start=0)
    followers_of_1 = {r[1] for r in layout if r[0] == 1}
    assert followers_of_1 == {2, 3, 4, 5}


def test_added_partitions_continue_the_stripe() -> None:
    brokers = [Broker(i) for i in range(1, 4)]
    whole = placer().place(range(6), 2, brokers, start=1)
    tail = placer().place(range(3, 6), 2, brokers, start=1)
    assert whole[3:] == tail


def test_seeded_start_is_reproducible_and_random_start_varies() -> None:
    brokers = [Broker(i) for i in range(1, 6)]
    assert placer(3).place(range(5), 2, brokers) == placer(3).place(range(5), 2, brokers)
    firsts = {tuple(placer(s).place(range(1), 2, brokers)[0]) for s in range(30)}
    assert len(firsts) > 1


@pytest.mark.parametrize("rf", [0, -1, 4])
def test_invalid_replication_factor(rf: int) -> None:
    with pytest.raises(InvalidReplicationFactorError):
        placer().place(range(1), rf, [Broker(1), Broker(2), Broker(3)])


@given(
    st.lists(st.sampled_from([None, "a", "b", "c"]), min_size=1, max_size=8),
    st.data(),
)
def test_replicas_are_distinct_registered_brokers(
    racks: list[str | None], data: st.DataObject
) -> None:
    brokers = [Broker(i + 10, rack) for i, rack in enumerate(racks)]
    rf = data.draw(st.integers(1, len(brokers)))
    layout = placer().place(range(12), rf, brokers, start=data.draw(st.integers(0, 20)))
    ids = {b.id for b in brokers}
    distinct_racks = len({b.rack for b in brokers})
    for replicas in layout:
        assert len(replicas) == rf == len(set(replicas))
        assert set(replicas) <= ids
        assert len({brokers[r - 10].rack for r in replicas}) == min(rf, distinct_racks)


def test_builtin_placer_registered_through_the_hook() -> None:
    placers = PluginHost(load_entry_points=False).replica_placers()
    assert next(iter(placers)) == "striped"
    assert isinstance(placers["striped"].factory(), StripedReplicaPlacer)


def test_duplicate_placer_name_is_an_error() -> None:
    class Duplicate:
        @hookimpl
        def pydmq_register_replica_placers(self) -> list[ReplicaPlacerSpec]:
            return [ReplicaPlacerSpec("striped", StripedReplicaPlacer)]

    with pytest.raises(DuplicateRegistrationError):
        PluginHost([Duplicate()], load_entry_points=False).replica_placers()
