"""LocalController: a single node is its own controller (issue 16: a cluster of one).

It runs the controller's sans-IO operations (:mod:`pydmq.controller.operations`) on the image
of the node's :class:`~pydmq.controller.local_log.LocalMetadataLog`, commits their records
there (one entry per operation, flushed before :meth:`LocalController.run` returns) and hands
every :class:`~pydmq.metadata.delta.MetadataDelta` to its listeners, in the order they were
added: the broker's topic registry first (the view the handlers read), then its publisher
(partitions, fetch sessions, topic hooks). A cluster's active controller does the same
through Raft and pushes the result to its brokers. It implements the admin handlers' port
(:class:`~pydmq.controller.handlers._common.AdminController`), so a single node's admin
requests are answered by the controller's own handlers, in process.

Operations run one at a time under an ``asyncio.Lock`` (Kafka's controller serializes them
on its event queue): each sees the records of the previous one, including a creation whose
partitions were being opened while others waited. Before a result's records are committed
the node prepares them (:data:`CommitPreparer`: a single node opens the partitions they
create, in chunks between which the event loop serves other connections); all or nothing:
if preparing or writing fails, or the request is cancelled, what was prepared is undone and
nothing is committed; a failure raises
:class:`~pydmq.controller.errors.ControllerError` (KAFKA_STORAGE_ERROR).

Owned by the broker's event loop.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from pydmq.config.features import BOOTSTRAP_TRANSACTION_VERSION
from pydmq.controller.errors import ControllerError
from pydmq.controller.local_log import LocalMetadataLog
from pydmq.metadata.delta import MetadataDelta
from pydmq.metadata.features import bootstrap_feature_records
from pydmq.metadata.image import MetadataImage
from pydmq.metadata.records import (
    RESOURCE_BROKER,
    MetadataRecord,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
)
from pydmq.protocol.errors import ErrorCode
from pydmq.storage.errors import KafkaStorageError

if TYPE_CHECKING:
    from pydmq.config.broker import BrokerConfig
    from pydmq.controller.operations import ControllerResult, OperationContext
    from pydmq.plugins.host import PluginHost

__all__ = ["CommitPreparation", "CommitPreparer", "DeltaListener", "LocalController"]

R = TypeVar("R")

DeltaListener = Callable[[MetadataImage, MetadataDelta], None]
"""Called with the new image and the delta that made it, after every committed change."""


class CommitPreparation(Protocol):
    """What the node does for one result before its records are committed."""

    def steps(self) -> Iterator[None]:
        """Do it, yielding where the event loop may serve others; may raise."""
        ...

    def rollback(self) -> None:
        """Undo every step done (the records are not committed)."""
        ...

    def failure(self, exc: BaseException) -> str:
        """The message every item of the request answers when ``exc`` stopped it."""
        ...


CommitPreparer = Callable[[MetadataImage, Sequence[MetadataRecord]], CommitPreparation | None]
"""Given the image and a result's records, what to do before committing them (None: nothing)."""


