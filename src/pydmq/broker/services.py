"""``BrokerServices``: what the broker's handlers are given, one port each.

Kafka's KafkaApis takes its dependencies one by one (replica manager, metadata cache, group
coordinator, forwarding manager, config...) rather than the server that builds them; the
broker's handlers do the same: their context's host (``ctx.broker``) is a ``BrokerServices``,
never the node or the :class:`~pydmq.broker.server.Broker` (a layer rule,
``tests/unit/test_layers.py``, keeps the handlers from importing ``broker.server``).

What differs between a single node and a cluster-mode broker is answered by the ports both
modes implement, so the handlers do not ask which mode they run in:

- :class:`MetadataView` — the brokers clients see, their liveness and endpoints, the
  controller id and offline replicas (a single node: itself,
  :class:`~pydmq.broker.single_node_metadata.SingleNodeMetadata`; a cluster: its metadata cache,
  :class:`~pydmq.broker.cluster.metadata_view.ClusterMetadataView`);
- :class:`ProducerIdSource` — producer ids (a single node's durable blocks, a cluster's
  blocks allocated by the controller);
- the :class:`~pydmq.broker.controller_channel.ControllerChannel` — admin requests to the
  controller (in process, or forwarded to the active controller).

Only the controller's pushes (LeaderAndIsr, StopReplica, UpdateMetadata) have no single-node
counterpart: ``control_plane`` is None there, and their handlers answer INVALID_REQUEST.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pydmq.broker.metadata_answers import MetadataAnswerCache
from pydmq.config.topic import TopicConfig

if TYPE_CHECKING:
    from pydmq.api.handler import ApiHandlerSpec
    from pydmq.broker.controller_channel import ControllerChannel
    from pydmq.broker.fetch_session import FetchSessionCache
    from pydmq.broker.topic_creator import TopicCreator
    from pydmq.broker.topics import TopicRegistry
    from pydmq.config.broker import BrokerConfig
    from pydmq.groups.coordinator import GroupCoordinator
    from pydmq.groups.log import ConsumerOffsetsLog
    from pydmq.metadata.image import ScramCredentialData
    from pydmq.protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
    from pydmq.protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse
    from pydmq.protocol.messages.update_metadata import (
        UpdateMetadataRequest,
        UpdateMetadataResponse,
    )
    from pydmq.quotas.manager import QuotaManagers
    from pydmq.replication.replica_manager import ReplicaManager
    from pydmq.security.authorizer import Authorizer
    from pydmq.shares.coordinator import ShareCoordinator
    from pydmq.shares.service import ShareGroupService
    from pydmq.storage.api import TopicPartition
    from pydmq.transactions.coordinator import TransactionCoordinator
    from pydmq.transactions.log import TransactionStateLog

__all__ = [
    "BrokerEndpoint",
    "BrokerServices",
    "ControlPlane",
    "FinalizedFeatures",
    "MetadataView",
    "ProducerIdSource",
]


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """An alive broker as clients reach it on one listener."""

    node_id: int
    host: str
    port: int
    rack: str | None


@dataclass(frozen=True, slots=True)
class FinalizedFeatures:
    """The cluster's finalized feature levels as ApiVersions (v3+) reports them: ``epoch``
    (the metadata offset they were read at; -1 while unknown) and the level of each feature
    (a feature not named is at level 0)."""

    epoch: int
    levels: Mapping[str, int]


class MetadataView(Protocol):
    """The cluster as this broker answers clients about it (Kafka's MetadataCache reads)."""

    @property
    def describes_controllers(self) -> bool:
        """Whether a client listener describes the controllers (DescribeCluster's endpoint
        type 2): a combined single node does; a cluster's brokers leave it to the controller
        listeners."""
        ...

    def alive_brokers(self, listener: str) -> list[BrokerEndpoint]:
        """The alive (unfenced) brokers with an endpoint on ``listener``, by id."""
        ...

    def is_alive(self, broker_id: int) -> bool: ...

    def endpoint(self, broker_id: int, listener: str) -> tuple[str, int] | None:
        """An alive broker's endpoint on ``listener``; None if not alive or not there."""
        ...

    def controller_id(self) -> int:
        """The broker clients send admin requests to: the active controller when it is also
        an alive broker, else the lowest alive broker (-1: none)."""
        ...

    def image_version(self) -> int:
        """A number that changes whenever an answer read from this view or from the topic
        registry may change (topics, partitions, brokers, the controller): what encoded
        answers are cached under (``metadata_answers.py``)."""
        ...

    def offline_replicas(self, tp: TopicPartition) -> Sequence[int]: ...

    def finalized_features(self) -> FinalizedFeatures:
        """The finalized feature levels (``transaction.version`` tells clients whether to use
        transactions v2)."""
        ...


class ProducerIdSource(Protocol):
    """Producer ids for InitProducerId: an id now, or an awaitable one while the next block
    is being obtained. Raises (or the awaitable raises)
    :class:`~pydmq.producers.id_manager.ProducerIdBlockError` with the code to answer."""

    def generate_producer_id(self) -> int | Awaitable[int]: ...


class ControlPlane(Protocol):
    """Applies the controller's pushes (cluster mode only, on the control-plane listener);
    ``source`` names the sender for the logs."""

    async def leader_and_isr(
        self, request: LeaderAndIsrRequest, source: str
    ) -> LeaderAndIsrResponse: ...

    async def stop_replica(
        self, request: StopReplicaRequest, source: str
    ) -> StopReplicaResponse: ...

    async def update_metadata(
        self, request: UpdateMetadataRequest, source: str
    ) -> UpdateMetadataResponse: ...


@dataclass(slots=True, eq=False)
class BrokerServices:
    """The ports of the broker's handlers (see the module docstring). Built once by the
    broker at start-up; read by the handlers on the event loop."""

    config: BrokerConfig
    node_id: int
    cluster_id: str
    log_dir: Path
    topics: TopicRegistry
    metadata: MetadataView
    replica_manager: ReplicaManager
    group_coordinator: GroupCoordinator
    group_coordinator_log: ConsumerOffsetsLog
    transaction_coordinator: TransactionCoordinator
    transaction_state_log: TransactionStateLog
    controller_channel: ControllerChannel
    topic_creator: TopicCreator
    producer_ids: ProducerIdSource
    fetch_sessions: FetchSessionCache
    # Share groups (KIP-932): membership, share sessions, share-partitions.
    share_coordinator: ShareCoordinator
    share_groups: ShareGroupService
    # This node's endpoint on a listener, as clients reach it.
    advertised_endpoint: Callable[[str], tuple[str, int]]
    # The listener follower fetches must come over (None: a single node has no followers).
    inter_broker_listener: str | None
    # The APIs a listener serves (None: the client listeners), for ApiVersions.
    served_apis: Callable[[str | None], Mapping[int, ApiHandlerSpec]]
    control_plane: ControlPlane | None
    # Users' SCRAM credentials by (user, mechanism type id), as this node's metadata has them.
    scram_credentials: Callable[[], Mapping[tuple[str, int], ScramCredentialData]]
    # The client quota managers (Kafka's ClientQuotaManagers) and the quotas they enforce.
    quotas: QuotaManagers
    # The authorizer authorizer.class.name names (None: every request allowed).
    authorizer: Authorizer | None = None
    # Encoded "all topics" Metadata answers of the current metadata version.
    metadata_answers: MetadataAnswerCache = field(default_factory=MetadataAnswerCache)

    def topic_config(self, name: str) -> TopicConfig:
        """The effective configs of topic ``name`` (the broker's defaults if unknown)."""
        info = self.topics.get(name)
        return TopicConfig(self.config, {} if info is None else dict(info.configs))
