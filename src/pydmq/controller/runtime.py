"""ControllerRuntime: the controller role of a node in cluster mode.

It wires four things together on the event loop:

1. the Raft quorum (:class:`~pydmq.controller.raft_driver.RaftDriver` over a
   :class:`~pydmq.raft.core.RaftCore`, log and quorum state in
   ``<log.dirs>/__cluster_metadata-0/``);
2. the state machine: committed entries are decoded into metadata records and replayed into a
   :class:`~pydmq.metadata.delta.MetadataDelta`; each batch of entries publishes a new
   :class:`~pydmq.metadata.image.MetadataImage`. At start the latest snapshot is loaded; every
   ``metadata.log.max.snapshot.interval.records`` applied records a snapshot of the image is
   written (``image.to_records()``), so the log does not grow forever;
3. operations (active controller only): one at a time under a lock, a sans-IO operation from
   :mod:`pydmq.controller.operations` runs on the current image, its records are appended as
   ONE Raft entry (so they commit atomically), and the caller gets the operation's response
   once that entry is committed *and* applied. Leadership lost meanwhile ->
   :class:`NotControllerError` (NOT_CONTROLLER); no commit in time ->
   :class:`ControllerTimeoutError` (REQUEST_TIMED_OUT);
4. while active: heartbeat bookkeeping and fencing of silent brokers, and the
   :class:`~pydmq.controller.channel_manager.ControllerChannelManager` pushing state to brokers.

Entry payload framing (private to the controllers: brokers learn metadata by UpdateMetadata,
never by reading this log): a sequence of ``uint32 length | encode_record(record)`` frames; an
empty payload holds no records. The Raft leader-change entry of each epoch carries one
``NoOpRecord``. Snapshot payloads are one ``encode_record`` each.

Offsets: the image offset is the offset of the last *entry* applied. Because an operation runs
on an image that holds every entry appended before it, its entry lands at ``image.offset + 1``,
which is what the operations assume for broker epochs (``register_broker``).

Becoming active: the Raft leader of epoch E is the active controller once the leader-change
entry of E (appended by the core when it won) is committed and applied: then every entry of
earlier epochs is in the image. It then treats every registered broker as heard from now (a
grace period, as Kafka), makes sure ``metadata.version`` is set (FeatureLevelRecord), starts
the channel manager (FULL state to every broker) and the fencing task.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

from pydmq.api.request_metrics import LatencyHistogram
from pydmq.config.broker import BrokerConfig
from pydmq.config.features import BOOTSTRAP_TRANSACTION_VERSION
from pydmq.controller.channel_manager import ControllerChannelManager
from pydmq.controller.errors import ControllerError, ControllerTimeoutError, NotControllerError
from pydmq.controller.operations import (
    ControllerResult,
    fence_stale_brokers,
    operation_context,
)
from pydmq.controller.raft_driver import RaftDriver
from pydmq.metadata.delta import MetadataDelta, MetadataReplayError
from pydmq.metadata.features import bootstrap_feature_records
from pydmq.metadata.image import MetadataImage
from pydmq.metadata.records import (
    RESOURCE_BROKER,
    CorruptRecordError,
    MetadataRecord,
    NoOpRecord,
    decode_payload,
    decode_record,
    encode_payload,
    encode_record,
)
from pydmq.protocol.features import METADATA_VERSION_FEATURE
from pydmq.raft.core import NotLeaderError, RaftConfig, RaftCore
from pydmq.raft.file_log import FileRaftLog
from pydmq.raft.state import FileQuorumStateStore
from pydmq.security.authorizer import build_authorizer
from pydmq.security.sasl.listener import node_sasl_client
from pydmq.security.tls import node_client_ssl

if TYPE_CHECKING:
    from pydmq.api.handler import ApiHandlerSpec
    from pydmq.plugins.host import PluginHost

__all__ = [
    "METADATA_LOG_DIR",
    "ControllerError",
    "ControllerHost",
    "ControllerRuntime",
    "ControllerTimeoutError",
    "NotControllerError",
    "SessionJudge",
    "Verdict",
]

log = logging.getLogger(__name__)

METADATA_LOG_DIR: Final = "__cluster_metadata-0"
QUORUM_STATE_FILE: Final = "quorum-state"
_APPLY_BATCH: Final = 1000
# How long an operation waits for its entry to commit before answering REQUEST_TIMED_OUT.
DEFAULT_OPERATION_TIMEOUT_S: Final = 30.0

R = TypeVar("R")


class ControllerHost(Protocol):
    """What the runtime needs from its node (the :class:`~pydmq.node.Node`)."""

    config: BrokerConfig
    cluster_id: str
    plugins: PluginHost


class Verdict(enum.Enum):
    BLIND = "blind"  # this controller could not have heard heartbeats: judge nobody
    RENEW = "renew"  # it hears again: fresh sessions for every connected broker
    JUDGE = "judge"  # fence brokers whose sessions expired


class SessionJudge:
    """Whether the fencing loop may judge broker sessions now (pure; times in ms).

    Blind when the loop's own tick came late by more than half a session (the process was
    paused or starved: heartbeats wait unread in its sockets), or when no majority of voters
    fetched from this leader within a session (it may be the node that is cut off). The first
    tick after a blind spell renews sessions instead of judging them.
    """

    def __init__(self, period_ms: int, session_timeout_ms: int, now_ms: int) -> None:
        self.period_ms = period_ms
        self.session_timeout_ms = session_timeout_ms
        self.last_tick = now_ms
        self.blind = False
        self.newly_blind = False
        self.why = ""

    def tick(self, now_ms: int, quorum_contact_ms: int | None) -> Verdict:
        stalled = now_ms - self.last_tick > self.period_ms + self.session_timeout_ms // 2
        self.last_tick = now_ms
        cut_off = (
            quorum_contact_ms is not None and now_ms - quorum_contact_ms > self.session_timeout_ms
        )
        if stalled or cut_off:
            self.newly_blind = not self.blind
            self.blind = True
            self.why = "event loop stalled" if stalled else "no quorum contact"
            return Verdict.BLIND
        self.newly_blind = False
        if self.blind:
            self.blind = False
            return Verdict.RENEW
        return Verdict.JUDGE


class ControllerRuntime:
    """The controller role of one node; see the module docstring. Event-loop owned."""

    def __init__(self, broker: ControllerHost, *, raft_config: RaftConfig | None = None) -> None:
        config = broker.config
        self.broker = broker
        self.config = config
        self.node_id = config.node_id
        self.cluster_id = broker.cluster_id
        self.voters = config.controller_quorum_voters
        self.controller_listener_name = config.controller_listener_names[0]
        self.inter_broker_listener_name = config.inter_broker_listener_name
        self.control_plane_listener_name = config.control_plane_listener_name
        # TLS of the pushes to the brokers' control-plane listener when it is SSL.
        self._control_plane_ssl = node_client_ssl(config, self.control_plane_listener_name)
        self.session_timeout_ms = config.get_int("broker.session.timeout.ms")
        self.snapshot_interval_records = int(
            config.get_int("metadata.log.max.snapshot.interval.records")
        )
        self.operation_timeout_s = DEFAULT_OPERATION_TIMEOUT_S
        self.operation_context = operation_context(config, broker.plugins)
        self.metadata_dir = Path(config.log_dir) / METADATA_LOG_DIR
        self.raft_config = raft_config or RaftConfig(
            election_timeout_ms=config.get_int("controller.quorum.election.timeout.ms"),
            fetch_timeout_ms=config.get_int("controller.quorum.fetch.timeout.ms"),
            election_backoff_max_ms=config.get_int("controller.quorum.election.backoff.max.ms"),
            snapshot_interval_records=self.snapshot_interval_records,
        )
        self._driver: RaftDriver | None = None
        # Written with metadata.version by the first active controller of a new cluster
        # (Kafka's bootstrap records): this node's ``--add-scram`` users.
        self.bootstrap_records: list[MetadataRecord] = []
        self.image = MetadataImage.EMPTY
        # The controller listener's authorizer (None: authorizer.class.name is empty); it
        # follows the ACLs of the image replayed here.
        self.authorizer = build_authorizer(config, broker.plugins.authorizers())
        self._records_since_snapshot = 0
        # Append-to-applied time of each committed operation (read by /metrics).
        self.commit_latency = LatencyHistogram()
        self._lock = asyncio.Lock()
        # offset -> futures resolved once the entry at that offset is applied
        self._waiters: dict[int, list[asyncio.Future[None]]] = {}
        self._heartbeat_connections: dict[int, int] = {}
        # Brokers whose heartbeat connection closed, or whose control-plane listener refused
        # this controller's channel, and that have not heartbeated since.
        self._closed_sessions: set[int] = set()
        # Set when a session was expired early: the fencing loop judges at once.
        self._judge_now = asyncio.Event()
        self._leader_epoch: int | None = None  # Raft epoch in which we lead, if we do
        self._epoch_start_offset = -1  # the leader-change entry of that epoch
        self._active = False
        self._channels: ControllerChannelManager | None = None
        self._active_tasks: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[Any]] = set()
        self.last_heartbeat_ms: dict[int, int] = {}
        self._handler_specs: dict[int, ApiHandlerSpec] | None = None
        self._started = False

    # -- public state -------------------------------------------------------------------------

    @property
    def driver(self) -> RaftDriver:
        if self._driver is None:
            raise RuntimeError("the controller runtime is not started")
        return self._driver

    @property
    def is_active(self) -> bool:
        """True while this node is the active controller (Raft leader, caught up)."""
        return self._active

    @property
    def epoch(self) -> int:
        """The Raft epoch: the controller epoch of the requests it sends while active."""
        return self._driver.epoch if self._driver is not None else -1

    @property
    def active_controller_id(self) -> int:
        """The Raft leader as far as this node knows; -1 when unknown."""
        if self._driver is None:
            return -1
        leader = self._driver.leader_id
        return -1 if leader is None else leader

    @property
    def channel_manager(self) -> ControllerChannelManager | None:
        return self._channels

    def handler_specs(self) -> dict[int, ApiHandlerSpec]:
        """The APIs of the controller listener(s), by key (see :mod:`.handlers`)."""
        if self._handler_specs is None:
            from pydmq.controller.handlers.listener import controller_handler_specs

            self._handler_specs = controller_handler_specs(self)
        return self._handler_specs

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        self.metadata_dir.mkdir(parents=True, exist_ok=True)
        raft_log = FileRaftLog(str(self.metadata_dir))
        store = FileQuorumStateStore(str(self.metadata_dir / QUORUM_STATE_FILE))
        core = RaftCore(
            self.node_id,
            sorted(self.voters),
            raft_log,
            store,
            random.Random(),
            self.raft_config,
            cluster_id=self.cluster_id,
            leader_change_payload=encode_payload([NoOpRecord()]),
        )
        self._driver = RaftDriver(
            core,
            self.voters,
            on_update=self._on_raft_update,
            ssl_context=node_client_ssl(self.config, self.controller_listener_name),
            sasl=node_sasl_client(
                self.config,
                self.controller_listener_name,
                "sasl.mechanism.controller.protocol",
            ),
        )
        snapshot = raft_log.latest_snapshot()
        if snapshot is not None:
            self._load_snapshot(core.load_snapshot(snapshot), snapshot.end_offset, snapshot.epoch)
        await self._driver.start()
        log.info(
            "controller %d started (voters %s, metadata log %s, image at offset %d)",
            self.node_id,
            ",".join(map(str, sorted(self.voters))),
            self.metadata_dir,
            self.image.offset,
        )

    async def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        self._deactivate("stopping")
        if self._driver is not None:
            await self._driver.stop(resign=True)
        tasks = [*self._active_tasks, *self._background]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._active_tasks.clear()
        self._background.clear()
        log.info("controller %d stopped", self.node_id)

    # -- state machine ------------------------------------------------------------------------

    def _load_snapshot(self, payloads: Sequence[bytes], end_offset: int, epoch: int) -> None:
        delta = MetadataDelta(MetadataImage.EMPTY)
        for payload in payloads:
            delta.replay(decode_record(payload))
        old = self.image
        self.image = delta.apply(offset=end_offset - 1, epoch=epoch)
        if self.authorizer is not None and self.image.acls != old.acls:
            self.authorizer.update_acls(self.image.acls)
        self._records_since_snapshot = 0
        self.operation_context = operation_context(self.config, self.broker.plugins, self.image)
        log.info("controller %d loaded the snapshot at offset %d", self.node_id, end_offset)
        if self._channels is not None and old is not self.image:
            for broker_id in list(self._channels.channels):
                self._channels.resend_full(broker_id)

    def _on_raft_update(self) -> None:
        """Called by the driver after every step: apply commits, follow leadership."""
        driver = self.driver
        core = driver.core
        # A new leadership must be noted before applying: its leader-change entry marks
        # where the entries of earlier epochs end.
        if core.is_leader and self._leader_epoch != core.epoch:
            self._deactivate("new epoch")
            self._leader_epoch = core.epoch
            self._epoch_start_offset = core.log_end_offset - 1
            log.info(
                "controller %d leads epoch %d; active once offset %d is applied",
                self.node_id,
                core.epoch,
                self._epoch_start_offset,
            )
        elif not core.is_leader and self._leader_epoch is not None:
            self._deactivate(f"leader is now {core.leader_id} in epoch {core.epoch}")
            self._leader_epoch = None
        self._apply_committed()
        if (
            not self._active
            and self._leader_epoch is not None
            and self.image.offset >= self._epoch_start_offset
        ):
            self._activate()

    def _apply_committed(self) -> None:
        core = self.driver.core
        while True:
            next_offset = self.image.offset + 1
            snapshot = core.committed_snapshot_needed(next_offset)
            if snapshot is not None:
                self._load_snapshot(
                    core.load_snapshot(snapshot), snapshot.end_offset, snapshot.epoch
                )
                continue
            entries = core.read_committed(next_offset, _APPLY_BATCH)
            if not entries:
                break
            old = self.image
            delta = MetadataDelta(old)
            count = 0
            for entry in entries:
                try:
                    records = decode_payload(entry.payload)
                except CorruptRecordError:
                    log.exception(
                        "controller %d: undecodable metadata entry at offset %d skipped",
                        self.node_id,
                        entry.offset,
                    )
                    continue
                for rec in records:
                    try:
                        delta.replay(rec)
                    except MetadataReplayError:
                        # Every voter replays the same log, so skipping keeps them equal;
                        # a record that does not apply is a controller bug, not a reason to
                        # stop following the log.
                        log.exception(
                            "controller %d: record %r at offset %d does not apply; skipped",
                            self.node_id,
                            rec,
                            entry.offset,
                        )
                count += len(records)
            last = entries[-1]
            self.image = delta.apply(offset=last.offset, epoch=last.epoch)
            if self.authorizer is not None and delta.acls_changed():
                self.authorizer.update_acls(self.image.acls)
            self._records_since_snapshot += count
            self._publish(old, self.image, delta)
        self._resolve_waiters()
        self._maybe_snapshot()

    def _publish(self, old: MetadataImage, new: MetadataImage, delta: MetadataDelta) -> None:
        if any(kind == RESOURCE_BROKER for kind, _ in delta.changed_config_resources()):
            self.operation_context = operation_context(self.config, self.broker.plugins, new)
        for broker_id, (before, after) in delta.changed_brokers().items():
            if after is None:
                self.last_heartbeat_ms.pop(broker_id, None)
            elif self._active and (before is None or before.epoch != after.epoch):
                # A (re-)registration counts as a heartbeat.
                self.last_heartbeat_ms[broker_id] = self.driver.now_ms()
        if self._channels is not None:
            try:
                self._channels.publish(old, new, delta)
            except Exception:
                log.exception("controller %d: pushing metadata to brokers failed", self.node_id)

    def _maybe_snapshot(self) -> None:
        if self._records_since_snapshot < self.snapshot_interval_records:
            return
        core = self.driver.core
        end = self.image.offset + 1
        if end <= core.log.log_start_offset:
            return
        payloads = [encode_record(rec) for rec in self.image.to_records()]
        try:
            snapshot_id = core.create_snapshot(end, payloads)
        except Exception:
            log.exception("controller %d: snapshot at offset %d failed", self.node_id, end)
            return
        self._records_since_snapshot = 0
        log.info(
            "controller %d wrote snapshot %d/%d (%d records)",
            self.node_id,
            snapshot_id.end_offset,
            snapshot_id.epoch,
            len(payloads),
        )

    def _resolve_waiters(self) -> None:
        applied = self.image.offset
        for offset in [o for o in self._waiters if o <= applied]:
            for future in self._waiters.pop(offset):
                if not future.done():
                    future.set_result(None)

    # -- activation ---------------------------------------------------------------------------

    def _activate(self) -> None:
        epoch = self.driver.epoch
        self._active = True
        now = self.driver.now_ms()
        self.last_heartbeat_ms = dict.fromkeys(self.image.brokers, now)
        self._channels = ControllerChannelManager(
            controller_id=self.node_id,
            controller_epoch=epoch,
            control_plane_listener_name=self.control_plane_listener_name,
            inter_broker_listener_name=self.inter_broker_listener_name,
            image_provider=lambda: self.image,
            on_refused=self.broker_refused,
            ssl_context=self._control_plane_ssl,
            sasl=node_sasl_client(
                self.config,
                self.control_plane_listener_name,
                "sasl.mechanism.inter.broker.protocol",
            ),
        )
        self._channels.start()
        self._active_tasks = [
            asyncio.create_task(self._after_activation(epoch), name="controller-activation"),
            asyncio.create_task(self._fence_loop(epoch), name="controller-fencing"),
        ]
        log.info(
            "controller %d is active in epoch %d (image offset %d, %d brokers)",
            self.node_id,
            epoch,
            self.image.offset,
            len(self.image.brokers),
        )

    def _deactivate(self, why: str) -> None:
        for offsets in self._waiters.values():
            for future in offsets:
                if not future.done():
                    future.set_exception(NotControllerError(why))
        self._waiters.clear()
        if not self._active:
            return
        self._active = False
        for task in self._active_tasks:
            task.cancel()
        self._active_tasks = []
        channels, self._channels = self._channels, None
        if channels is not None:
            self._spawn(channels.stop())
        log.info("controller %d is no longer active: %s", self.node_id, why)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _after_activation(self, epoch: int) -> None:
        """One-off writes of the first active controller of a new cluster: its feature levels
        (``metadata.version``, ``transaction.version``) and the bootstrap records
        (``--add-scram``), committed together."""
        if METADATA_VERSION_FEATURE in self.image.features:
            return
        bootstrap = list(self.bootstrap_records)
        transaction_version = self.config.get_int(BOOTSTRAP_TRANSACTION_VERSION)
        with contextlib.suppress(ControllerError):
            await self.run(
                lambda image: ControllerResult(
                    (bootstrap_feature_records(image, transaction_version) + bootstrap)
                    if METADATA_VERSION_FEATURE not in image.features
                    else [],
                    None,
                )
            )

    async def _fence_loop(self, epoch: int) -> None:
        """Fence brokers whose heartbeats stopped (``broker.session.timeout.ms``), one per
        period, and only while this controller could have heard them.

        A controller that could not hear heartbeats judges nobody: when its own loop stalled
        (a paused or starved process: heartbeats wait unread in its sockets) or when no
        majority of voters has fetched from it within a session (it may be the node cut
        off). Once it hears again, every broker gets a fresh session, as on activation,
        except brokers whose heartbeat connection closed. Without this, a controller cut off
        from its peers fenced every broker, itself included, the moment the cut healed.
        """
        period = max(0.05, min(1.0, self.session_timeout_ms / 4000))
        judge = SessionJudge(int(period * 1000), self.session_timeout_ms, self.driver.now_ms())
        while self._active and self.epoch == epoch:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._judge_now.wait(), period)
            self._judge_now.clear()
            if not self._active:
                return
            now = self.driver.now_ms()
            verdict = judge.tick(now, self.driver.core.quorum_contact_ms(now))
            if verdict is Verdict.BLIND:
                if judge.newly_blind:
                    log.info(
                        "controller %d: not judging broker sessions (%s)", self.node_id, judge.why
                    )
                continue
            if verdict is Verdict.RENEW:
                self._renew_sessions(now)
                continue
            try:
                fenced = await self.run(
                    lambda image: fence_stale_brokers(
                        image,
                        self.operation_context,
                        now_ms=self.driver.now_ms(),
                        last_heartbeat_ms=self.last_heartbeat_ms,
                        session_timeout_ms=self.session_timeout_ms,
                        limit=1,
                    )
                )
            except ControllerError:
                continue
            except Exception:
                log.exception("controller %d: fencing failed", self.node_id)
                continue
            if fenced:
                log.info(
                    "controller %d fenced brokers %s (session expired: no heartbeat for %d "
                    "ms, or its connection closed or refused)",
                    self.node_id,
                    fenced,
                    self.session_timeout_ms,
                )

    def _renew_sessions(self, now_ms: int) -> None:
        """A fresh session for every broker still connected (see :meth:`_fence_loop`)."""
        for broker_id in self.last_heartbeat_ms:
            if broker_id not in self._closed_sessions:
                self.last_heartbeat_ms[broker_id] = max(self.last_heartbeat_ms[broker_id], now_ms)
        log.info("controller %d: judging broker sessions again (fresh sessions)", self.node_id)

    # -- operations ---------------------------------------------------------------------------

    def check_active(self) -> None:
        if not self._active:
            raise NotControllerError(
                f"node {self.node_id} is not the active controller "
                f"(leader {self.active_controller_id}, epoch {self.epoch})"
            )

    async def run(
        self,
        operation: Callable[[MetadataImage], ControllerResult[R]],
        *,
        timeout: float | None = None,
    ) -> R:
        """Run ``operation`` on the current image, commit its records, return its response.

        Raises NotControllerError (not active, or leadership lost before the commit) or
        ControllerTimeoutError. Operations run one at a time, each on an image holding every
        record of the previous one.
        """
        timeout = self.operation_timeout_s if timeout is None else timeout
        async with self._lock:
            self.check_active()
            driver = self.driver
            # An earlier operation that timed out may still be in flight: wait for it, so
            # that this one sees its effect (and lands at image.offset + 1).
            pending = driver.core.log_end_offset - 1
            if pending > self.image.offset:
                await self._wait_applied(pending, timeout)
                self.check_active()
            result = operation(self.image)
            if result.records:
                appended = time.perf_counter()
                try:
                    offset = driver.append([encode_payload(result.records)])
                except NotLeaderError as exc:
                    raise NotControllerError(str(exc)) from None
                await self._wait_applied(offset, timeout)
                self.commit_latency.observe(time.perf_counter() - appended)
            return result.response

    async def _wait_applied(self, offset: int, timeout: float) -> None:
        if self.image.offset >= offset:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # The waiting task may be cancelled (connection closed, shutdown) before the outcome:
        # mark the exception retrieved so a later NotControllerError is not reported as lost.
        future.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._waiters.setdefault(offset, []).append(future)
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            waiting = self._waiters.get(offset, [])
            if future in waiting:
                waiting.remove(future)
            future.cancel()
            raise ControllerTimeoutError(
                f"offset {offset} not committed within {timeout:.1f}s"
            ) from None

    def record_heartbeat(
        self, broker_id: int, broker_epoch: int, connection_id: int | None = None
    ) -> None:
        """Note a heartbeat from the current incarnation of ``broker_id`` (and the controller
        listener connection it came on, see :meth:`connection_closed`)."""
        broker = self.image.brokers.get(broker_id)
        if broker is not None and broker.epoch == broker_epoch:
            self.last_heartbeat_ms[broker_id] = self.driver.now_ms()
            self._closed_sessions.discard(broker_id)
            if connection_id is not None:
                self._heartbeat_connections[broker_id] = connection_id

    def connection_closed(self, connection_id: int) -> None:
        """A connection to the controller listener closed. If a broker heartbeated on it, its
        process most likely died (kill -9 closes its sockets): its session is treated as
        expired, so the fencing loop fences it at once instead of waiting out
        ``broker.session.timeout.ms``. A live broker reconnects, heartbeats and is unfenced
        again once caught up, as after any fencing."""
        for broker_id, conn in list(self._heartbeat_connections.items()):
            if conn == connection_id:
                del self._heartbeat_connections[broker_id]
                self._expire_session(broker_id)

    def broker_refused(self, broker_id: int, broker_epoch: int) -> None:
        """This controller's channel found ``broker_id``'s control-plane listener refusing
        connections. A broker opens that listener before it registers and closes it only when
        it stops, so the registered incarnation's process is gone: its session is treated as
        expired, as for a closed heartbeat connection. This is what a new active controller
        learns of a broker that died with the old one (a combined node killed while it was
        the active controller): it never heard that broker, and would otherwise wait out a
        whole session from its activation before fencing it. A paused or cut-off broker times
        out instead of refusing, and keeps its session."""
        broker = self.image.brokers.get(broker_id)
        if broker is None or broker.epoch != broker_epoch or broker.fenced:
            return
        if broker_id not in self._closed_sessions:
            log.info(
                "controller %d: broker %d (epoch %d) refuses connections; fencing it",
                self.node_id,
                broker_id,
                broker_epoch,
            )
        self._heartbeat_connections.pop(broker_id, None)
        self._expire_session(broker_id)

    def _expire_session(self, broker_id: int) -> None:
        """Treat ``broker_id``'s session as expired until it heartbeats again, and have the
        fencing loop judge at once."""
        self._closed_sessions.add(broker_id)
        if broker_id in self.last_heartbeat_ms:
            expired = self.driver.now_ms() - self.session_timeout_ms - 1
            self.last_heartbeat_ms[broker_id] = min(self.last_heartbeat_ms[broker_id], expired)
            self._judge_now.set()
