"""The REST admin API's Idempotency-Key answers, kept in the metadata log as
:class:`~pydmq.metadata.records.RestAnswerRecord` (pydmq's own record): replicated to every
voter and in snapshots, so a replay survives restarts and controller changes.

Transported as a pydmq config resource type, :data:`REST_ANSWER_RESOURCE` (no Kafka
resource type is that high): IncrementalAlterConfigs keeps one, DescribeConfigs reads one,
its fields as configs (:data:`FIELDS`; the body in base64).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping

from pydmq.controller.operations.common import ControllerResult
from pydmq.metadata.image import MetadataImage
from pydmq.metadata.records import RestAnswerRecord

__all__ = [
    "FIELDS",
    "REST_ANSWER_RESOURCE",
    "answer_configs",
    "answer_of_configs",
    "describe_rest_answer",
    "keep_rest_answer",
]

REST_ANSWER_RESOURCE = 100
FIELDS = (
    "fingerprint",
    "status",
    "content_type",
    "location",
    "body",
    "created_at_ms",
    "expires_at_ms",
)


def answer_configs(answer: RestAnswerRecord) -> dict[str, str | None]:
    """The answer's fields as config values."""
    return {
        "fingerprint": answer.fingerprint,
        "status": str(answer.status),
        "content_type": answer.content_type,
        "location": answer.location,
        "body": base64.b64encode(answer.body).decode(),
        "created_at_ms": str(answer.created_at_ms),
        "expires_at_ms": str(answer.expires_at_ms),
    }


def answer_of_configs(key: str, configs: Mapping[str, str | None]) -> RestAnswerRecord:
    """The answer ``configs`` describe; ValueError when one is missing or malformed."""
    try:
        location = configs.get("location")
        return RestAnswerRecord(
            key=key,
            fingerprint=str(configs["fingerprint"]),
            status=int(str(configs["status"])),
            content_type=str(configs["content_type"]),
            location=location,
            body=base64.b64decode(str(configs["body"]), validate=True),
            created_at_ms=int(str(configs["created_at_ms"])),
            expires_at_ms=int(str(configs["expires_at_ms"])),
        )
    except (KeyError, binascii.Error) as exc:
        raise ValueError(f"a REST answer needs {', '.join(FIELDS)}: {exc}") from None


def keep_rest_answer(
    image: MetadataImage, answer: RestAnswerRecord
) -> ControllerResult[RestAnswerRecord]:
    """Keep ``answer`` unless a live one has its key (two brokers ran the same request at
    once: the first kept wins); the response is the answer kept."""
    kept = image.rest_answers.get(answer.key)
    if kept is not None and kept.expires_at_ms > answer.created_at_ms:
        return ControllerResult([], kept)
    return ControllerResult([answer], answer)


def describe_rest_answer(
    image: MetadataImage, key: str, now_ms: int
) -> ControllerResult[RestAnswerRecord | None]:
    """The live answer kept for ``key``, None if none."""
    kept = image.rest_answers.get(key)
    return ControllerResult([], kept if kept is not None and kept.expires_at_ms > now_ms else None)
