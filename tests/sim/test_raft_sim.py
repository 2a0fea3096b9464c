"""Seeded simulation of the KRaft quorum: safety after every step, liveness after healing.

Quick mode (the default) runs ~2750 short seeds over three fault profiles and 3 or 5 voters,
plus a few long runs. ``PYDMQ_SIM_SEEDS=<n>`` scales the short runs to ``n`` seeds per
profile and voter count (``PYDMQ_SIM_FIRST_SEED`` moves the window). A failure names its seed
and profile; reproduce it with ``run(seed, PROFILE)`` from :mod:`tests.sim.raftsim`.
"""

from __future__ import annotations

import dataclasses
import os
import time

import pytest

from .raftsim import DEFAULT, FAST, HARSH, SimConfig, Simulation, run

_SCALE = os.environ.get("PYDMQ_SIM_SEEDS")
FIRST_SEED = int(os.environ.get("PYDMQ_SIM_FIRST_SEED", "0"))

# (profile name, config, quick-mode seeds)
PROFILES: list[tuple[str, SimConfig, int]] = [
    ("default-3", DEFAULT, 800),
    ("default-5", dataclasses.replace(DEFAULT, voters=5), 300),
    ("fast-3", FAST, 400),
    ("fast-5", dataclasses.replace(FAST, voters=5), 150),
    ("harsh-3", HARSH, 800),
    ("harsh-5", dataclasses.replace(HARSH, voters=5), 300),
]


@pytest.mark.parametrize(("name", "config", "quick"), PROFILES, ids=[p[0] for p in PROFILES])
def test_raft_invariants_hold(name: str, config: SimConfig, quick: int) -> None:
    seeds = int(_SCALE) if _SCALE else quick
    started = time.perf_counter()
    elections = commits = installs = 0
    for seed in range(FIRST_SEED, FIRST_SEED + seeds):
        result = run(seed, config)  # raises InvariantViolation naming the seed
        elections += result.leaders
        commits += result.committed
        installs += result.snapshots_installed
    elapsed = time.perf_counter() - started
    print(
        f"raft sim {name}: {seeds} seeds, {elections} leaders, {commits} committed entries, "
        f"{installs} snapshots installed, {elapsed:.1f}s"
    )
    # The faults must actually bite: elections beyond the first, snapshots shipped.
    assert elections > seeds


@pytest.mark.parametrize(
    ("seed", "config"),
    [
        (1, dataclasses.replace(DEFAULT, fault_ms=600_000)),
        (2, dataclasses.replace(DEFAULT, voters=5, fault_ms=300_000)),
        (3, dataclasses.replace(FAST, fault_ms=120_000)),
        (4, dataclasses.replace(HARSH, voters=5, fault_ms=600_000)),
    ],
    ids=["default-3-long", "default-5-long", "fast-3-long", "harsh-5-long"],
)
def test_raft_long_runs(seed: int, config: SimConfig) -> None:
    result = run(seed, config)
    assert result.committed > 0


QUIET = SimConfig(drop=0.0, duplicate=0.0)


@pytest.mark.parametrize("seed", range(20))
def test_isolated_voter_does_not_disrupt_the_leader_when_it_returns(seed: int) -> None:
    """Pre-vote (KIP-996): a voter cut off for long cannot bump the epoch on its return."""
    sim = Simulation(seed, QUIET)
    sim.advance(6000, append_interval_ms=100)
    leader = sim.leader()
    assert leader is not None, f"seed={seed}: no leader"
    epoch, leader_id = leader.epoch, leader.node_id
    follower = next(i for i in sim.ids if i != leader_id)
    sim.isolate(follower)
    sim.advance(20_000, append_interval_ms=100)
    assert sim.core(follower).epoch == epoch, f"seed={seed}: isolated voter bumped its epoch"
    sim.heal_links()
    sim.advance(10_000, append_interval_ms=100)
    leader = sim.leader()
    assert leader is not None and (leader.node_id, leader.epoch) == (leader_id, epoch), (
        f"seed={seed}: leadership changed after the isolated voter returned"
    )
    assert sim.core(follower).high_watermark >= leader.high_watermark - 10


@pytest.mark.parametrize("seed", range(10))
def test_isolated_leader_resigns_and_the_rest_elect(seed: int) -> None:
    """Check-quorum: a leader cut off from the majority steps down; the others elect."""
    sim = Simulation(seed, QUIET)
    sim.advance(6000, append_interval_ms=100)
    leader = sim.leader()
    assert leader is not None, f"seed={seed}: no leader"
    old_id, old_epoch = leader.node_id, leader.epoch
    sim.isolate(old_id)
    sim.advance(10_000, append_interval_ms=100)
    assert not sim.core(old_id).is_leader, f"seed={seed}: isolated leader still leads"
    new = sim.leader()
    assert new is not None and new.node_id != old_id and new.epoch > old_epoch, f"seed={seed}"
    sim.heal_links()
    sim.advance(10_000, append_interval_ms=100)
    assert sim.core(old_id).leader_id == sim.leader().node_id  # type: ignore[union-attr]
