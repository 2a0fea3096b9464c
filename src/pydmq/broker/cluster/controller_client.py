"""ControllerClient: the broker's channel to the active controller of the quorum.

Only the Raft leader among ``controller.quorum.voters`` serves controller APIs; the others
answer NOT_CONTROLLER. The client tries the voters in turn: first the one that answered last,
then the Raft leader known locally (``leader_hint``: a combined broker+controller node knows it
from its own quorum), then the others, and voters that recently failed or timed out last. Each
attempt gets part of the deadline only, so a paused (SIGSTOPped) controller cannot eat the whole
budget of a heartbeat: otherwise every broker misses its session and is fenced at once.

A caller that must not wait for a quorum that cannot come back (controlled shutdown: the last
node of a stopping cluster) asks with ``require_quorum``: while the request is in flight the
voters are all asked every 100 ms (DescribeQuorum) and when a majority refuse connections (their
processes are gone: a refusal, unlike a timeout, is not what a paused or slow voter causes) no
leader can be elected or commit anything, so the request fails at once with
:class:`QuorumLostError`, also while it waits for its answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import TYPE_CHECKING, Any

from pydmq.broker.cluster.fencing import LeaderAndEpoch
from pydmq.broker.controller_channel import ControllerUnavailableError
from pydmq.net.client import NodeConnection, NodeConnectionError, NodeUnreachableError
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.describe_quorum import (
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    PartitionData,
    TopicData,
)
from pydmq.security.sasl.client import SaslClient

if TYPE_CHECKING:
    import ssl

__all__ = ["ControllerClient", "ControllerUnavailableError", "QuorumLostError"]

log = logging.getLogger(__name__)

_RETRY_BACKOFF_S = 0.1
_MAX_BACKOFF_S = 1.0
_QUORUM_PROBE_S = 0.5  # a live voter answers DescribeQuorum within this, or is not counted
_QUORUM_WATCH_S = 0.1  # how often a request that requires a quorum asks the voters
DESCRIBE_QUORUM_API = 55
DESCRIBE_QUORUM_VERSION = 2
METADATA_TOPIC = "__cluster_metadata"


class QuorumLostError(ControllerUnavailableError):
    """A majority of the voters refuse connections: no controller can be elected."""


def _is_not_controller(response: Any) -> bool:
    return getattr(response, "error_code", ErrorCode.NONE) == ErrorCode.NOT_CONTROLLER


class ControllerClient:
    """Owned by the broker's event loop; one pipelined connection per voter."""

    def __init__(
        self,
        voters: Mapping[int, tuple[str, int]],
        *,
        client_id: str,
        leader_hint: Callable[[], int | None] | None = None,
        ssl_context: ssl.SSLContext | None = None,
        sasl: Callable[[], SaslClient] | None = None,
    ) -> None:
        """``voters``: id -> (host, port), as ``BrokerConfig.controller_quorum_voters``."""
        if not voters:
            raise ValueError("a controller client needs at least one voter")
        self.voters = sorted(voters)
        self._connections = {
            node_id: NodeConnection(
                host, port, client_id=client_id, ssl_context=ssl_context, sasl=sasl
            )
            for node_id, (host, port) in voters.items()
        }
        self._active: int | None = None
        self._leader_hint = leader_hint
        self._suspect_until: dict[int, float] = {}
        self._closed = False

    @property
    def active_controller_id(self) -> int | None:
        """The voter that last accepted a request (None before the first success)."""
        return self._active

    def _candidates(self) -> list[int]:
        now = time.monotonic()
        first: list[int] = []
        if self._active is not None:
            first.append(self._active)
        hint = self._leader_hint() if self._leader_hint is not None else None
        if hint is not None and hint in self._connections and hint not in first:
            first.append(hint)
        rest = [v for v in self.voters if v not in first]
        healthy = [v for v in rest if self._suspect_until.get(v, 0.0) <= now]
        suspect = [v for v in rest if self._suspect_until.get(v, 0.0) > now]
        return first + healthy + suspect

    def _suspect(self, voter: int, timeout: float) -> None:
        self._suspect_until[voter] = time.monotonic() + max(2 * timeout, 1.0)
        if self._active == voter:
            self._active = None

    async def send(
        self,
        api_key: int,
        version: int,
        request: Any,
        timeout: float = 5.0,
        *,
        not_controller: Callable[[Any], bool] | None = None,
        require_quorum: bool = False,
    ) -> Any:
        """Send ``request`` to the active controller and return its response.

        Retries across voters until ``timeout`` seconds have passed. A response for which
        ``not_controller`` is true (default: top-level error NOT_CONTROLLER) means "ask the
        next voter"; APIs whose errors are per item (CreateTopics...) pass their own test.
        Raises ControllerUnavailableError; with ``require_quorum``, QuorumLostError as soon as
        a majority of the voters refuse connections, also while the request waits for an
        answer (an active controller whose peers died cannot commit it).
        """
        if not require_quorum:
            return await self._send(api_key, version, request, timeout, not_controller)
        # The flag, not only cancel(): asyncio.wait_for may swallow a cancellation that races
        # with its inner future completing (Python < 3.12), here when the connection drop that
        # shows the quorum gone also fails the request in flight.
        given_up = asyncio.Event()
        sending = asyncio.ensure_future(
            self._send(api_key, version, request, timeout, not_controller, given_up)
        )
        watching = asyncio.ensure_future(self._until_quorum_lost())
        try:
            await asyncio.wait({sending, watching}, return_when=asyncio.FIRST_COMPLETED)
            if sending.done():
                return sending.result()
            raise watching.result()
        finally:
            given_up.set()
            for task in (sending, watching):
                task.cancel()
            for task in (sending, watching):
                with contextlib.suppress(BaseException):
                    await task

    async def _send(
        self,
        api_key: int,
        version: int,
        request: Any,
        timeout: float,
        not_controller: Callable[[Any], bool] | None,
        given_up: asyncio.Event | None = None,
    ) -> Any:
        deadline = time.monotonic() + timeout
        backoff = _RETRY_BACKOFF_S
        last_error = "no voter tried"
        while True:
            for voter in self._candidates():
                if self._closed:
                    raise ControllerUnavailableError("the controller client is closed")
                if given_up is not None and given_up.is_set():
                    raise ControllerUnavailableError("given up")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ControllerUnavailableError(
                        f"no active controller answered within {timeout}s ({last_error})"
                    )
                connection = self._connections[voter]
                try:
                    response = await connection.request(
                        api_key, version, request, timeout=min(remaining, max(timeout / 2, 0.2))
                    )
                except NodeConnectionError as exc:
                    last_error = str(exc)
                    self._suspect(voter, timeout)
                    continue
                if (not_controller or _is_not_controller)(response):
                    last_error = f"voter {voter} is not the active controller"
                    self._suspect(voter, timeout)
                    continue
                self._active = voter
                self._suspect_until.pop(voter, None)
                return response
            remaining = deadline - time.monotonic()
            if remaining <= 0 or (given_up is not None and given_up.is_set()):
                raise ControllerUnavailableError(
                    f"no active controller answered within {timeout}s ({last_error})"
                )
            await asyncio.sleep(min(backoff, remaining))
            backoff = min(backoff * 2, _MAX_BACKOFF_S)

    async def unreachable_voters(self, timeout: float) -> list[int]:
        """The voters that refuse connections (or drop them), asked all at once with
        DescribeQuorum within ``timeout`` seconds; a voter that times out is not counted."""
        answers = await asyncio.gather(*(self._refuses(v, timeout) for v in self.voters))
        return [v for v, gone in zip(self.voters, answers, strict=True) if gone]

    async def _refuses(self, voter: int, timeout: float) -> bool:
        request = DescribeQuorumRequest(
            topics=[TopicData(topic_name=METADATA_TOPIC, partitions=[PartitionData()])]
        )
        try:
            await self._connections[voter].request(
                DESCRIBE_QUORUM_API, DESCRIBE_QUORUM_VERSION, request, timeout=timeout
            )
        except NodeUnreachableError:
            return True
        except NodeConnectionError:
            return False
        return False

    async def _until_quorum_lost(self) -> QuorumLostError:
        """Ask the voters every ``_QUORUM_WATCH_S``; return as soon as a majority refuse
        (without waiting for silent voters)."""
        while True:
            probes = {
                asyncio.ensure_future(self._refuses(v, _QUORUM_PROBE_S)): v for v in self.voters
            }
            pending = set(probes)
            gone: list[int] = []
            try:
                while pending:
                    done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                    gone += [probes[task] for task in done if task.result()]
                    if len(gone) > len(self.voters) // 2:
                        return QuorumLostError(
                            f"no quorum: voters {','.join(map(str, sorted(gone)))} of "
                            f"{','.join(map(str, self.voters))} refuse connections"
                        )
            finally:
                for task in pending:
                    task.cancel()
            await asyncio.sleep(_QUORUM_WATCH_S)

    async def quorum_views(self, timeout: float) -> AsyncGenerator[LeaderAndEpoch, None]:
        """Ask every voter at once (DescribeQuorum) which leader and epoch it knows; yield
        each answer as it arrives, within ``timeout`` seconds. A voter that is not the leader
        answers with the leader and epoch it follows; unreachable voters are skipped."""
        request = DescribeQuorumRequest(
            topics=[TopicData(topic_name=METADATA_TOPIC, partitions=[PartitionData()])]
        )
        asks = [
            asyncio.ensure_future(
                connection.request(
                    DESCRIBE_QUORUM_API, DESCRIBE_QUORUM_VERSION, request, timeout=timeout
                )
            )
            for connection in self._connections.values()
        ]
        try:
            for answer in asyncio.as_completed(asks):
                try:
                    response: DescribeQuorumResponse = await answer
                except NodeConnectionError:
                    continue
                for topic in response.topics:
                    for partition in topic.partitions:
                        if topic.topic_name == METADATA_TOPIC and partition.leader_epoch >= 0:
                            yield LeaderAndEpoch(partition.leader_id, partition.leader_epoch)
        finally:
            for ask in asks:
                ask.cancel()
            for ask in asks:
                with contextlib.suppress(BaseException):
                    await ask

    async def close(self) -> None:
        """Fail every request in flight and every later one at once (shutdown)."""
        self._closed = True
        for connection in self._connections.values():
            await connection.close()
