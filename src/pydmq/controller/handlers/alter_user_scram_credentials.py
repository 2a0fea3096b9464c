"""AlterUserScramCredentials (key 51), v0, forwarded by brokers (a single node's in process):
runs :func:`~pydmq.controller.operations.scram.alter_user_scram_credentials` and answers one
result per user; NOT_CONTROLLER / REQUEST_TIMED_OUT for every user when the operation cannot
run or commit."""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller.handlers._common import AdminController, run_operation
from pydmq.controller.operations.scram import (
    ScramDeletion,
    ScramUpsertion,
    alter_user_scram_credentials,
)
from pydmq.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)

__all__ = ["make_handler"]


def make_handler(controller: AdminController) -> ApiHandlerSpec:
    async def handle(
        ctx: RequestContext[object], request: AlterUserScramCredentialsRequest
    ) -> AlterUserScramCredentialsResponse:
        deletions = [ScramDeletion(d.name, d.mechanism) for d in request.deletions]
        upsertions = [
            ScramUpsertion(u.name, u.mechanism, u.iterations, u.salt, u.salted_password)
            for u in request.upsertions
        ]
        results, code, message = await run_operation(
            controller, lambda image: alter_user_scram_credentials(image, deletions, upsertions)
        )
        if results is None:
            users = dict.fromkeys([*(d.name for d in deletions), *(u.name for u in upsertions)])
            return AlterUserScramCredentialsResponse(
                results=[
                    AlterUserScramCredentialsResult(
                        user=user, error_code=code, error_message=message
                    )
                    for user in users
                ]
            )
        return AlterUserScramCredentialsResponse(
            results=[
                AlterUserScramCredentialsResult(
                    user=r.user, error_code=r.error_code, error_message=r.error_message
                )
                for r in results
            ]
        )

    return ApiHandlerSpec(51, 0, 0, handle, "AlterUserScramCredentials")
