"""The client quota properties (Kafka's names): the windows the quota managers measure over.

``quota.window.num`` samples of ``quota.window.size.seconds`` for the byte-rate and request
quotas; ``controller.quota.window.*`` for ``controller_mutation_rate``. The quotas themselves
are metadata (AlterClientQuotas), not properties.
"""

from __future__ import annotations

from pydmq.config.definitions import ConfigDef, at_least
from pydmq.config.definitions import ConfigType as T

__all__ = ["QUOTA_CONFIGS"]

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
)
