"""ApiVersions (key 18), v0-v4, on a controller listener.

Advertises exactly the APIs this listener serves (raft RPCs, broker lifecycle, forwarded admin
requests), not the broker's client APIs: a client that lands on a controller listener learns
it cannot produce there. Validation and features as the broker's ApiVersions.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pydmq.api.handler import ApiHandlerSpec, RequestContext
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
    from pydmq.controller.runtime import ControllerRuntime

__all__ = ["make_handler"]

# Kafka's rule for client_software_name/version (v3+).
_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def make_handler(runtime: ControllerRuntime) -> ApiHandlerSpec:
    def api_keys() -> list[ApiVersion]:
        return [
            ApiVersion(api_key=s.api_key, min_version=s.min_version, max_version=s.max_version)
            for s in sorted(runtime.handler_specs().values(), key=lambda s: s.api_key)
        ]

    def handle(ctx: RequestContext[object], request: ApiVersionsRequest) -> ApiVersionsResponse:
        if ctx.api_version >= 3 and not (
            _SOFTWARE.match(request.client_software_name or "")
            and _SOFTWARE.match(request.client_software_version or "")
        ):
            return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST)
        response = ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=api_keys())
        if ctx.api_version >= 3:
            image = runtime.image
            response.supported_features = [
                SupportedFeatureKey(name=name, min_version=low, max_version=high)
                for name, (low, high) in SUPPORTED_FEATURES.items()
                # KAFKA-17011: a minimum of 0 is only safe to send from v4 on.
                if low > 0 or ctx.api_version >= 4
            ]
            response.finalized_features_epoch = max(0, image.offset)
            response.finalized_features = [
                FinalizedFeatureKey(name=name, min_version_level=level, max_version_level=level)
                for name, level in sorted(image.features.items())
                if level > 0
            ]
        return response

    return ApiHandlerSpec(18, 0, 4, handle, "ApiVersions")
