"""Idempotency-Key: a write sent again with the same key gets the first answer again.

An answer is kept (:class:`StoredAnswer`) per key, with the fingerprint of the request that
produced it (a hash of method, path and body) and an expiry (``pydmq.rest.idempotency.retention.ms``,
24 h by default). For a request carrying a key:

- no answer kept (or it expired): the request runs; its answer is kept unless it is a server
  error (5xx: nothing may have happened, so a retry must run again);
- an answer kept for the same fingerprint: it is replayed, status, body and headers, with
  ``Idempotent-Replayed: true``;
- an answer kept for another fingerprint: 422 INVALID_INPUT (the key was reused for a
  different request; IETF draft-ietf-httpapi-idempotency-key-header);
- the same key still running: 409 CONFLICT.

Keys are scoped by the authenticated user (HTTP Basic), so two users cannot replay each
other's answers. :class:`FileAnswerStore` keeps answers durably: one JSON line each, appended
and fsynced before the answer is sent, in ``rest-idempotency.jsonl`` of the node's first log
directory, read back at start (expired answers dropped, the file rewritten without them;
also rewritten once it holds more than twice the live answers plus 1,000).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydmq.http.messages import HttpRequest, HttpResponse
from pydmq.http.routing import Handler
from pydmq.rest.errors import RestError

__all__ = ["FILE_NAME", "FileAnswerStore", "Idempotency", "StoredAnswer"]

FILE_NAME = "rest-idempotency.jsonl"
HEADER = "idempotency-key"
MAX_KEY_LENGTH = 255
_KEPT_HEADERS = ("location",)
_REWRITE_SLACK = 1000  # expired lines tolerated in the file before it is rewritten


@dataclass(frozen=True, slots=True)
class StoredAnswer:
    """The answer given to the first request with a key."""

    key: str
    fingerprint: str
    status: int
    content_type: str
    body: bytes
    headers: tuple[tuple[str, str], ...]
    expires_at_ms: int

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "fingerprint": self.fingerprint,
            "status": self.status,
            "content_type": self.content_type,
            "body": base64.b64encode(self.body).decode(),
            "headers": [list(h) for h in self.headers],
            "expires_at_ms": self.expires_at_ms,
        }

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> StoredAnswer:
        return cls(
            key=str(value["key"]),
            fingerprint=str(value["fingerprint"]),
            status=int(value["status"]),
            content_type=str(value["content_type"]),
            body=base64.b64decode(value["body"]),
            headers=tuple((str(k), str(v)) for k, v in value["headers"]),
            expires_at_ms=int(value["expires_at_ms"]),
        )


class FileAnswerStore:
    """Answers by key, in memory and in an append-only file (see the module docstring).
    Owned by the node's HTTP service, used on its event loop; an append is one small write
    and an fsync."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self._clock = clock
        self._answers: dict[str, StoredAnswer] = {}
        self._lines = 0  # answers in the file, live or not
        self._load()

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _load(self) -> None:
        now = self._now_ms()
        try:
            lines = self.path.read_bytes().splitlines()
        except FileNotFoundError:
            return
        for line in lines:
            try:
                answer = StoredAnswer.from_json(json.loads(line))
            except (ValueError, KeyError, TypeError):
                continue  # a torn last line (a crash mid-append): that answer was never sent
            if answer.expires_at_ms > now:
                self._answers[answer.key] = answer
        self._rewrite()

    def _rewrite(self) -> None:
        """The file with only the live answers (write aside, fsync, rename, fsync the dir)."""
        aside = self.path.with_name(self.path.name + ".tmp")
        with open(aside, "wb") as out:
            for answer in self._answers.values():
                out.write(json.dumps(answer.to_json()).encode() + b"\n")
            out.flush()
            self._lines = len(self._answers)
            os.fsync(out.fileno())
        os.replace(aside, self.path)
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def get(self, key: str) -> StoredAnswer | None:
        answer = self._answers.get(key)
        if answer is None or answer.expires_at_ms <= self._now_ms():
            return None
        return answer

    def put(self, answer: StoredAnswer) -> None:
        with open(self.path, "ab") as out:
            out.write(json.dumps(answer.to_json()).encode() + b"\n")
            out.flush()
            os.fsync(out.fileno())
        self._answers[answer.key] = answer
        self._lines += 1
        now = self._now_ms()
        for key in [k for k, a in self._answers.items() if a.expires_at_ms <= now]:
            del self._answers[key]
        if self._lines > 2 * len(self._answers) + _REWRITE_SLACK:
            self._rewrite()  # mostly expired answers: the file shrinks back to the live ones


class Idempotency:
    """Wraps the write routes' handlers (see the module docstring). Owned by the node's HTTP
    service, on its event loop."""

    def __init__(
        self, store: FileAnswerStore, retention_ms: int, clock: Callable[[], float] = time.time
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
        kept = self.store.get(key)
        if kept is not None:
            if kept.fingerprint != fingerprint:
                raise RestError(
                    "INVALID_INPUT",
                    "this Idempotency-Key was used for a different request (method, path or body)",
                    {"field": "Idempotency-Key"},
                    status=422,
                )
            return HttpResponse(
                kept.status,
                kept.body,
                kept.content_type,
                [*kept.headers, ("idempotent-replayed", "true")],
            )
        if key in self._running:
            raise RestError(
                "CONFLICT",
                "a request with this Idempotency-Key is in progress",
                {"field": "Idempotency-Key"},
            )
        self._running.add(key)
        try:
            response = await handler(request)
            if response.status < 500:
                self.store.put(
                    StoredAnswer(
                        key=key,
                        fingerprint=fingerprint,
                        status=response.status,
                        content_type=response.content_type,
                        body=response.body,
                        headers=tuple(h for h in response.headers if h[0] in _KEPT_HEADERS),
                        expires_at_ms=int(self._clock() * 1000) + self.retention_ms,
                    )
                )
            return response
        finally:
            self._running.discard(key)
