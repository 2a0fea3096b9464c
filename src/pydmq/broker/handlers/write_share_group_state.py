"""WriteShareGroupState (key 85), v0-v1: a share-partition's state, written by its partition
leader (KIP-932). pydmq's leaders send every in-flight batch, so a write replaces the stored
state. FENCED_LEADER_EPOCH from a leader epoch below the stored one, FENCED_STATE_EPOCH from
a state epoch below it. See :mod:`pydmq.broker.handlers._share_state`.
"""

from __future__ import annotations

import time
from typing import Any

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._share_state import error_only, serve_request
from pydmq.protocol.messages import write_share_group_state as m
from pydmq.shares.coordinator import ShareCoordinator, StateAnswer
from pydmq.shares.generated_records import ShareSnapshotValue, StateBatch

__all__ = ["HANDLER"]


async def _write(coordinator: ShareCoordinator, key: tuple[Any, Any, int], p: Any) -> StateAnswer:
    now = time.time_ns() // 1_000_000
    value = ShareSnapshotValue(
        snapshot_epoch=0,
        state_epoch=p.state_epoch,
        leader_epoch=p.leader_epoch,
        start_offset=p.start_offset,
        create_timestamp=now,
        write_timestamp=now,
        state_batches=tuple(
            StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in p.state_batches
        ),
        delivery_complete_count=p.delivery_complete_count,
    )
    return await coordinator.write_state(key, value)


async def handle(
    ctx: BrokerContext, request: m.WriteShareGroupStateRequest
) -> m.WriteShareGroupStateResponse:
    return await serve_request(
        ctx,
        request,
        _write,
        error_only(m.PartitionResult),
        m.WriteShareGroupStateResponse,
        m.WriteStateResult,
    )


HANDLER = ApiHandlerSpec(85, 0, m.REQUEST_MAX_VERSION, handle, "WriteShareGroupState")
