"""Cluster mode: a client's CreateTopics of a reserved name is refused by the broker that
receives it (the rest of the request is forwarded), and no node appends a client's Produce to
an internal topic (issue 15, finding 6; the single-node cases are in
tests/unit/broker/test_internal_topics.py).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from pydmq.protocol.messages.produce import ProduceRequest
from pydmq.protocol.records import SimpleRecord, build_batch

from .conftest import Cluster

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from support.broker_checks import produce_request

pytestmark = pytest.mark.timeout(120)


def _produce(topic: str) -> ProduceRequest:
    return produce_request(topic, build_batch([SimpleRecord(b"forged-key", b"forged-value")]))


def test_cluster_refuses_reserved_topics_and_internal_writes(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        try:
            await cluster.start()
            allowed = "cluster-ok"
            request = CreateTopicsRequest(
                topics=[
                    CreatableTopic(name=n, num_partitions=1, replication_factor=1)
                    for n in ("__cluster_metadata", allowed, "__consumer_offsets")
                ],
                timeout=10000,
            )
            response = await cluster.client(0).request(19, 7, request)
            codes = [(r.name, r.error_code) for r in response.topics]
            assert codes == [
                ("__cluster_metadata", ErrorCode.INVALID_REQUEST),
                (allowed, ErrorCode.NONE),
                ("__consumer_offsets", ErrorCode.INVALID_REQUEST),
            ]
            for index in range(3):
                response = await cluster.client(index).request(0, 9, _produce("__consumer_offsets"))
                (partition,) = response.responses[0].partition_responses
                assert partition.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        finally:
            await cluster.stop()

    asyncio.run(scenario())
