"""ReadShareGroupState (key 84), v0: a share-partition's state, read by its partition leader
at its leader epoch (KIP-932). A leader epoch above the stored one is recorded first, fencing
the previous leader's writes; below it: FENCED_LEADER_EPOCH. No state: start offset -1.
See :mod:`pydmq.broker.handlers._share_state`.
"""

from __future__ import annotations

from typing import Any

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._share_state import serve_request
from pydmq.protocol.messages import read_share_group_state as m
from pydmq.shares.coordinator import StateAnswer

__all__ = ["HANDLER"]


def _answer(p: Any, answer: StateAnswer) -> m.PartitionResult:
    code, state = answer
    if code or state is None:
        return m.PartitionResult(
            partition=p.partition, error_code=code, state_epoch=-1, start_offset=-1
        )
    return m.PartitionResult(
        partition=p.partition,
        state_epoch=state.state_epoch,
        start_offset=state.start_offset,
        state_batches=[
            m.StateBatch(
                first_offset=b.first_offset,
                last_offset=b.last_offset,
                delivery_state=b.delivery_state,
                delivery_count=b.delivery_count,
            )
            for b in state.state_batches
        ],
    )


async def handle(
    ctx: BrokerContext, request: m.ReadShareGroupStateRequest
) -> m.ReadShareGroupStateResponse:
    return await serve_request(
        ctx,
        request,
        lambda coordinator, key, p: coordinator.read_state(key, p.leader_epoch),
        _answer,
        m.ReadShareGroupStateResponse,
        m.ReadStateResult,
    )


HANDLER = ApiHandlerSpec(84, 0, m.REQUEST_MAX_VERSION, handle, "ReadShareGroupState")
