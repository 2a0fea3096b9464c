"""CreatePartitions, DeleteRecords, DescribeCluster and DescribeTopicPartitions end to end.

Real clients (confluent-kafka, kafka-python, the Java Admin client when java is available)
against an in-process broker; a raw client checks DescribeTopicPartitions pagination.
"""

from __future__ import annotations

import glob
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import (
    Consumer,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic, OffsetSpec

from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.describe_cluster import DescribeClusterRequest
from pydmq.protocol.messages.describe_topic_partitions import (
    Cursor,
    DescribeTopicPartitionsRequest,
    TopicRequest,
)
from pydmq.testing import EmbeddedBroker

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from support.raw_client import RawClient

TIMEOUT = 15
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path_factory.mktemp("admin-topics") / "d") as b:
        yield b


@pytest.fixture(scope="module")
def admin(broker: EmbeddedBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _topic(admin: AdminClient, partitions: int = 1, config: dict[str, str] | None = None) -> str:
    name = f"adm-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(TIMEOUT)
    return name


def _partition_count(admin: AdminClient, name: str) -> int:
    return len(admin.list_topics(name, timeout=TIMEOUT).topics[name].partitions)


def _produce(broker: EmbeddedBroker, name: str, count: int, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(name, value=f"v{i}".encode(), partition=partition)
        producer.flush(TIMEOUT)  # one batch per record: deletes can free whole batches
    assert producer.flush(TIMEOUT) == 0


def _code(exc: BaseException) -> int:
    assert isinstance(exc, KafkaException)
    return int(exc.args[0].code())


# -- CreatePartitions ----------------------------------------------------------------------
def test_create_partitions_grows_topic(broker: EmbeddedBroker, admin: AdminClient) -> None:
    name = _topic(admin, 2)
    admin.create_partitions([NewPartitions(name, 5)], validate_only=True)[name].result(TIMEOUT)
    assert _partition_count(admin, name) == 2
    admin.create_partitions([NewPartitions(name, 5)])[name].result(TIMEOUT)
    assert _partition_count(admin, name) == 5
    _produce(broker, name, 3, partition=4)  # the new partition takes writes
    low, high = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "x"}
    ).get_watermark_offsets(TopicPartition(name, 4), timeout=TIMEOUT)
    assert (low, high) == (0, 3)
    # manual assignment naming this broker
    admin.create_partitions([NewPartitions(name, 6, replica_assignment=[[1]])])[name].result(
        TIMEOUT
    )
    assert _partition_count(admin, name) == 6


@pytest.mark.parametrize(
    ("count", "assignment", "code"),
    [
        (1, None, ErrorCode.INVALID_PARTITIONS),  # fewer
        (3, None, ErrorCode.INVALID_PARTITIONS),  # same
        (5, [[1]], ErrorCode.INVALID_REPLICA_ASSIGNMENT),  # 2 new partitions, 1 assignment
        (4, [[9]], ErrorCode.INVALID_REPLICA_ASSIGNMENT),  # unknown broker
    ],
)
def test_create_partitions_errors(
    admin: AdminClient, count: int, assignment: list[list[int]] | None, code: int
) -> None:
    name = _topic(admin, 3)
    new = (
        NewPartitions(name, count)
        if assignment is None
        else NewPartitions(name, count, replica_assignment=assignment)
    )
    with pytest.raises(KafkaException) as exc:
        admin.create_partitions([new])[name].result(TIMEOUT)
    assert _code(exc.value) == code
    assert _partition_count(admin, name) == 3


def test_create_partitions_unknown_topic_kafka_python(
    broker: EmbeddedBroker, admin: AdminClient
) -> None:
    with pytest.raises(KafkaException) as exc:
        admin.create_partitions([NewPartitions("no-such-topic-cp", 4)])["no-such-topic-cp"].result(
            TIMEOUT
        )
    assert _code(exc.value) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewPartitions as KPNewPartitions

    name = _topic(admin, 1)
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        kp.create_partitions({name: KPNewPartitions(total_count=3)})
    finally:
        kp.close()
    assert _partition_count(admin, name) == 3