class LocalController:
    """Runs operations on a single node's metadata log; see the module docstring."""

    def __init__(
        self,
        metadata_log: LocalMetadataLog,
        config: BrokerConfig,
        plugins: PluginHost,
        prepare: CommitPreparer | None = None,
    ) -> None:
        self.metadata_log = metadata_log
        self._config = config
        self._plugins = plugins
        self._prepare = prepare
        self._context: OperationContext | None = None
        self._listeners: list[DeltaListener] = []
        self._lock = asyncio.Lock()  # one operation at a time (module docstring)

    @property
    def config(self) -> BrokerConfig:
        return self._config

    @property
    def image(self) -> MetadataImage:
        """The committed image."""
        return self.metadata_log.image

    @property
    def operation_context(self) -> OperationContext:
        """Built on first use: a node that changes no metadata does not import the operations
        at start-up."""
        if self._context is None:
            from pydmq.controller.operations import operation_context

            self._context = operation_context(self._config, self._plugins, self.image)
        return self._context

    def register_node(self, node_id: int, rack: str | None) -> None:
        """Make ``node_id`` the image's one registered broker, unfenced (the operations place
        replicas on registered brokers), unless it already is: a new data dir, a log written
        before registration, a changed ``node.id`` or ``broker.rack``. Called at start-up."""
        image = self.image
        current = image.brokers.get(node_id)
        registered = current is not None and not current.fenced and current.rack == rack
        if registered and len(image.brokers) == 1:
            return
        records: list[MetadataRecord] = [
            UnregisterBrokerRecord(b.id, b.epoch) for b in image.brokers.values() if b.id != node_id
        ]
        epoch = max(image.offset + 1, current.epoch + 1 if current is not None else 0)
        records.append(RegisterBrokerRecord(node_id, uuid.uuid4(), epoch, (), rack, False, False))
        self.append(records)

    def bootstrap_features(self) -> None:
        """A new cluster of one (no ``metadata.version`` yet): commit its feature levels
        (``transaction.version`` from ``pydmq.bootstrap.transaction.version``)."""
        records = bootstrap_feature_records(
            self.image, self.config.get_int(BOOTSTRAP_TRANSACTION_VERSION)
        )
        if records:
            self.append(records)

    def add_listener(self, listener: DeltaListener) -> None:
        self._listeners.append(listener)

    async def run(self, operation: Callable[[MetadataImage], ControllerResult[R]]) -> R:
        """Run ``operation`` on the image once the operations before it are done, prepare and
        commit its records, return its response; raises ControllerError (nothing committed).
        A cancelled caller's preparation is undone."""
        async with self._lock:
            result = operation(self.image)
            steps = self._commit(result.records)
            try:
                for _ in steps:
                    await asyncio.sleep(0)
            finally:
                steps.close()
            return result.response

    def run_now(self, operation: Callable[[MetadataImage], ControllerResult[R]]) -> R:
        """:meth:`run` without yielding to the event loop, for the node's own internal topics
        (the group coordinator creates ``__consumer_offsets`` synchronously). Refused with
        ControllerError (COORDINATOR_NOT_AVAILABLE) while another operation is in progress."""
        if self._lock.locked():
            raise ControllerError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                "The controller is busy with another operation; try again.",
            )
        result = operation(self.image)
        for _ in self._commit(result.records):
            pass
        return result.response

    def _commit(self, records: Sequence[MetadataRecord]) -> Generator[None, None, None]:
        """Prepare ``records`` (yielding between the preparation's steps), then append them."""
        if not records:
            return
        preparation = None if self._prepare is None else self._prepare(self.image, records)
        if preparation is None:
            try:
                self.append(records)
            except KafkaStorageError as exc:
                raise ControllerError(
                    ErrorCode.KAFKA_STORAGE_ERROR, f"The metadata log refused the change: {exc}"
                ) from None
            return
        try:
            yield from preparation.steps()
            delta = self.metadata_log.append(records)
        except Exception as exc:
            preparation.rollback()
            raise ControllerError(ErrorCode.KAFKA_STORAGE_ERROR, preparation.failure(exc)) from None
        except BaseException:  # abandoned (cancelled, closed): nothing of it may stay
            preparation.rollback()
            raise
        # Committed: the prepared partitions stay whatever a listener does with the delta.
        self._publish(delta)

    def append(self, records: Sequence[MetadataRecord]) -> None:
        """Commit ``records`` as one entry and publish the delta (nothing when empty)."""
        if not records:
            return
        self._publish(self.metadata_log.append(records))

    def _publish(self, delta: MetadataDelta) -> None:
        """Hand a committed delta to the listeners, in the order they were added."""
        for listener in self._listeners:
            listener(self.image, delta)
        if any(kind == RESOURCE_BROKER for kind, _ in delta.changed_config_resources()):
            # The operations' view of the dynamic broker configs (log.engine,
            # unclean.leader.election.enable, ...) is built again on next use.
            self._context = None
