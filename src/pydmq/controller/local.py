"""LocalController: a single node is its own controller (issue 16: a cluster of one).

It runs the controller's sans-IO operations (:mod:`pydmq.controller.operations`) on the image
of the node's :class:`~pydmq.controller.local_log.LocalMetadataLog`, commits their records
there (one entry per operation, flushed before :meth:`LocalController.run` returns) and hands
every :class:`~pydmq.metadata.delta.MetadataDelta` to its listeners, in the order they were
added: the broker's topic registry first (the view the handlers read), then its publisher
(partitions, fetch sessions, topic hooks). A cluster's active controller does the same
through Raft and pushes the result to its brokers.

Operations run one at a time, synchronously, on the event loop: each sees the records of the
previous one. A failed write raises KafkaStorageError and changes nothing.

Owned by the broker's event loop.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from pydmq.controller.local_log import LocalMetadataLog
from pydmq.metadata.delta import MetadataDelta
from pydmq.metadata.image import MetadataImage
from pydmq.metadata.records import (
    RESOURCE_BROKER,
    MetadataRecord,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
)

if TYPE_CHECKING:
    from pydmq.config.broker import BrokerConfig
    from pydmq.controller.operations import ControllerResult, OperationContext
    from pydmq.plugins.host import PluginHost

__all__ = ["DeltaListener", "LocalController"]

R = TypeVar("R")

DeltaListener = Callable[[MetadataImage, MetadataDelta], None]
"""Called with the new image and the delta that made it, after every committed change."""


class LocalController:
    """Runs operations on a single node's metadata log; see the module docstring."""

    def __init__(
        self, metadata_log: LocalMetadataLog, config: BrokerConfig, plugins: PluginHost
    ) -> None:
        self.metadata_log = metadata_log
        self._config = config
        self._plugins = plugins
        self._context: OperationContext | None = None
        self._listeners: list[DeltaListener] = []

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

    def add_listener(self, listener: DeltaListener) -> None:
        self._listeners.append(listener)

    def run(self, operation: Callable[[MetadataImage], ControllerResult[R]]) -> R:
        """Run ``operation`` on the image, commit its records, return its response."""
        result = operation(self.image)
        self.append(result.records)
        return result.response

    def append(self, records: Sequence[MetadataRecord]) -> None:
        """Commit ``records`` as one entry and publish the delta (nothing when empty)."""
        if not records:
            return
        delta = self.metadata_log.append(records)
        for listener in self._listeners:
            listener(self.image, delta)
        if any(kind == RESOURCE_BROKER for kind, _ in delta.changed_config_resources()):
            # The operations' view of the dynamic broker configs (log.engine,
            # unclean.leader.election.enable, ...) is built again on next use.
            self._context = None
