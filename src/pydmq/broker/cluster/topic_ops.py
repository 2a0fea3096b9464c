"""Topic creation a cluster-mode broker asks the controller for.

Metadata auto-creation and the group coordinator's ``__consumer_offsets`` go through here:
both send CreateTopics to the active controller (one request for all the names one Metadata
request auto-creates, within its ``pydmq.auto.create.max.partitions`` budget) (which places replicas, applies
``default.replication.factor`` and refuses INVALID_REPLICATION_FACTOR when too few brokers are
registered) and learn the topic from a later UpdateMetadata. Client CreateTopics requests are
forwarded by their handler instead, at the client's version. The single-node operations
inherited from :class:`~pydmq.broker.topic_ops.TopicOperations` are not used in cluster mode
(and not set up: there is no local metadata log to write; issue 16 part 1 replaces both
classes by the controller's operations).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydmq.broker.cluster.forwarding import ControllerUnavailableError, forward
from pydmq.broker.topic_ops import NewTopic, TopicOperations
from pydmq.groups.log import OFFSETS_TOPIC
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
    CreateTopicsResponse,
)

if TYPE_CHECKING:
    from pydmq.broker.server import Broker

__all__ = ["ClusterTopicOperations"]

log = logging.getLogger(__name__)

CREATE_TOPICS_API = 19
CREATE_TOPICS_VERSION = 7
_CREATE_TIMEOUT_MS = 10000


class ClusterTopicOperations(TopicOperations):
    """TopicOperations of a cluster-mode broker: creations go to the controller."""

    def __init__(self, broker: Broker) -> None:  # no super().__init__: see the module docstring
        self._broker = broker
        self._in_flight: set[str] = set()

    async def create_via_controller(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: dict[str, str] | None = None,
    ) -> int:
        """Ask the controller to create ``name``; returns its error code (NONE when created,
        TOPIC_ALREADY_EXISTS...)."""
        new = NewTopic(name, num_partitions, replication_factor, configs or {})
        return (await self.create_topics_via_controller([new]))[name]

    async def create_topics_via_controller(self, topics: Sequence[NewTopic]) -> dict[str, int]:
        """Ask the controller to create ``topics`` in one CreateTopics; each name's error code.
        A name already asked for by a request still in flight is not asked again (repeated
        Metadata requests for a missing topic do not pile up): NONE."""
        cluster = self._broker.cluster
        if cluster is None:
            return {t.name: ErrorCode.INVALID_REQUEST for t in topics}
        codes: dict[str, int] = {t.name: ErrorCode.NONE for t in topics}
        asked = [t for t in topics if t.name not in self._in_flight]
        if not asked:
            return codes
        names = {t.name for t in asked}
        self._in_flight |= names
        request = CreateTopicsRequest(
            topics=[
                CreatableTopic(
                    name=t.name,
                    num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
                    configs=[
                        CreatableTopicConfig(name=k, value=v)
                        for k, v in t.configs.items()
                        if v is not None
                    ],
                )
                for t in asked
            ],
            timeout=_CREATE_TIMEOUT_MS,
            validate_only=False,
        )
        try:
            response: CreateTopicsResponse = await forward(
                cluster, CREATE_TOPICS_API, CREATE_TOPICS_VERSION, request, _CREATE_TIMEOUT_MS
            )
        except ControllerUnavailableError as exc:
            log.info("cannot create %s: %s", ", ".join(sorted(names)), exc)
            codes.update((name, ErrorCode.REQUEST_TIMED_OUT) for name in names)
            return codes
        finally:
            self._in_flight -= names
        answered = {r.name: r for r in response.topics}
        for name in names:
            result = answered.get(name)
            if result is None:
                codes[name] = ErrorCode.UNKNOWN_SERVER_ERROR
                continue
            if result.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                log.info(
                    "creating %s refused: %s %s",
                    name,
                    ErrorCode(result.error_code).name,
                    result.error_message or "",
                )
            codes[name] = result.error_code
        return codes

    async def ensure_offsets_topic(self) -> int:
        """Create ``__consumer_offsets`` as Kafka does: ``offsets.topic.num.partitions``,
        ``offsets.topic.replication.factor`` capped at the brokers alive, compacted."""
        if self._broker.topics.get(OFFSETS_TOPIC) is not None:
            return ErrorCode.NONE
        config = self._broker.config
        cluster = self._broker.cluster
        alive = len(cluster.metadata_cache.brokers) if cluster is not None else 1
        replication = max(1, min(config.get_int("offsets.topic.replication.factor"), alive))
        return await self.create_via_controller(
            OFFSETS_TOPIC,
            config.get_int("offsets.topic.num.partitions"),
            replication,
            {"cleanup.policy": "compact", "compression.type": "producer"},
        )
