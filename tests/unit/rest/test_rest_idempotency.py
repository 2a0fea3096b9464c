"""Idempotency-Key on the REST admin API's writes against a real ``pydmq serve``: the same
request replays the first answer (also after a restart of the broker), a different request
with the same key is refused 422; and the answers in the metadata image (expiry, snapshot, the
first kept wins)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pydmq.controller.operations.rest_answers import (
    answer_configs,
    answer_of_configs,
    describe_rest_answer,
    keep_rest_answer,
)
from pydmq.metadata.delta import MetadataDelta
from pydmq.metadata.image import MetadataImage
from pydmq.metadata.records import RestAnswerRecord

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


def _answer(key: str, created_at_ms: int, expires_at_ms: int) -> RestAnswerRecord:
    return RestAnswerRecord(
        key, "f", 201, "application/json", "/x", b"{}", created_at_ms, expires_at_ms
    )


def _replayed(image: MetadataImage, *records: RestAnswerRecord) -> MetadataImage:
    delta = MetadataDelta(image)
    for rec in records:
        delta.replay(rec)
    return delta.apply(image.offset + len(records), 1)


def test_answers_in_the_metadata_image_expire_by_the_log_time() -> None:
    image = _replayed(MetadataImage.EMPTY, _answer("a", 0, 100), _answer("b", 10, 50))
    assert set(image.rest_answers) == {"a", "b"}
    # a later answer created at 50 drops "b" (expired at 50) on every replica alike
    image = _replayed(image, _answer("c", 50, 1000))
    assert set(image.rest_answers) == {"a", "c"}
    # a snapshot keeps them
    assert (
        _replayed(
            MetadataImage.EMPTY, *[r for r in image.to_records() if isinstance(r, RestAnswerRecord)]
        ).rest_answers
        == image.rest_answers
    )


def test_the_first_answer_kept_wins() -> None:
    image = _replayed(MetadataImage.EMPTY, _answer("a", 0, 100))
    later = RestAnswerRecord("a", "g", 409, "application/json", None, b"{}", 5, 105)
    result = keep_rest_answer(image, later)
    assert result.records == [] and result.response == image.rest_answers["a"]
    # once expired, a new answer replaces it
    renewed = RestAnswerRecord("a", "g", 409, "application/json", None, b"{}", 100, 200)
    assert keep_rest_answer(image, renewed).records == [renewed]
    assert describe_rest_answer(image, "a", 99).response is not None
    assert describe_rest_answer(image, "a", 100).response is None
    assert answer_of_configs("a", answer_configs(later)) == later
