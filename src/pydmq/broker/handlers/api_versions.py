"""ApiVersions (key 18), v0-v4.

Derived from the registered handlers: every key is advertised with exactly the version range
its handler declares. v3+ requests carry the client's software name/version (validated like
Kafka: INVALID_REQUEST when they are not ``[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?``).
An unsupported request version gets UNSUPPORTED_VERSION (35) in a v0 body (see dispatcher);
v3+ responses list the supported features (``metadata.version``; from v4 also features whose
minimum is 0, per KAFKA-17011: ``transaction.version`` 0-2, ``group.version`` 0) and the
cluster's finalized levels (its metadata's ``FeatureLevelRecord``s: ``metadata.version`` and,
for a cluster formatted by this version, ``transaction.version`` 2, which makes Kafka 4.x
clients use transactions v2, KIP-890).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.features import SUPPORTED_FEATURES
from pydmq.protocol.messages.api_versions import (
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["HANDLER", "unsupported_version_response"]

_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def _api_keys(handlers: Mapping[int, ApiHandlerSpec]) -> list[ApiVersion]:
    """The versions of ``handlers``' APIs, by key."""
    return [
        ApiVersion(
            api_key=spec.api_key,
            min_version=spec.min_version if spec.advertised_min is None else spec.advertised_min,
            max_version=spec.max_version,
        )
        for spec in sorted(handlers.values(), key=lambda s: s.api_key)
    ]


def unsupported_version_response(handlers: Mapping[int, ApiHandlerSpec]) -> ApiVersionsResponse:
    """The answer to an ApiVersions version outside v0-v4, on any listener of a node:
    ``handlers``' APIs (a broker's client listeners', on every listener of the node; a
    controller-only node's own)."""
    return ApiVersionsResponse(
        error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=_api_keys(handlers)
    )


def handle(ctx: BrokerContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    if ctx.api_version >= 3 and not (
        _SOFTWARE.match(request.client_software_name or "")
        and _SOFTWARE.match(request.client_software_version or "")
    ):
        return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST)
    response = ApiVersionsResponse(
        error_code=ErrorCode.NONE, api_keys=_api_keys(ctx.broker.served_apis(ctx.listener))
    )
    if ctx.api_version >= 3:
        response.supported_features = [
            SupportedFeatureKey(name=name, min_version=low, max_version=high)
            for name, (low, high) in SUPPORTED_FEATURES.items()
            # KAFKA-17011: a minimum of 0 is only safe to send from v4 on.
            if low > 0 or ctx.api_version >= 4
        ]
        finalized = ctx.broker.metadata.finalized_features()
        response.finalized_features_epoch = finalized.epoch
        response.finalized_features = [
            FinalizedFeatureKey(name=name, min_version_level=level, max_version_level=level)
            for name, level in sorted(finalized.levels.items())
            if level > 0
        ]
    return response


HANDLER = ApiHandlerSpec(18, 0, 4, handle, "ApiVersions")
