"""A Fetch of more partitions than one slice is read in slices (issue 15: a Fetch of 110,000
partitions, within its decode budget, held the event loop 1.4-3.5 s while another client
waited); a normal fetch is still read and answered at once.
"""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path

import pytest

from pydmq.api.handler import RequestContext
from pydmq.broker.handlers import fetch
from pydmq.broker.handlers._slices import SLICE_ELEMENTS
from pydmq.broker.server import Broker
from pydmq.config.broker import BrokerConfig
from pydmq.node import Node
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from pydmq.protocol.records import SimpleRecord, build_batch
from pydmq.storage.api import TopicPartition

pytestmark = pytest.mark.timeout(60)


def _request(partitions: int) -> FetchRequest:
    return FetchRequest(
        replica_id=-1,
        max_wait=0,
        min_bytes=0,
        max_bytes=1 << 20,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchTopic(
                topic="sliced",
                partitions=[FetchPartition(partition=i % 2) for i in range(partitions)],
            )
        ],
    )


def _ctx(broker: Broker) -> RequestContext:
    return RequestContext(
        broker=broker.services,
        api_key=1,
        api_version=12,
        correlation_id=1,
        client_id="test",
        client_host="127.0.0.1",
        client_port=1,
        listener="PLAINTEXT",
        connection_id=1,
    )


def test_a_large_fetch_gives_the_loop_back_and_answers_the_same(tmp_path: Path) -> None:
    async def scenario() -> None:
        node = Node(
            BrokerConfig(
                {
                    "listeners": "PLAINTEXT://127.0.0.1:0",
                    "pydmq.http.listeners": "http://127.0.0.1:0",
                    "log.dirs": str(tmp_path),
                }
            )
        )
        broker = node.broker
        assert broker is not None
        await node.start()
        try:
            broker.topic_creator.create_topic("sliced", 2)
            log = broker.replica_manager.get(TopicPartition("sliced", 1))
            assert log is not None
            batch = bytearray(build_batch([SimpleRecord(b"k", b"v")]))
            broker.replica_manager.append(log, memoryview(batch), 1)

            small = fetch.handle(_ctx(broker), _request(10))
            assert isinstance(small, FetchResponse)  # answered at once, as before

            size = 3 * SLICE_ELEMENTS
            answer = fetch.handle(_ctx(broker), _request(size))
            assert inspect.isawaitable(answer)
            served: list[bool] = []
            asyncio.get_running_loop().call_soon(lambda: served.append(True))
            response = await answer
            assert served == [True]  # another callback ran while the fetch was being read
            (topic,) = response.responses
            assert len(topic.partitions) == size
            assert all(p.error_code == ErrorCode.NONE for p in topic.partitions)
            with_records = [p for p in topic.partitions if p.records is not None and len(p.records)]
            assert {p.partition_index for p in with_records} == {1}
        finally:
            await node.stop()

    asyncio.run(scenario())
