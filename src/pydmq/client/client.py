"""KafkaClient: bootstrap, per-node connections, metadata and a few typed helpers.

A dead broker does not stop the client while another one answers (librdkafka behaves the
same): requests without a node go to any reachable broker, the bootstrap servers first, then
the brokers the last Metadata named, those that failed recently last; a request whose
connection could not be opened goes to the next one, and so does a read-only request
(Metadata, ListOffsets, Describe*...) whose connection broke after it was sent. Requests for
a partition's leader (ListOffsets here, Produce and Fetch in :mod:`.producer` and
:mod:`.consumer`) refresh the metadata and try the new leader when the old one is gone.
"""

from __future__ import annotations

import ssl
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, TypeVar

from pydmq.client.connection import DEFAULT_TIMEOUT, BrokerConnection, parse_address
from pydmq.client.errors import (
    BrokerUnreachableError,
    KafkaConnectionError,
    KafkaError,
    raise_for_error,
)
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages import API_SCHEMAS
from pydmq.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from pydmq.protocol.messages.metadata import (
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
)

if TYPE_CHECKING:
    from pydmq.security.sasl.client import SaslClient

__all__ = [
    "EARLIEST",
    "LATEST",
    "ApiKey",
    "KafkaClient",
    "PartitionInfo",
    "TopicInfo",
]

R = TypeVar("R")

EARLIEST: Final = -2
LATEST: Final = -1
# An address whose connection failed is tried after the others for this long.
_AVOID_FAILED_S: Final = 10.0
_RETRY_BACKOFF_S: Final = 0.1
_RETRY_BACKOFF_MAX_S: Final = 1.0
# Requests that change nothing: sent again to another broker when the connection broke
# after they were sent (Metadata, ListOffsets, OffsetFetch, FindCoordinator, DescribeGroups,
# ListGroups, ApiVersions, DescribeConfigs, DescribeLogDirs, DescribeQuorum, DescribeCluster).
_READ_ONLY_APIS: Final = frozenset({2, 3, 9, 10, 15, 16, 18, 32, 35, 55, 60})


class ApiKey:
    """The API keys the client's helpers use (any key of API_SCHEMAS works with send)."""

    PRODUCE: Final = 0
    FETCH: Final = 1
    LIST_OFFSETS: Final = 2
    METADATA: Final = 3
    OFFSET_COMMIT: Final = 8
    OFFSET_FETCH: Final = 9
    FIND_COORDINATOR: Final = 10
    LIST_GROUPS: Final = 16
    API_VERSIONS: Final = 18
    CREATE_TOPICS: Final = 19
    DELETE_TOPICS: Final = 20
    INIT_PRODUCER_ID: Final = 22
    DESCRIBE_CONFIGS: Final = 32
    CREATE_PARTITIONS: Final = 37
    INCREMENTAL_ALTER_CONFIGS: Final = 44


def _api_key_of(request: Any) -> int | None:
    """The API key of a generated request object (from its module, without loading others)."""
    module = sys.modules.get(type(request).__module__)
    api_key = getattr(module, "API_KEY", None)
    if not isinstance(api_key, int) or API_SCHEMAS[api_key].request_root != type(request).__name__:
        return None
    return api_key


@dataclass(slots=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]
    error_code: int = 0


