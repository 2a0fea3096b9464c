"""Value types of the group coordinator's API: its configuration, requests and summaries."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pydmq.groups.consumer.api import ConsumerGroupConfig
from pydmq.groups.offsets import TopicPartitionKey

__all__ = ["CommitRequest", "GroupConfig", "GroupSummary", "JoinRequest", "MemberSummary"]


@dataclass(frozen=True, slots=True)
class GroupConfig:
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_size: int = 2**31 - 1
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    consumer: ConsumerGroupConfig = field(default_factory=ConsumerGroupConfig)

    @staticmethod
    def from_broker_config(config: object) -> GroupConfig:
        get_int: Callable[[str], int] = config.get_int  # type: ignore[attr-defined]
        return GroupConfig(
            initial_rebalance_delay_ms=get_int("group.initial.rebalance.delay.ms"),
            min_session_timeout_ms=get_int("group.min.session.timeout.ms"),
            max_session_timeout_ms=get_int("group.max.session.timeout.ms"),
            max_size=get_int("group.max.size"),
            offsets_retention_ms=get_int("offsets.retention.minutes") * 60_000,
            retention_check_interval_ms=get_int("offsets.retention.check.interval.ms"),
            offset_metadata_max_bytes=get_int("offset.metadata.max.bytes"),
            consumer=ConsumerGroupConfig(
                heartbeat_interval_ms=get_int("group.consumer.heartbeat.interval.ms"),
                session_timeout_ms=get_int("group.consumer.session.timeout.ms"),
                max_size=get_int("group.consumer.max.size"),
                assignors=tuple(config.get_list("group.consumer.assignors")),  # type: ignore[attr-defined]
            ),
        )


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    require_known_member_id: bool
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]


@dataclass(frozen=True, slots=True)
class CommitRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    generation_id: int
    retention_time_ms: int
    offsets: dict[TopicPartitionKey, tuple[int, int, str | None]]  # offset, epoch, metadata
    api_version: int = 9
    # A TxnOffsetCommit's producer id and epoch (its offsets are written in the producer's
    # transaction; KIP-447 checks); None for an OffsetCommit.
    producer: tuple[int, int] | None = None

    @property
    def transactional(self) -> bool:
        return self.producer is not None


@dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberSummary] = field(default_factory=list)
