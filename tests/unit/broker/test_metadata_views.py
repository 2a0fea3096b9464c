"""The handlers' MetadataView in both modes: a single node is the whole cluster; a
cluster-mode broker answers from its metadata cache (what UpdateMetadata told it)."""

from __future__ import annotations

import pytest

from pydmq.broker.cluster.metadata_cache import CachedBroker, MetadataCache
from pydmq.broker.cluster.metadata_view import ClusterMetadataView
from pydmq.broker.services import BrokerEndpoint, FinalizedFeatures, MetadataView
from pydmq.broker.single_node_metadata import SingleNodeMetadata
from pydmq.metadata.image import MetadataImage, frozen_mapping
from pydmq.storage.api import TopicPartition

pytestmark = pytest.mark.timeout(10)

TP = TopicPartition("t", 0)


def test_a_single_node_answers_with_itself_on_the_listener_asked() -> None:
    view: MetadataView = SingleNodeMetadata(
        7,
        "r1",
        lambda listener: ("h", 9092 if listener == "PLAINTEXT" else 9093),
        lambda: MetadataImage(offset=4, features=frozen_mapping({"transaction.version": 2})),
    )
    assert view.alive_brokers("PLAINTEXT") == [BrokerEndpoint(7, "h", 9092, "r1")]
    assert view.alive_brokers("OTHER") == [BrokerEndpoint(7, "h", 9093, "r1")]
    assert view.is_alive(7) and not view.is_alive(8)
    assert view.endpoint(7, "PLAINTEXT") == ("h", 9092) and view.endpoint(8, "PLAINTEXT") is None
    assert view.controller_id() == 7
    assert list(view.offline_replicas(TP)) == []
    assert view.describes_controllers
    assert view.finalized_features() == FinalizedFeatures(4, {"transaction.version": 2})


def _cache(controller_id: int, alive: dict[int, dict[str, tuple[str, int]]]) -> MetadataCache:
    cache = MetadataCache(1)
    cache.controller_id = controller_id
    cache.brokers = {b: CachedBroker(b, endpoints, None, 5) for b, endpoints in alive.items()}
    cache.offline_replicas[TP] = [3]
    return cache


def test_a_cluster_broker_answers_from_its_metadata_cache() -> None:
    alive = {2: {"PLAINTEXT": ("b", 9002)}, 1: {"PLAINTEXT": ("a", 9001), "REPL": ("a", 9101)}}
    view: MetadataView = ClusterMetadataView(_cache(2, alive))
    assert view.alive_brokers("PLAINTEXT") == [
        BrokerEndpoint(1, "a", 9001, None),
        BrokerEndpoint(2, "b", 9002, None),
    ]
    assert view.alive_brokers("REPL") == [BrokerEndpoint(1, "a", 9101, None)]
    assert view.is_alive(2) and not view.is_alive(3)
    assert view.endpoint(2, "REPL") is None and view.endpoint(3, "PLAINTEXT") is None
    assert view.controller_id() == 2  # the active controller is an alive broker
    assert list(view.offline_replicas(TP)) == [3]
    assert not view.describes_controllers


def test_the_controller_id_is_the_lowest_alive_broker_when_the_controller_is_none() -> None:
    view = ClusterMetadataView(_cache(9, {4: {}, 3: {}}))
    assert view.controller_id() == 3
    assert ClusterMetadataView(_cache(9, {})).controller_id() == -1
