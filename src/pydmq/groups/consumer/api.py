"""The KIP-848 consumer groups' configuration, requests and the services they share.

:class:`ConsumerGroupServices` is what every shard's
:class:`~pydmq.groups.consumer.manager.ConsumerGroupManager` reads besides its own groups: the
configuration, the server-side assignors (and which one a group uses) and the broker's topics.
One per group coordinator; owned by the event loop.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pydmq.groups.consumer.group import ConsumerGroup, Partitions

if TYPE_CHECKING:
    from pydmq.assignment.api import GroupAssignorSpec

__all__ = [
    "ConsumerGroupConfig",
    "ConsumerGroupServices",
    "HeartbeatRequest",
    "HeartbeatResult",
    "TopicLike",
    "TopicView",
]


class TopicLike(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def topic_id(self) -> uuid.UUID: ...

    @property
    def partitions(self) -> Sequence[object]: ...


class TopicView(Protocol):
    """The broker's topic registry as the coordinator reads it."""

    def get(self, name: str) -> TopicLike | None: ...

    def by_id(self, topic_id: uuid.UUID) -> TopicLike | None: ...

    def __iter__(self) -> Iterator[TopicLike]: ...


class _NoTopics:
    def get(self, name: str) -> TopicLike | None:
        return None

    def by_id(self, topic_id: uuid.UUID) -> TopicLike | None:
        return None

    def __iter__(self) -> Iterator[TopicLike]:
        return iter(())


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    heartbeat_interval_ms: int = 5000
    session_timeout_ms: int = 45000
    max_size: int = 2**31 - 1
    assignors: tuple[str, ...] = ("uniform", "range")


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: Sequence[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: Mapping[uuid.UUID, Iterable[int]] | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1


@dataclass(slots=True)
class HeartbeatResult:
    error_code: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None


class ConsumerGroupServices:
    """Configuration, assignors and topics shared by the consumer groups of every shard."""

    __slots__ = ("assignors", "config", "default_assignor", "topics")

    def __init__(
        self,
        config: ConsumerGroupConfig,
        assignors: Mapping[str, GroupAssignorSpec],
        topics: TopicView | None = None,
    ) -> None:
        self.config = config
        self.assignors = dict(assignors)
        self.topics: TopicView = topics if topics is not None else _NoTopics()
        default = next((a for a in config.assignors if a in self.assignors), None)
        self.default_assignor = default or next(iter(self.assignors), "")

    def assignor_for(self, group: ConsumerGroup) -> str:
        """The assignor most members name in ``server_assignor``, else the default."""
        votes = Counter(
            m.server_assignor
            for m in group.members.values()
            if m.server_assignor is not None and m.server_assignor in self.assignors
        )
        if not votes:
            return self.default_assignor
        order = list(self.assignors)
        return max(votes, key=lambda n: (votes[n], -order.index(n)))

    def topic_names(self, parts: Partitions) -> list[tuple[uuid.UUID, str, list[int]]]:
        """(topic id, name or "" when unknown, sorted partitions) of ``parts``, by topic id."""
        out = []
        for topic_id, ps in sorted(parts.items()):
            info = self.topics.by_id(topic_id)
            out.append((topic_id, "" if info is None else info.name, sorted(ps)))
        return out
