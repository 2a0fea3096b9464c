"""The web console's properties (``pydmq.console.*``): how often the node samples the
figures the console plots and computes rates from, and how long it keeps them.

The console (:mod:`pydmq.console`) is served at ``/`` on the HTTP listener; its samples are
read from the node's metrics registry (consumer lag per group and partition, records and
bytes in and out per topic) into a ring buffer of ``history / interval`` samples.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydmq.config.definitions import ConfigDef, ConfigType, ConfigValues, at_least

__all__ = ["CONSOLE_CONFIGS", "ConsoleSettings"]

SAMPLE_INTERVAL = "pydmq.console.sample.interval.ms"
HISTORY = "pydmq.console.history.ms"

CONSOLE_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef(
        SAMPLE_INTERVAL,
        ConfigType.INT,
        5000,
        "How often the node samples consumer lag and the per-topic counters the web console "
        "plots and computes rates from (pydmq).",
        at_least(100),
        read_only=True,
    ),
    ConfigDef(
        HISTORY,
        ConfigType.INT,
        600_000,
        "How far back the web console's samples (its lag plot) reach (pydmq).",
        at_least(1000),
        read_only=True,
    ),
)


@dataclass(frozen=True, slots=True)
class ConsoleSettings:
    """The console's settings, read once at start-up."""

    sample_interval_s: float = 5.0
    history_s: float = 600.0

    @property
    def samples_kept(self) -> int:
        """The ring buffer's length."""
        return max(2, int(self.history_s / self.sample_interval_s) + 1)

    @classmethod
    def from_config(cls, config: ConfigValues) -> ConsoleSettings:
        return cls(
            sample_interval_s=config.get_int(SAMPLE_INTERVAL) / 1000,
            history_s=config.get_int(HISTORY) / 1000,
        )
