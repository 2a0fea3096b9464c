"""Fencing of the controller's requests: which controller a broker obeys, and what it refuses.

LeaderAndIsr, StopReplica and UpdateMetadata carry the sender's ``controller_id`` and
``controller_epoch`` (the Raft epoch in which it leads the quorum), the recipient's
``broker_epoch`` (its registration) and, per partition, a leader epoch. Nothing authenticates
them yet, so a broker believes none of these numbers on their own:

- the controller: only the ``(controller_id, controller_epoch)`` that equals the quorum's
  ``(leader, epoch)`` as this broker knows it from trusted sources (:func:`judge`). Those are
  its own Raft state on a combined broker+controller node, and the voters of
  ``controller.quorum.voters`` (trusted configuration), asked with DescribeQuorum when a
  request claims an epoch newer than the known one (:class:`ControllerEpochVerifier`). Under
  Raft a voter knows ``leader L in epoch E`` only from L itself, and an epoch has at most one
  leader, so any voter's answer is as good as the leader's. An older epoch is stale; a newer
  one that no voter confirms is refused and never stored;
- the registration: ``broker_epoch`` must equal this broker's current registration epoch; a
  broker not registered yet refuses every request (:func:`broker_epoch_error`);
- a partition: a leader epoch older than the applied one is fenced, negative ones included
  (:func:`leader_epoch_fenced`). No sentinel value skips a check.

The rules are pure functions; the verifier and :class:`ControllerRequestFence`, which applies
them all to one request, are owned by the broker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass

from pydmq.protocol.errors import ErrorCode

__all__ = [
    "UNKNOWN",
    "ControllerEpochVerifier",
    "ControllerRequestFence",
    "LeaderAndEpoch",
    "Verdict",
    "broker_epoch_error",
    "judge",
    "leader_epoch_fenced",
]

log = logging.getLogger(__name__)

# Sources whose refused requests were logged (each is logged once; the set is bounded).
_MAX_WARNED_SOURCES = 1024


@dataclass(frozen=True, slots=True)
class LeaderAndEpoch:
    """The quorum's leader in one Raft epoch, as a trusted source reported it (Kafka's
    ``LeaderAndEpoch``); ``leader_id`` is -1 while the epoch has no known leader."""

    leader_id: int
    epoch: int

    def newer_than(self, other: LeaderAndEpoch) -> bool:
        """A later epoch, or the same epoch with its leader now known."""
        if self.epoch != other.epoch:
            return self.epoch > other.epoch
        return self.leader_id >= 0 and other.leader_id < 0


UNKNOWN = LeaderAndEpoch(-1, -1)


class Verdict(enum.Enum):
    """What a broker makes of a request's ``(controller_id, controller_epoch)``."""

    CURRENT = "current"  # the known leader of the known epoch: apply the request
    STALE = "stale"  # an epoch older than the known one: a deposed controller
    UNCONFIRMED = "unconfirmed"  # not (yet) what the quorum says: refuse, store nothing

    @property
    def error_code(self) -> int:
        """NONE, STALE_CONTROLLER_EPOCH, or NOT_CONTROLLER ("not the controller of this
        cluster"; the real controller's channel sends again until it is confirmed)."""
        match self:
            case Verdict.CURRENT:
                return ErrorCode.NONE
            case Verdict.STALE:
                return ErrorCode.STALE_CONTROLLER_EPOCH
            case Verdict.UNCONFIRMED:
                return ErrorCode.NOT_CONTROLLER


def judge(controller_id: int, controller_epoch: int, known: LeaderAndEpoch) -> Verdict:
    """A request's claim against the quorum's ``known`` leader and epoch."""
    if controller_epoch < known.epoch:
        return Verdict.STALE
    if (
        controller_epoch == known.epoch
        and known.leader_id >= 0
        and controller_id == known.leader_id
    ):
        return Verdict.CURRENT
    return Verdict.UNCONFIRMED


def broker_epoch_error(request_epoch: int, registered_epoch: int) -> int:
    """NONE when a request is for this broker's current registration, else STALE_BROKER_EPOCH
    (also for -1 in the request, and for every request while not registered)."""
    if registered_epoch < 0 or request_epoch != registered_epoch:
        return ErrorCode.STALE_BROKER_EPOCH
    return ErrorCode.NONE


def leader_epoch_fenced(request_epoch: int, applied_epoch: int) -> bool:
    """True when a partition request's leader epoch is older than the one applied here
    (Kafka's -1 "no epoch" and -2 "deleting" included: they no longer skip the check)."""
    return request_epoch < 0 or request_epoch < applied_epoch


# What asks the voters: yields each voter's (leader, epoch) as its answer arrives, within
# the given number of seconds.
QuorumQuery = Callable[[float], AsyncGenerator[LeaderAndEpoch, None]]


