"""``ClusterMetadataView``: the :class:`~pydmq.broker.services.MetadataView` of a cluster-mode
broker, read from its metadata cache (what the controller's UpdateMetadata told it)."""

from __future__ import annotations

from collections.abc import Sequence

from pydmq.broker.cluster.metadata_cache import MetadataCache
from pydmq.broker.services import BrokerEndpoint, FinalizedFeatures
from pydmq.storage.api import TopicPartition

__all__ = ["ClusterMetadataView"]


class ClusterMetadataView:
    """The metadata cache as the handlers read it. Read on the broker's event loop."""

    # Controllers are described by the controller listeners' own DescribeCluster.
    describes_controllers = False

    def __init__(self, cache: MetadataCache) -> None:
        self._cache = cache

    def alive_brokers(self, listener: str) -> list[BrokerEndpoint]:
        out: list[BrokerEndpoint] = []
        for broker_id in self._cache.alive_broker_ids():
            cached = self._cache.brokers[broker_id]
            endpoint = cached.endpoint(listener)
            if endpoint is not None:
                out.append(BrokerEndpoint(broker_id, endpoint[0], endpoint[1], cached.rack))
        return out

    def is_alive(self, broker_id: int) -> bool:
        return self._cache.is_alive(broker_id)

    def endpoint(self, broker_id: int, listener: str) -> tuple[str, int] | None:
        return self._cache.endpoint(broker_id, listener)

    def controller_id(self) -> int:
        cache = self._cache
        if cache.is_alive(cache.controller_id):
            return cache.controller_id
        alive = cache.alive_broker_ids()
        return alive[0] if alive else -1

    def image_version(self) -> int:
        return self._cache.updates

    def offline_replicas(self, tp: TopicPartition) -> Sequence[int]:
        return self._cache.offline(tp)

    def finalized_features(self) -> FinalizedFeatures:
        return self._cache.finalized_features
