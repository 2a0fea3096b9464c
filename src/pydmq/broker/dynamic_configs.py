"""Dynamic broker configs on the broker side: installing the layers a node learns from its
metadata, in both modes.

The controller keeps them as ConfigRecords of BROKER resources (the cluster-wide default ""
and each broker's own id). A single node installs them from its local controller's image
(at start and from each delta, :class:`~pydmq.broker.metadata_publisher.LocalMetadataPublisher`);
a cluster broker from the ``broker_configs`` of the controller's UpdateMetadata
(:class:`~pydmq.broker.cluster.metadata_cache.MetadataCache`). Installing replaces both
layers in the node's :class:`~pydmq.config.broker.BrokerConfig` and re-derives the
effective configs of every topic on its hosted partitions, so a ``log.retention.ms`` set on
the broker takes effect on each topic that does not set ``retention.ms`` itself.

Runs on the broker's event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pydmq.config.definitions import ConfigError
from pydmq.config.topic import TopicConfig

if TYPE_CHECKING:
    from pydmq.broker.server import Broker

__all__ = ["install_broker_configs"]

log = logging.getLogger(__name__)


def install_broker_configs(
    broker: Broker, cluster_default: Mapping[str, str], own: Mapping[str, str]
) -> None:
    """Make ``cluster_default`` and ``own`` the node's dynamic layers and apply the topics'
    new effective configs to the hosted partitions. Nothing changes when nothing differs. A
    value this node cannot parse (the controller checked it: a newer controller's rule) is
    logged and leaves the old layers in place."""
    config = broker.config
    if config.dynamic_default == cluster_default and config.dynamic_broker == own:
        return
    try:
        config.set_dynamic(cluster_default, own)
    except ConfigError as exc:
        log.error("dynamic broker configs not installed, the old ones stay: %s", exc)
        return
    broker.replica_manager.update_configs(
        {topic.name: TopicConfig(config, topic.configs) for topic in broker.topics}
    )
