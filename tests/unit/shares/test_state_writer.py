"""StateWriter: one write per share-partition in flight, changes made meanwhile coalesced
into the next (the latest snapshot wins), flush waits for the changes made before it, and a
fenced write is reported."""

from __future__ import annotations

import asyncio
import uuid

from pydmq.protocol.errors import ErrorCode as E
from pydmq.shares.generated_records import ShareSnapshotValue
from pydmq.shares.state_writer import StateWriter

KEY = ("g", uuid.UUID(int=1), 0)


def snap(start: int) -> ShareSnapshotValue:
    return ShareSnapshotValue(0, 0, 0, start, 0, 0, ())


def test_changes_during_a_write_are_coalesced_into_the_next() -> None:
    async def scenario() -> None:
        gate = asyncio.Event()
        written: list[int | None] = []

        async def write(key: object, value: ShareSnapshotValue | None) -> int:
            written.append(None if value is None else value.start_offset)
            await gate.wait()
            return E.NONE

        writer = StateWriter(write, lambda key, code: None)
        writer.write(KEY, snap(1))
        await asyncio.sleep(0)
        for start in (2, 3, 4):
            writer.write(KEY, snap(start))
        flushed = asyncio.ensure_future(writer.flush([KEY]))
        await asyncio.sleep(0)
        assert not flushed.done() and written == [1]
        gate.set()
        assert await flushed == {KEY: E.NONE}
        assert written == [1, 4]  # 4 changes, 2 writes, the last one the latest state
        assert not writer.pending(KEY)
        assert await writer.flush([KEY]) == {}  # nothing pending: nothing to wait for

    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_a_fenced_write_is_reported_and_stops_the_later_ones() -> None:
    async def scenario() -> None:
        fenced: list[int] = []
        calls: list[int] = []

        async def write(key: object, value: ShareSnapshotValue | None) -> int:
            calls.append(0)
            await asyncio.sleep(0)
            return E.FENCED_STATE_EPOCH

        writer = StateWriter(write, lambda key, code: fenced.append(code))
        writer.write(KEY, snap(1))
        writer.write(KEY, snap(2))
        assert await writer.flush([KEY]) == {KEY: E.FENCED_STATE_EPOCH}
        assert fenced == [E.FENCED_STATE_EPOCH] and len(calls) == 1

    asyncio.run(asyncio.wait_for(scenario(), 10))
