"""Rate limits and the OpenAPI document of the REST admin API against a real ``pydmq
serve``; the rate-limit gate and the error mapping on their own."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from openapi_spec_validator import validate

from pydmq.http.messages import HttpRequest
from pydmq.http.ratelimit import RateLimitGate
from pydmq.protocol.errors import ErrorCode
from pydmq.rest.errors import STATUS, kafka_error

pytestmark = pytest.mark.timeout(120)


def _fresh_window(rest: Any, path: str) -> None:
    """Wait for a new one-minute window if this one ends within 10 s (so a burst below
    falls in one window)."""
    reset = int(rest.request("GET", path).headers["x-ratelimit-reset"])
    if reset <= 10:
        time.sleep(reset + 0.5)


def test_rate_limits(tmp_path: Path, start: Any, client: Any) -> None:
    broker = start(
        tmp_path,
        {"pydmq.rest.admin.requests.per.minute": 3, "pydmq.rest.monitoring.requests.per.minute": 5},
    )
    try:
        rest = client(broker.http_port)
        _fresh_window(rest, "/v1/health/live")
        answers = [rest.request("GET", "/v1/admin/topics") for _ in range(4)]
        assert [a.status for a in answers] == [200, 200, 200, 429]
        assert [a.headers["x-ratelimit-remaining"] for a in answers] == ["2", "1", "0", "0"]
        assert {a.headers["x-ratelimit-limit"] for a in answers} == {"3"}
        limited = answers[3]
        assert limited.error["code"] == "RATE_LIMITED"
        assert limited.error["request_id"] == limited.headers["x-request-id"]
        assert 1 <= int(limited.headers["retry-after"]) <= 60
        assert 1 <= int(limited.headers["x-ratelimit-reset"]) <= 60
        # the monitoring group has its own count
        live = rest.request("GET", "/v1/health/live")
        assert live.status == 200 and live.headers["x-ratelimit-limit"] == "5"
    finally:
        broker.stop()


def _request(host: str, user: str | None = None) -> HttpRequest:
    return HttpRequest("GET", "/", {}, [], b"", host, 1, "id", user=user)


def test_gate_windows_and_clients() -> None:
    now = [120.0]
    gate = RateLimitGate({"admin": 2, "monitoring": 0}, clock=lambda: now[0])
    assert gate.admit(_request("a"), "monitoring").headers == []  # 0: not limited
    assert gate.admit(_request("a"), "admin").refusal is None
    assert gate.admit(_request("a"), "admin").refusal is None
    refused = gate.admit(_request("a"), "admin")
    assert refused.refusal is not None and refused.refusal.status == 429
    assert dict(refused.headers)["x-ratelimit-reset"] == "60"
    assert gate.admit(_request("b"), "admin").refusal is None  # another address
    assert gate.admit(_request("a", user="alice"), "admin").refusal is None  # a user
    now[0] = 179.5
    assert dict(gate.admit(_request("c"), "admin").headers)["x-ratelimit-reset"] == "1"
    now[0] = 180.0  # the next window
    assert gate.admit(_request("a"), "admin").refusal is None


def test_kafka_error_mapping() -> None:
    cases = {
        ErrorCode.TOPIC_ALREADY_EXISTS: "CONFLICT",
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "NOT_FOUND",
        ErrorCode.INVALID_TOPIC_EXCEPTION: "INVALID_TOPIC_NAME",
        ErrorCode.INVALID_PARTITIONS: "INVALID_PARTITION_COUNT",
        ErrorCode.INVALID_CONFIG: "INVALID_INPUT",
        ErrorCode.TOPIC_AUTHORIZATION_FAILED: "FORBIDDEN",
        ErrorCode.SASL_AUTHENTICATION_FAILED: "UNAUTHORIZED",
        ErrorCode.THROTTLING_QUOTA_EXCEEDED: "RATE_LIMITED",
        ErrorCode.REQUEST_TIMED_OUT: "SERVICE_UNAVAILABLE",
        ErrorCode.UNKNOWN_SERVER_ERROR: "INTERNAL_ERROR",
    }
    for kafka, code in cases.items():
        error = kafka_error(kafka, None)
        assert (error.code, error.status) == (code, STATUS[code])
        assert error.details["kafka_error"] == ErrorCode(kafka).name
    assert kafka_error(ErrorCode.INVALID_TOPIC_EXCEPTION, None).details["field"] == "name"
    unavailable = kafka_error(ErrorCode.NOT_CONTROLLER, "x").response("rid")
    assert unavailable.status == 503 and ("retry-after", "1") in unavailable.headers


def test_openapi_document(rest: Any) -> None:
    answer = rest.request("GET", "/v1/openapi.json")
    assert answer.status == 200
    document = answer.json
    validate(document)
    assert document["openapi"] == "3.1.0"
    paths = document["paths"]
    expected = {
        "/v1/admin/topics": {"get", "post"},
        "/v1/admin/topics/{name}": {"get", "delete"},
        "/v1/admin/topics/{name}/configs": {"put"},
        "/v1/admin/groups": {"get"},
        "/v1/admin/groups/{group_id}": {"get"},
        "/v1/admin/groups/{group_id}/offsets/reset": {"post"},
        "/v1/admin/cluster/brokers": {"get"},
        "/v1/admin/cluster/controller": {"get"},
        "/v1/admin/cluster/quorum": {"get"},
        "/v1/openapi.json": {"get"},
        "/metrics": {"get"},
        "/v1/health/live": {"get"},
        "/v1/health/ready": {"get"},
    }
    assert {p: set(ops) for p, ops in paths.items()} == expected
    create = paths["/v1/admin/topics"]["post"]
    assert "201" in create["responses"] and "409" in create["responses"]
    assert create["requestBody"]["content"]["application/json"]["schema"]["required"] == ["name"]
    error = create["responses"]["409"]["content"]["application/json"]["schema"]
    assert error == {"$ref": "#/components/schemas/Error"}
