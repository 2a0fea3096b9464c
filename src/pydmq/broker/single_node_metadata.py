"""``SingleNodeMetadata``: the :class:`~pydmq.broker.services.MetadataView` of a single node.

A single node is a combined broker and controller, the only broker there is, always alive: it
answers with itself on the listener asked, as the controller too, and has no offline replica.
Its finalized features are those of its local controller's metadata image.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydmq.broker.services import BrokerEndpoint, FinalizedFeatures
from pydmq.metadata.image import MetadataImage
from pydmq.storage.api import TopicPartition

__all__ = ["SingleNodeMetadata"]


class SingleNodeMetadata:
    """This node as the whole cluster. Read by the handlers on the event loop."""

    describes_controllers = True

    def __init__(
        self,
        node_id: int,
        rack: str | None,
        advertised_endpoint: Callable[[str], tuple[str, int]],
        image: Callable[[], MetadataImage],
    ) -> None:
        self._node_id = node_id
        self._image = image
        self._rack = rack
        self._advertised_endpoint = advertised_endpoint

    def alive_brokers(self, listener: str) -> list[BrokerEndpoint]:
        host, port = self._advertised_endpoint(listener)
        return [BrokerEndpoint(self._node_id, host, port, self._rack)]

    def is_alive(self, broker_id: int) -> bool:
        return broker_id == self._node_id

    def endpoint(self, broker_id: int, listener: str) -> tuple[str, int] | None:
        return self._advertised_endpoint(listener) if broker_id == self._node_id else None

    def controller_id(self) -> int:
        return self._node_id

    def image_version(self) -> int:
        """The offset of the image: the topic registry follows each committed delta before
        anything else runs on the loop, and nothing else here changes."""
        return self._image().offset

    def offline_replicas(self, tp: TopicPartition) -> Sequence[int]:
        return ()

    def finalized_features(self) -> FinalizedFeatures:
        image = self._image()
        return FinalizedFeatures(max(0, image.offset), image.features)
