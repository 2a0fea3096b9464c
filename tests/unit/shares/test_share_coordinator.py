"""The share coordinator over an in-memory ``__share_group_state``: reads, writes,
initializations and deletions of share-partition state, with Kafka's leader-epoch and
state-epoch fencing, and a reload from the records it wrote giving the same state."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine, Iterator, Sequence
from typing import Any, TypeVar

from pydmq.coordinator.api import CoordinatorRecord
from pydmq.protocol.errors import ErrorCode as E
from pydmq.protocol.records import Record
from pydmq.shares.coordinator import ShareCoordinator
from pydmq.shares.generated_records import ShareSnapshotValue, StateBatch
from pydmq.shares.state_log import share_state_partition

T = TypeVar("T")
TOPIC = uuid.UUID(int=7)
KEY = ("g", TOPIC, 0)


class MemoryStateLog:
    """``__share_group_state`` in memory: appends commit at once."""

    def __init__(self, partitions: int = 3) -> None:
        self.partitions = partitions
        self.logs: dict[int, list[CoordinatorRecord]] = {}

    @property
    def exists(self) -> bool:
        return True

    @property
    def num_partitions(self) -> int:
        return self.partitions

    def partition_for(self, key: tuple[str, uuid.UUID, int]) -> int:
        return share_state_partition(key, self.partitions)

    def ensure_created(self) -> bool:
        return True

    def append(self, partition: int, records: Sequence[CoordinatorRecord]) -> None:
        self.logs.setdefault(partition, []).extend(records)

    def replay_partition(self, partition: int) -> Iterator[Record]:
        for offset, (key, value) in enumerate(list(self.logs.get(partition, []))):
            yield Record(offset, 0, key, value, ())

    def await_committed(self, partition: int) -> None:
        return None


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, 10))


def state(leader_epoch: int, state_epoch: int = 0, start: int = 10) -> ShareSnapshotValue:
    return ShareSnapshotValue(
        snapshot_epoch=0,
        state_epoch=state_epoch,
        leader_epoch=leader_epoch,
        start_offset=start,
        create_timestamp=1,
        write_timestamp=1,
        state_batches=(StateBatch(start, start + 4, 2, 1), StateBatch(start + 5, start + 5, 0, 3)),
        delivery_complete_count=5,
    )


def coordinator(log: MemoryStateLog) -> ShareCoordinator:
    return ShareCoordinator(log, owns_all_partitions=True)  # type: ignore[arg-type]


def test_written_state_is_read_back_and_survives_a_reload() -> None:
    log = MemoryStateLog()

    async def scenario() -> None:
        c = coordinator(log)
        assert await c.read_state(KEY, 0) == (E.NONE, None)  # no state yet
        assert (await c.write_state(KEY, state(0)))[0] == E.NONE
        code, read = await c.read_state(KEY, 0)
        assert code == E.NONE and read is not None
        assert read.start_offset == 10 and read.state_batches == state(0).state_batches
        again = coordinator(log)  # a new coordinator loads the records written
        code, reloaded = await again.read_state(KEY, 0)
        assert code == E.NONE and reloaded == read
        assert again.summary(KEY) == (E.NONE, read)

    run(scenario())


def test_a_new_leader_epoch_fences_the_previous_leader() -> None:
    async def scenario() -> None:
        c = coordinator(MemoryStateLog())
        await c.write_state(KEY, state(3))
        code, read = await c.read_state(KEY, 4)  # the new leader reads at its epoch
        assert code == E.NONE and read is not None and read.leader_epoch == 4
        assert (await c.write_state(KEY, state(3, start=12)))[0] == E.FENCED_LEADER_EPOCH
        assert (await c.read_state(KEY, 3))[0] == E.FENCED_LEADER_EPOCH
        assert (await c.write_state(KEY, state(4, start=12)))[0] == E.NONE
        _, after = c.summary(KEY)
        assert after is not None and after.start_offset == 12

    run(scenario())


def test_initialize_takes_a_higher_state_epoch_and_fences_older_writes() -> None:
    async def scenario() -> None:
        c = coordinator(MemoryStateLog())
        await c.write_state(KEY, state(2, state_epoch=1))
        assert (await c.initialize_state(KEY, 1, 0))[0] == E.FENCED_STATE_EPOCH
        assert (await c.initialize_state(KEY, 2, 100))[0] == E.NONE
        _, fresh = c.summary(KEY)
        assert fresh is not None and fresh.start_offset == 100 and fresh.state_batches == ()
        assert fresh.leader_epoch == 2  # kept: the leader is fenced by the state epoch
        assert (await c.write_state(KEY, state(2, state_epoch=1)))[0] == E.FENCED_STATE_EPOCH
        assert (await c.write_state(KEY, state(2, state_epoch=2, start=100)))[0] == E.NONE

    run(scenario())


def test_delete_forgets_the_state() -> None:
    async def scenario() -> None:
        log = MemoryStateLog()
        c = coordinator(log)
        await c.write_state(KEY, state(0))
        assert (await c.delete_state(KEY))[0] == E.NONE
        assert await c.read_state(KEY, 0) == (E.NONE, None)
        assert await coordinator(log).read_state(KEY, 0) == (E.NONE, None)  # the tombstone
        assert list(c.snapshots()) == []

    run(scenario())


def test_a_partition_not_led_here_is_not_coordinator() -> None:
    async def scenario() -> None:
        c = ShareCoordinator(MemoryStateLog(), owns_all_partitions=False)  # type: ignore[arg-type]
        assert not c.leads(KEY)
        assert (await c.write_state(KEY, state(0)))[0] == E.NOT_COORDINATOR
        assert c.summary(KEY)[0] == E.NOT_COORDINATOR
        partition = share_state_partition(KEY, 3)
        load = c.on_elected(partition, 5)
        assert load is not None
        await load
        assert c.leads(KEY)
        assert (await c.write_state(KEY, state(5)))[0] == E.NONE
        c.on_resigned(partition, 6)
        await asyncio.sleep(0)
        assert (await c.read_state(KEY, 5))[0] == E.NOT_COORDINATOR

    run(scenario())


def test_the_partition_of_a_key_is_kafkas() -> None:
    # Kafka: Utils.abs("group:topicId:partition".hashCode) % partitions, the topic id in its
    # base64 form ("AAAAAAAAAAAAAAAAAAAABw" for the UUID 0...07).
    from pydmq.groups.log import java_string_hashcode

    expected = abs(java_string_hashcode("g:AAAAAAAAAAAAAAAAAAAABw:0")) % 50
    assert share_state_partition(KEY, 50) == expected
