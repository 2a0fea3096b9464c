"""The REST admin API's properties (``pydmq.rest.*``): per-client rate limits and how long an
``Idempotency-Key`` is remembered.

Rate limits count requests per client (the remote address, or the authenticated user when
HTTP Basic is on) per route group in fixed one-minute windows: ``admin`` (``/v1/admin/...``)
and ``monitoring`` (``/metrics``, health, ``/v1/openapi.json``). 0 turns a group's limit off.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydmq.config.definitions import ConfigDef, ConfigType, ConfigValues, at_least

__all__ = ["REST_CONFIGS", "RestSettings"]

ADMIN_RATE = "pydmq.rest.admin.requests.per.minute"
MONITORING_RATE = "pydmq.rest.monitoring.requests.per.minute"
IDEMPOTENCY_RETENTION = "pydmq.rest.idempotency.retention.ms"

REST_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef(
        ADMIN_RATE,
        ConfigType.INT,
        100,
        "Requests per minute one client may make to the REST admin API (/v1/admin); beyond "
        "them it is answered 429 RATE_LIMITED until the minute ends; 0 = no limit (pydmq).",
        at_least(0),
        read_only=True,
    ),
    ConfigDef(
        MONITORING_RATE,
        ConfigType.INT,
        1000,
        "Requests per minute one client may make to the monitoring endpoints (/metrics, "
        "/v1/health/*, /v1/openapi.json); 0 = no limit (pydmq).",
        at_least(0),
        read_only=True,
    ),
    ConfigDef(
        IDEMPOTENCY_RETENTION,
        ConfigType.LONG,
        86_400_000,
        "How long the answer to a REST admin write sent with an Idempotency-Key is kept and "
        "replayed to a repeat of that request (pydmq).",
        at_least(1),
        read_only=True,
    ),
)


@dataclass(frozen=True, slots=True)
class RestSettings:
    """The REST admin API's settings, read once at start-up."""

    admin_per_minute: int = 100
    monitoring_per_minute: int = 1000
    idempotency_retention_ms: int = 86_400_000

    @classmethod
    def from_config(cls, config: ConfigValues) -> RestSettings:
        return cls(
            admin_per_minute=config.get_int(ADMIN_RATE),
            monitoring_per_minute=config.get_int(MONITORING_RATE),
            idempotency_retention_ms=config.get_int(IDEMPOTENCY_RETENTION),
        )
