"""AlterClientQuotas (key 49), v0-v1, forwarded by brokers (a single node's in process):
set and remove client quotas of user / client-id / ip entities as ClientQuotaRecords.

The checks and the records are :func:`~pydmq.controller.operations.alter_client_quotas`'s;
each distinct entity is answered once, with the pairs it was stored under. When the
controller cannot run or commit the operation, every entity gets its error (NOT_CONTROLLER,
REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR). v1 is flexible.
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller.handlers._common import AdminController, run_operation
from pydmq.controller.operations import ClientQuotaAlteration, alter_client_quotas
from pydmq.metadata.image import quota_entity
from pydmq.protocol.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    EntityData,
    EntryDataResponse,
)

__all__ = ["make_handler"]


def make_handler(controller: AdminController) -> ApiHandlerSpec:
    async def handle(
        ctx: RequestContext[object], request: AlterClientQuotasRequest
    ) -> AlterClientQuotasResponse:
        alterations = [
            ClientQuotaAlteration(
                [(e.entity_type, e.entity_name) for e in entry.entity],
                [(op.key, None if op.remove else op.value) for op in entry.ops],
            )
            for entry in request.entries
        ]
        results, error, message = await run_operation(
            controller,
            lambda image: alter_client_quotas(
                image, alterations, validate_only=request.validate_only
            ),
        )
        if results is None:
            answers = [
                (quota_entity(dict(a.entity).items()), int(error), message) for a in alterations
            ]
        else:
            answers = [(r.entity, r.error_code, r.error_message) for r in results]
        return AlterClientQuotasResponse(
            entries=[
                EntryDataResponse(
                    error_code=code,
                    error_message=text,
                    entity=[EntityData(entity_type=k, entity_name=n) for k, n in entity],
                )
                for entity, code, text in answers
            ]
        )

    return ApiHandlerSpec(49, 0, 1, handle, "AlterClientQuotas")
