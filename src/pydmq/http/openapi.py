"""The OpenAPI 3.1 document of a router, built from its routes (never a copy kept by hand).

Every route with a :class:`~pydmq.http.routing.RouteDoc` becomes an operation: its path
template (``{name}`` segments become path parameters), its query parameters, its JSON request
body and its answers. Every error answer refers to the one error envelope schema
(:mod:`pydmq.http.messages`).
"""

from __future__ import annotations

import re
from typing import Any

from pydmq.http.routing import Router

__all__ = ["ERROR_SCHEMA", "openapi_document"]

ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "request_id"],
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "details": {"type": "object"},
                "request_id": {"type": "string"},
            },
        }
    },
}
_ERROR_REF = {"$ref": "#/components/schemas/Error"}
_PARAM = re.compile(r"\{([^}/]+)\}")
_RESPONSE_HEADERS = {
    "X-Request-Id": {"description": "The request's id", "schema": {"type": "string"}},
}


def _operation_id(method: str, template: str) -> str:
    words = [w for w in re.split(r"[^A-Za-z0-9]+", template) if w and w != "v1"]
    return method.lower() + "".join(w[:1].upper() + w[1:] for w in words)


def _response(status: int, schema: Any) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "description": "error" if status >= 400 else "success",
        "headers": _RESPONSE_HEADERS,
    }
    if status >= 400:
        answer["content"] = {"application/json": {"schema": _ERROR_REF}}
    elif schema is not None:
        answer["content"] = {"application/json": {"schema": schema}}
    return answer


def openapi_document(router: Router, title: str, version: str) -> dict[str, Any]:
    """The document of every documented route of ``router``."""
    paths: dict[str, dict[str, Any]] = {}
    for route in router.routes:
        doc = route.doc
        if doc is None:
            continue
        parameters: list[dict[str, Any]] = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in _PARAM.findall(route.template)
        ]
        parameters += [
            {
                "name": name,
                "in": "query",
                "required": False,
                "description": text,
                "schema": {"type": "string"},
            }
            for name, text in doc.query.items()
        ]
        operation: dict[str, Any] = {
            "operationId": _operation_id(route.method, route.template),
            "summary": doc.summary,
            "responses": {
                str(status): _response(status, schema)
                for status, schema in sorted(doc.responses.items())
            },
        }
        if doc.tag:
            operation["tags"] = [doc.tag]
        if parameters:
            operation["parameters"] = parameters
        if doc.request_body is not None:
            operation["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": dict(doc.request_body)}},
            }
        paths.setdefault(route.template, {})[route.method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version},
        "paths": paths,
        "components": {"schemas": {"Error": ERROR_SCHEMA}},
    }