# -- DeleteRecords -------------------------------------------------------------------------
def test_delete_records_moves_the_log_start(broker: EmbeddedBroker, admin: AdminClient) -> None:
    name = _topic(admin, 1)
    _produce(broker, name, 10)
    (future,) = admin.delete_records([TopicPartition(name, 0, 4)]).values()
    assert future.result(TIMEOUT).low_watermark == 4
    earliest = admin.list_offsets({TopicPartition(name, 0): OffsetSpec.earliest()})
    assert next(iter(earliest.values())).result(TIMEOUT).offset == 4
    # an offset below the log start changes nothing and is no error
    (future,) = admin.delete_records([TopicPartition(name, 0, 2)]).values()
    assert future.result(TIMEOUT).low_watermark == 4

    # a consumer positioned at offset 0 is out of range and resets to the new log start
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KPTopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=5000,
    )
    tp = KPTopicPartition(name, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    seen: list[int] = []
    for record in consumer:
        seen.append(record.offset)
        if len(seen) == 6:
            break
    consumer.close()
    assert seen == list(range(4, 10))

    # -1 means the high watermark: everything goes
    (future,) = admin.delete_records([TopicPartition(name, 0, -1)]).values()
    assert future.result(TIMEOUT).low_watermark == 10
    low, high = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "x"}
    ).get_watermark_offsets(TopicPartition(name, 0), timeout=TIMEOUT)
    assert (low, high) == (10, 10)


def test_delete_records_librdkafka_consumer_resets(
    broker: EmbeddedBroker, admin: AdminClient
) -> None:
    name = _topic(admin, 1)
    _produce(broker, name, 5)
    (future,) = admin.delete_records([TopicPartition(name, 0, 3)]).values()
    assert future.result(TIMEOUT).low_watermark == 3
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"h-{name}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(name, 0, 0)])
    seen: list[int] = []
    for _ in range(25):
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            seen.append(msg.offset())
        if len(seen) == 2:
            break
    consumer.close()
    assert seen == [3, 4]


def test_delete_records_errors(broker: EmbeddedBroker, admin: AdminClient) -> None:
    name = _topic(admin, 1)
    _produce(broker, name, 3)
    (future,) = admin.delete_records([TopicPartition(name, 0, 50)]).values()
    with pytest.raises(KafkaException) as exc:
        future.result(TIMEOUT)
    assert _code(exc.value) == ErrorCode.OFFSET_OUT_OF_RANGE
    compacted = _topic(admin, 1, {"cleanup.policy": "compact"})
    (future,) = admin.delete_records([TopicPartition(compacted, 0, 0)]).values()
    with pytest.raises(KafkaException) as exc:
        future.result(TIMEOUT)
    assert _code(exc.value) == ErrorCode.POLICY_VIOLATION
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartition as KPTopicPartition

    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        result = kp.delete_records({KPTopicPartition(name, 0): 2})
        assert result[KPTopicPartition(name, 0)]["low_watermark"] == 2
    finally:
        kp.close()


# -- DescribeCluster -----------------------------------------------------------------------
def test_describe_cluster(broker: EmbeddedBroker, admin: AdminClient) -> None:
    result = admin.describe_cluster(include_authorized_operations=True).result(TIMEOUT)
    inner = broker.broker
    assert result.cluster_id == inner.cluster_id  # type: ignore[attr-defined]
    assert result.controller.id == 1
    assert [(n.id, n.host, n.port) for n in result.nodes] == [
        (1, "127.0.0.1", int(broker.bootstrap.rsplit(":", 1)[1]))
    ]
    with RawClient(broker.bootstrap) as raw:
        for version in (0, 1, 2):
            body = raw.request(60, version, DescribeClusterRequest(endpoint_type=1)).body
            assert body.error_code == 0 and body.brokers[0].broker_id == 1
            assert body.cluster_authorized_operations == -(2**31)
        with_ops = DescribeClusterRequest(include_cluster_authorized_operations=True)
        body = raw.request(60, 0, with_ops).body
        assert body.cluster_authorized_operations > 0  # every CLUSTER operation, no authorizer
        controllers = raw.request(60, 1, DescribeClusterRequest(endpoint_type=2)).body
        assert controllers.endpoint_type == 2 and controllers.controller_id == 1
        bad = raw.request(60, 1, DescribeClusterRequest(endpoint_type=7)).body
        assert bad.error_code == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE


