"""Alteration of a BROKER resource's dynamic configs on a single node (IncrementalAlterConfigs
and AlterConfigs share it), persisted in the metadata dir and applied at once.

The resource is this node (its id) or the cluster-wide default (""); another id is
INVALID_REQUEST "Unexpected broker id, expected N, but received M" (Kafka 4.4's text). The
new layer is checked by :func:`pydmq.config.dynamic.updated_layer`, written atomically to
``<log.dirs>/__pydmq_metadata/dynamic_broker_configs.json`` (read back at start-up by
:func:`load_dynamic_configs`), then installed in the node's :class:`BrokerConfig`, and every
topic's effective configs are re-derived and applied to its hosted partitions (a
``log.retention.ms`` set on the broker takes effect on every topic that does not set
``retention.ms`` itself). Runs on the event loop.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydmq.config.broker import BrokerConfig
from pydmq.config.dynamic import DynamicConfigError, updated_layer
from pydmq.config.topic import TopicConfig
from pydmq.protocol.errors import ErrorCode, TopicError
from pydmq.storage.checkpoint import write_atomically

if TYPE_CHECKING:
    from pydmq.broker.server import Broker

__all__ = ["alter_broker_configs", "load_dynamic_configs"]

FILE_NAME = "dynamic_broker_configs.json"
METADATA_DIR = "__pydmq_metadata"  # the single node's registry dir, as in broker/server.py


def _path(metadata_dir: Path) -> Path:
    return metadata_dir / FILE_NAME


def load_dynamic_configs(config: BrokerConfig, metadata_dir: Path) -> None:
    """Install the dynamic configs a single node persisted (none when the file is absent)."""
    path = _path(metadata_dir)
    if not path.exists():
        return
    saved = json.loads(path.read_text(encoding="utf-8"))
    config.set_dynamic(saved.get("cluster_default", {}), saved.get("broker", {}))


def _effective(config: BrokerConfig, name: str) -> str | None:
    definition = config.definitions.get(name)
    if definition is not None:
        return definition.render(config.get(name))
    return config.dynamic_default.get(name, config.kafka_only_values.get(name))


def alter_broker_configs(
    broker: Broker,
    resource_name: str,
    changes: Sequence[tuple[str, int, str | None]],
    *,
    validate_only: bool,
    replace: bool,
) -> None:
    """Apply ``changes`` ((name, AlterConfigOp, value)) to the resource's layer; ``replace``
    (AlterConfigs) starts from an empty layer. Raises TopicError with Kafka's code."""
    if resource_name not in ("", str(broker.node_id)):
        raise TopicError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {broker.node_id}, but received {resource_name}",
        )
    config = broker.config
    default_scope = resource_name == ""
    current = config.dynamic_default if default_scope else config.dynamic_broker
    try:
        layer = updated_layer(
            {} if replace else current, changes, lambda name: _effective(config, name)
        )
    except DynamicConfigError as exc:
        raise TopicError(exc.error_code, exc.message) from None
    if validate_only:
        return
    cluster_default = layer if default_scope else config.dynamic_default
    own = config.dynamic_broker if default_scope else layer
    saved = json.dumps({"cluster_default": cluster_default, "broker": own}, sort_keys=True)
    try:
        write_atomically(str(_path(broker.log_dir / METADATA_DIR)), saved.encode())
    except OSError as exc:
        raise TopicError(
            ErrorCode.KAFKA_STORAGE_ERROR, f"Dynamic broker configs could not be persisted: {exc}"
        ) from None
    config.set_dynamic(cluster_default, own)
    _apply_to_topics(broker)


def _apply_to_topics(broker: Broker) -> None:
    """Re-derive every topic's effective configs from the broker's and apply them to its
    hosted partitions (append policy and min ISR, and the engine log's settings)."""
    for topic in broker.topics:
        broker.replica_manager.update_config(topic.name, TopicConfig(broker.config, topic.configs))
