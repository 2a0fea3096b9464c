"""LocalMetadataPublisher: a single node applies its committed metadata changes to itself.

A :class:`~pydmq.controller.local.LocalController` listener, called after the topic registry
has followed the same delta. For each delta:

- deleted topics: their hosted partitions are deleted (with the storage engine their configs
  named), their fetch-session entries forgotten, ``pydmq_on_topic_deleted`` fired;
- created topics: ``pydmq_on_topic_created`` fired (their partitions were opened before their
  records were committed: creation is all or nothing, see
  :class:`~pydmq.broker.partition_creation.PartitionCreation`);
- topics whose configs changed: the new effective configs applied to their hosted partitions;
- client quotas changed: the quota managers take the image's quotas;
- the cluster-wide default or this node's dynamic broker configs changed (BROKER resources ""
  and the node id): installed, and every topic's effective configs re-derived
  (:func:`~pydmq.broker.dynamic_configs.install_broker_configs`);
- ACLs created or deleted: the authorizer given the image's ACLs.

What a node replays at start is not published (the hooks never fire for the state a node
starts with). A cluster broker does the same from UpdateMetadata
(:class:`~pydmq.broker.cluster.runtime.BrokerCluster`).

Owned by the broker's event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydmq.broker.dynamic_configs import install_broker_configs
from pydmq.config.topic import TopicConfig
from pydmq.metadata.delta import MetadataDelta
from pydmq.metadata.image import MetadataImage
from pydmq.metadata.records import RESOURCE_BROKER, RESOURCE_TOPIC
from pydmq.storage.api import TopicPartition

if TYPE_CHECKING:
    from pydmq.broker.server import Broker

__all__ = ["LocalMetadataPublisher"]


class LocalMetadataPublisher:
    """Applies each committed delta to the replica manager, fetch sessions and plugin host."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def publish(self, image: MetadataImage, delta: MetadataDelta) -> None:
        broker = self._broker
        replica_manager = broker.replica_manager
        for topic_id, gone in delta.deleted_topics().items():
            configs = delta.image.topic_config(gone.name)
            engine = TopicConfig(broker.config, configs).get_str("pydmq.engine")
            for index in gone.partitions:
                replica_manager.delete_partition(TopicPartition(gone.name, index), engine)
            broker.fetch_sessions.forget_topic(gone.name)
            broker.plugins.on_topic_deleted(gone.name, str(topic_id))
        created = delta.created_topics()
        for topic_id, name in created.items():
            partitions = len(image.topics.by_id[topic_id].partitions)
            broker.plugins.on_topic_created(name, str(topic_id), partitions)
        if delta.acls_changed() and broker.authorizer is not None:
            broker.authorizer.update_acls(image.acls)
        if delta.changed_client_quotas():
            broker.quotas.update(image.client_quotas)
        changed_configs = delta.changed_config_resources()
        own = str(broker.node_id)
        if {(RESOURCE_BROKER, ""), (RESOURCE_BROKER, own)} & changed_configs:
            install_broker_configs(broker, image.broker_config(""), image.broker_config(own))
        for resource_type, name in changed_configs:
            topic = image.topics.by_name.get(name)
            if (
                resource_type == RESOURCE_TOPIC
                and topic is not None
                and topic.topic_id not in created
            ):
                replica_manager.update_config(
                    name, TopicConfig(broker.config, image.topic_config(name))
                )
