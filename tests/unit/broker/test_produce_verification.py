"""The Produce handler with a transaction verified by a coordinator that answers later:
acks=0 gets no response but the batch is appended once the coordinator said yes (the
handler's awaitable is run, not dropped)."""

from __future__ import annotations

import asyncio
import inspect
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from pydmq.broker.handlers.produce import HANDLER
from pydmq.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pydmq.quotas.manager import QuotaManagers, QuotaSettings
from pydmq.testing.conformance_transactions import transactional_batch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "replication"))

from replica_support import TP, Verifier, verified_leader

pytestmark = pytest.mark.timeout(30)


def test_acks_0_appends_once_verified() -> None:
    async def scenario() -> None:
        verifier = Verifier(later=True)
        rm, p = verified_leader(verifier)
        ctx = SimpleNamespace(
            broker=SimpleNamespace(
                replica_manager=rm, authorizer=None, quotas=QuotaManagers(QuotaSettings())
            ),
            api_version=9,
        )
        request = ProduceRequest(
            transactional_id="txn",
            acks=0,
            timeout=1000,
            topic_data=[
                TopicProduceData(
                    name=TP.topic,
                    partition_data=[
                        PartitionProduceData(
                            index=TP.partition, records=transactional_batch(7, 0, 0)
                        )
                    ],
                )
            ],
        )
        answer = HANDLER.handle(ctx, request)  # type: ignore[arg-type]
        assert inspect.isawaitable(answer)
        waiting = asyncio.ensure_future(answer)
        await asyncio.sleep(0)
        verifier.answer()
        assert await waiting is None
        assert p.log.log_end_offset == 1

    asyncio.run(scenario())
