"""Seeded simulation of ISR replication: safety invariants for every built-in strategy.

Quick mode runs a few thousand seeds; ``PYDMQ_SIM_SEEDS=<n>`` runs ``n`` seeds per strategy
(``PYDMQ_SIM_FIRST_SEED`` moves the window). A failure names its seed; rerun one with
``run_seed(seed, strategy)`` from :mod:`tests.sim.replication_harness`.
"""

from __future__ import annotations

import os

import pytest

from pydmq.replication.strategy import IsrStrategy, QuorumStrategy, ReplicationStrategy

from .replication_harness import SimStats, run_seed

SEEDS = int(os.environ.get("PYDMQ_SIM_SEEDS", "1000"))
FIRST_SEED = int(os.environ.get("PYDMQ_SIM_FIRST_SEED", "0"))
CHUNKS = 5


@pytest.mark.parametrize("chunk", range(CHUNKS))
@pytest.mark.parametrize("strategy", [IsrStrategy(), QuorumStrategy()], ids=lambda s: s.name)
def test_replication_invariants_hold(strategy: ReplicationStrategy, chunk: int) -> None:
    total = SimStats()
    for seed in range(FIRST_SEED + chunk, FIRST_SEED + SEEDS, CHUNKS):
        stats = run_seed(seed, strategy)
        total.steps += stats.steps
        total.elections += stats.elections
        total.acked += stats.acked
        total.truncations += stats.truncations
        total.tail_losses += stats.tail_losses
        total.isr_changes += stats.isr_changes
    # The runs must exercise what they claim to check, not pass vacuously.
    assert total.elections > 0 and total.acked > 0 and total.truncations > 0, total
    assert total.isr_changes > 0 and total.tail_losses > 0, total
