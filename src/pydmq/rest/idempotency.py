r"""Idempotency-Key: a write sent again with the same key gets the first answer again.

An answer is kept per key, with the fingerprint of the request that produced it (a hash of
method, path and body) and an expiry (``pydmq.rest.idempotency.retention.ms``, 24 h by
default). For a request carrying a key:

- no answer kept (or it expired): the request runs; its answer is kept unless it is a server
  error (5xx: nothing may have happened, so a retry must run again);
- an answer kept for the same fingerprint: it is replayed, status, body and ``Location``,
  with ``Idempotent-Replayed: true``;
- an answer kept for another fingerprint: 422 INVALID_INPUT (the key was reused for a
  different request; IETF draft-ietf-httpapi-idempotency-key-header);
- the same key still running on this broker: 409 CONFLICT.

Keys are scoped by the authenticated user (HTTP Basic), so two users cannot replay each
other's answers. :class:`ControllerAnswerStore` keeps the answers in the metadata log, as the
controller's :class:`~pydmq.metadata.records.RestAnswerRecord`\s
(:mod:`pydmq.controller.operations.rest_answers`): a broker asks the controller for a key's
answer before it runs a request (DescribeConfigs of the REST answer resource) and has its
answer kept before it sends it (IncrementalAlterConfigs), both through the broker's
controller channel, as its other admin requests (a single node's own controller, in
process; the active controller of a cluster). So an answer is replayed by any broker, after
restarts and controller changes. A key whose answer cannot be looked up (no controller) is
answered 503; an answer that cannot be kept is sent all the same (logged).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from pydmq.http.messages import HttpRequest, HttpResponse
from pydmq.http.routing import Handler
from pydmq.metadata.records import RestAnswerRecord
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from pydmq.protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from pydmq.rest.errors import RestError, kafka_error

if TYPE_CHECKING:
    from pydmq.broker.server import Broker

__all__ = ["AnswerStore", "ControllerAnswerStore", "Idempotency"]

log = logging.getLogger(__name__)

HEADER = "idempotency-key"
MAX_KEY_LENGTH = 255
DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
_SET = 0  # IncrementalAlterConfigs' SET
_TIMEOUT_MS = 30_000


class AnswerStore(Protocol):
    """Where answers are kept (:class:`ControllerAnswerStore`; tests give their own)."""

    async def get(self, key: str) -> RestAnswerRecord | None:
        """The live answer kept for ``key``, None if none."""
        ...

    async def put(self, answer: RestAnswerRecord) -> RestAnswerRecord:
        """Keep ``answer``; the answer kept for its key (another, if one was kept first)."""
        ...


class ControllerAnswerStore:
    """Answers kept by the controller (see the module docstring). Used on the broker's
    event loop."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    async def get(self, key: str) -> RestAnswerRecord | None:
        # Imported here, as the controller operations a single node imports at its first admin
        # request (the HTTP listener's start-up time).
        from pydmq.controller.operations.rest_answers import (
            REST_ANSWER_RESOURCE,
            answer_of_configs,
        )

        request = DescribeConfigsRequest(
            resources=[
                DescribeConfigsResource(
                    resource_type=REST_ANSWER_RESOURCE, resource_name=key, configuration_keys=None
                )
            ],
            include_synonyms=False,
            include_documentation=False,
        )
        try:
            response = await self._broker.controller_channel.send(
                DESCRIBE_CONFIGS, 4, request, _TIMEOUT_MS
            )
        except ConnectionError as exc:
            raise RestError(
                "SERVICE_UNAVAILABLE", f"the Idempotency-Key cannot be looked up: {exc}"
            ) from None
        result = response.results[0]
        if result.error_code == ErrorCode.RESOURCE_NOT_FOUND:
            return None
        if result.error_code != ErrorCode.NONE:
            error = kafka_error(result.error_code, result.error_message)
            if error.code != "SERVICE_UNAVAILABLE":
                error = RestError("INTERNAL_ERROR", error.message, error.details)
            raise error
        return answer_of_configs(key, {c.name: c.value for c in result.configs})

    async def put(self, answer: RestAnswerRecord) -> RestAnswerRecord:
        from pydmq.controller.operations.rest_answers import REST_ANSWER_RESOURCE, answer_configs

        request = IncrementalAlterConfigsRequest(
            resources=[
                AlterConfigsResource(
                    resource_type=REST_ANSWER_RESOURCE,
                    resource_name=answer.key,
                    configs=[
                        AlterableConfig(name=name, config_operation=_SET, value=value)
                        for name, value in answer_configs(answer).items()
                    ],
                )
            ],
            validate_only=False,
        )
        try:
            response = await self._broker.controller_channel.send(
                INCREMENTAL_ALTER_CONFIGS, 1, request, _TIMEOUT_MS
            )
            result = response.responses[0]
            code, message = result.error_code, result.error_message
        except ConnectionError as exc:
            code, message = ErrorCode.REQUEST_TIMED_OUT, str(exc)
        if code == ErrorCode.DUPLICATE_RESOURCE:
            kept = await self.get(answer.key)  # kept by another broker first
            return answer if kept is None else kept
        if code != ErrorCode.NONE:
            log.warning("REST answer to an Idempotency-Key not kept (%s: %s)", code, message)
        return answer