# -- DescribeTopicPartitions ---------------------------------------------------------------
def test_describe_topic_partitions_pagination(broker: EmbeddedBroker, admin: AdminClient) -> None:
    a = _topic(admin, 5)
    b = _topic(admin, 2)
    first, second = sorted([a, b])
    sizes = {a: 5, b: 2}
    with RawClient(broker.bootstrap) as raw:
        request = DescribeTopicPartitionsRequest(
            topics=[TopicRequest(name=b), TopicRequest(name=a), TopicRequest(name="zz-missing")],
            response_partition_limit=3,
        )
        seen: list[tuple[str, int]] = []
        errors: dict[str, int] = {}
        for _ in range(10):
            body = raw.request(75, 0, request).body
            for topic in body.topics:
                if topic.error_code:
                    errors[topic.name] = topic.error_code
                    continue
                assert topic.topic_authorized_operations > 0
                for p in topic.partitions:
                    assert (p.leader_id, p.replica_nodes, p.isr_nodes) == (1, [1], [1])
                    assert p.eligible_leader_replicas == [] and p.last_known_elr == []
                    seen.append((topic.name, p.partition_index))
            if body.next_cursor is None:
                break
            request.cursor = body.next_cursor
        expected = [(first, i) for i in range(sizes[first])] + [
            (second, i) for i in range(sizes[second])
        ]
        assert seen == expected
        assert errors == {"zz-missing": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        # a cursor naming a topic that is not requested fails the request
        body = raw.request(
            75,
            0,
            DescribeTopicPartitionsRequest(
                topics=[TopicRequest(name=a)], cursor=Cursor(topic_name=b, partition_index=0)
            ),
        ).body
        assert [t.error_code for t in body.topics] == [ErrorCode.INVALID_REQUEST]
        # no topics = every topic
        body = raw.request(75, 0, DescribeTopicPartitionsRequest(topics=[])).body
        assert {a, b} <= {t.name for t in body.topics}


def test_describe_topics_confluent(broker: EmbeddedBroker, admin: AdminClient) -> None:
    name = _topic(admin, 3)
    description = admin.describe_topics(TopicCollection([name]))[name].result(TIMEOUT)
    assert [p.id for p in description.partitions] == [0, 1, 2]
    assert description.partitions[0].leader.id == 1


_JAVA_PROBE = """
import java.util.*;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.TopicPartitionInfo;

public class DescribeProbe {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        try (Admin admin = Admin.create(p)) {
            List<String> names = Arrays.asList(args).subList(1, args.length);
            DescribeTopicsOptions options = new DescribeTopicsOptions().partitionSizeLimitPerResponse(2);
            Map<String, TopicDescription> all = admin.describeTopics(names, options)
                .allTopicNames().get(30, TimeUnit.SECONDS);
            for (String name : names) {
                TopicDescription d = all.get(name);
                StringBuilder sb = new StringBuilder(name).append(' ').append(d.topicId());
                for (TopicPartitionInfo info : d.partitions()) {
                    sb.append(' ').append(info.partition()).append(':').append(info.leader().id());
                }
                System.out.println(sb);
            }
            try {
                admin.describeTopics(Collections.singleton("no-such-topic-java")).allTopicNames()
                    .get(30, TimeUnit.SECONDS);
                System.out.println("missing-found");
            } catch (java.util.concurrent.ExecutionException e) {
                System.out.println("missing " + e.getCause().getClass().getSimpleName());
            }
        }
    }
}
"""


@pytest.mark.skipif(shutil.which("java") is None, reason="java not on PATH")
def test_java_admin_describe_topics(
    broker: EmbeddedBroker, admin: AdminClient, tmp_path: Path
) -> None:
    jars = glob.glob(str(REPO / "compat" / "java" / "lib" / "*.jar"))
    if not any("kafka-clients" in j for j in jars):
        pytest.skip("compat/java/lib has no kafka-clients jar")
    a = _topic(admin, 5)
    b = _topic(admin, 1)
    source = tmp_path / "DescribeProbe.java"
    source.write_text(_JAVA_PROBE)
    proc = subprocess.run(
        ["java", "-cp", ":".join(jars), str(source), broker.bootstrap, a, b],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line]
    inner = broker.broker
    topic_a = inner.topics.get(a)  # type: ignore[attr-defined]
    assert lines[0] == f"{a} {_kafka_uuid(topic_a.topic_id)} " + " ".join(
        f"{i}:1" for i in range(5)
    )
    assert lines[1].startswith(f"{b} ") and lines[1].endswith(" 0:1")
    assert lines[2] == "missing UnknownTopicOrPartitionException"


def _kafka_uuid(value: uuid.UUID) -> str:
    import base64

    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")
