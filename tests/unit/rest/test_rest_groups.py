"""The REST admin API's consumer groups and cluster against a real ``pydmq serve`` and a real
consumer (confluent-kafka): list, describe with members and lag, reset offsets only while
the group is empty (as kafka-consumer-groups), the brokers, controller and quorum."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

pytestmark = pytest.mark.timeout(120)

RECORDS = 10


def _produce(bootstrap: str, topic: str) -> int:
    """RECORDS records to partition 0; the time before the sixth (ms)."""
    producer = Producer({"bootstrap.servers": bootstrap})
    middle = 0
    for i in range(RECORDS):
        if i == 5:
            time.sleep(0.01)
            middle = int(time.time() * 1000)
            time.sleep(0.01)
        producer.produce(topic, b"v%d" % i, partition=0, timestamp=int(time.time() * 1000))
        producer.flush(10)
    return middle


def _joined(bootstrap: str, group: str, topic: str) -> Any:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    while not consumer.assignment():
        assert time.monotonic() < deadline, "the consumer was never assigned its partitions"
        consumer.poll(0.2)
    consumer.commit(offsets=[TopicPartition(topic, 0, 4)], asynchronous=False)
    return consumer


def test_groups_describe_lag_and_reset(broker: Any, rest: Any) -> None:
    topic, group = "clicks", "readers"
    assert rest.request("POST", "/v1/admin/topics", {"name": topic, "partitions": 2}).status == 201
    middle = _produce(broker.bootstrap, topic)
    consumer = _joined(broker.bootstrap, group, topic)
    try:
        listed = rest.request("GET", "/v1/admin/groups").json["groups"]
        assert {
            "group_id": group,
            "state": "Stable",
            "type": "classic",
            "protocol_type": "consumer",
        } in listed
        described = rest.request("GET", f"/v1/admin/groups/{group}")
        assert described.status == 200, described.body
        info = described.json
        assert info["state"] == "Stable"
        (member,) = info["members"]
        assert sorted((a["topic"], a["partition"]) for a in member["assignment"]) == [
            (topic, 0),
            (topic, 1),
        ]
        by_partition = {o["partition"]: o for o in info["offsets"]}
        assert by_partition[0]["committed_offset"] == 4
        assert by_partition[0]["log_end_offset"] == RECORDS
        assert by_partition[0]["lag"] == RECORDS - 4
        assert by_partition[0]["member_id"] == member["member_id"]
        assert by_partition[1]["committed_offset"] is None
        assert info["total_lag"] == RECORDS - 4

        active = rest.request(
            "POST", f"/v1/admin/groups/{group}/offsets/reset", {"topic": topic, "to": "earliest"}
        )
        assert active.status == 409, active.body
        assert active.error["code"] == "CONFLICT"
        assert active.error["details"]["state"] == "Stable"
    finally:
        consumer.close()

    def reset(target: dict[str, Any]) -> dict[int, int]:
        answer = rest.request(
            "POST",
            f"/v1/admin/groups/{group}/offsets/reset",
            {"topic": topic, "partitions": [0], **target},
        )
        assert answer.status == 200, answer.body
        committed = rest.request("GET", f"/v1/admin/groups/{group}").json["offsets"]
        assert {o["partition"]: o["committed_offset"] for o in committed}[0] == (
            answer.json["offsets"][0]["offset"]
        )
        return {o["partition"]: o["offset"] for o in answer.json["offsets"]}

    assert reset({"to": "earliest"}) == {0: 0}
    assert reset({"to": "latest"}) == {0: RECORDS}
    assert reset({"to": "offset", "offset": 7}) == {0: 7}
    assert reset({"to": "offset", "offset": 1000}) == {0: RECORDS}  # kept within the log
    assert reset({"to": "timestamp", "timestamp": middle}) == {0: 5}
    assert reset({"to": "timestamp", "timestamp": int(time.time() * 1000) + 3600_000}) == {
        0: RECORDS
    }
    assert rest.request("GET", f"/v1/admin/groups/{group}").json["state"] == "Empty"


def test_group_errors(rest: Any) -> None:
    missing = rest.request("GET", "/v1/admin/groups/nobody-here")
    assert missing.status == 404 and missing.error["code"] == "NOT_FOUND"
    for body, field in [
        ({"to": "earliest"}, "topic"),
        ({"topic": "t", "to": "soon"}, "to"),
        ({"topic": "t", "to": "offset"}, "offset"),
        ({"topic": "t", "to": "earliest", "partitions": "0"}, "partitions"),
    ]:
        answer = rest.request("POST", "/v1/admin/groups/g/offsets/reset", body)
        assert answer.status == 400 and answer.error["code"] == "INVALID_INPUT"
        assert answer.error["details"]["field"] == field
    unknown = rest.request(
        "POST", "/v1/admin/groups/g/offsets/reset", {"topic": "no-such-topic", "to": "earliest"}
    )
    assert unknown.status == 404 and unknown.error["code"] == "NOT_FOUND"


def test_cluster(broker: Any, rest: Any) -> None:
    brokers = rest.request("GET", "/v1/admin/cluster/brokers").json
    assert brokers["brokers"] == [{"id": 1, "host": "127.0.0.1", "port": broker.port, "rack": None}]
    assert brokers["cluster_id"]
    assert rest.request("GET", "/v1/admin/cluster/controller").json["id"] == 1
    quorum = rest.request("GET", "/v1/admin/cluster/quorum").json
    assert quorum["leader_id"] == 1
    assert [v["id"] for v in quorum["voters"]] == [1]
