"""RaftDriver: runs the sans-IO :class:`~pydmq.raft.core.RaftCore` on the event loop.

The core decides everything (roles, votes, what to fetch, when a write commits); the driver
only moves time and bytes:

- a timer task calls ``core.poll(now)`` at ``core.next_deadline_ms()`` and sends each
  :class:`~pydmq.raft.core.Outbound` it returns;
- every answer to one of those requests goes to ``core.handle_response`` (with the request's
  correlation id, so a late answer to an abandoned request is never mistaken for a newer one);
- inbound requests from the controller listener go to ``core.handle_request``; a Fetch the core
  parks (long poll) is answered later from ``core.complete_parked``, in order per source;
- after each of these *steps* the driver polls again, completes parked fetches (appends and
  high-watermark moves make them ready), and calls ``on_update`` so the state machine can
  read newly committed entries and notice leadership changes.

Durability is the core's business (it persists the quorum state before answering and flushes
the log before a follower fetches again or a leader counts its own entries), so the driver
never flushes on its own.

Each voter gets two :class:`~pydmq.net.client.NodeConnection`\\ s: one for Fetch/FetchSnapshot
and one for Vote/BeginQuorumEpoch/EndQuorumEpoch. A server answers one connection's requests in
order, so a Vote must not queue behind a long-polling Fetch.

Storage failures: a step that fails with an OSError (the quorum state could not be written:
nothing depending on it was sent) is retried after a back-off. When the metadata log goes
offline (a failed fsync, see :mod:`pydmq.raft.file_log`) the driver stops: this node no
longer votes, fetches or leads until it restarts, as Kafka halts a node whose metadata log dir
failed, and its peers elect without it.

Everything runs on one event loop and the core is only touched from it, so no locks.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Final

from pydmq.controller import raft_wire
from pydmq.net.client import NodeConnection, NodeConnectionError, NodeUnreachableError
from pydmq.protocol.errors import ErrorCode, ProtocolError
from pydmq.raft import messages as rm
from pydmq.raft.core import Outbound, Parked, RaftCore
from pydmq.raft.file_log import MetadataLogOfflineError
from pydmq.raft.log import Entry
from pydmq.security.sasl.client import SaslClient

if TYPE_CHECKING:
    import ssl

__all__ = ["RaftDriver", "monotonic_ms"]

log = logging.getLogger(__name__)

_FETCH_KEYS: Final = frozenset({raft_wire.FETCH, raft_wire.FETCH_SNAPSHOT})
_STORAGE_RETRY_S: Final = 0.5  # back-off after a step failed to write the quorum state


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def _source_of(request: rm.RaftRequest) -> int:
    """The voter a request comes from (the core's ``src``)."""
    match request:
        case rm.VoteRequest():
            return request.replica_id
        case rm.BeginQuorumEpochRequest() | rm.EndQuorumEpochRequest():
            return request.leader_id
        case rm.FetchRequest() | rm.FetchSnapshotRequest():
            return request.replica_id
    raise TypeError(f"not a raft request: {request!r}")


class RaftDriver:
    """Owns one RaftCore and the connections to the other voters."""

    def __init__(
        self,
        core: RaftCore,
        voters: Mapping[int, tuple[str, int]],
        *,
        on_update: Callable[[], None] | None = None,
        clock: Callable[[], int] = monotonic_ms,
        connect_timeout: float = 1.0,
        ssl_context: ssl.SSLContext | None = None,
        sasl: Callable[[], SaslClient] | None = None,
    ) -> None:
        self.core = core
        self.node_id = core.node_id
        self.voters = dict(voters)
        self._sasl = sasl  # how to authenticate on a SASL controller listener
        self.on_update = on_update
        self._clock = clock
        self._connect_timeout = connect_timeout
        self._ssl_context = ssl_context  # TLS when the controller listener is SSL
        self._control: dict[int, NodeConnection] = {}
        self._fetch: dict[int, NodeConnection] = {}
        self._parked: dict[int, collections.deque[asyncio.Future[rm.RaftResponse]]] = {}
        self._exchanges: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        self._timer: asyncio.Task[None] | None = None
        self._stepping = False
        self._step_again = False
        self._running = False

    # -- state the runtime reads -------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.core.is_leader

    @property
    def epoch(self) -> int:
        return self.core.epoch

    @property
    def leader_id(self) -> int | None:
        return self.core.leader_id

    @property
    def high_watermark(self) -> int:
        return self.core.high_watermark

    def now_ms(self) -> int:
        return self._clock()

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        if self._running:
            return
        self._running = True
        self._timer = asyncio.create_task(self._run_timer(), name=f"raft-driver-{self.node_id}")

    async def stop(self, *, resign: bool = True, grace: float = 0.3) -> None:
        """Stop driving the core; a leader first resigns (EndQuorumEpoch, best effort)."""
        if not self._running:
            return
        if resign and self.core.is_leader:
            self.core.resign(self.now_ms())
            self.step()
            pending = [t for t in self._exchanges if not t.done()]
            if pending:
                await asyncio.wait(pending, timeout=grace)
        self._running = False
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await timer
        for task in list(self._exchanges):
            task.cancel()
        if self._exchanges:
            await asyncio.gather(*self._exchanges, return_exceptions=True)
        for futures in self._parked.values():
            for future in futures:
                future.cancel()
        self._parked.clear()
        for conn in [*self._control.values(), *self._fetch.values()]:
            await conn.close()
        self._control.clear()
        self._fetch.clear()
        self.core.log.close()

    # -- the step -----------------------------------------------------------------------------

    def step(self) -> None:
        """Poll the core, send what it wants sent, answer ready parked fetches, notify.

        Re-entrant calls (``on_update`` appending, say) are folded into one more round.
        """
        if not self._running:
            return
        if self._stepping:
            self._step_again = True
            return
        self._stepping = True
        try:
            rounds = 0
            while True:
                self._step_again = False
                now = self.now_ms()
                for outbound in self.core.poll(now):
                    self._send(outbound)
                for src, response in self.core.complete_parked(now):
                    self._answer_parked(src, response)
                if self.on_update is not None:
                    try:
                        self.on_update()
                    except Exception:
                        log.exception("raft node %d: state machine update failed", self.node_id)
                rounds += 1
                if not self._step_again or rounds >= 8:
                    break
        finally:
            self._stepping = False
        self._wake.set()

    async def _run_timer(self) -> None:
        while self._running:
            try:
                self.step()
            except MetadataLogOfflineError as exc:
                log.error("raft node %d leaves the quorum until restarted: %s", self.node_id, exc)
                self._running = False
                return
            except OSError as exc:
                log.error("raft node %d: storage failed, retrying: %s", self.node_id, exc)
                await asyncio.sleep(_STORAGE_RETRY_S)
                continue
            except Exception:
                log.exception("raft node %d: poll failed", self.node_id)
            delay_ms = self.core.next_deadline_ms() - self.now_ms()
            self._wake.clear()
            if delay_ms <= 0:
                await asyncio.sleep(0.001)
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay_ms / 1000)

    # -- writes -------------------------------------------------------------------------------

    def append(self, payloads: Sequence[bytes]) -> int:
        """Append entries (leader only; raises NotLeaderError); returns the last offset.

        The entries become durable and may commit at the next poll, which runs at once.
        """
        offset = self.core.append(payloads)
        self._wake.set()
        return offset

    def read_committed(self, from_offset: int, max_entries: int = 1000) -> list[Entry]:
        return self.core.read_committed(from_offset, max_entries)

    def describe_quorum(self) -> rm.DescribeQuorumResult:
        """The core's answer with its (monotonic) timestamps turned into wall-clock
        milliseconds, which is what DescribeQuorum carries in Kafka."""
        result = self.core.describe_quorum()
        shift = int(time.time() * 1000) - self._clock()

        def wall(states: tuple[rm.ReplicaState, ...]) -> tuple[rm.ReplicaState, ...]:
            return tuple(
                dataclasses.replace(
                    s,
                    last_fetch_timestamp=(
                        s.last_fetch_timestamp + shift if s.last_fetch_timestamp >= 0 else -1
                    ),
                    last_caught_up_timestamp=(
                        s.last_caught_up_timestamp + shift
                        if s.last_caught_up_timestamp >= 0
                        else -1
                    ),
                )
                for s in states
            )

        return dataclasses.replace(
            result, current_voters=wall(result.current_voters), observers=wall(result.observers)
        )

    # -- outbound -----------------------------------------------------------------------------

    def _connection(self, dest: int, api_key: int) -> NodeConnection | None:
        pool = self._fetch if api_key in _FETCH_KEYS else self._control
        conn = pool.get(dest)
        if conn is None:
            address = self.voters.get(dest)
            if address is None:
                return None
            conn = pool[dest] = NodeConnection(
                address[0],
                address[1],
                client_id=f"pydmq-raft-{self.node_id}",
                connect_timeout=self._connect_timeout,
                ssl_context=self._ssl_context,
                sasl=self._sasl,
            )
        return conn

    def _send(self, outbound: Outbound) -> None:
        task = asyncio.create_task(self._exchange(outbound))
        self._exchanges.add(task)
        task.add_done_callback(self._exchanges.discard)

    async def _exchange(self, outbound: Outbound) -> None:
        api_key, wire = raft_wire.to_wire_request(outbound.message)
        conn = self._connection(outbound.dest, api_key)
        if conn is None:
            log.warning("raft node %d: no address for voter %d", self.node_id, outbound.dest)
            return
        config = self.core.config
        timeout_ms = config.request_timeout_ms
        if isinstance(outbound.message, rm.FetchRequest):
            timeout_ms += outbound.message.max_wait_ms
        try:
            answer = await conn.request(
                api_key, raft_wire.API_VERSIONS[api_key], wire, timeout=timeout_ms / 1000
            )
        except NodeConnectionError as exc:
            # No answer: the core retries once the request's deadline passes. A node that
            # refused or dropped the connection is likely dead: tell the core at once, so
            # a follower of a killed leader need not wait out fetch.timeout.
            log.debug("raft node %d -> %d: %s", self.node_id, outbound.dest, exc)
            if isinstance(exc, NodeUnreachableError):
                self.core.handle_unreachable(self.now_ms(), outbound.dest)
                self._wake.set()
            return
        try:
            response = raft_wire.from_wire_response(outbound.message, answer)
        except (ProtocolError, ValueError, AssertionError) as exc:
            log.warning(
                "raft node %d: bad answer from voter %d: %s", self.node_id, outbound.dest, exc
            )
            return
        if not self._running:
            return
        if (
            isinstance(outbound.message, rm.VoteRequest)
            and outbound.message.pre_vote
            and isinstance(response, rm.VoteResponse)
            and response.vote_granted
            and response.leader_epoch == outbound.message.replica_epoch
        ):
            # WORKAROUND (RaftCore): a voter that grants a pre-vote says the leader it names
            # is not alive, but the core takes any named leader of its epoch for a live one and
            # turns the prospective back into that leader's follower; two voters then bounce
            # each other between prospective and follower forever once the leader is gone.
            # Kafka's ProspectiveState keeps the leader it timed out on and ignores it here.
            response = rm.VoteResponse(response.error_code, -1, response.leader_epoch, True)
        try:
            self.core.handle_response(
                self.now_ms(), outbound.dest, response, outbound.correlation_id
            )
        except Exception:
            log.exception(
                "raft node %d: handling an answer of %d failed", self.node_id, outbound.dest
            )
        self.step()

    # -- inbound ------------------------------------------------------------------------------

    async def handle_request(self, request: rm.RaftRequest) -> rm.RaftResponse:
        """The core's answer to a peer's request (awaits a parked Fetch's completion)."""
        if not self._running:
            return _not_running(request)
        src = _source_of(request)
        try:
            result = self.core.handle_request(self.now_ms(), src, request)
        except MetadataLogOfflineError as exc:
            log.error("raft node %d leaves the quorum until restarted: %s", self.node_id, exc)
            self._running = False
            return _not_running(request)
        if isinstance(result, Parked):
            future: asyncio.Future[rm.RaftResponse] = asyncio.get_running_loop().create_future()
            self._parked.setdefault(src, collections.deque()).append(future)
            self.step()
            return await future
        self.step()
        return result

    def _answer_parked(self, src: int, response: rm.RaftResponse) -> None:
        # One answer per parked fetch, in parking order; the answer to a fetch whose
        # connection went away (future cancelled) is dropped with it.
        futures = self._parked.get(src)
        if not futures:
            return
        future = futures.popleft()
        if not future.done():
            future.set_result(response)


def _not_running(request: rm.RaftRequest) -> rm.RaftResponse:
    """What a stopped driver answers (the node is shutting down)."""
    code = int(ErrorCode.BROKER_NOT_AVAILABLE)
    match request:
        case rm.VoteRequest():
            return rm.VoteResponse(code, -1, -1, False)
        case rm.BeginQuorumEpochRequest():
            return rm.BeginQuorumEpochResponse(code, -1, -1)
        case rm.EndQuorumEpochRequest():
            return rm.EndQuorumEpochResponse(code, -1, -1)
        case rm.FetchRequest():
            return rm.FetchResponse(code, -1, -1)
        case rm.FetchSnapshotRequest():
            return rm.FetchSnapshotResponse(code, -1, -1)
    raise TypeError(f"not a raft request: {request!r}")