class Idempotency:
    """Wraps the write routes' handlers (see the module docstring). Owned by the node's HTTP
    service, on its event loop."""

    def __init__(
        self, store: AnswerStore, retention_ms: int, clock: Callable[[], float] = time.time
    ) -> None:
        self.store = store
        self.retention_ms = retention_ms
        self._clock = clock
        self._running: set[str] = set()

    def wrap(self, handler: Handler) -> Handler:
        async def idempotent(request: HttpRequest) -> HttpResponse:
            raw = request.header(HEADER)
            if raw is None:
                return await handler(request)
            return await self._once(raw, request, handler)

        return idempotent

    async def _once(self, raw: str, request: HttpRequest, handler: Handler) -> HttpResponse:
        if not 0 < len(raw) <= MAX_KEY_LENGTH:
            raise RestError(
                "INVALID_INPUT",
                f"Idempotency-Key must be 1 to {MAX_KEY_LENGTH} characters",
                {"field": "Idempotency-Key"},
            )
        key = f"{request.user or ''}\x00{raw}"
        digest = hashlib.sha256()
        for part in (request.method.encode(), request.path.encode(), request.body):
            digest.update(len(part).to_bytes(8, "big") + part)
        fingerprint = digest.hexdigest()
        if key in self._running:
            raise RestError(
                "CONFLICT",
                "a request with this Idempotency-Key is in progress",
                {"field": "Idempotency-Key"},
            )
        self._running.add(key)
        try:
            kept = await self.store.get(key)
            if kept is None:
                response = await handler(request)
                if response.status >= 500:
                    return response
                now_ms = int(self._clock() * 1000)
                answer = RestAnswerRecord(
                    key=key,
                    fingerprint=fingerprint,
                    status=response.status,
                    content_type=response.content_type,
                    location=next((v for k, v in response.headers if k == "location"), None),
                    body=response.body,
                    created_at_ms=now_ms,
                    expires_at_ms=now_ms + self.retention_ms,
                )
                kept = await self.store.put(answer)
                if kept is answer:
                    return response
            return self._replay(kept, fingerprint)
        finally:
            self._running.discard(key)

    @staticmethod
    def _replay(kept: RestAnswerRecord, fingerprint: str) -> HttpResponse:
        if kept.fingerprint != fingerprint:
            raise RestError(
                "INVALID_INPUT",
                "this Idempotency-Key was used for a different request (method, path or body)",
                {"field": "Idempotency-Key"},
                status=422,
            )
        headers = [] if kept.location is None else [("location", kept.location)]
        return HttpResponse(
            kept.status, kept.body, kept.content_type, [*headers, ("idempotent-replayed", "true")]
        )
