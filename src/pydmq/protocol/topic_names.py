"""Kafka's topic-name rules (legal characters, length, reserved names)."""

from __future__ import annotations

import re

__all__ = [
    "INTERNAL_TOPICS",
    "MAX_TOPIC_NAME_LENGTH",
    "RESERVED_TOPICS",
    "internal_topic_creation_problem",
    "topic_name_problem",
]

MAX_TOPIC_NAME_LENGTH = 249
# Topics the broker itself writes (Kafka's Topic.isInternal): clients may read them, but only
# the coordinators that own them append (Produce from a client: INVALID_TOPIC_EXCEPTION).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
# Internal topics plus the name of a log that is not a topic at all here (the Raft metadata
# log): no client may create any of them.
RESERVED_TOPICS = INTERNAL_TOPICS | {"__cluster_metadata"}
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def internal_topic_creation_problem(name: str) -> str | None:
    """Why a client may not create ``name`` (Kafka's wording), or None if it may.

    Kafka refuses ``__cluster_metadata`` this way but lets a client create
    ``__consumer_offsets`` before the coordinator does, with any partition count, after which
    FindCoordinator answers COORDINATOR_NOT_AVAILABLE (seen on Kafka 4.4). pydmq refuses every
    reserved name: the broker creates its internal topics itself, with their own settings.
    """
    if name in RESERVED_TOPICS:
        return f"Creation of internal topic {name} is prohibited."
    return None


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
