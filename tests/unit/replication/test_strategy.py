"""The built-in replication strategies and their registration hook."""

from __future__ import annotations

from typing import Any

import pytest

from pydmq.plugins.host import DuplicateRegistrationError, PluginHost
from pydmq.plugins.markers import hookimpl
from pydmq.replication.strategy import (
    IsrStrategy,
    QuorumStrategy,
    ReplicationStrategy,
    ReplicationStrategySpec,
)

ISR = IsrStrategy()
QUORUM = QuorumStrategy()


def test_builtins_satisfy_the_protocol() -> None:
    assert isinstance(ISR, ReplicationStrategy)
    assert isinstance(QUORUM, ReplicationStrategy)


@pytest.mark.parametrize(
    ("strategy", "replicas", "configured", "expected"),
    [
        (ISR, [1, 2, 3], 2, 2),
        (ISR, [1, 2, 3], 5, 5),  # not capped: acks=all then fails, as in Kafka
        (QUORUM, [1, 2, 3], 1, 2),
        (QUORUM, [1, 2, 3, 4, 5], 1, 3),
        (QUORUM, [1], 3, 1),
    ],
)
def test_min_insync_replicas(
    strategy: ReplicationStrategy, replicas: list[int], configured: int, expected: int
) -> None:
    assert strategy.min_insync_replicas(replicas, configured) == expected


@pytest.mark.parametrize("strategy", [ISR, QUORUM], ids=lambda s: s.name)
def test_high_watermark_is_the_isr_minimum(strategy: ReplicationStrategy) -> None:
    assert strategy.high_watermark(10, {1: 10, 2: 7, 3: 9}, [1, 2, 3]) == 7
    assert strategy.high_watermark(10, {1: 10}, [1, 2, 3]) == 10
    assert strategy.high_watermark(10, {1: 10, 2: -1}, [1, 2]) == -1


def test_isr_may_shrink_to_the_leader_alone_quorum_to_a_majority() -> None:
    assert ISR.may_shrink_isr_to([1], [1, 2, 3])
    assert not ISR.may_shrink_isr_to([], [1, 2, 3])
    assert QUORUM.may_shrink_isr_to([1, 2], [1, 2, 3])
    assert not QUORUM.may_shrink_isr_to([1], [1, 2, 3])
    assert not QUORUM.may_shrink_isr_to([1, 2], [1, 2, 3, 4, 5])


def test_elections() -> None:
    # first live ISR member in replica order (the preferred replica first)
    assert ISR.elect_leader([3, 1, 2], [1, 2, 3], {1, 2, 3}, False) == 3
    assert ISR.elect_leader([3, 1, 2], [1, 2], {1, 2, 3}, False) == 1
    assert ISR.elect_leader([3, 1, 2], [2], {1, 3}, False) == -1
    assert ISR.elect_leader([3, 1, 2], [2], {1, 3}, True) == 3  # unclean
    assert QUORUM.elect_leader([3, 1, 2], [1, 2], {1, 2}, False) == 1
    assert QUORUM.elect_leader([3, 1, 2], [2], {1, 3}, True) == -1  # never unclean


def test_plugin_host_registers_the_builtins() -> None:
    strategies = PluginHost(load_entry_points=False).replication_strategies()
    assert list(strategies)[:2] == ["isr", "quorum"]
    assert strategies["quorum"].factory().name == "quorum"


class Strict(IsrStrategy):
    name = "isr-strict"

    def elect_leader(self, replicas: Any, isr: Any, live: Any, unclean_allowed: bool) -> int:
        return super().elect_leader(replicas, isr, live, False)


def test_third_party_strategy_and_duplicates() -> None:
    class Plugin:
        @hookimpl
        def pydmq_register_replication_strategies(self) -> list[ReplicationStrategySpec]:
            return [ReplicationStrategySpec("isr-strict", Strict)]

    strategies = PluginHost([Plugin()], load_entry_points=False).replication_strategies()
    assert strategies["isr-strict"].factory().elect_leader([1], [2], {1}, True) == -1

    class Duplicate:
        @hookimpl
        def pydmq_register_replication_strategies(self) -> list[ReplicationStrategySpec]:
            return [ReplicationStrategySpec("isr", IsrStrategy)]

    with pytest.raises(DuplicateRegistrationError):
        PluginHost([Duplicate()], load_entry_points=False).replication_strategies()
