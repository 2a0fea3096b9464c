"""ReadShareGroupStateSummary (key 87), v0-v1: a share-partition's start offset, state and
leader epochs, and (v1) how many offsets from the start offset completed delivery, without
its batches (KIP-932). No state: start offset -1.
See :mod:`pydmq.broker.handlers._share_state`.
"""

from __future__ import annotations

from typing import Any

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._share_state import serve_request
from pydmq.protocol.messages import read_share_group_state_summary as m
from pydmq.shares.coordinator import ShareCoordinator, StateAnswer

__all__ = ["HANDLER"]


def _answer(p: Any, answer: StateAnswer) -> m.PartitionResult:
    code, state = answer
    if code or state is None:
        return m.PartitionResult(
            partition=p.partition, error_code=code, state_epoch=-1, leader_epoch=-1, start_offset=-1
        )
    return m.PartitionResult(
        partition=p.partition,
        state_epoch=state.state_epoch,
        leader_epoch=state.leader_epoch,
        start_offset=state.start_offset,
        delivery_complete_count=state.delivery_complete_count,
    )


async def _summary(coordinator: ShareCoordinator, key: tuple[Any, Any, int], p: Any) -> StateAnswer:
    return coordinator.summary(key)


async def handle(
    ctx: BrokerContext, request: m.ReadShareGroupStateSummaryRequest
) -> m.ReadShareGroupStateSummaryResponse:
    return await serve_request(
        ctx,
        request,
        _summary,
        _answer,
        m.ReadShareGroupStateSummaryResponse,
        m.ReadStateSummaryResult,
    )


HANDLER = ApiHandlerSpec(87, 0, m.REQUEST_MAX_VERSION, handle, "ReadShareGroupStateSummary")
