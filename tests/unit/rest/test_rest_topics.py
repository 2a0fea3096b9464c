"""The REST admin API's topics against a real ``pydmq serve``: create, list, describe, change
configs, delete; and the envelope of every error a topic request can meet."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.timeout(120)


def test_topic_lifecycle(rest: Any) -> None:
    created = rest.request(
        "POST",
        "/v1/admin/topics",
        {
            "name": "orders",
            "partitions": 3,
            "replication_factor": 1,
            "configs": {"retention.ms": 3600000},
        },
    )
    assert created.status == 201, created.body
    body = created.json
    assert body["name"] == "orders"
    assert body["partitions"] == 3
    assert body["replication_factor"] == 1
    assert body["created_at"].endswith("Z")
    assert body["configs"]["retention.ms"] == "3600000"
    assert created.headers["location"] == "/v1/admin/topics/orders"

    listed = rest.request("GET", "/v1/admin/topics")
    assert listed.status == 200
    names = [t["name"] for t in listed.json["topics"]]
    assert "orders" in names
    assert "__consumer_offsets" not in names
    internal = rest.request("GET", "/v1/admin/topics?include_internal=true").json["topics"]
    orders = next(t for t in internal if t["name"] == "orders")
    assert (orders["partitions"], orders["replication_factor"]) == (3, 1)

    described = rest.request("GET", "/v1/admin/topics/orders")
    assert described.status == 200
    topic = described.json
    assert topic["topic_id"] == body["topic_id"]
    assert [p["id"] for p in topic["partitions"]] == [0, 1, 2]
    for p in topic["partitions"]:
        assert p["leader"] == 1 and p["replicas"] == [1] and p["isr"] == [1]
    assert topic["configs"]["retention.ms"] == {
        "value": "3600000",
        "source": "DYNAMIC_TOPIC_CONFIG",
        "read_only": False,
    }

    changed = rest.request(
        "PUT",
        "/v1/admin/topics/orders/configs",
        {"configs": {"retention.ms": None, "cleanup.policy": "compact"}},
    )
    assert changed.status == 200, changed.body
    configs = rest.request("GET", "/v1/admin/topics/orders").json["configs"]
    assert configs["cleanup.policy"]["value"] == "compact"
    assert configs["retention.ms"]["source"] != "DYNAMIC_TOPIC_CONFIG"

    deleted = rest.request("DELETE", "/v1/admin/topics/orders")
    assert deleted.status == 204 and deleted.body == b""
    gone = rest.request("GET", "/v1/admin/topics/orders")
    assert gone.status == 404
    assert gone.error["code"] == "NOT_FOUND"


def _check_envelope(answer: Any, status: int, code: str) -> dict[str, Any]:
    assert answer.status == status, answer.body
    error: dict[str, Any] = answer.error
    assert error["code"] == code
    assert error["message"]
    assert error["request_id"] == answer.headers["x-request-id"]
    return error


@pytest.mark.parametrize(
    ("body", "status", "code", "field"),
    [
        ({"name": "bad name!", "partitions": 1}, 400, "INVALID_TOPIC_NAME", "name"),
        ({"name": "a" * 250, "partitions": 1}, 400, "INVALID_TOPIC_NAME", "name"),
        ({"partitions": 1}, 400, "INVALID_TOPIC_NAME", "name"),
        ({"name": "p0", "partitions": 0}, 400, "INVALID_PARTITION_COUNT", "partitions"),
        ({"name": "p1", "partitions": "three"}, 400, "INVALID_PARTITION_COUNT", "partitions"),
        ({"name": "r9", "replication_factor": 9}, 400, "INVALID_INPUT", "replication_factor"),
        ({"name": "c1", "configs": {"no.such.config": "1"}}, 400, "INVALID_INPUT", "configs"),
        ({"name": "c2", "configs": ["x"]}, 400, "INVALID_INPUT", "configs"),
        ({"name": "__consumer_offsets"}, 400, "INVALID_INPUT", None),
    ],
)
def test_create_errors(rest: Any, body: Any, status: int, code: str, field: str | None) -> None:
    error = _check_envelope(rest.request("POST", "/v1/admin/topics", body), status, code)
    if field is not None:
        assert error["details"]["field"] == field


def test_body_that_is_not_json(rest: Any) -> None:
    answer = rest.request("POST", "/v1/admin/topics", raw=b"{not json")
    _check_envelope(answer, 400, "INVALID_INPUT")
    answer = rest.request("POST", "/v1/admin/topics", [1, 2])
    _check_envelope(answer, 400, "INVALID_INPUT")


def test_conflict_and_not_found(rest: Any) -> None:
    assert rest.request("POST", "/v1/admin/topics", {"name": "twice"}).status == 201
    error = _check_envelope(
        rest.request("POST", "/v1/admin/topics", {"name": "twice"}), 409, "CONFLICT"
    )
    assert error["details"]["kafka_error"] == "TOPIC_ALREADY_EXISTS"
    _check_envelope(rest.request("GET", "/v1/admin/topics/none"), 404, "NOT_FOUND")
    _check_envelope(rest.request("DELETE", "/v1/admin/topics/none"), 404, "NOT_FOUND")
    _check_envelope(
        rest.request("PUT", "/v1/admin/topics/none/configs", {"configs": {"retention.ms": 1}}),
        404,
        "NOT_FOUND",
    )
    _check_envelope(
        rest.request("PUT", "/v1/admin/topics/twice/configs", {"configs": {}}),
        400,
        "INVALID_INPUT",
    )
    _check_envelope(rest.request("GET", "/v1/admin/nothing"), 404, "NOT_FOUND")
    answer = rest.request("PATCH", "/v1/admin/topics/twice")
    _check_envelope(answer, 405, "METHOD_NOT_ALLOWED")
    assert answer.headers["allow"] == "DELETE, GET, HEAD"


def test_every_answer_has_a_request_id_and_rate_headers(rest: Any) -> None:
    ids = set()
    for method, path in [
        ("GET", "/v1/admin/topics"),
        ("GET", "/v1/admin/topics/none"),
        ("GET", "/v1/health/live"),
        ("GET", "/v1/openapi.json"),
    ]:
        answer = rest.request(method, path)
        ids.add(answer.headers["x-request-id"])
        for header in ("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"):
            assert header in answer.headers, (path, answer.headers)
    assert len(ids) == 4
