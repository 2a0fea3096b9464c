"""Broker lifecycle operations: registration, heartbeats, fencing, controlled shutdown, and
producer id blocks (BrokerRegistration 62, BrokerHeartbeat 63, ControlledShutdown 7,
UnregisterBroker 64, AllocateProducerIds 67)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydmq.controller.operations.common import (
    ControllerResult,
    OperationContext,
    check_broker,
    elect_offline_leaders,
    image_after,
    move_replicas_away,
)
from pydmq.metadata.image import MetadataImage
from pydmq.metadata.records import (
    BrokerRegistrationChangeRecord,
    Endpoint,
    FenceBrokerRecord,
    MetadataRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from pydmq.protocol.errors import ErrorCode

__all__ = [
    "BrokerHeartbeatReply",
    "BrokerRegistrationReply",
    "ControlledShutdownReply",
    "ProducerIdsBlock",
    "allocate_producer_ids",
    "broker_heartbeat",
    "controlled_shutdown",
    "fence_brokers",
    "fence_stale_brokers",
    "register_broker",
    "unfence_broker",
    "unregister_broker",
]


@dataclass(frozen=True, slots=True)
class BrokerRegistrationReply:
    error_code: int
    broker_epoch: int = -1


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatReply:
    error_code: int
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False


@dataclass(frozen=True, slots=True)
class ControlledShutdownReply:
    error_code: int
    remaining_partitions: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class ProducerIdsBlock:
    error_code: int
    producer_id_start: int = -1
    producer_id_len: int = 0


def register_broker(
    image: MetadataImage,
    ctx: OperationContext,
    *,
    broker_id: int,
    incarnation_id: uuid.UUID,
    endpoints: Sequence[Endpoint],
    rack: str | None,
) -> ControllerResult[BrokerRegistrationReply]:
    """Register (or re-register) a broker, fenced until it catches up with the metadata log.

    The broker epoch is ``image.offset + 1`` — the offset the RegisterBrokerRecord gets when
    the runtime appends it right after the image, as Kafka's epoch is the record's offset —
    and in any case above the previous registration's. A re-registration (a restart, new
    ``incarnation_id``) replaces the old one; the old incarnation's state is gone, so its
    leaderships and ISR memberships are taken away as for a fenced broker.
    """
    old = image.brokers.get(broker_id)
    epoch = max(image.offset + 1, old.epoch + 1 if old is not None else 0)
    records: list[MetadataRecord] = [
        RegisterBrokerRecord(broker_id, incarnation_id, epoch, tuple(endpoints), rack, True, False)
    ]
    if old is not None:
        records.extend(move_replicas_away(image, ctx, {broker_id}))
    return ControllerResult(records, BrokerRegistrationReply(ErrorCode.NONE, epoch))


def _fence_records(
    image: MetadataImage, ctx: OperationContext, broker_ids: Sequence[int]
) -> list[MetadataRecord]:
    records: list[MetadataRecord] = []
    for broker_id in sorted(set(broker_ids)):
        broker = image.brokers.get(broker_id)
        if broker is not None and not broker.fenced:
            records.append(FenceBrokerRecord(broker_id, broker.epoch))
    records.extend(move_replicas_away(image, ctx, set(broker_ids)))
    return records


def _unfence_records(
    image: MetadataImage, ctx: OperationContext, broker_id: int
) -> list[MetadataRecord]:
    broker = image.brokers.get(broker_id)
    if broker is None or not broker.fenced:
        return []
    records: list[MetadataRecord] = [UnfenceBrokerRecord(broker_id, broker.epoch)]
    records.extend(elect_offline_leaders(image, ctx, {broker_id}))
    return records


def fence_brokers(
    image: MetadataImage, ctx: OperationContext, broker_ids: Sequence[int]
) -> ControllerResult[list[int]]:
    """Fence ``broker_ids``: FenceBrokerRecords, then new leaders (elected by each topic's
    strategy among the electable brokers, else ``-1``) and ISR shrinks where the strategy
    allows. The response is the ids that were unfenced before."""
    fenced = sorted(
        b for b in set(broker_ids) if b in image.brokers and not image.brokers[b].fenced
    )
    return ControllerResult(_fence_records(image, ctx, broker_ids), fenced)


def unfence_broker(
    image: MetadataImage, ctx: OperationContext, *, broker_id: int
) -> ControllerResult[bool]:
    """Unfence a fenced broker and elect leaders for the offline partitions it can lead.
    The response says whether it was fenced."""
    records = _unfence_records(image, ctx, broker_id)
    return ControllerResult(records, bool(records))


def fence_stale_brokers(
    image: MetadataImage,
    ctx: OperationContext,
    *,
    now_ms: int,
    last_heartbeat_ms: Mapping[int, int],
    session_timeout_ms: int,
    limit: int | None = None,
) -> ControllerResult[list[int]]:
    """Fence unfenced brokers whose last heartbeat is older than the session timeout, the
    stalest first and at most ``limit`` of them (Kafka fences one stale broker at a time, so
    that heartbeats queued behind a stall are heard before more brokers go).

    Brokers missing from ``last_heartbeat_ms`` are not judged: the runtime starts every
    broker's clock when it becomes the active controller (as Kafka's heartbeat manager does).
    The response is the fenced broker ids.
    """
    candidates = sorted(
        (last_heartbeat_ms[b.id], b.id)
        for b in image.brokers.values()
        if not b.fenced
        and b.id in last_heartbeat_ms
        and now_ms - last_heartbeat_ms[b.id] > session_timeout_ms
    )
    stale = [broker_id for _, broker_id in candidates[:limit]]
    if not stale:
        return ControllerResult([], [])
    return ControllerResult(_fence_records(image, ctx, stale), sorted(stale))


def _leads_nothing(image: MetadataImage, broker_id: int) -> bool:
    return not image.partitions_led_by(broker_id)


def _enter_controlled_shutdown(
    image: MetadataImage, ctx: OperationContext, broker_id: int
) -> list[MetadataRecord]:
    broker = image.brokers[broker_id]
    records: list[MetadataRecord] = []
    if not broker.in_controlled_shutdown:
        records.append(
            BrokerRegistrationChangeRecord(broker_id, broker.epoch, in_controlled_shutdown=True)
        )
    records.extend(move_replicas_away(image, ctx, {broker_id}))
    return records


def broker_heartbeat(
    image: MetadataImage,
    ctx: OperationContext,
    *,
    broker_id: int,
    broker_epoch: int,
    current_metadata_offset: int,
    want_fence: bool = False,
    want_shut_down: bool = False,
) -> ControllerResult[BrokerHeartbeatReply]:
    """Kafka's broker state machine, driven by heartbeats.

    - fenced: unfenced once caught up (``current_metadata_offset`` >= the registration's
      offset, the broker epoch) unless it asks to stay fenced; told to shut down at once if
      it wants to (it leads nothing).
    - unfenced: ``want_fence`` fences it; ``want_shut_down`` starts a controlled shutdown
      (leaderships and ISR memberships move away).
    - in controlled shutdown: leadership keeps moving away; ``should_shut_down`` once the
      broker leads nothing.
    """
    error = check_broker(image, broker_id, broker_epoch)
    if error != ErrorCode.NONE:
        return ControllerResult([], BrokerHeartbeatReply(error))
    broker = image.brokers[broker_id]
    caught_up = current_metadata_offset >= broker.epoch
    records: list[MetadataRecord] = []
    if broker.fenced:
        if want_shut_down:
            return ControllerResult([], BrokerHeartbeatReply(ErrorCode.NONE, caught_up, True, True))
        if not want_fence and caught_up:
            records = _unfence_records(image, ctx, broker_id)
    elif want_shut_down or broker.in_controlled_shutdown:
        records = _enter_controlled_shutdown(image, ctx, broker_id)
    elif want_fence:
        records = _fence_records(image, ctx, [broker_id])
    after = image_after(image, records) if records else image
    state = after.brokers[broker_id]
    shut_down = state.in_controlled_shutdown and _leads_nothing(after, broker_id)
    return ControllerResult(
        records, BrokerHeartbeatReply(ErrorCode.NONE, caught_up, state.fenced, shut_down)
    )


def controlled_shutdown(
    image: MetadataImage, ctx: OperationContext, *, broker_id: int, broker_epoch: int
) -> ControllerResult[ControlledShutdownReply]:
    """ControlledShutdown (7): move leadership away; answer the partitions still led."""
    error = check_broker(image, broker_id, broker_epoch)
    if error != ErrorCode.NONE:
        return ControllerResult([], ControlledShutdownReply(error))
    if image.brokers[broker_id].fenced:
        return ControllerResult([], ControlledShutdownReply(ErrorCode.NONE))
    records = _enter_controlled_shutdown(image, ctx, broker_id)
    after = image_after(image, records)
    remaining = tuple(
        (after.topics.by_id[topic_id].name, pid)
        for topic_id, pid in after.partitions_led_by(broker_id)
    )
    return ControllerResult(records, ControlledShutdownReply(ErrorCode.NONE, remaining))


def unregister_broker(
    image: MetadataImage, ctx: OperationContext, *, broker_id: int
) -> ControllerResult[int]:
    """UnregisterBroker (64): remove a registration, moving its replicas' roles away."""
    broker = image.brokers.get(broker_id)
    if broker is None:
        return ControllerResult([], ErrorCode.BROKER_ID_NOT_REGISTERED)
    records: list[MetadataRecord] = [UnregisterBrokerRecord(broker_id, broker.epoch)]
    records.extend(move_replicas_away(image, ctx, {broker_id}))
    return ControllerResult(records, ErrorCode.NONE)


def allocate_producer_ids(
    image: MetadataImage, ctx: OperationContext, *, broker_id: int, broker_epoch: int
) -> ControllerResult[ProducerIdsBlock]:
    """AllocateProducerIds (67): the next block of ``producer_id_block_size`` ids."""
    error = check_broker(image, broker_id, broker_epoch)
    if error != ErrorCode.NONE:
        return ControllerResult([], ProducerIdsBlock(error))
    start = image.next_producer_id
    size = ctx.producer_id_block_size
    record = ProducerIdsRecord(broker_id, broker_epoch, start + size)
    return ControllerResult([record], ProducerIdsBlock(ErrorCode.NONE, start, size))
