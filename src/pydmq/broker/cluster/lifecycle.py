"""BrokerLifecycleManager: registration with the controller and the heartbeat loop.

A broker joins the cluster by sending BrokerRegistration (key 62) with a fresh incarnation id
per process start, so the controller can tell a restarted broker from a duplicate one. The
registration leaves it fenced; it then heartbeats (BrokerHeartbeat, key 63) every
``broker.heartbeat.interval.ms`` reporting the offset of the last UpdateMetadata it applied,
and the controller unfences it once that offset reaches its registration. STALE_BROKER_EPOCH
or BROKER_ID_NOT_REGISTERED mean the controller forgot us (failover before the registration
committed, or a session expiry): register again. During shutdown the heartbeats carry
``want_shut_down`` so the controller stops choosing this broker as a leader.

A broker whose log dir went offline (a failed fsync, an I/O error: see
:mod:`pydmq.storage.errors`) heartbeats ``want_fence`` from then on, at once and until it
restarts: the controller fences it, which moves its leaderships to the other ISR members and
keeps it out of new ISRs and elections (Kafka's offline log dirs have the same effect when a
broker's only log dir fails).

Once registered, the broker asks the controller's ApiVersions for the cluster's finalized
feature levels (``on_features``; again with the next heartbeats until the controller has
finalized ``metadata.version``): a cluster broker's ApiVersions reports them to clients
(``transaction.version`` 2 makes Kafka 4.x clients use transactions v2). Kafka's brokers read
them from the metadata log; pydmq's are pushed UpdateMetadata, which has no features.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pydmq import __version__
from pydmq.broker.cluster.controller_client import ControllerClient, ControllerUnavailableError
from pydmq.broker.services import FinalizedFeatures
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.features import METADATA_VERSION_FEATURE
from pydmq.protocol.messages.api_versions import ApiVersionsRequest
from pydmq.protocol.messages.broker_heartbeat import BrokerHeartbeatRequest
from pydmq.protocol.messages.broker_registration import (
    BrokerRegistrationRequest,
    Feature,
)
from pydmq.protocol.messages.broker_registration import (
    Listener as RegistrationListener,
)

__all__ = ["BrokerEndpoint", "BrokerLifecycleManager"]

log = logging.getLogger(__name__)

BROKER_REGISTRATION_API = 62
BROKER_HEARTBEAT_API = 63
API_VERSIONS_API = 18
API_VERSIONS_VERSION = 4  # every supported feature (KAFKA-17011)
REGISTRATION_VERSION = 3  # previous_broker_epoch (KIP-966); log dirs unused
HEARTBEAT_VERSION = 1
# What this broker supports, advertised at registration (the controller finalises levels).
SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {"metadata.version": (1, 1)}
_SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """An advertised listener as registered: name, host, port, security protocol."""

    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


class BrokerLifecycleManager:
    """Owned by the broker's event loop; ``start()`` spawns the registration/heartbeat task."""

    def __init__(
        self,
        *,
        broker_id: int,
        cluster_id: str,
        client: ControllerClient,
        endpoints: Callable[[], Sequence[BrokerEndpoint]],
        rack: str | None,
        heartbeat_interval_ms: int,
        metadata_offset: Callable[[], int],
        log_dirs_offline: Callable[[], bool] = lambda: False,
        on_fenced_changed: Callable[[bool], None] = lambda fenced: None,
        on_features: Callable[[FinalizedFeatures], None] = lambda features: None,
    ) -> None:
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.client = client
        self._endpoints = endpoints
        self.rack = rack
        self.heartbeat_interval = heartbeat_interval_ms / 1000
        self._metadata_offset = metadata_offset
        self._log_dirs_offline = log_dirs_offline
        self._on_fenced_changed = on_fenced_changed
        self._on_features = on_features
        self._features_known = False
        self.incarnation_id = uuid.uuid4()
        self.broker_epoch = -1
        self._previous_epoch = -1
        self.fenced = True
        self.caught_up = False
        # time.monotonic() of the last registration or heartbeat the controller answered
        # without error (readiness: a broker that lost its controller stops being ready).
        self.last_contact = 0.0
        self.registered = asyncio.Event()
        self.unfenced = asyncio.Event()
        self.want_shut_down = False
        self.should_shut_down = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._running = False

    # -- control ---------------------------------------------------------------------
    def start(self) -> None:
        self._running = True
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"broker-{self.broker_id}-lifecycle")

    async def stop(self) -> None:
        self._running = False  # see ReplicaFetcher.stop
        self._wake.set()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    def begin_shutdown(self) -> None:
        """Heartbeat ``want_shut_down`` from now on (and at once)."""
        self.want_shut_down = True
        self._wake.set()

    def heartbeat_now(self) -> None:
        """Send the next heartbeat without waiting for the interval (metadata caught up)."""
        self._wake.set()

    # -- loop ------------------------------------------------------------------------
    async def _run(self) -> None:
        while self._running:
            try:
                if self.broker_epoch < 0:
                    await self._register()
                else:
                    await self._heartbeat()
                if self.broker_epoch >= 0 and not self._features_known:
                    await self._learn_features()
            except ControllerUnavailableError as exc:
                log.info("broker %d: controller unavailable: %s", self.broker_id, exc)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("broker %d: lifecycle request failed", self.broker_id)
            if not self._running:
                return  # stopped while the request was in flight (see ReplicaFetcher.stop)
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.heartbeat_interval)

    def registration_request(self) -> BrokerRegistrationRequest:
        return BrokerRegistrationRequest(
            broker_id=self.broker_id,
            cluster_id=self.cluster_id,
            incarnation_id=self.incarnation_id,
            listeners=[
                RegistrationListener(
                    name=e.name,
                    host=e.host,
                    port=e.port,
                    security_protocol=_SECURITY_PROTOCOLS.get(e.security_protocol, 0),
                )
                for e in self._endpoints()
            ],
            features=[
                Feature(name=name, min_supported_version=low, max_supported_version=high)
                for name, (low, high) in SUPPORTED_FEATURES.items()
            ],
            rack=self.rack,
            previous_broker_epoch=self._previous_epoch,
        )

    async def _register(self) -> None:
        response = await self.client.send(
            BROKER_REGISTRATION_API,
            REGISTRATION_VERSION,
            self.registration_request(),
            timeout=max(self.heartbeat_interval, 1.0),
        )
        if response.error_code != ErrorCode.NONE:
            log.warning(
                "broker %d: registration refused: %s",
                self.broker_id,
                ErrorCode(response.error_code).name,
            )
            return
        self.broker_epoch = response.broker_epoch
        self._previous_epoch = response.broker_epoch
        self.last_contact = time.monotonic()
        self.fenced = True
        self.unfenced.clear()
        self.registered.set()
        log.info("broker %d registered with epoch %d", self.broker_id, self.broker_epoch)
        self._wake.set()  # first heartbeat at once

    async def _learn_features(self) -> None:
        """The finalized feature levels, from the active controller's ApiVersions."""
        response = await self.client.send(
            API_VERSIONS_API,
            API_VERSIONS_VERSION,
            ApiVersionsRequest(
                client_software_name="pydmq-broker", client_software_version=__version__
            ),
            timeout=max(self.heartbeat_interval, 1.0),
        )
        if response.error_code != ErrorCode.NONE:
            return
        levels = {f.name: f.max_version_level for f in response.finalized_features}
        self._features_known = METADATA_VERSION_FEATURE in levels
        self._on_features(FinalizedFeatures(response.finalized_features_epoch, levels))

    async def _heartbeat(self) -> None:
        request = BrokerHeartbeatRequest(
            broker_id=self.broker_id,
            broker_epoch=self.broker_epoch,
            current_metadata_offset=max(self._metadata_offset(), 0),
            want_fence=self._log_dirs_offline(),
            want_shut_down=self.want_shut_down,
        )
        response = await self.client.send(
            BROKER_HEARTBEAT_API,
            HEARTBEAT_VERSION,
            request,
            timeout=max(self.heartbeat_interval, 1.0),
        )
        code = response.error_code
        if code in (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED):
            log.info(
                "broker %d: controller does not know epoch %d (%s); registering again",
                self.broker_id,
                self.broker_epoch,
                ErrorCode(code).name,
            )
            self.broker_epoch = -1
            self.registered.clear()
            self._set_fenced(True)
            self._wake.set()
            return
        if code != ErrorCode.NONE:
            log.info("broker %d: heartbeat error %s", self.broker_id, ErrorCode(code).name)
            return
        self.last_contact = time.monotonic()
        self.caught_up = response.is_caught_up
        self.should_shut_down = response.should_shut_down
        self._set_fenced(response.is_fenced)

    def _set_fenced(self, fenced: bool) -> None:
        changed = fenced != self.fenced
        if changed:
            log.info("broker %d is now %s", self.broker_id, "fenced" if fenced else "unfenced")
        self.fenced = fenced
        if fenced:
            self.unfenced.clear()
        else:
            self.unfenced.set()
        if changed:
            self._on_fenced_changed(fenced)
