"""The fencing rules of controller requests, and the verifier that confirms controller epochs
with the quorum (fake voters, no sockets)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import TypeVar

import pytest

from pydmq.broker.cluster.fencing import (
    UNKNOWN,
    ControllerEpochVerifier,
    ControllerRequestFence,
    LeaderAndEpoch,
    Verdict,
    broker_epoch_error,
    judge,
    leader_epoch_fenced,
)
from pydmq.protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(30)

T = TypeVar("T")


def run(scenario: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(asyncio.wait_for(scenario(), 20))  # type: ignore[arg-type]


# -- pure rules --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("claim", "known", "verdict"),
    [
        ((1, 5), LeaderAndEpoch(1, 5), Verdict.CURRENT),
        ((1, 4), LeaderAndEpoch(1, 5), Verdict.STALE),
        ((2, 0), LeaderAndEpoch(1, 5), Verdict.STALE),
        ((1, 6), LeaderAndEpoch(1, 5), Verdict.UNCONFIRMED),
        ((1, 2**31 - 1), LeaderAndEpoch(1, 5), Verdict.UNCONFIRMED),
        ((2, 5), LeaderAndEpoch(1, 5), Verdict.UNCONFIRMED),  # one leader per epoch
        ((1, 5), LeaderAndEpoch(-1, 5), Verdict.UNCONFIRMED),  # epoch without a leader yet
        ((-1, 5), LeaderAndEpoch(-1, 5), Verdict.UNCONFIRMED),
        ((-1, -1), UNKNOWN, Verdict.UNCONFIRMED),  # sentinels confirm nothing
        ((1, 0), UNKNOWN, Verdict.UNCONFIRMED),
    ],
)
def test_judge(claim: tuple[int, int], known: LeaderAndEpoch, verdict: Verdict) -> None:
    assert judge(*claim, known) is verdict


def test_verdict_error_codes() -> None:
    assert Verdict.CURRENT.error_code == ErrorCode.NONE
    assert Verdict.STALE.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert Verdict.UNCONFIRMED.error_code == ErrorCode.NOT_CONTROLLER


def test_newer_than() -> None:
    assert LeaderAndEpoch(-1, 6).newer_than(LeaderAndEpoch(1, 5))
    assert LeaderAndEpoch(2, 5).newer_than(LeaderAndEpoch(-1, 5))
    assert not LeaderAndEpoch(2, 5).newer_than(LeaderAndEpoch(1, 5))
    assert not LeaderAndEpoch(-1, 5).newer_than(LeaderAndEpoch(1, 5))
    assert not LeaderAndEpoch(1, 4).newer_than(LeaderAndEpoch(1, 5))


@pytest.mark.parametrize(
    ("request_epoch", "registered", "code"),
    [
        (7, 7, ErrorCode.NONE),
        (-1, 7, ErrorCode.STALE_BROKER_EPOCH),  # -1 no longer skips the check
        (6, 7, ErrorCode.STALE_BROKER_EPOCH),
        (8, 7, ErrorCode.STALE_BROKER_EPOCH),  # another registration than ours
        (7, -1, ErrorCode.STALE_BROKER_EPOCH),  # not registered: refuse everything
        (-1, -1, ErrorCode.STALE_BROKER_EPOCH),
    ],
)
def test_broker_epoch_error(request_epoch: int, registered: int, code: int) -> None:
    assert broker_epoch_error(request_epoch, registered) == code


@pytest.mark.parametrize(
    ("request_epoch", "applied", "fenced"),
    [
        (3, 3, False),
        (4, 3, False),
        (2, 3, True),
        (-1, 3, True),  # Kafka's "no epoch" sentinel
        (-2, 3, True),  # Kafka's EpochDuringDelete sentinel
        (-1, -1, True),  # not hosted: a negative epoch is still no epoch
        (0, -1, False),
    ],
)
def test_leader_epoch_fenced(request_epoch: int, applied: int, fenced: bool) -> None:
    assert leader_epoch_fenced(request_epoch, applied) is fenced


# -- the verifier ------------------------------------------------------------------------------


class FakeVoters:
    """Each round yields ``views`` (after ``delay`` s each), then waits ``tail`` seconds."""

    def __init__(
        self, views: Sequence[LeaderAndEpoch], delay: float = 0.0, tail: float = 0.0
    ) -> None:
        self.views = list(views)
        self.delay = delay
        self.tail = tail
        self.rounds = 0
        self.fail = False

    async def __call__(self, timeout: float) -> AsyncGenerator[LeaderAndEpoch, None]:
        self.rounds += 1
        if self.fail:
            raise ConnectionError("voters unreachable")
        for view in self.views:
            await asyncio.sleep(self.delay)
            yield view
        await asyncio.sleep(min(self.tail, timeout))


def _verifier(
    voters: FakeVoters,
    local: LeaderAndEpoch | None = None,
    timeout_s: float = 60.0,
    min_interval_s: float = 0.0,
) -> ControllerEpochVerifier:
    return ControllerEpochVerifier(
        local=lambda: local,
        ask_voters=voters,
        timeout_s=timeout_s,
        min_interval_s=min_interval_s,
    )


def test_a_new_epoch_is_believed_once_a_voter_confirms_it() -> None:
    async def scenario() -> None:
        voters = FakeVoters([LeaderAndEpoch(2, 7)])
        verifier = _verifier(voters)
        assert await verifier.verify(2, 7) is Verdict.CURRENT
        assert verifier.known == LeaderAndEpoch(2, 7) and voters.rounds == 1
        # Known now: no more questions; the deposed epoch is stale.
        assert await verifier.verify(2, 7) is Verdict.CURRENT
        assert await verifier.verify(1, 6) is Verdict.STALE
        assert voters.rounds == 1

    run(scenario)


def test_an_epoch_the_quorum_never_had_is_refused_and_not_stored() -> None:
    async def scenario() -> None:
        voters = FakeVoters([LeaderAndEpoch(1, 3), LeaderAndEpoch(1, 3), LeaderAndEpoch(-1, 2)])
        verifier = _verifier(voters)
        assert await verifier.verify(1, 2**31 - 1) is Verdict.UNCONFIRMED
        assert await verifier.verify(3, 3) is Verdict.UNCONFIRMED  # not epoch 3's leader
        assert verifier.known == LeaderAndEpoch(1, 3)
        # The real controller is still obeyed, without asking again.
        rounds = voters.rounds
        assert await verifier.verify(1, 3) is Verdict.CURRENT
        assert voters.rounds == rounds

    run(scenario)


def test_a_combined_node_trusts_its_own_raft_state_without_asking() -> None:
    async def scenario() -> None:
        voters = FakeVoters([])
        verifier = _verifier(voters, local=LeaderAndEpoch(3, 9))
        assert await verifier.verify(3, 9) is Verdict.CURRENT
        assert await verifier.verify(1, 8) is Verdict.STALE
        assert voters.rounds == 0

    run(scenario)


def test_a_lagging_local_view_asks_the_voters() -> None:
    async def scenario() -> None:
        voters = FakeVoters([LeaderAndEpoch(2, 10)])
        verifier = _verifier(voters, local=LeaderAndEpoch(1, 9))
        assert await verifier.verify(2, 10) is Verdict.CURRENT
        assert voters.rounds == 1

    run(scenario)


def test_confirmation_does_not_wait_for_slow_voters() -> None:
    """One voter confirms at once, the others never answer: the request goes on."""

    async def scenario() -> None:
        voters = FakeVoters([LeaderAndEpoch(2, 4)], tail=3600)
        verifier = _verifier(voters, timeout_s=3600)
        verdict = await asyncio.wait_for(verifier.verify(2, 4), 10)
        assert verdict is Verdict.CURRENT
        await verifier.close()

    run(scenario)


def test_an_unanswered_claim_is_refused_within_the_time_limit() -> None:
    async def scenario() -> None:
        voters = FakeVoters([], tail=3600)
        verifier = _verifier(voters, timeout_s=0.2)
        assert await asyncio.wait_for(verifier.verify(1, 1), 10) is Verdict.UNCONFIRMED
        assert verifier.known == UNKNOWN
        voters.fail = True  # a failing round is logged, and refuses too
        await verifier.close()
        assert await asyncio.wait_for(verifier.verify(1, 1), 10) is Verdict.UNCONFIRMED

    run(scenario)


def test_a_refused_claim_ends_with_its_round_not_at_the_time_limit() -> None:
    async def scenario() -> None:
        voters = FakeVoters([LeaderAndEpoch(1, 3)])
        verifier = _verifier(voters, timeout_s=3600, min_interval_s=0.01)
        for epoch in (4, 5, 6):
            assert await asyncio.wait_for(verifier.verify(1, epoch), 10) is Verdict.UNCONFIRMED

    run(scenario)


def test_a_flood_of_forged_claims_shares_rounds_and_the_real_one_gets_through() -> None:
    async def scenario() -> None:
        voters = FakeVoters([LeaderAndEpoch(1, 3), LeaderAndEpoch(1, 3)], delay=0.01)
        verifier = _verifier(voters, timeout_s=3600, min_interval_s=0.05)
        forged = [verifier.verify(1, 1000 + i) for i in range(200)]
        verdicts = await asyncio.wait_for(asyncio.gather(*forged), 10)
        assert set(verdicts) == {Verdict.UNCONFIRMED}
        assert voters.rounds <= 2, voters.rounds  # 200 claims, at most two rounds
        voters.views = [LeaderAndEpoch(2, 4)]  # failover: node 2 leads epoch 4
        assert await asyncio.wait_for(verifier.verify(2, 4), 10) is Verdict.CURRENT

    run(scenario)


# -- one request -------------------------------------------------------------------------------


def test_a_request_passes_broker_then_controller_epoch_checks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> None:
        registered = [-1]
        voters = FakeVoters([LeaderAndEpoch(1, 3)])
        fence = ControllerRequestFence(
            node_id=4, broker_epoch=lambda: registered[0], verifier=_verifier(voters)
        )
        # Not registered yet: everything is refused, and the voters are not asked.
        assert await fence.check("LeaderAndIsr", 1, 3, -1, "h:1") == ErrorCode.STALE_BROKER_EPOCH
        assert await fence.check("LeaderAndIsr", 1, 3, 20, "h:1") == ErrorCode.STALE_BROKER_EPOCH
        assert voters.rounds == 0
        registered[0] = 20
        assert await fence.check("StopReplica", 1, 3, -1, "h:1") == ErrorCode.STALE_BROKER_EPOCH
        assert await fence.check("StopReplica", 1, 3, 19, "h:1") == ErrorCode.STALE_BROKER_EPOCH
        assert voters.rounds == 0
        assert await fence.check("StopReplica", 1, 3, 20, "h:1") == ErrorCode.NONE
        assert await fence.check("StopReplica", 1, 2, 20, "h:1") == ErrorCode.STALE_CONTROLLER_EPOCH
        with caplog.at_level(logging.WARNING, logger="pydmq.broker.cluster.fencing"):
            for source in ("forger:1", "forger:2", "other:3"):
                code = await fence.check("UpdateMetadata", 1, 2**31 - 1, 20, source)
                assert code == ErrorCode.NOT_CONTROLLER
        refused = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
        assert len(refused) == 2  # once per source host
        claim = "refused UpdateMetadata from forger:1 claiming controller 1 in epoch 2147483647"
        assert claim in refused[0]
        assert "confirms leader 1 in epoch 3" in refused[0]

    run(scenario)
