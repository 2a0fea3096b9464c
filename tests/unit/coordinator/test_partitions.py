"""InternalTopicPartitions: an acks=-1 append's commit future always settles, even when the
wait it reports on fails (the runtime's write, and the request behind it, would else wait
forever)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pydmq.coordinator.partitions import InternalTopicPartitions
from pydmq.replication.append import AppendResult

pytestmark = pytest.mark.timeout(30)


class _FailingWait:
    """A replica manager whose acks=-1 wait fails after the append (as a cancelled or broken
    purgatory wait would)."""

    def append_records(self, *args: Any, **kwargs: Any) -> Any:
        async def wait() -> list[AppendResult]:
            await asyncio.sleep(0)
            raise RuntimeError("the acks wait broke")

        return wait()


def test_a_commit_whose_wait_fails_settles_with_that_failure() -> None:
    async def scenario() -> None:
        partitions = InternalTopicPartitions("__state", lambda: _FailingWait(), 1000)  # type: ignore[arg-type,return-value]
        committed = partitions.append_batch(0, memoryview(b"batch"))
        assert committed is not None
        with pytest.raises(RuntimeError):
            await asyncio.wait_for(committed, 5)  # a generous bound that only catches a wedge

    asyncio.run(scenario())
