"""Reading a REST request's JSON body and query: INVALID_INPUT (with ``details.field``) for
whatever is not what the route documents."""

from __future__ import annotations

import json
from typing import Any

from pydmq.http.messages import HttpRequest
from pydmq.rest.errors import RestError

__all__ = ["json_object", "optional_int", "query_flag", "string_map"]


def json_object(request: HttpRequest) -> dict[str, Any]:
    """The body as a JSON object."""
    try:
        value = json.loads(request.body or b"null")
    except (UnicodeDecodeError, ValueError) as exc:
        raise RestError("INVALID_INPUT", f"the body is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise RestError("INVALID_INPUT", "the body must be a JSON object")
    return value


def optional_int(body: dict[str, Any], name: str, default: int, code: str = "INVALID_INPUT") -> int:
    """``body[name]`` as an integer (``default`` when absent or null)."""
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise RestError(code, f"{name} must be an integer", {"field": name})
    return value


def string_map(
    body: dict[str, Any], name: str, nullable_values: bool = False
) -> dict[str, str | None]:
    """``body[name]`` as an object of strings (numbers and booleans are written as Kafka
    spells them; null values only when ``nullable_values``)."""
    value = body.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RestError("INVALID_INPUT", f"{name} must be an object", {"field": name})
    out: dict[str, str | None] = {}
    for key, item in value.items():
        if item is None and nullable_values:
            out[key] = None
        elif isinstance(item, bool):
            out[key] = "true" if item else "false"
        elif isinstance(item, str | int | float):
            out[key] = str(item)
        else:
            raise RestError(
                "INVALID_INPUT", f"{name}.{key} must be a string", {"field": f"{name}.{key}"}
            )
    return out


def query_flag(request: HttpRequest, name: str) -> bool:
    """A boolean query parameter (``true``/``false``; absent = false)."""
    values = request.query.get(name)
    if not values:
        return False
    if values[-1] not in ("true", "false"):
        raise RestError(
            "INVALID_INPUT", f"query parameter {name} must be true or false", {"field": name}
        )
    return values[-1] == "true"
