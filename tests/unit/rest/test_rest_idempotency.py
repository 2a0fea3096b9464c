"""Idempotency-Key on the REST admin API's writes against a real ``pydmq serve``: the same
request replays the first answer (also after a restart of the broker), a different request
with the same key is refused 422; and the store's expiry and torn lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pydmq.rest.idempotency import FILE_NAME, FileAnswerStore, StoredAnswer

pytestmark = pytest.mark.timeout(120)


def test_replay_across_a_restart(tmp_path: Path, start: Any, client: Any, restart: Any) -> None:
    broker = start(tmp_path)
    try:
        rest = client(broker.http_port)
        create = {"name": "once", "partitions": 2}
        key = {"Idempotency-Key": "create-once-1"}
        first = rest.request("POST", "/v1/admin/topics", create, key)
        assert first.status == 201, first.body
        assert "idempotent-replayed" not in first.headers
        again = rest.request("POST", "/v1/admin/topics", create, key)
        assert (again.status, again.body) == (201, first.body)
        assert again.headers["idempotent-replayed"] == "true"
        assert again.headers["location"] == first.headers["location"]
        # without the key the same request is a second creation: CONFLICT
        assert rest.request("POST", "/v1/admin/topics", create).status == 409
        reused = rest.request("POST", "/v1/admin/topics", {"name": "other"}, key)
        assert reused.status == 422
        assert reused.error["code"] == "INVALID_INPUT"
        assert reused.error["details"]["field"] == "Idempotency-Key"
        # an error answer is kept too: the same DELETE of a missing topic answers 404 again
        gone = {"Idempotency-Key": "delete-missing"}
        assert rest.request("DELETE", "/v1/admin/topics/missing", None, gone).status == 404

        restart(broker)
        after = rest.request("POST", "/v1/admin/topics", create, key)
        assert (after.status, after.body) == (201, first.body)
        assert after.headers["idempotent-replayed"] == "true"
        assert rest.request("POST", "/v1/admin/topics", {"name": "other"}, key).status == 422
        missing = rest.request("DELETE", "/v1/admin/topics/missing", None, gone)
        assert missing.status == 404 and missing.headers["idempotent-replayed"] == "true"
        assert rest.request("GET", "/v1/admin/topics/once").json["name"] == "once"
    finally:
        broker.stop()


def test_bad_keys(rest: Any) -> None:
    answer = rest.request("POST", "/v1/admin/topics", {"name": "k"}, {"Idempotency-Key": "x" * 256})
    assert answer.status == 400 and answer.error["details"]["field"] == "Idempotency-Key"


def _answer(key: str, expires_at_ms: int) -> StoredAnswer:
    return StoredAnswer(
        key, "f", 201, "application/json", b"{}", (("location", "/x"),), expires_at_ms
    )


def test_store_expiry_and_torn_tail(tmp_path: Path) -> None:
    now = [1000.0]
    path = tmp_path / FILE_NAME
    store = FileAnswerStore(path, clock=lambda: now[0])
    store.put(_answer("a", 1_000_000 + 86_400_000))
    store.put(_answer("b", 1_000_000 + 10))
    assert store.get("b") is not None
    now[0] = 1000.011
    assert store.get("b") is None  # expired
    with open(path, "ab") as out:
        out.write(b'{"key": "c", "fingerp')  # a crash mid-append
    reopened = FileAnswerStore(path, clock=lambda: now[0])
    assert reopened.get("a") == _answer("a", 1_000_000 + 86_400_000)
    assert reopened.get("c") is None
    # the file was rewritten with the live answers only
    assert [json.loads(line)["key"] for line in path.read_bytes().splitlines()] == ["a"]
    now[0] = 1000.0 + 86_400
    assert FileAnswerStore(path, clock=lambda: now[0]).get("a") is None


def test_store_file_shrinks_once_mostly_expired(tmp_path: Path) -> None:
    now = [0.0]
    path = tmp_path / FILE_NAME
    store = FileAnswerStore(path, clock=lambda: now[0])
    for i in range(1100):
        store.put(_answer(f"old-{i}", 10))
    now[0] = 1.0  # all of them expired
    store.put(_answer("new-0", 1_000_000))
    store.put(_answer("new-1", 1_000_000))
    assert len(path.read_bytes().splitlines()) < 10
    assert FileAnswerStore(path, clock=lambda: now[0]).get("new-0") is not None
