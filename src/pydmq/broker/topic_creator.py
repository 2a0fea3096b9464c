"""TopicCreator: the topics a broker creates for itself, asked of its controller.

Metadata auto-creation and the group coordinator's ``__consumer_offsets`` go through here, in
both modes: one CreateTopics (for all the names one Metadata request auto-creates, within its
``pydmq.auto.create.max.partitions`` budget) sent through the broker's
:class:`~pydmq.broker.controller_channel.ControllerChannel` to its controller, the active one
in cluster mode (which places replicas, applies ``default.replication.factor`` and refuses
INVALID_REPLICATION_FACTOR when too few brokers are registered; the topic arrives with a later
UpdateMetadata), the node's own on a single node (created when the answer comes). Client
CreateTopics requests are forwarded by their handler instead, at the client's version.

A single node's group and transaction coordinators create ``__consumer_offsets`` and
``__transaction_state`` synchronously when they first need them (:meth:`TopicCreator.create_topic`,
the controller's ``create_topics`` run at once); in cluster mode they ask for them with
:meth:`TopicCreator.ensure_offsets_topic` and :meth:`TopicCreator.ensure_transaction_state_topic`.

Owned by the broker; used on its event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydmq.groups.log import OFFSETS_TOPIC, offsets_topic_configs
from pydmq.protocol.errors import ErrorCode, TopicError
from pydmq.protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from pydmq.transactions.log import TRANSACTION_STATE_TOPIC, transaction_state_topic_configs

if TYPE_CHECKING:
    from pydmq.broker.server import Broker
    from pydmq.broker.topics import TopicInfo
    from pydmq.controller.local import LocalController

__all__ = ["NewTopic", "TopicCreator"]

log = logging.getLogger(__name__)

CREATE_TOPICS_API = 19
# v4: the answers carry no config listing (v5+), which the controller would build per topic
# (~0.3 ms each) for nothing: only the error codes are used here.
CREATE_TOPICS_VERSION = 4
_CREATE_TIMEOUT_MS = 10000


@dataclass(frozen=True, slots=True)
class NewTopic:
    """One topic to create (-1: the broker default)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str | None] = field(default_factory=dict)


