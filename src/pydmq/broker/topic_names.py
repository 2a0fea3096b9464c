"""Kafka's topic-name rules (legal characters, length, reserved names)."""

from __future__ import annotations

import re

__all__ = ["INTERNAL_TOPICS", "MAX_TOPIC_NAME_LENGTH", "topic_name_problem"]

MAX_TOPIC_NAME_LENGTH = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def topic_name_problem(name: str | None) -> str | None:
    """Why ``name`` is not a legal topic name, or None if it is (Kafka's Topic.validate)."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters"
    if not _LEGAL.match(name):
        return (
            f"Topic name {name!r} is illegal, it contains a character other than ASCII "
            "alphanumerics, '.', '_' and '-'"
        )
    return None
