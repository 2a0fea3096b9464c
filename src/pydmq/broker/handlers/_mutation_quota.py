"""The controller mutation quota of CreateTopics, CreatePartitions and DeleteTopics (Kafka's
``controller_mutation_rate``, KIP-599), applied by the broker that receives the request,
where the client's principal is known, before it forwards what remains to the controller.

Each topic's partitions are taken from the client's token bucket in request order
(:mod:`pydmq.quotas.controller_mutation`); from the strict versions on (CreateTopics v6,
CreatePartitions v3, DeleteTopics v5) a topic met with an empty bucket is refused with
THROTTLING_QUOTA_EXCEEDED and not forwarded, older versions are all accepted; either way the
response carries the throttle time and the connection is muted for it. ``validate_only``
requests count too, and the refusal has no message: both as Kafka 4.4 answers.
"""

from __future__ import annotations

from typing import Any

from pydmq.broker.context import BrokerContext
from pydmq.quotas.controller_mutation import ControllerMutationQuota

__all__ = ["THROTTLED", "finish", "mutation_quota"]

THROTTLED: str | None = None
"""The message of a topic refused THROTTLING_QUOTA_EXCEEDED: none, as Kafka 4.4 answers."""


def mutation_quota(ctx: BrokerContext, strict_since: int) -> ControllerMutationQuota | None:
    """The request's quota, None when the client has none (nothing is looked up without
    any ``controller_mutation_rate`` configured)."""
    manager = ctx.broker.quotas.controller_mutation
    if not manager.enabled:
        return None
    return manager.new_quota(
        ctx.principal.name, ctx.client_id or "", ctx.api_version >= strict_since
    )


def finish(ctx: BrokerContext, quota: ControllerMutationQuota | None, response: Any) -> None:
    """Put the quota's throttle time in the response and the context (muting the client)."""
    if quota is not None and quota.throttle_time_ms:
        ctx.throttle_time_ms = max(ctx.throttle_time_ms, quota.throttle_time_ms)
        response.throttle_time = max(response.throttle_time, quota.throttle_time_ms)
