"""DescribeUserScramCredentials (key 50), v0: the mechanisms and iterations of users' SCRAM
credentials (never the keys), from this node's metadata.

No users (null or empty) -> every user with a credential; a named user without one ->
RESOURCE_NOT_FOUND; a user named twice -> DUPLICATE_RESOURCE for that user, as Kafka answers.
"""

from __future__ import annotations

from collections import Counter

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.describe_user_scram_credentials import (
    CredentialInfo,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)

__all__ = ["HANDLER"]


def handle(
    ctx: BrokerContext, request: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    by_user: dict[str, list[CredentialInfo]] = {}
    for (user, mechanism), data in sorted(ctx.broker.scram_credentials().items()):
        by_user.setdefault(user, []).append(
            CredentialInfo(mechanism=mechanism, iterations=data.iterations)
        )
    if not request.users:
        return DescribeUserScramCredentialsResponse(
            results=[
                DescribeUserScramCredentialsResult(user=user, credential_infos=infos)
                for user, infos in by_user.items()
            ]
        )
    counts = Counter(u.name for u in request.users)
    results: list[DescribeUserScramCredentialsResult] = []
    for name in dict.fromkeys(u.name for u in request.users):
        if counts[name] > 1:
            results.append(
                DescribeUserScramCredentialsResult(
                    user=name,
                    error_code=ErrorCode.DUPLICATE_RESOURCE,
                    error_message="Cannot describe SCRAM credentials for the same user twice "
                    "in a single request",
                )
            )
        elif name not in by_user:
            results.append(
                DescribeUserScramCredentialsResult(
                    user=name,
                    error_code=ErrorCode.RESOURCE_NOT_FOUND,
                    error_message="Attempt to describe a user credential that does not exist",
                )
            )
        else:
            results.append(
                DescribeUserScramCredentialsResult(user=name, credential_infos=by_user[name])
            )
    return DescribeUserScramCredentialsResponse(results=results)


HANDLER = ApiHandlerSpec(50, 0, 0, handle, "DescribeUserScramCredentials")
