"""DescribeClientQuotas (key 48), v0-v1: the client quotas matching a filter.

Answered by every broker from the quotas it enforces (a single node's metadata image, a
cluster broker's copy from the controller's UpdateMetadata), with Kafka's filter rules and
errors (:mod:`pydmq.quotas.describe`): components EXACT / DEFAULT / SPECIFIED per entity type,
``strict``; a bad filter answers its error and null entries. The success message is "" as
Kafka sends it. v1 is flexible.
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.describe_client_quotas import (
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    EntityData,
    EntryData,
    ValueData,
)
from pydmq.quotas.describe import FilterComponent, QuotaFilterError, describe_client_quotas

__all__ = ["HANDLER"]


def handle(
    ctx: BrokerContext, request: DescribeClientQuotasRequest
) -> DescribeClientQuotasResponse:
    components = [FilterComponent(c.entity_type, c.match_type, c.match) for c in request.components]
    try:
        found = describe_client_quotas(ctx.broker.quotas.client_quotas, components, request.strict)
    except QuotaFilterError as exc:
        return DescribeClientQuotasResponse(
            error_code=exc.error_code, error_message=exc.message, entries=None
        )
    return DescribeClientQuotasResponse(
        error_code=ErrorCode.NONE,
        error_message="",
        entries=[
            EntryData(
                entity=[EntityData(entity_type=k, entity_name=n) for k, n in entity],
                values=[ValueData(key=key, value=value) for key, value in values.items()],
            )
            for entity, values in found
        ],
    )


HANDLER = ApiHandlerSpec(48, 0, 1, handle, "DescribeClientQuotas")
