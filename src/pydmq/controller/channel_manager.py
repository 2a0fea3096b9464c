"""ControllerChannelManager: the active controller's pushes to brokers (keys 4, 5, 6).

Only the active controller runs one. Each registered broker gets a :class:`BrokerChannel`: a
:class:`~pydmq.net.client.NodeConnection` to the endpoint it registered for the control-plane
listener (``control.plane.listener.name``, KIP-291: brokers serve these keys nowhere else), an
ordered queue, and one task that keeps exactly one request in flight. Order
matters (a LeaderAndIsr for epoch 5 must not overtake the one for epoch 4), so there is no
pipelining per broker; brokers are independent of each other.

A broker must never depend on an incremental request it may have missed. So a channel sends
the FULL state (:func:`~pydmq.controller.propagation.full_push`, built from the image current
*at send time*) first when it is created: for a newly registered broker, a re-registered one
(new incarnation), and for every broker when a controller becomes active (failover). After a
failed request (connection lost, timeout) the channel drops its queued incrementals, backs
off, and sends the FULL state again from the then-current image. Queued incrementals at or
below the offset of a FULL image are dropped, since the FULL state already contains them.

Requests are fenced by ``controller_epoch`` (the Raft leader epoch of this controller) and by
``broker_epoch`` (the recipient's registration epoch): a broker answers
STALE_CONTROLLER_EPOCH to a deposed controller, which then simply stops being active. A broker
that has not confirmed this controller's epoch with the quorum yet (NOT_CONTROLLER) or has not
received its registration epoch yet (STALE_BROKER_EPOCH) applied nothing: the channel backs
off and sends the FULL state again, as after a lost connection, until the broker accepts it.

A broker whose control-plane listener refuses the connection is reported to ``on_refused``
(broker id and epoch): its process is gone, and the runtime fences it without waiting out its
session (see :meth:`ControllerRuntime.broker_refused`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import enum
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from pydmq.controller.propagation import BrokerPush, delta_pushes, full_push
from pydmq.net.client import NodeConnection, NodeConnectionError, NodeUnreachableError
from pydmq.protocol.errors import ErrorCode
from pydmq.security.sasl.client import SaslClient

if TYPE_CHECKING:
    import ssl

    from pydmq.metadata.delta import MetadataDelta
    from pydmq.metadata.image import BrokerRegistration, MetadataImage

__all__ = ["BrokerChannel", "ControllerChannelManager"]

log = logging.getLogger(__name__)

# The one version pydmq speaks of each controller-to-broker API.
VERSIONS: Final = {4: 7, 5: 4, 6: 8}
_NAMES: Final = {4: "LeaderAndIsr", 5: "StopReplica", 6: "UpdateMetadata"}
# Answers of a broker that applied nothing yet but will once it catches up: send again.
_NOT_YET: Final = frozenset({ErrorCode.NOT_CONTROLLER, ErrorCode.STALE_BROKER_EPOCH})


class _Outcome(enum.Enum):
    DELIVERED = "delivered"  # answered; done with this request, whatever the error
    REFUSED = "refused"  # answered with a _NOT_YET error: back off, FULL state again
    LOST = "lost"  # no answer: reconnect, back off, FULL state again


class BrokerChannel:
    """Ordered, one-in-flight delivery of controller requests to one broker incarnation."""

    def __init__(
        self,
        manager: ControllerChannelManager,
        registration: BrokerRegistration,
        host: str,
        port: int,
    ) -> None:
        self.manager = manager
        self.broker_id = registration.id
        self.incarnation_id = registration.incarnation_id
        self.broker_epoch = registration.epoch
        self.host = host
        self.port = port
        self.connection = NodeConnection(
            host,
            port,
            client_id=f"pydmq-controller-{manager.controller_id}",
            connect_timeout=manager.connect_timeout,
            ssl_context=manager.ssl_context,
            sasl=manager.sasl,
        )
        self.needs_full = True
        self.queue: collections.deque[tuple[int, int, Any]] = collections.deque()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # Highest image offset the broker acknowledged an UpdateMetadata for (diagnostics).
        self.acked_offset = -1
        self.sent_requests = 0

    def __repr__(self) -> str:
        return f"BrokerChannel({self.broker_id}@{self.host}:{self.port})"

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"controller-channel-{self.broker_id}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.connection.close()

    def enqueue(self, push: BrokerPush) -> None:
        """Queue an incremental push, unless a FULL push not yet built will cover it."""
        if self.needs_full:
            return
        for api_key, request in push.requests():
            self.queue.append((push.metadata_offset, api_key, request))
        self._wake.set()

    def resend_full(self) -> None:
        self.needs_full = True
        self.queue.clear()
        self._wake.set()

    async def _run(self) -> None:
        backoff = self.manager.retry_backoff_ms
        while True:
            if self.needs_full:
                image = self.manager.current_image()
                if self.broker_id not in image.brokers:
                    self.needs_full = False
                    continue
                self.needs_full = False
                while self.queue and self.queue[0][0] <= image.offset:
                    self.queue.popleft()
                push = full_push(
                    image,
                    self.broker_id,
                    controller_id=self.manager.controller_id,
                    controller_epoch=self.manager.controller_epoch,
                    listener_name=self.manager.inter_broker_listener_name,
                )
                items = [(image.offset, key, req) for key, req in push.requests()]
                # The FULL requests go ahead of anything queued after that image.
                self.queue.extendleft(reversed(items))
            if not self.queue:
                self._wake.clear()
                await self._wake.wait()
                continue
            offset, api_key, request = self.queue[0]
            outcome = await self._send(offset, api_key, request)
            if outcome is _Outcome.DELIVERED:
                if self.queue and self.queue[0][2] is request:
                    self.queue.popleft()
                backoff = self.manager.retry_backoff_ms
                continue
            # Lost or not applied: the broker may have missed anything; start again from a
            # FULL state.
            self.needs_full = True
            self.queue.clear()
            if outcome is _Outcome.LOST:
                self.connection.reset()
            await asyncio.sleep(backoff / 1000)
            backoff = min(backoff * 2, self.manager.retry_backoff_max_ms)

    async def _send(self, offset: int, api_key: int, request: Any) -> _Outcome:
        try:
            response = await self.connection.request(
                api_key, VERSIONS[api_key], request, timeout=self.manager.request_timeout
            )
        except NodeConnectionError as exc:
            log.info(
                "controller %d: %s to broker %d failed (%s); will resend its full state",
                self.manager.controller_id,
                _NAMES[api_key],
                self.broker_id,
                exc,
            )
            if _refused(exc):
                self.manager.on_refused(self.broker_id, self.broker_epoch)
            return _Outcome.LOST
        self.sent_requests += 1
        error = getattr(response, "error_code", ErrorCode.NONE)
        if error in _NOT_YET:
            log.info(
                "controller %d (epoch %d): broker %d applied no %s yet (%s); will resend its "
                "full state",
                self.manager.controller_id,
                self.manager.controller_epoch,
                self.broker_id,
                _NAMES[api_key],
                _error_name(error),
            )
            return _Outcome.REFUSED
        if error == ErrorCode.STALE_CONTROLLER_EPOCH:
            log.warning(
                "controller %d (epoch %d): broker %d reports a newer controller",
                self.manager.controller_id,
                self.manager.controller_epoch,
                self.broker_id,
            )
        elif error != ErrorCode.NONE:
            log.warning(
                "controller %d: broker %d answered %s with error %s",
                self.manager.controller_id,
                self.broker_id,
                _NAMES[api_key],
                _error_name(error),
            )
        elif api_key == 6:
            self.acked_offset = max(self.acked_offset, offset)
        return _Outcome.DELIVERED


def _refused(exc: NodeConnectionError) -> bool:
    """The connection attempt was refused (nothing listens there), not timed out or lost."""
    return isinstance(exc, NodeUnreachableError) and isinstance(
        exc.__cause__, ConnectionRefusedError
    )


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class ControllerChannelManager:
    """The channels of one active-controller term; built on activation, closed on loss."""

    def __init__(
        self,
        *,
        controller_id: int,
        controller_epoch: int,
        control_plane_listener_name: str,
        inter_broker_listener_name: str,
        image_provider: Callable[[], MetadataImage],
        on_refused: Callable[[int, int], None] = lambda broker_id, broker_epoch: None,
        request_timeout: float = 30.0,
        connect_timeout: float = 2.0,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 2000,
        ssl_context: ssl.SSLContext | None = None,
        sasl: Callable[[], SaslClient] | None = None,
    ) -> None:
        self.controller_id = controller_id
        self.ssl_context = ssl_context  # TLS when the control-plane listener is SSL
        self.controller_epoch = controller_epoch
        # Channels connect to this listener; LeaderAndIsr names the leaders' inter-broker one.
        self.control_plane_listener_name = control_plane_listener_name
        self.inter_broker_listener_name = inter_broker_listener_name
        self.current_image = image_provider
        self.on_refused = on_refused
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self.sasl = sasl  # how to authenticate on the brokers' SASL control-plane listener
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self.channels: dict[int, BrokerChannel] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self._started = False

    def start(self) -> None:
        """Open a channel (FULL state first) to every broker registered in the image."""
        self._started = True
        for registration in self.current_image().brokers.values():
            self._open(registration)

    async def stop(self) -> None:
        self._started = False
        channels, self.channels = list(self.channels.values()), {}
        await asyncio.gather(*(c.stop() for c in channels), return_exceptions=True)
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    def _open(self, registration: BrokerRegistration) -> None:
        endpoint = registration.endpoint(self.control_plane_listener_name)
        if endpoint is None:
            log.warning(
                "controller %d: broker %d registered no %s endpoint; cannot push metadata to it",
                self.controller_id,
                registration.id,
                self.control_plane_listener_name,
            )
            return
        channel = BrokerChannel(self, registration, endpoint.host or "127.0.0.1", endpoint.port)
        self.channels[registration.id] = channel
        channel.start()

    def _close(self, broker_id: int) -> None:
        channel = self.channels.pop(broker_id, None)
        if channel is not None:
            task = asyncio.create_task(channel.stop())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    def publish(self, old: MetadataImage, new: MetadataImage, delta: MetadataDelta) -> None:
        """Queue what ``delta`` means for each broker. Call after ``new`` became current."""
        if not self._started:
            return
        for broker_id, (before, after) in delta.changed_brokers().items():
            if after is None:
                self._close(broker_id)
                continue
            channel = self.channels.get(broker_id)
            if (
                channel is None
                or before is None
                or channel.incarnation_id != after.incarnation_id
                or channel.broker_epoch != after.epoch
            ):
                # New incarnation (maybe a new endpoint): a fresh channel, FULL state first.
                self._close(broker_id)
                self._open(after)
        pushes = delta_pushes(
            old,
            new,
            delta,
            controller_id=self.controller_id,
            controller_epoch=self.controller_epoch,
            listener_name=self.inter_broker_listener_name,
        )
        for broker_id, push in pushes.items():
            channel = self.channels.get(broker_id)
            if channel is not None:
                channel.enqueue(push)

    def resend_full(self, broker_id: int) -> None:
        """Send the broker its FULL state again (e.g. it says it lost its metadata)."""
        channel = self.channels.get(broker_id)
        if channel is not None:
            channel.resend_full()
