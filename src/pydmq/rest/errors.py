"""The REST admin API's errors: one exception carrying the envelope's code, its HTTP status,
and the mapping from Kafka error codes.

The envelope codes (and statuses): INVALID_INPUT 400, INVALID_TOPIC_NAME 400 (with
``details.field``), INVALID_PARTITION_COUNT 400, UNAUTHORIZED 401, FORBIDDEN 403, NOT_FOUND
404, CONFLICT 409, RATE_LIMITED 429, INTERNAL_ERROR 500, SERVICE_UNAVAILABLE 503.
"""

from __future__ import annotations

from typing import Any

from pydmq.http.messages import HttpResponse, error_response
from pydmq.protocol.errors import ErrorCode

__all__ = ["RestError", "kafka_error"]

STATUS = {
    "INVALID_INPUT": 400,
    "INVALID_TOPIC_NAME": 400,
    "INVALID_PARTITION_COUNT": 400,
    "UNAUTHORIZED": 401,
    "FORBIDDEN": 403,
    "NOT_FOUND": 404,
    "CONFLICT": 409,
    "RATE_LIMITED": 429,
    "INTERNAL_ERROR": 500,
    "SERVICE_UNAVAILABLE": 503,
}

# Kafka error code -> envelope code (and the details field it concerns, if any).
_KAFKA: dict[int, tuple[str, str | None]] = {
    ErrorCode.INVALID_TOPIC_EXCEPTION: ("INVALID_TOPIC_NAME", "name"),
    ErrorCode.INVALID_PARTITIONS: ("INVALID_PARTITION_COUNT", "partitions"),
    ErrorCode.INVALID_REPLICATION_FACTOR: ("INVALID_INPUT", "replication_factor"),
    ErrorCode.INVALID_REPLICA_ASSIGNMENT: ("INVALID_INPUT", "replication_factor"),
    ErrorCode.INVALID_CONFIG: ("INVALID_INPUT", "configs"),
    ErrorCode.INVALID_REQUEST: ("INVALID_INPUT", None),
    ErrorCode.POLICY_VIOLATION: ("INVALID_INPUT", None),
    ErrorCode.INVALID_GROUP_ID: ("INVALID_INPUT", "group_id"),
    ErrorCode.INVALID_COMMIT_OFFSET_SIZE: ("INVALID_INPUT", None),
    ErrorCode.INVALID_TIMESTAMP: ("INVALID_INPUT", "timestamp"),
    ErrorCode.TOPIC_ALREADY_EXISTS: ("CONFLICT", None),
    ErrorCode.NON_EMPTY_GROUP: ("CONFLICT", None),
    ErrorCode.REBALANCE_IN_PROGRESS: ("CONFLICT", None),
    ErrorCode.UNKNOWN_MEMBER_ID: ("CONFLICT", None),
    ErrorCode.ILLEGAL_GENERATION: ("CONFLICT", None),
    ErrorCode.REASSIGNMENT_IN_PROGRESS: ("CONFLICT", None),
    ErrorCode.TOPIC_DELETION_DISABLED: ("CONFLICT", None),
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ("NOT_FOUND", None),
    ErrorCode.UNKNOWN_TOPIC_ID: ("NOT_FOUND", None),
    ErrorCode.GROUP_ID_NOT_FOUND: ("NOT_FOUND", None),
    ErrorCode.RESOURCE_NOT_FOUND: ("NOT_FOUND", None),
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: ("FORBIDDEN", None),
    ErrorCode.GROUP_AUTHORIZATION_FAILED: ("FORBIDDEN", None),
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: ("FORBIDDEN", None),
    ErrorCode.SASL_AUTHENTICATION_FAILED: ("UNAUTHORIZED", None),
    ErrorCode.THROTTLING_QUOTA_EXCEEDED: ("RATE_LIMITED", None),
    ErrorCode.REQUEST_TIMED_OUT: ("SERVICE_UNAVAILABLE", None),
    ErrorCode.NOT_CONTROLLER: ("SERVICE_UNAVAILABLE", None),
    ErrorCode.LEADER_NOT_AVAILABLE: ("SERVICE_UNAVAILABLE", None),
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ("SERVICE_UNAVAILABLE", None),
    ErrorCode.COORDINATOR_NOT_AVAILABLE: ("SERVICE_UNAVAILABLE", None),
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: ("SERVICE_UNAVAILABLE", None),
    ErrorCode.NOT_COORDINATOR: ("SERVICE_UNAVAILABLE", None),
    ErrorCode.KAFKA_STORAGE_ERROR: ("SERVICE_UNAVAILABLE", None),
    ErrorCode.BROKER_NOT_AVAILABLE: ("SERVICE_UNAVAILABLE", None),
}


class RestError(Exception):
    """An answer in the error envelope: raised by a resource's handler, rendered by
    :func:`pydmq.rest.api.serve`."""

    def __init__(
        self,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = dict(details or {})
        self.status = STATUS[code] if status is None else status

    def response(self, request_id: str) -> HttpResponse:
        headers = [("retry-after", "1")] if self.code == "SERVICE_UNAVAILABLE" else []
        return error_response(
            self.status, self.code, self.message, request_id, self.details, headers
        )


def kafka_error(error_code: int, message: str | None, **details: Any) -> RestError:
    """The envelope error for a Kafka error code (INTERNAL_ERROR for one not in the table),
    with the Kafka error's name in ``details.kafka_error``."""
    code, field = _KAFKA.get(error_code, ("INTERNAL_ERROR", None))
    try:
        name = ErrorCode(error_code).name
    except ValueError:
        name = str(error_code)
    full: dict[str, Any] = {"kafka_error": name, **details}
    if field is not None:
        full.setdefault("field", field)
    return RestError(code, message or name, full)
