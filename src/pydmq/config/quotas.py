"""The quota properties (Kafka's names): the windows the client quota managers measure over,
and the connection quotas.

``quota.window.num`` samples of ``quota.window.size.seconds`` for the byte-rate and request
quotas; ``controller.quota.window.*`` for ``controller_mutation_rate``. The client quotas
themselves are metadata (AlterClientQuotas), not properties. The connection quotas are
:mod:`pydmq.config.connection_quotas`.
"""

from __future__ import annotations

from pydmq.config.connection_quotas import CONNECTION_QUOTA_CONFIGS, pop_listener_limits
from pydmq.config.definitions import ConfigDef, at_least
from pydmq.config.definitions import ConfigType as T

__all__ = ["QUOTA_CONFIGS", "pop_listener_limits"]

QUOTA_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef(
        "quota.window.num",
        T.INT,
        11,
        "Samples kept in memory for client quotas.",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        "quota.window.size.seconds",
        T.INT,
        1,
        "Time span of each sample of client quotas.",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        "controller.quota.window.num",
        T.INT,
        11,
        "Samples kept in memory for controller mutation quotas.",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        "controller.quota.window.size.seconds",
        T.INT,
        1,
        "Time span of each sample of controller mutation quotas.",
        at_least(1),
        read_only=True,
    ),
    *CONNECTION_QUOTA_CONFIGS,
)
