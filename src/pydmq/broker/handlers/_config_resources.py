"""Checks shared by AlterConfigs and IncrementalAlterConfigs (Kafka's request validation)."""

from __future__ import annotations

import collections
from collections.abc import Iterable, Sequence
from typing import Protocol

from pydmq.protocol.errors import ErrorCode, TopicError

__all__ = ["check_resource", "resource_counts"]


class _Named(Protocol):
    name: str


class _Resource(Protocol):
    resource_type: int
    resource_name: str

    @property
    def configs(self) -> Sequence[_Named]: ...


def resource_counts(resources: Iterable[_Resource]) -> collections.Counter[tuple[int, str]]:
    return collections.Counter((r.resource_type, r.resource_name) for r in resources)


def check_resource(resource: _Resource, counts: collections.Counter[tuple[int, str]]) -> None:
    """INVALID_REQUEST for a resource named twice or a config key named twice in it."""
    if counts[(resource.resource_type, resource.resource_name)] > 1:
        raise TopicError(ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
    names = collections.Counter(c.name for c in resource.configs)
    duplicates = sorted(name for name, n in names.items() if n > 1)
    if duplicates:
        raise TopicError(
            ErrorCode.INVALID_REQUEST,
            f"Error due to duplicate config keys: {', '.join(duplicates)}",
        )
