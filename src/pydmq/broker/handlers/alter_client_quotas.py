"""AlterClientQuotas (key 49), v0-v1: set and remove client quotas.

Forwarded to the controller at the client's version (the active controller in cluster mode,
REQUEST_TIMED_OUT per entity when none answers; a single node's own, in process), which
checks every entity and value with Kafka's rules and texts and commits ClientQuotaRecords
(:mod:`pydmq.controller.handlers.alter_client_quotas`). Every broker then enforces the new
quotas (:mod:`pydmq.quotas.manager`). v1 is flexible.
"""

from __future__ import annotations

from collections.abc import Awaitable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._forward import forward_to_controller
from pydmq.protocol.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    EntityData,
    EntryDataResponse,
)

__all__ = ["HANDLER"]


def handle(
    ctx: BrokerContext, request: AlterClientQuotasRequest
) -> Awaitable[AlterClientQuotasResponse]:
    def unavailable(code: int, message: str) -> AlterClientQuotasResponse:
        return AlterClientQuotasResponse(
            entries=[
                EntryDataResponse(
                    error_code=code,
                    error_message=message,
                    entity=[
                        EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                        for e in entry.entity
                    ],
                )
                for entry in request.entries
            ]
        )

    return forward_to_controller(ctx, request, unavailable)


HANDLER = ApiHandlerSpec(49, 0, 1, handle, "AlterClientQuotas")