class TopicCreator:
    """Asks the broker's controller to create topics (see the module docstring)."""

    def __init__(self, broker: Broker, local: LocalController | None) -> None:
        self._broker = broker
        self._local = local
        self._in_flight: set[str] = set()

    async def create_topics(self, topics: Sequence[NewTopic]) -> dict[str, int]:
        """Ask the controller to create ``topics`` in one CreateTopics; each name's error code.
        A name already asked for by a request still in flight is not asked again (repeated
        Metadata requests for a missing topic do not pile up): NONE. No controller answering
        (cluster mode): REQUEST_TIMED_OUT."""
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
            response = await self._ask(request)
        finally:
            self._in_flight -= names
        if response is None:
            codes.update((name, ErrorCode.REQUEST_TIMED_OUT) for name in names)
            return codes
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

    async def _ask(self, request: CreateTopicsRequest) -> CreateTopicsResponse | None:
        """The controller's answer; None when no controller answered (cluster mode)."""
        channel = self._broker.controller_channel
        if self._local is not None:
            local: CreateTopicsResponse = await channel.send(
                CREATE_TOPICS_API, CREATE_TOPICS_VERSION, request
            )
            return local
        from pydmq.broker.cluster.forwarding import ControllerUnavailableError

        try:
            response: CreateTopicsResponse = await channel.send(
                CREATE_TOPICS_API, CREATE_TOPICS_VERSION, request, _CREATE_TIMEOUT_MS
            )
        except ControllerUnavailableError as exc:
            names = ", ".join(sorted(t.name for t in request.topics))
            log.info("cannot create %s: %s", names, exc)
            return None
        return response

    async def ensure_offsets_topic(self) -> int:
        """Create ``__consumer_offsets`` unless it exists; its error code. Cluster mode, as
        Kafka does: ``offsets.topic.num.partitions``, ``offsets.topic.replication.factor``
        capped at the brokers alive, :func:`~pydmq.groups.log.offsets_topic_configs`. A single
        node's group coordinator creates it itself, with the same configs (:meth:`create_topic`)."""
        broker = self._broker
        if broker.topics.get(OFFSETS_TOPIC) is not None:
            return ErrorCode.NONE
        cluster = broker.cluster
        if cluster is None:
            try:
                broker.group_coordinator_log.ensure_created()
            except TopicError as exc:
                return exc.error_code
            return ErrorCode.NONE
        config = broker.config
        alive = len(cluster.metadata_cache.brokers)
        replication = max(1, min(config.get_int("offsets.topic.replication.factor"), alive))
        new = NewTopic(
            OFFSETS_TOPIC,
            config.get_int("offsets.topic.num.partitions"),
            replication,
            offsets_topic_configs(config),
        )
        return (await self.create_topics([new]))[OFFSETS_TOPIC]

    async def ensure_transaction_state_topic(self) -> int:
        """Create ``__transaction_state`` unless it exists; its error code. Cluster mode, as
        the offsets topic: ``transaction.state.log.num.partitions``,
        ``transaction.state.log.replication.factor`` capped at the brokers alive,
        :func:`~pydmq.transactions.log.transaction_state_topic_configs`. A single node's
        coordinator creates it itself with the same configs."""
        broker = self._broker
        if broker.topics.get(TRANSACTION_STATE_TOPIC) is not None:
            return ErrorCode.NONE
        cluster = broker.cluster
        if cluster is None:
            try:
                broker.transaction_state_log.ensure_created()
            except TopicError as exc:
                return exc.error_code
            return ErrorCode.NONE
        config = broker.config
        alive = len(cluster.metadata_cache.brokers)
        replication = max(1, min(config.get_int("transaction.state.log.replication.factor"), alive))
        new = NewTopic(
            TRANSACTION_STATE_TOPIC,
            config.get_int("transaction.state.log.num.partitions"),
            replication,
            transaction_state_topic_configs(config, replication),
        )
        return (await self.create_topics([new]))[TRANSACTION_STATE_TOPIC]

    async def ensure_share_state_topic(self) -> int:
        """Cluster mode: create ``__share_group_state`` unless it exists; its error code.
        ``share.coordinator.state.topic.num.partitions``, the replication factor capped at the
        brokers alive, :func:`~pydmq.shares.state_log.share_state_topic_configs` (a single
        node's share coordinator creates it itself, with the same configs)."""
        from pydmq.config.share import STATE_TOPIC_PARTITIONS, STATE_TOPIC_REPLICATION
        from pydmq.shares.state_log import SHARE_GROUP_STATE_TOPIC, share_state_topic_configs

        broker = self._broker
        cluster = broker.cluster
        if broker.topics.get(SHARE_GROUP_STATE_TOPIC) is not None or cluster is None:
            return ErrorCode.NONE
        config = broker.config
        alive = len(cluster.metadata_cache.brokers)
        replication = max(1, min(config.get_int(STATE_TOPIC_REPLICATION), alive))
        new = NewTopic(
            SHARE_GROUP_STATE_TOPIC,
            config.get_int(STATE_TOPIC_PARTITIONS),
            replication,
            share_state_topic_configs(config, replication),
        )
        return (await self.create_topics([new]))[SHARE_GROUP_STATE_TOPIC]

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str | None] | None = None,
    ) -> TopicInfo:
        """Single node: create ``name`` at once (the group coordinator's internal topic), by
        the controller's ``create_topics`` on the node's controller; raises TopicError."""
        from pydmq.controller.errors import ControllerError
        from pydmq.controller.operations import CreatableTopic as Creatable
        from pydmq.controller.operations import create_topics

        controller = self._local
        if controller is None:
            raise TopicError(ErrorCode.INVALID_REQUEST, "only a single node creates topics here")
        wanted = [Creatable(name, num_partitions, replication_factor, None, configs or {})]
        try:
            [result] = controller.run_now(
                lambda image: create_topics(image, controller.operation_context, wanted)
            )
        except ControllerError as exc:
            raise TopicError(exc.error_code, exc.message) from None
        if result.error_code != ErrorCode.NONE:
            raise TopicError(result.error_code, result.error_message or "")
        topic = self._broker.topics.get(name)
        assert topic is not None  # committed, and the registry follows every delta
        return topic
