"""AlterUserScramCredentials (key 51), v0: add, replace or delete users' SCRAM-SHA-256 and
SCRAM-SHA-512 credentials.

Forwarded to the controller (the active one in cluster mode, REQUEST_TIMED_OUT per user when
none answers; a single node's own, in process), which checks them as Kafka does and commits
UserScramCredentialRecord / RemoveUserScramCredentialRecord
(:mod:`pydmq.controller.operations.scram`); every node's SCRAM logins see the change once it
has the records. The request carries the client-computed salted password, never the password.
"""

from __future__ import annotations

from collections.abc import Awaitable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._forward import forward_to_controller
from pydmq.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)

__all__ = ["HANDLER"]


def handle(
    ctx: BrokerContext, request: AlterUserScramCredentialsRequest
) -> Awaitable[AlterUserScramCredentialsResponse]:
    def unavailable(code: int, message: str) -> AlterUserScramCredentialsResponse:
        users = dict.fromkeys(
            [*(d.name for d in request.deletions), *(u.name for u in request.upsertions)]
        )
        return AlterUserScramCredentialsResponse(
            results=[
                AlterUserScramCredentialsResult(user=user, error_code=code, error_message=message)
                for user in users
            ]
        )

    return forward_to_controller(ctx, request, unavailable)


HANDLER = ApiHandlerSpec(51, 0, 0, handle, "AlterUserScramCredentials")
