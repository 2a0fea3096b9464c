"""The controller picks its replica placer by ``pydmq.replica.placer`` among registered ones."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from pydmq.assignment.placement import ReplicaPlacerSpec
from pydmq.config.broker import BrokerConfig
from pydmq.controller.operations import operation_context
from pydmq.plugins.host import PluginHost
from pydmq.plugins.markers import hookimpl


class EverythingOnOne:
    """A third-party placer: every replica list starts with the lowest broker id."""

    def place(
        self,
        partitions: Sequence[int],
        replication_factor: int,
        brokers: Sequence[Any],
        start: int | None = None,
    ) -> list[list[int]]:
        ids = sorted(b.id for b in brokers)
        return [ids[:replication_factor] for _ in partitions]


class PlacerPlugin:
    @hookimpl
    def pydmq_register_replica_placers(self) -> list[ReplicaPlacerSpec]:
        return [ReplicaPlacerSpec("on-one", EverythingOnOne)]


def test_default_placer_is_striped() -> None:
    context = operation_context(BrokerConfig(), PluginHost(load_entry_points=False))
    assert type(context.placer).__name__ == "StripedReplicaPlacer"


def test_a_registered_placer_is_chosen_by_config() -> None:
    config = BrokerConfig({"pydmq.replica.placer": "on-one"})
    context = operation_context(config, PluginHost([PlacerPlugin()], load_entry_points=False))
    assert isinstance(context.placer, EverythingOnOne)


def test_an_unknown_placer_is_a_clear_error() -> None:
    config = BrokerConfig({"pydmq.replica.placer": "nope"})
    with pytest.raises(ValueError, match="nope"):
        operation_context(config, PluginHost(load_entry_points=False))


def test_dynamic_broker_configs_of_the_image_win_over_the_static_file() -> None:
    """Issue 16 part 1: the controller's own layer, then the cluster default, then the file
    (on 4a2e8d9 the context never saw dynamic broker configs)."""
    from pydmq.metadata.delta import MetadataDelta
    from pydmq.metadata.image import MetadataImage
    from pydmq.metadata.records import ConfigRecord

    delta = MetadataDelta(MetadataImage.EMPTY)
    for rec in (
        ConfigRecord(4, "", "unclean.leader.election.enable", "true"),
        ConfigRecord(4, "", "pydmq.max.broker.partitions", "10"),
        ConfigRecord(4, "1", "pydmq.max.broker.partitions", "20"),
        ConfigRecord(4, "2", "log.engine", "memory"),
    ):
        delta.replay(rec)
    image = delta.apply(3, 0)
    config = BrokerConfig({"node.id": 1, "pydmq.max.broker.partitions": 5})
    plugins = PluginHost(load_entry_points=False)
    static = operation_context(config, plugins)
    assert (static.unclean_leader_election_enable, static.max_broker_partitions) == (False, 5)
    context = operation_context(config, plugins, image)
    assert context.unclean_leader_election_enable is True
    assert context.max_broker_partitions == 20
    assert context.default_engine == "segment"  # broker 2's layer is not this node's