@dataclass(slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    is_internal: bool
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    error_code: int = 0


class KafkaClient:
    """A synchronous Kafka client: ``KafkaClient("127.0.0.1:9092").send(key, request)``.

    ``bootstrap`` is a comma-separated list of ``host:port``. Requests for a specific broker
    take ``node_id``; without it they go to any reachable broker (the module docstring says
    which, and when a request is sent again elsewhere). Owned by one thread.
    """

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        client_id: str = "pydmq-cli",
        timeout: float = DEFAULT_TIMEOUT,
        *,
        version_caps: dict[int, int] | None = None,
        sasl: Callable[[], SaslClient] | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """``sasl``: how to authenticate on a SASL listener (a factory of clients);
        ``ssl_context``: TLS for SSL and SASL_SSL listeners."""
        self.sasl = sasl
        self.ssl_context = ssl_context
        items = bootstrap.split(",") if isinstance(bootstrap, str) else list(bootstrap)
        self.bootstrap = [parse_address(a) for a in items if a.strip()]
        if not self.bootstrap:
            raise ValueError("no bootstrap servers given")
        self.client_id = client_id
        self.timeout = timeout
        self.version_caps = dict(version_caps or {})
        self.brokers: dict[int, tuple[str, int]] = {}
        self.controller_id = -1
        self.cluster_id: str | None = None
        self.topics: dict[str, TopicInfo] = {}
        self._bootstrap_conn: BrokerConnection | None = None
        self._nodes: dict[int, BrokerConnection] = {}
        self._failed_at: dict[tuple[str, int], float] = {}

    # -- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> KafkaClient:
        self.connect()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _new_conn(self, host: str, port: int) -> BrokerConnection:
        return BrokerConnection(
            host,
            port,
            client_id=self.client_id,
            timeout=self.timeout,
            version_caps=self.version_caps,
            sasl=self.sasl,
            ssl_context=self.ssl_context,
        )

    def connect(self) -> BrokerConnection:
        """A connection to any reachable broker (opened and negotiated on first use):
        the bootstrap servers first, then the brokers the metadata names, those that failed
        recently last. Raises BrokerUnreachableError when none answers."""
        conn = self._bootstrap_conn
        if conn is not None and conn.connected:
            return conn
        self._bootstrap_conn = None
        errors: list[str] = []
        for host, port in self._candidates():
            conn = self._new_conn(host, port)
            try:
                conn.connect()
            except KafkaConnectionError as exc:
                self._failed((host, port))
                errors.append(exc.message)
                continue
            self._failed_at.pop((host, port), None)
            self._bootstrap_conn = conn
            return conn
        raise BrokerUnreachableError("; ".join(errors) or "no bootstrap server reachable")

    def _candidates(self) -> list[tuple[str, int]]:
        """Addresses to try, in order: bootstrap, then metadata brokers; recent failures last
        (the oldest failure first)."""
        addresses = list(dict.fromkeys([*self.bootstrap, *self.brokers.values()]))
        now = time.monotonic()
        fresh = [
            a
            for a in addresses
            if self._failed_at.get(a, -_AVOID_FAILED_S) + _AVOID_FAILED_S <= now
        ]
        failed = sorted((a for a in addresses if a not in fresh), key=self._failed_at.__getitem__)
        return fresh + failed

    def _failed(self, address: tuple[str, int]) -> None:
        self._failed_at[address] = time.monotonic()

    def close(self) -> None:
        for conn in self._nodes.values():
            conn.close()
        self._nodes.clear()
        if self._bootstrap_conn is not None:
            self._bootstrap_conn.close()
            self._bootstrap_conn = None

    def connection(self, node_id: int | None = None) -> BrokerConnection:
        """The connection to ``node_id`` (None: any reachable broker, see :meth:`connect`)."""
        if node_id is None:
            return self.connect()
        conn = self._nodes.get(node_id)
        if conn is not None and conn.connected:
            return conn
        address = self.brokers.get(node_id)
        if address is None:
            self.refresh_metadata([])
            address = self.brokers.get(node_id)
            if address is None:
                raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"unknown broker id {node_id}")
        boot = self._bootstrap_conn
        if boot is not None and boot.connected and (boot.host, boot.port) == address:
            conn = boot
        else:
            conn = self._new_conn(*address)
            try:
                conn.connect()
            except KafkaConnectionError:
                self._failed(address)
                raise
        self._nodes[node_id] = conn
        return conn

    # -- versions -----------------------------------------------------------------------------

    def supports(self, api_key: int, node_id: int | None = None) -> bool:
        """Whether the broker advertises ``api_key`` in a version our codecs know."""
        return self.connection(node_id).supports(api_key)

    def version_for(self, api_key: int, node_id: int | None = None) -> int:
        return self.connection(node_id).version_for(api_key)

    @property
    def api_versions(self) -> dict[int, int]:
        """Negotiated version per API key on the bootstrap connection."""
        return dict(self.connect().versions)

    # -- requests -----------------------------------------------------------------------------

    def send(
        self,
        api_key: int,
        request: Any,
        *,
        node_id: int | None = None,
        version: int | None = None,
        expect_response: bool = True,
        timeout: float | None = None,
    ) -> Any:
        """Send one request and return the decoded response object.

        Without ``node_id``, a request that could not be sent, or a read-only one whose
        connection broke, is sent again to the next reachable broker.
        """
        if node_id is not None:
            return self.connection(node_id).send(
                api_key, request, version=version, expect_response=expect_response, timeout=timeout
            )
        tries = max(1, len(self._candidates()))
        attempt = 0
        while True:
            attempt += 1
            conn = self.connect()
            try:
                return conn.send(
                    api_key,
                    request,
                    version=version,
                    expect_response=expect_response,
                    timeout=timeout,
                )
            except KafkaConnectionError as exc:
                self._failed((conn.host, conn.port))
                self._bootstrap_conn = None
                conn.close()
                again = isinstance(exc, BrokerUnreachableError) or api_key in _READ_ONLY_APIS
                if not again or attempt >= tries:
                    raise

    def call(self, request: Any, response_type: type[R], *, node_id: int | None = None) -> R:
        """Typed :meth:`send`: the API key comes from the request's type."""
        api_key = _api_key_of(request)
        if api_key is None:
            raise TypeError(f"{type(request).__name__} is not a request type")
        response = self.send(api_key, request, node_id=node_id)
        if not isinstance(response, response_type):
            raise TypeError(f"expected {response_type.__name__}, got {type(response).__name__}")
        return response

    # -- metadata -----------------------------------------------------------------------------

    def refresh_metadata(
        self, topics: Iterable[str] | None = None, *, allow_auto_create: bool = False
    ) -> MetadataResponse:
        """Fetch metadata for ``topics`` (None: all topics; []: brokers only) and cache it."""
        names = None if topics is None else list(topics)
        request = MetadataRequest(
            topics=None if names is None else [MetadataRequestTopic(name=n) for n in names],
            allow_auto_topic_creation=allow_auto_create,
        )
        conn = self.connect()
        if names is None and conn.version_for(ApiKey.METADATA) == 0:
            request.topics = []  # v0 has no null: an empty list means "all topics"
        response = self.call(request, MetadataResponse)
        self.brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        self.controller_id = response.controller_id
        self.cluster_id = response.cluster_id
        for topic in response.topics:
            if topic.name is None:
                continue
            info = TopicInfo(topic.name, topic.topic_id, topic.is_internal)
            info.error_code = topic.error_code
            for p in topic.partitions:
                info.partitions[p.partition_index] = PartitionInfo(
                    p.partition_index,
                    p.leader_id,
                    p.leader_epoch,
                    list(p.replica_nodes),
                    list(p.isr_nodes),
                    list(p.offline_replicas),
                    p.error_code,
                )
            if topic.error_code:
                self.topics.pop(topic.name, None)
            else:
                self.topics[topic.name] = info
        return response

    def topic(self, name: str, *, refresh: bool = False) -> TopicInfo:
        """Metadata for one topic; raises KafkaError (e.g. UNKNOWN_TOPIC_OR_PARTITION)."""
        if refresh or name not in self.topics:
            response = self.refresh_metadata([name])
            for t in response.topics:
                if t.name == name:
                    raise_for_error(t.error_code, f"topic {name!r}")
        info = self.topics.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r}")
        return info

    def wait_for_topic(self, name: str, timeout: float = 10.0) -> TopicInfo:
        """Poll metadata until every partition of ``name`` has a leader."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                info = self.topic(name, refresh=True)
                if info.partitions and all(p.leader >= 0 for p in info.partitions.values()):
                    return info
            except KafkaError as exc:
                if time.monotonic() >= deadline or exc.code not in (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    ErrorCode.LEADER_NOT_AVAILABLE,
                ):
                    raise
            if time.monotonic() >= deadline:
                raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"topic {name!r} has no leader")
            time.sleep(0.05)

    def leader_for(self, topic: str, partition: int) -> int:
        info = self.topic(topic)
        p = info.partitions.get(partition)
        if p is None:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"topic {topic!r} has no partition {partition}",
            )
        if p.leader < 0:
            raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"{topic}-{partition}")
        return p.leader

    # -- offsets ------------------------------------------------------------------------------

    def list_offsets(
        self,
        topic: str,
        timestamps: dict[int, int],
        *,
        isolation_level: int = 0,
        partial: bool = False,
    ) -> dict[int, tuple[int, int]]:
        """ListOffsets for ``{partition: timestamp}`` (EARLIEST, LATEST or a time in ms).

        Returns ``{partition: (offset, timestamp)}``; offset is -1 when no record has a
        timestamp at or after the one asked for. Each partition is asked of its leader; when
        the leader cannot be reached or is no longer the leader, the metadata is refreshed
        and the new leader asked, until the client's timeout. With ``partial``, partitions
        without a leader, or still failing at the timeout, are left out instead of raising.
        """
        deadline = time.monotonic() + self.timeout
        backoff = _RETRY_BACKOFF_S
        out: dict[int, tuple[int, int]] = {}
        pending = dict(timestamps)
        while True:
            failed: dict[int, KafkaError] = {}
            by_leader: dict[int, dict[int, int]] = {}
            for partition, ts in pending.items():
                try:
                    by_leader.setdefault(self.leader_for(topic, partition), {})[partition] = ts
                except KafkaError as exc:
                    if partial and exc.code == ErrorCode.LEADER_NOT_AVAILABLE:
                        continue  # no leader to ask
                    if not exc.retriable:
                        raise
                    failed[partition] = exc
            for leader, wanted in by_leader.items():
                try:
                    answers = self._list_offsets_of(leader, topic, wanted, isolation_level)
                except KafkaConnectionError as exc:
                    failed.update(dict.fromkeys(wanted, exc))
                    continue
                for partition, (code, offset, timestamp) in answers.items():
                    if code == ErrorCode.NONE:
                        out[partition] = (offset, timestamp)
                        continue
                    error = KafkaError(code, f"{topic}-{partition}")
                    if not error.retriable:
                        raise error
                    failed[partition] = error
            if not failed:
                return out
            if time.monotonic() + backoff > deadline:
                if partial:
                    return out
                raise next(iter(failed.values()))
            time.sleep(backoff)
            backoff = min(2 * backoff, _RETRY_BACKOFF_MAX_S)
            try:
                self.refresh_metadata([topic])
            except KafkaConnectionError:
                if time.monotonic() >= deadline:
                    raise
            pending = {p: timestamps[p] for p in failed}

    def _list_offsets_of(
        self, leader: int, topic: str, wanted: dict[int, int], isolation_level: int
    ) -> dict[int, tuple[int, int, int]]:
        """One ListOffsets to ``leader``: ``{partition: (error code, offset, timestamp)}``."""
        request = ListOffsetsRequest(
            replica_id=-1,
            isolation_level=isolation_level,
            topics=[
                ListOffsetsTopic(
                    name=topic,
                    partitions=[
                        ListOffsetsPartition(partition_index=p, timestamp=ts)
                        for p, ts in sorted(wanted.items())
                    ],
                )
            ],
            timeout=int(self.timeout * 1000),
        )
        response = self.call(request, ListOffsetsResponse, node_id=leader)
        return {
            p.partition_index: (p.error_code, p.offset, p.timestamp)
            for t in response.topics
            for p in t.partitions
        }

    def topic_id(self, topic: str) -> uuid.UUID:
        return self.topic(topic).topic_id