class ControllerEpochVerifier:
    """The broker's trusted view of the quorum's leader and epoch, and the check of the
    controller epoch of every controller request against it. Event-loop owned.

    ``local`` is this node's own Raft view (combined nodes; None elsewhere); ``ask_voters``
    asks every voter at once. Rounds of questions are shared by every request waiting for
    one and start at most every ``min_interval_s``, so forged requests claiming ever newer
    epochs cannot make the broker flood the voters; a request waits at most ``timeout_s``.
    """

    def __init__(
        self,
        *,
        local: Callable[[], LeaderAndEpoch | None],
        ask_voters: QuorumQuery,
        timeout_s: float = 2.0,
        min_interval_s: float = 0.1,
    ) -> None:
        self.known = UNKNOWN
        self._local = local
        self._ask_voters = ask_voters
        self.timeout_s = timeout_s
        self.min_interval_s = min_interval_s
        self._round: asyncio.Task[None] | None = None
        self._next_round_at = 0.0
        self._changed: asyncio.Future[None] | None = None
        self.rounds = 0  # rounds of questions asked so far (diagnostics and tests)

    def observe(self, view: LeaderAndEpoch) -> None:
        """Adopt ``view`` (from a trusted source) if it is newer than the known one."""
        if view.newer_than(self.known):
            self.known = view
            changed, self._changed = self._changed, None
            if changed is not None and not changed.done():
                changed.set_result(None)

    def _observe_local(self) -> None:
        view = self._local()
        if view is not None:
            self.observe(view)

    async def verify(self, controller_id: int, controller_epoch: int) -> Verdict:
        """The verdict on a request's claim; asks the voters when the claim is newer than
        what this broker knows (bounded by ``timeout_s``)."""
        self._observe_local()
        verdict = judge(controller_id, controller_epoch, self.known)
        if verdict is not Verdict.UNCONFIRMED:
            return verdict
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        self._ensure_round()
        while verdict is Verdict.UNCONFIRMED:
            round_ = self._round
            remaining = deadline - loop.time()
            if round_ is None or remaining <= 0:
                break
            if self._changed is None:
                self._changed = loop.create_future()
            await asyncio.wait(
                {self._changed, round_}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
            )
            self._observe_local()
            verdict = judge(controller_id, controller_epoch, self.known)
        return verdict

    def _ensure_round(self) -> None:
        if self._round is None:
            self._round = asyncio.create_task(self._run_round(), name="controller-epoch-check")

    async def _run_round(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            delay = self._next_round_at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            self.rounds += 1
            answers = self._ask_voters(self.timeout_s)
            try:
                async for view in answers:
                    self.observe(view)
            finally:
                await answers.aclose()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("asking the voters for the quorum's leader failed")
        finally:
            self._next_round_at = loop.time() + self.min_interval_s
            self._round = None

    async def close(self) -> None:
        round_, self._round = self._round, None
        if round_ is not None:
            round_.cancel()
            with contextlib.suppress(BaseException):
                await round_


class ControllerRequestFence:
    """The checks every LeaderAndIsr, StopReplica and UpdateMetadata passes before it is
    applied: broker epoch, then controller epoch (``verifier``), then the broker epoch again
    (a re-registration during a remote check fences the request). Logs a WARNING once per
    source host whose claim the quorum does not confirm. Event-loop owned."""

    def __init__(
        self, *, node_id: int, broker_epoch: Callable[[], int], verifier: ControllerEpochVerifier
    ) -> None:
        self.node_id = node_id
        self._broker_epoch = broker_epoch
        self.verifier = verifier
        self._warned_sources: set[str] = set()

    async def check(
        self, api: str, controller_id: int, controller_epoch: int, broker_epoch: int, source: str
    ) -> int:
        """NONE, STALE_BROKER_EPOCH, STALE_CONTROLLER_EPOCH or NOT_CONTROLLER."""
        code = broker_epoch_error(broker_epoch, self._broker_epoch())
        if code != ErrorCode.NONE:
            return code
        verdict = await self.verifier.verify(controller_id, controller_epoch)
        if verdict is Verdict.UNCONFIRMED:
            self._warn_refused(api, source, controller_id, controller_epoch)
        if verdict is not Verdict.CURRENT:
            return verdict.error_code
        return broker_epoch_error(broker_epoch, self._broker_epoch())

    def _warn_refused(self, api: str, source: str, controller_id: int, epoch: int) -> None:
        host = source.rpartition(":")[0] or source
        if host in self._warned_sources or len(self._warned_sources) >= _MAX_WARNED_SOURCES:
            return
        self._warned_sources.add(host)
        known = self.verifier.known
        log.warning(
            "broker %d: refused %s from %s claiming controller %d in epoch %d: the quorum "
            "confirms leader %d in epoch %d (further refusals from %s are not logged)",
            self.node_id,
            api,
            source,
            controller_id,
            epoch,
            known.leader_id,
            known.epoch,
            host,
        )
