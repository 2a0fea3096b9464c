"""Differential tests: the same client scenarios against a reference Apache Kafka and pydmq.

A module-scoped fixture starts both brokers once: the reference Kafka (a single KRaft node from
jars resolved out of Maven Central, ``compat/kafka/start.sh``) and a ``python -m pydmq serve``
child process, with the same broker settings (:data:`BROKER_PROPS`). Each scenario is a
function ``scenario(bootstrap) -> observation``: plain JSON-able data of what a client sees,
normalised so that what legitimately differs between two clusters (cluster ids, node ids and
ports, member ids, broker-assigned timestamps, throttle times, error messages) is left out.
The scenario runs against both brokers (concurrently) and the two observations must be equal,
except at the paths listed in :data:`DELIBERATE_DIFFERENCES` -- which are printed, and must
still differ, so the table cannot go stale.

ApiVersions ranges are compared for information only (printed, not asserted): pydmq
advertises what it implements. What is asserted is that pydmq supports every API key the
scenarios use.

Run with ``-s`` to see the tables; ``PYDMQ_DIFF_DUMP=<dir>`` writes both observations of each
scenario as JSON files there. ``PYDMQ_DIFF_KAFKA_BOOTSTRAP=host:port`` aims the tests at
an already running reference Kafka (started with the settings of :data:`BROKER_PROPS`, e.g.
``KAFKA_EXTRA_PROPS="num.partitions=3 auto.create.topics.enable=false
offsets.topic.num.partitions=1" compat/kafka/start.sh``) instead of starting one; see
compat/kafka/README.md.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

from confluent_kafka import (  # noqa: E402
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from pydmq.protocol.errors import ErrorCode  # noqa: E402
from pydmq.protocol.messages import create_topics as ct  # noqa: E402
from pydmq.protocol.messages import fetch as fe  # noqa: E402
from pydmq.protocol.messages import list_offsets as lo  # noqa: E402
from pydmq.protocol.messages import metadata as md  # noqa: E402
from pydmq.protocol.messages import produce as pr  # noqa: E402
from pydmq.protocol.messages.api_versions import ApiVersionsRequest  # noqa: E402
from pydmq.protocol.messages.metadata import MetadataRequest  # noqa: E402
from pydmq.protocol.records import SimpleRecord, build_batch  # noqa: E402
from pydmq.testing.process import BrokerProcess  # noqa: E402

from .differential_support import (  # noqa: E402
    ReferenceKafka,
    check_json_able,
    covers,
    diff_paths,
    reference_kafka_unavailable,
    short,
    wait_until_serving,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.raw_client import (  # noqa: E402
    RawClient,
    decode_response_frame,
    encode_raw_frame,
    encode_request_frame,
)

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

TIMEOUT = 30.0
LOG_LEVELS = ("OFF", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE")  # Kafka's names
# Kafka startup (first run: plus resolving the jars with Maven) on a loaded 2-core machine.
KAFKA_START_TIMEOUT = float(os.environ.get("PYDMQ_DIFF_KAFKA_START_TIMEOUT", "120"))

# The same broker settings on both sides (Kafka property names).
BROKER_PROPS = {
    "num.partitions": "3",
    "auto.create.topics.enable": "false",
    "offsets.topic.num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "0",
}

# CreateTime of the produced records: one base for both brokers (so timestamps compare), an
# hour in the past (inside log.message.timestamp.*.max.ms on both).
BASE_TS = (int(time.time() * 1000) - 3_600_000) // 1000 * 1000

# API keys the scenarios use (directly or through librdkafka): pydmq must advertise them all.
USED_API_KEYS = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    15: "DescribeGroups",
    16: "ListGroups",
    18: "ApiVersions",
    19: "CreateTopics",
    20: "DeleteTopics",
    22: "InitProducerId",
    32: "DescribeConfigs",
    37: "CreatePartitions",
    42: "DeleteGroups",
    44: "IncrementalAlterConfigs",
    33: "AlterConfigs",
    34: "AlterReplicaLogDirs",
    35: "DescribeLogDirs",
    68: "ConsumerGroupHeartbeat",
}

# scenario -> observation path (it covers everything below it) -> why pydmq differs on purpose.
_FETCH_ERROR_HW = (
    "pydmq fills high_watermark/log_start_offset in a partition answer with an error; Kafka "
    "sends -1/-1 (ReplicaManager's LogReadResult for an exception). Clients ignore both on "
    "errors; pydmq's own replica fetcher (broker/cluster/replica_fetcher.py _on_fetch_error) "
    "uses the leader's log start offset of an OFFSET_OUT_OF_RANGE answer."
)
_KRAFT_BOOTSTRAP_MIN_ISR = (
    "the formatted Kafka 4 metadata log starts with a cluster-level min.insync.replicas=1 "
    "(a bootstrap record, for ELR / KIP-966), so the topic's value (1 on both) shows as "
    "DYNAMIC_DEFAULT_BROKER_CONFIG (3), is_default false; pydmq has no such bootstrap "
    "record: DEFAULT_CONFIG (5), is_default true."
)
_API_VERSIONS_EMPTY_BODY = (
    "ApiVersions at a version the broker does not know, with a v1 (non-flexible) request "
    "header and no body: Kafka parses the header as v2 (as for ApiVersions v3+), finds no "
    "tagged fields and closes; pydmq answers UNSUPPORTED_VERSION anyway. Only malformed "
    "frames reach this (a real client sends the flexible header, see *_flexible_body, where "
    "both answer alike); tests/interop/test_bad_input.py pins pydmq's answer."
)
DELIBERATE_DIFFERENCES: dict[str, dict[str, str]] = {
    "broker_configs": {
        "described.ssl.keystore.password.read_only": (
            "Kafka can reload a key store at run time (dynamic ssl.* configs); pydmq reads "
            "ssl.* once, at start-up, so it describes them read-only and refuses a dynamic "
            "change (INVALID_REQUEST 'Cannot update these configs dynamically') instead of "
            "keeping a value that has no effect (docs/SECURITY.md)."
        ),
    },
    "admin_errors": {
        "describe_configs.existing.min.insync.replicas[1]": _KRAFT_BOOTSTRAP_MIN_ISR,
        "describe_configs.existing.min.insync.replicas[2]": _KRAFT_BOOTSTRAP_MIN_ISR,
    },
    "describe_groups": {
        "classic_view_of_consumer_group": (
            "DescribeGroups of a KIP-848 consumer group: Kafka answers it as Dead (v6: "
            "GROUP_ID_NOT_FOUND 'Group <id> is not a classic group.'), pydmq describes it "
            "(protocol type consumer, its members' subscriptions and assignments), so tools "
            "that only speak DescribeGroups (kafka-python's admin, pydmq groups describe) see "
            "its members; Kafka's own Admin asks ConsumerGroupDescribe first."
        ),
    },
    "bad_requests": {
        "fetch.beyond_end.high_watermark,log_start_offset": _FETCH_ERROR_HW,
        "fetch.negative_offset.high_watermark,log_start_offset": _FETCH_ERROR_HW,
        "fetch.empty_partition_offset_1.high_watermark,log_start_offset": _FETCH_ERROR_HW,
        "api_versions_v99_empty_body": _API_VERSIONS_EMPTY_BODY,
        "api_versions_v32767_empty_body": _API_VERSIONS_EMPTY_BODY,
        "api_versions_v99_flexible_body.lists_other_keys": (
            "the UNSUPPORTED_VERSION answer to ApiVersions: Kafka lists only the ApiVersions "
            "key (ApiVersionsRequest.getErrorResponse, KIP-511); pydmq lists every key it "
            "supports (api/dispatcher.py: 'listing what we support'). Clients read only "
            "key 18 from it to pick the version to retry with."
        ),
    },
}


# -- brokers ---------------------------------------------------------------------------------


@dataclass
class Brokers:
    kafka: str
    pydmq: str


@pytest.fixture(scope="module")
def brokers() -> Iterator[Brokers]:
    external = os.environ.get("PYDMQ_DIFF_KAFKA_BOOTSTRAP")
    kafka: ReferenceKafka | None = None
    if not external:
        missing = reference_kafka_unavailable()
        if missing:
            pytest.skip(missing)
        kafka = ReferenceKafka(BROKER_PROPS).start()  # the JVM starts while pydmq does
    root = Path(tempfile.mkdtemp(prefix="pydmq-diff-"))
    pydmq = BrokerProcess(root / "data", overrides=BROKER_PROPS, log_path=root / "broker.log")
    try:
        pydmq.start(30)
        wait_until_serving(pydmq.bootstrap, time.monotonic() + 30)
        if kafka is not None:
            kafka.wait_ready(KAFKA_START_TIMEOUT)
            bootstrap = kafka.bootstrap
        else:
            assert external is not None
            bootstrap = external
            wait_until_serving(bootstrap, time.monotonic() + 30)
        yield Brokers(kafka=bootstrap, pydmq=pydmq.bootstrap)
    finally:
        pydmq.stop()
        if kafka is not None:
            kafka.stop()
            kafka.cleanup()
        shutil.rmtree(root, ignore_errors=True)


# -- small helpers ---------------------------------------------------------------------------


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def txt(data: bytes | str | None) -> str | None:
    if data is None or isinstance(data, str):
        return data
    return data.decode("utf-8", "backslashreplace")


def kafka_error(exc: BaseException) -> str:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return str(exc.args[0].name())
    return type(exc).__name__


def outcome(future: Any, timeout: float = TIMEOUT) -> str:
    """Return "ok" or the error name a confluent-kafka admin future ends with."""
    try:
        future.result(timeout)
    except KafkaException as exc:
        return kafka_error(exc)
    return "ok"


def code_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"code {code}"


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    client = admin(bootstrap)  # referenced until the result: a dropped client destroys itself
    client.create_topics([NewTopic(name, partitions, 1)])[name].result(TIMEOUT)
    wait_leaders(bootstrap, name, partitions)


def wait_leaders(bootstrap: str, topic: str, partitions: int) -> None:
    """Until every partition answers ListOffsets without error (both brokers answer
    NOT_LEADER_OR_FOLLOWER for a moment after CreateTopics returns)."""
    request = lo.ListOffsetsRequest(
        replica_id=-1,
        topics=[
            lo.ListOffsetsTopic(
                name=topic,
                partitions=[
                    lo.ListOffsetsPartition(partition_index=p, timestamp=-1)
                    for p in range(partitions)
                ],
            )
        ],
    )
    deadline = time.monotonic() + TIMEOUT
    with RawClient(bootstrap) as client:
        while True:
            (t,) = client.request(2, 7, request).body.topics
            errors = [p.error_code for p in t.partitions]
            if not any(errors):
                return
            assert time.monotonic() < deadline, f"{topic}: partitions not ready: {errors}"
            time.sleep(0.05)


def raw_produce(bootstrap: str, topic: str, partition: int, records: list[SimpleRecord]) -> int:
    request = pr.ProduceRequest(
        acks=-1,
        timeout=10_000,
        topic_data=[
            pr.TopicProduceData(
                name=topic,
                partition_data=[
                    pr.PartitionProduceData(index=partition, records=build_batch(records))
                ],
            )
        ],
    )
    with RawClient(bootstrap) as client:
        (t,) = client.request(0, 9, request).body.responses
    (p,) = t.partition_responses
    return int(p.error_code)


def run_on_both(fn: Callable[[str], dict[str, Any]], brokers: Brokers) -> tuple[dict, dict]:
    try:
        with ThreadPoolExecutor(2, thread_name_prefix="diff") as pool:
            on_kafka = pool.submit(fn, brokers.kafka)
            on_pydmq = pool.submit(fn, brokers.pydmq)
            return on_kafka.result(), on_pydmq.result()
    finally:
        # librdkafka handles caught in reference cycles (admin futures) would otherwise live,
        # and reconnect noisily, until the brokers are gone.
        gc.collect()


# -- scenario: produce + fetch back ----------------------------------------------------------

PRODUCE_COUNT = 60


def _record(i: int) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]] | None]:
    key = None if i % 10 == 9 else b"key-%d" % i
    if i % 20 == 19:
        value = None
    elif i % 15 == 14:
        value = b""
    else:
        value = b"value-%d-" % i + b"abcdefghij" * (i % 4)
    all_headers: list[tuple[str, bytes | None]] = [
        ("idx", b"%d" % i),
        ("dup", b"a"),
        ("dup", b"b"),
        ("null", None),
    ]
    headers = None if i % 6 == 5 else all_headers[: 1 + i % 4]
    return key, value, headers


def scenario_produce_fetch(bootstrap: str) -> dict[str, Any]:
    """Idempotent acks=all producers (plain and lz4), explicit partitions, keys, headers and
    CreateTime timestamps; then everything fetched back from offset 0 of each partition."""
    topic = unique("diff-produce")
    create_topic(bootstrap, topic, 3)
    delivered: dict[str, list[int]] = {"0": [], "1": [], "2": []}
    delivery_errors: list[str] = []

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            delivery_errors.append(str(err.name()))
        else:
            delivered[str(msg.partition())].append(msg.offset())

    sent = 0
    for compression in ("none", "lz4"):
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "compression.type": compression,
                "linger.ms": 20,
            }
        )
        for i in range(sent, sent + PRODUCE_COUNT // 2):
            key, value, headers = _record(i)
            producer.produce(
                topic,
                value=value,
                key=key,
                partition=i % 3 if compression == "none" else (2 * i) % 3,
                headers=headers,
                timestamp=BASE_TS + i,
                on_delivery=on_delivery,
            )
        assert producer.flush(TIMEOUT) == 0
        sent += PRODUCE_COUNT // 2

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("diff-reader"),
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    records: dict[str, list[dict[str, Any]]] = {"0": [], "1": [], "2": []}
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(3)])
        eof: set[int] = set()
        got = 0
        deadline = time.monotonic() + TIMEOUT
        while (got < PRODUCE_COUNT or len(eof) < 3) and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=500, timeout=0.2):
                if msg.error():
                    assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                    eof.add(msg.partition())
                    continue
                got += 1
                ts_type, ts = msg.timestamp()
                records[str(msg.partition())].append(
                    {
                        "offset": msg.offset(),
                        "key": txt(msg.key()),
                        "value": txt(msg.value()),
                        "headers": [[k, txt(v)] for k, v in (msg.headers() or [])],
                        "timestamp": [ts_type, ts],
                        "leader_epoch": msg.leader_epoch(),
                    }
                )
        watermarks = {
            str(p): list(
                consumer.get_watermark_offsets(TopicPartition(topic, p), TIMEOUT, cached=False)
            )
            for p in range(3)
        }
    finally:
        consumer.close()
    return {
        "delivery_errors": delivery_errors,
        "delivered_offsets_in_ack_order": delivered,
        "records": records,
        "watermarks": watermarks,
    }


# -- scenario: ListOffsets ---------------------------------------------------------------------

# Partition 0: two batches, CreateTime T+0..40 (offsets 0-4) and T+100..140 (offsets 5-9).
# Partition 1: one batch whose timestamps are not monotonic (T+500, 300, 700, 600).
P0_TIMESTAMPS = [0, 10, 20, 30, 40], [100, 110, 120, 130, 140]
P1_TIMESTAMPS = [500, 300, 700, 600]
P0_TARGETS = [-1000, 0, 10, 15, 41, 100, 125, 140, 141, 100_000]
P1_TARGETS = [250, 300, 400, 550, 650, 700, 701]
RAW_SPECIAL_TIMESTAMPS = {
    "latest(-1)": -1,
    "earliest(-2)": -2,
    "max_timestamp(-3)": -3,
    "earliest_local(-4)": -4,
    "latest_tiered(-5)": -5,
}


def scenario_list_offsets(bootstrap: str) -> dict[str, Any]:
    topic = unique("diff-offsets")
    create_topic(bootstrap, topic, 2)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 50})
    for batch in P0_TIMESTAMPS:
        for dt in batch:
            producer.produce(topic, value=b"p0-%d" % dt, partition=0, timestamp=BASE_TS + dt)
        assert producer.flush(TIMEOUT) == 0
    for dt in P1_TIMESTAMPS:
        producer.produce(topic, value=b"p1-%d" % dt, partition=1, timestamp=BASE_TS + dt)
    assert producer.flush(TIMEOUT) == 0

    obs: dict[str, Any] = {}
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("diff-lo")})
    try:
        for partition, targets in ((0, P0_TARGETS), (1, P1_TARGETS)):
            # One query per call: librdkafka keeps one timestamp per partition per request.
            found = {
                dt: consumer.offsets_for_times(
                    [TopicPartition(topic, partition, BASE_TS + dt)], TIMEOUT
                )[0]
                for dt in targets
            }
            obs[f"offsets_for_times.p{partition}"] = {
                f"T{dt:+d}": {
                    "offset": tp.offset,
                    "error": tp.error.name() if tp.error else None,
                    "leader_epoch": tp.leader_epoch,
                }
                for dt, tp in found.items()
            }
            obs[f"watermarks.p{partition}"] = list(
                consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), TIMEOUT, cached=False
                )
            )
    finally:
        consumer.close()

    client = admin(bootstrap)
    specs = {
        "earliest": OffsetSpec.earliest(),
        "latest": OffsetSpec.latest(),
        "max_timestamp": OffsetSpec.max_timestamp(),
        "T+15": OffsetSpec.for_timestamp(BASE_TS + 15),
        "T+100000": OffsetSpec.for_timestamp(BASE_TS + 100_000),
    }
    for label, spec in specs.items():
        tps = [TopicPartition(topic, p) for p in (0, 1)]
        futures = client.list_offsets(dict.fromkeys(tps, spec), request_timeout=TIMEOUT)
        out: dict[str, Any] = {}
        for tp, future in futures.items():
            try:
                info = future.result(TIMEOUT)
            except KafkaException as exc:
                out[f"p{tp.partition}"] = kafka_error(exc)
                continue
            ts = info.timestamp - BASE_TS if info.timestamp >= BASE_TS else info.timestamp
            out[f"p{tp.partition}"] = {
                "offset": info.offset,
                "timestamp(-T if a record's)": ts,
                "leader_epoch": info.leader_epoch,
            }
        obs[f"admin.list_offsets.{label}"] = dict(sorted(out.items()))

    raw: dict[str, Any] = {}
    with RawClient(bootstrap) as rc:
        for label, ts in {**RAW_SPECIAL_TIMESTAMPS, "T+15": BASE_TS + 15}.items():
            request = lo.ListOffsetsRequest(
                replica_id=-1,
                topics=[
                    lo.ListOffsetsTopic(
                        name=topic,
                        partitions=[
                            lo.ListOffsetsPartition(partition_index=p, timestamp=ts) for p in (0, 1)
                        ],
                    )
                ],
            )
            (t,) = rc.request(2, 9, request).body.topics
            raw[label] = {
                f"p{p.partition_index}": {
                    "error": code_name(p.error_code),
                    "offset": p.offset,
                    "timestamp": p.timestamp - BASE_TS if p.timestamp >= BASE_TS else p.timestamp,
                    "leader_epoch": p.leader_epoch,
                }
                for p in t.partitions
            }
    obs["raw_list_offsets_v9"] = raw
    return obs


# -- scenario: consumer groups ---------------------------------------------------------------


def _group_consumer(bootstrap: str, group: str, client_id: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": client_id,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "range",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
        }
    )


def _describe(client: AdminClient, group: str) -> dict[str, Any] | str:
    try:
        d = client.describe_consumer_groups([group], request_timeout=TIMEOUT)[group].result(TIMEOUT)
    except KafkaException as exc:
        return kafka_error(exc)
    return {
        "state": d.state.name,
        "type": d.type.name,
        "is_simple_consumer_group": d.is_simple_consumer_group,
        "partition_assignor": d.partition_assignor,
        "member_count": len(d.members),
        "members": sorted(
            [
                m.client_id,
                m.host,
                m.group_instance_id,
                sorted(tp.partition for tp in m.assignment.topic_partitions),
            ]
            for m in d.members
        ),
    }


def _listed(client: AdminClient, group: str) -> dict[str, Any] | str:
    result = client.list_consumer_groups(request_timeout=TIMEOUT).result(TIMEOUT)
    mine = [g for g in result.valid if g.group_id == group]
    if not mine:
        return "not listed"
    (g,) = mine
    return {
        "state": g.state.name,
        "type": g.type.name,
        "is_simple_consumer_group": g.is_simple_consumer_group,
    }


def scenario_groups(bootstrap: str) -> dict[str, Any]:
    """Two librdkafka members of one classic group (range assignor) on a 3-partition topic."""
    topic = unique("diff-group")
    group = unique("diff-g")
    create_topic(bootstrap, topic, 3)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(30):
        producer.produce(topic, value=b"%d" % i, partition=i % 3)
    assert producer.flush(TIMEOUT) == 0

    client = admin(bootstrap)
    obs: dict[str, Any] = {}
    a = _group_consumer(bootstrap, group, "diff-member-a")
    b = _group_consumer(bootstrap, group, "diff-member-b")
    outsider = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    request = [ConsumerGroupTopicPartitions(group)]
    try:
        a.subscribe([topic])
        b.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT
        sa: set[int] = set()
        sb: set[int] = set()
        while time.monotonic() < deadline:
            for c in (a, b):
                c.poll(0.1)
            sa = {tp.partition for tp in a.assignment()}
            sb = {tp.partition for tp in b.assignment()}
            if sa and sb and not sa & sb and sa | sb == {0, 1, 2}:
                break
        obs["assignment"] = sorted([sorted(sa), sorted(sb)])

        # Each member commits offsets (with metadata) for its own partitions.
        for c, parts in ((a, sa), (b, sb)):
            offsets = [TopicPartition(topic, p, 3 + p, metadata=f"meta-{p}") for p in sorted(parts)]
            committed = c.commit(offsets=offsets, asynchronous=False)
            obs.setdefault("commit_result", []).extend(
                sorted(
                    [tp.partition, tp.offset, tp.error.name() if tp.error else None]
                    for tp in committed or []
                )
            )
        obs["commit_result"] = sorted(obs.get("commit_result", []))
        read_back = a.committed([TopicPartition(topic, p) for p in range(3)], TIMEOUT)
        obs["committed"] = [[tp.partition, tp.offset, tp.metadata] for tp in read_back]
        offs = client.list_consumer_group_offsets(request, request_timeout=TIMEOUT)[group].result(
            TIMEOUT
        )
        obs["admin.list_consumer_group_offsets"] = sorted(
            [tp.partition, tp.offset, tp.metadata] for tp in offs.topic_partitions
        )
        # A commit from a consumer that is not a member of the (non-empty) group.
        try:
            outsider.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
            obs["commit_by_non_member"] = "ok"
        except KafkaException as exc:
            obs["commit_by_non_member"] = kafka_error(exc)
        obs["listed_while_stable"] = _listed(client, group)
        obs["described_while_stable"] = _describe(client, group)
        obs["delete_while_stable"] = outcome(client.delete_consumer_groups([group])[group])
    finally:
        a.close()
        b.close()
    obs["described_after_close"] = _describe(client, group)
    obs["listed_after_close"] = _listed(client, group)
    try:
        offsets = [TopicPartition(topic, 2, 7, metadata="outsider")]
        outsider.commit(offsets=offsets, asynchronous=False)
        obs["commit_by_non_member_when_empty"] = "ok"
    except KafkaException as exc:
        obs["commit_by_non_member_when_empty"] = kafka_error(exc)
    finally:
        outsider.close()
    offs = client.list_consumer_group_offsets(request, request_timeout=TIMEOUT)[group].result(
        TIMEOUT
    )
    obs["admin.list_consumer_group_offsets_at_end"] = sorted(
        [tp.partition, tp.offset, tp.metadata] for tp in offs.topic_partitions
    )
    obs["delete_when_empty"] = outcome(client.delete_consumer_groups([group])[group])
    obs["delete_again"] = outcome(client.delete_consumer_groups([group])[group])
    nope = unique("diff-nope")
    obs["delete_unknown"] = outcome(client.delete_consumer_groups([nope])[nope])
    obs["described_after_delete"] = _describe(client, group)
    obs["listed_after_delete"] = _listed(client, group)
    return obs


# -- scenario: admin errors ------------------------------------------------------------------

DESCRIBED_TOPIC_CONFIGS = (
    "cleanup.policy",
    "compression.type",
    "max.message.bytes",
    "message.timestamp.type",
    "min.insync.replicas",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
)


def _raw_create(bootstrap: str, partitions: int, replication: int, validate_only: bool = False):
    name = unique("diff-raw")
    request = ct.CreateTopicsRequest(
        topics=[
            ct.CreatableTopic(name=name, num_partitions=partitions, replication_factor=replication)
        ],
        timeout=10_000,
        validate_only=validate_only,
    )
    with RawClient(bootstrap) as client:
        (t,) = client.request(19, 7, request).body.topics
    if t.error_code:
        return code_name(t.error_code)
    return {"num_partitions": t.num_partitions, "replication_factor": t.replication_factor}


def scenario_admin_errors(bootstrap: str) -> dict[str, Any]:
    client = admin(bootstrap)
    topic = unique("diff-admin")
    obs: dict[str, Any] = {}

    def create(*topics: NewTopic, validate_only: bool = False) -> list[str]:
        futures = client.create_topics(
            list(topics), operation_timeout=TIMEOUT, validate_only=validate_only
        )
        return [outcome(futures[t.topic]) for t in topics]

    obs["create"] = create(NewTopic(topic, 3, 1))
    obs["create_existing"] = create(NewTopic(topic, 3, 1))
    obs["create_existing_validate_only"] = create(NewTopic(topic, 3, 1), validate_only=True)
    obs["create_replication_factor_3"] = create(NewTopic(unique("diff-rf"), 1, 3))
    obs["create_bad_config_value"] = create(
        NewTopic(unique("diff-cfg"), 1, 1, config={"cleanup.policy": "bogus"})
    )
    obs["create_unknown_config"] = create(
        NewTopic(unique("diff-cfg"), 1, 1, config={"no.such.config": "1"})
    )
    for label, name in (
        ("space_and_bang", "bad topic!"),
        ("slash", "a/b"),
        ("250_chars", "x" * 250),
        ("dot", "."),
        ("dot_dot", ".."),
    ):
        obs[f"create_invalid_name.{label}"] = create(NewTopic(name, 1, 1))
    # librdkafka refuses partitions < 1 (other than -1) itself: raw CreateTopics v7.
    obs["raw_create"] = {
        f"partitions={p},replication={r}": _raw_create(bootstrap, p, r)
        for p, r in ((0, 1), (-2, 1), (1, 0), (1, -2), (1, 3), (-1, -1))
    }
    obs["raw_create_validate_only_defaults"] = _raw_create(bootstrap, -1, -1, validate_only=True)

    missing = unique("diff-missing")
    obs["delete_unknown"] = outcome(
        client.delete_topics([missing], operation_timeout=TIMEOUT)[missing]
    )
    for kind, res in (
        ("unknown_topic", ConfigResource(ResourceType.TOPIC, missing)),
        ("invalid_topic_name", ConfigResource(ResourceType.TOPIC, "bad topic!")),
    ):
        obs[f"describe_configs.{kind}"] = outcome(
            client.describe_configs([res], request_timeout=TIMEOUT)[res]
        )
    res = ConfigResource(ResourceType.TOPIC, topic)
    entries = client.describe_configs([res], request_timeout=TIMEOUT)[res].result(TIMEOUT)
    obs["describe_configs.existing"] = {
        name: (
            [entries[name].value, entries[name].is_default, entries[name].source]
            if name in entries
            else "absent"
        )
        for name in DESCRIBED_TOPIC_CONFIGS
    }

    def alter(topic_name: str, name: str, value: str) -> str:
        r = ConfigResource(
            ResourceType.TOPIC,
            topic_name,
            incremental_configs=[
                ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            ],
        )
        return outcome(client.incremental_alter_configs([r])[r])

    obs["alter_config.invalid_value"] = alter(topic, "retention.ms", "not-a-number")
    obs["alter_config.unknown_name"] = alter(topic, "no.such.config", "1")
    obs["alter_config.unknown_topic"] = alter(missing, "retention.ms", "1000")
    obs["alter_config.ok"] = alter(topic, "retention.ms", "123456")
    # Kafka applies an altered config once its metadata log has it: a describe right after
    # the alter can still see the old value, so wait (bounded) for the new one.
    deadline = time.monotonic() + TIMEOUT
    while True:
        entries = client.describe_configs([res], request_timeout=TIMEOUT)[res].result(TIMEOUT)
        if entries["retention.ms"].value == "123456" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    obs["describe_configs.after_alter"] = [
        entries["retention.ms"].value,
        entries["retention.ms"].is_default,
        entries["retention.ms"].source,
    ]

    def grow(topic_name: str, count: int) -> str:
        futures = client.create_partitions(
            [NewPartitions(topic_name, count)], operation_timeout=TIMEOUT
        )
        return outcome(futures[topic_name])

    obs["create_partitions.decrease_3_to_2"] = grow(topic, 2)
    obs["create_partitions.same_count_3"] = grow(topic, 3)
    obs["create_partitions.unknown_topic"] = grow(missing, 4)
    obs["create_partitions.increase_3_to_5"] = grow(topic, 5)
    deadline = time.monotonic() + TIMEOUT
    partitions = 0
    while time.monotonic() < deadline:
        partitions = len(client.list_topics(topic, timeout=TIMEOUT).topics[topic].partitions)
        if partitions == 5:
            break
        time.sleep(0.1)
    obs["partitions_after_increase"] = partitions
    obs["delete_existing"] = outcome(
        client.delete_topics([topic], operation_timeout=TIMEOUT)[topic]
    )
    return obs


# -- scenario: bad requests at the protocol level --------------------------------------------


def _frame_outcome(bootstrap: str, frame: bytes, api_key: int, version: int) -> Any:
    """What a raw frame gets: "closed", "no answer" or the decoded response body."""
    with RawClient(bootstrap, timeout=5) as client:
        client.send(frame)
        try:
            answer = client.read_frame(5)
        except TimeoutError:
            return "no answer"
        if answer is None:
            return "closed"
        try:
            return decode_response_frame(answer, api_key, version)
        except Exception as exc:  # an answer our decoder cannot read is an observation too
            return f"undecodable answer ({type(exc).__name__})"


def _produce_code(bootstrap: str, topic: str, partition: int) -> str:
    return code_name(raw_produce(bootstrap, topic, partition, [SimpleRecord(b"k", b"v")]))


def _fetch(bootstrap: str, topic: str, partition: int, offset: int) -> dict[str, Any] | str:
    request = fe.FetchRequest(
        replica_id=-1,
        max_wait=0,
        min_bytes=0,
        max_bytes=1 << 20,
        session_epoch=-1,
        topics=[
            fe.FetchTopic(
                topic=topic,
                partitions=[
                    fe.FetchPartition(
                        partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20
                    )
                ],
            )
        ],
    )
    with RawClient(bootstrap) as client:
        body = client.request(1, 12, request).body
    if body.error_code:
        return code_name(body.error_code)
    (t,) = body.responses
    (p,) = t.partitions
    return {
        "error": code_name(p.error_code),
        "high_watermark,log_start_offset": [p.high_watermark, p.log_start_offset],
        "record_bytes": len(p.records or b""),
    }


def _list_offsets(
    bootstrap: str, topic: str, partition: int, ts: int, version: int = 7
) -> dict[str, Any]:
    request = lo.ListOffsetsRequest(
        replica_id=-1,
        topics=[
            lo.ListOffsetsTopic(
                name=topic,
                partitions=[lo.ListOffsetsPartition(partition_index=partition, timestamp=ts)],
            )
        ],
    )
    with RawClient(bootstrap) as client:
        (t,) = client.request(2, version, request).body.topics
    (p,) = t.partitions
    return {"error": code_name(p.error_code), "offset": p.offset}


def _api_versions_probe(bootstrap: str, frame: bytes) -> Any:
    """An ApiVersions request the broker cannot parse at its version, then a v0 retry."""
    with RawClient(bootstrap, timeout=5) as client:
        client.send(frame)
        try:
            answer = client.read_frame(5)
        except TimeoutError:
            return "no answer"
        if answer is None:
            return "closed"
        try:
            response = decode_response_frame(answer, 18, 0)  # header v0 + v0 body
        except Exception as exc:
            return f"undecodable answer ({type(exc).__name__})"
        keys = {k.api_key: [k.min_version, k.max_version] for k in response.body.api_keys}
        try:
            retry = client.request(18, 0, ApiVersionsRequest()).body.error_code
            fallback = code_name(retry)
        except (ConnectionError, OSError, TimeoutError) as exc:
            fallback = type(exc).__name__
        return {
            "error": code_name(response.body.error_code),
            "trailing_bytes": response.trailing,
            # The ranges themselves differ by design (see test_api_versions_ranges).
            "lists_api_versions_key": 18 in keys,
            "lists_other_keys": bool(set(keys) - {18}),
            "v0_retry_on_same_connection": fallback,
        }


def _still_serves(bootstrap: str) -> bool:
    with RawClient(bootstrap) as client:
        return client.request(18, 0, ApiVersionsRequest()).body.error_code == 0


def scenario_bad_requests(bootstrap: str) -> dict[str, Any]:
    topic = unique("diff-bad")
    missing = unique("diff-missing")
    create_topic(bootstrap, topic, 3)
    obs: dict[str, Any] = {}
    obs["produce.ok"] = _produce_code(bootstrap, topic, 0)
    assert raw_produce(bootstrap, topic, 0, [SimpleRecord(b"k", b"v")] * 2) == 0
    obs["produce.unknown_topic"] = _produce_code(bootstrap, missing, 0)
    obs["produce.unknown_partition"] = _produce_code(bootstrap, topic, 7)
    obs["produce.negative_partition"] = _produce_code(bootstrap, topic, -1)
    obs["produce.invalid_topic_name"] = _produce_code(bootstrap, "bad topic!", 0)

    obs["fetch.at_end"] = _fetch(bootstrap, topic, 0, 3)
    obs["fetch.beyond_end"] = _fetch(bootstrap, topic, 0, 1000)
    obs["fetch.negative_offset"] = _fetch(bootstrap, topic, 0, -5)
    obs["fetch.empty_partition_offset_1"] = _fetch(bootstrap, topic, 1, 1)
    obs["fetch.unknown_partition"] = _fetch(bootstrap, topic, 7, 0)
    obs["fetch.unknown_topic"] = _fetch(bootstrap, missing, 0, 0)

    obs["list_offsets.latest"] = _list_offsets(bootstrap, topic, 0, -1)
    obs["list_offsets.unknown_partition"] = _list_offsets(bootstrap, topic, 7, -1)
    obs["list_offsets.unknown_topic"] = _list_offsets(bootstrap, missing, 0, -1)
    # Special timestamps exist from a version on (-3: v7, -4: v8, -5: v9); others are unknown.
    obs["list_offsets.special_timestamp_by_version"] = {
        f"v{v} ts={ts}": _list_offsets(bootstrap, topic, 0, ts, version=v)["error"]
        for v, ts in (
            (1, -3),
            (6, -3),
            (7, -3),
            (7, -4),
            (8, -4),
            (8, -5),
            (9, -5),
            (9, -6),
            (10, -7),
            (7, -100),
        )
    }

    # KAFKA-18659: Kafka 4 advertises Produce from v0 (and closes v0-2 requests) because
    # librdkafka < 2.10 otherwise disables compression ("Broker does not support
    # compression type gzip").
    with RawClient(bootstrap) as client:
        body = client.request(18, 0, ApiVersionsRequest()).body
    produce_range = [(k.min_version, k.max_version) for k in body.api_keys if k.api_key == 0]
    obs["api_versions.produce_min_version"] = produce_range[0][0] if produce_range else None

    with RawClient(bootstrap) as client:
        for label, auto in (("metadata.unknown_topic", False), ("metadata.unknown_auto", True)):
            request = MetadataRequest(
                topics=[md.MetadataRequestTopic(name=missing)], allow_auto_topic_creation=auto
            )
            (t,) = client.request(3, 12, request).body.topics
            obs[label] = code_name(t.error_code)
        request = MetadataRequest(
            topics=[md.MetadataRequestTopic(name="bad topic!")], allow_auto_topic_creation=True
        )
        (t,) = client.request(3, 12, request).body.topics
        obs["metadata.invalid_name"] = code_name(t.error_code)

    # Versions no broker knows: a non-ApiVersions API, and ApiVersions itself (KIP-511).
    def closed_or_error(frame: bytes, api_key: int, version: int) -> str:
        got = _frame_outcome(bootstrap, frame, api_key, version)
        return got if isinstance(got, str) else f"answered (error {got.body.error_code})"

    metadata_v1 = encode_request_frame(3, 1, MetadataRequest(topics=[]), 5)
    obs["metadata_v99"] = closed_or_error(
        metadata_v1[:6] + struct.pack(">h", 99) + metadata_v1[8:], 3, 1
    )
    produce_v9 = encode_request_frame(
        0,
        9,
        pr.ProduceRequest(acks=-1, timeout=1000, topic_data=[]),
        5,
    )
    obs["produce_v2_below_min"] = closed_or_error(
        produce_v9[:6] + struct.pack(">h", 2) + produce_v9[8:], 0, 9
    )
    obs["api_versions_v99_flexible_body"] = _api_versions_probe(
        bootstrap, encode_raw_frame(18, 99, 42, b"\x05probe\x041.0\x00", flexible_header=True)
    )
    obs["api_versions_v99_empty_body"] = _api_versions_probe(
        bootstrap, encode_raw_frame(18, 99, 42, b"")
    )
    obs["api_versions_v32767_empty_body"] = _api_versions_probe(
        bootstrap, encode_raw_frame(18, 32767, 42, b"")
    )
    for key in (9999, 4, -1):
        obs[f"unknown_api_key_{key}"] = closed_or_error(encode_raw_frame(key, 0, 1, b""), 18, 0)

    # Garbage bodies for known keys.
    obs["garbage.metadata_v1_huge_array"] = closed_or_error(
        encode_raw_frame(3, 1, 1, struct.pack(">i", 0x7FFFFFFF)), 3, 1
    )
    obs["garbage.metadata_v1_truncated_string"] = closed_or_error(
        encode_raw_frame(3, 1, 1, struct.pack(">ih", 1, 100) + b"abc"), 3, 1
    )
    produce_frame = encode_request_frame(
        0,
        9,
        pr.ProduceRequest(
            acks=-1,
            timeout=1000,
            topic_data=[
                pr.TopicProduceData(
                    name=topic,
                    partition_data=[
                        pr.PartitionProduceData(
                            index=0, records=build_batch([SimpleRecord(b"k", b"v")])
                        )
                    ],
                )
            ],
        ),
        8,
    )
    cut = produce_frame[4:-20]
    obs["garbage.produce_v9_truncated"] = closed_or_error(struct.pack(">i", len(cut)) + cut, 0, 9)
    obs["garbage.random_bytes_api_versions_v3"] = closed_or_error(
        encode_raw_frame(18, 3, 1, bytes(range(200, 240)), flexible_header=True), 18, 3
    )
    obs["garbage.zero_length_frame"] = closed_or_error(struct.pack(">i", 0), 18, 0)
    # A well-formed Metadata v1 body followed by 8 extra bytes.
    extra = encode_request_frame(3, 1, MetadataRequest(topics=[]), 9)[4:] + b"\x00" * 8
    obs["garbage.trailing_bytes_after_metadata_v1"] = closed_or_error(
        struct.pack(">i", len(extra)) + extra, 3, 1
    )
    obs["still_serves_after_all"] = _still_serves(bootstrap)
    return obs


# -- scenario: an older librdkafka (kcat) producing compressed batches ------------------------

KCAT_CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _batches(records: bytes) -> list[dict[str, int]]:
    """Compression codec and record count of each v2 batch in a Fetch answer's records."""
    out = []
    pos = 0
    while pos + 61 <= len(records):
        (length,) = struct.unpack_from(">i", records, pos + 8)
        (attributes,) = struct.unpack_from(">h", records, pos + 21)
        (count,) = struct.unpack_from(">i", records, pos + 57)
        out.append({"codec": attributes & 7, "records": count})
        pos += 12 + length
    return out


def scenario_kcat_compression(bootstrap: str) -> dict[str, Any]:
    """``kcat -z <codec>``: does the batch reach the log compressed?

    librdkafka before 2.10 only compresses when the broker's Produce range starts at v0
    (librdkafka#4956), which is why Kafka 4 still advertises Produce v0 (KAFKA-18659).
    """
    kcat = shutil.which("kcat")
    if kcat is None:
        return {"skipped": "kcat is not installed"}
    obs: dict[str, Any] = {}
    for codec in KCAT_CODECS:
        topic = unique(f"diff-kcat-{codec}")
        create_topic(bootstrap, topic, 1)
        run = subprocess.run(
            # A long linger puts the 20 lines in one batch (kcat's flush at EOF sends it at
            # once), instead of however many batches the timing made.
            [
                kcat,
                "-P",
                "-b",
                bootstrap,
                "-t",
                topic,
                "-p",
                "0",
                "-z",
                codec,
                "-X",
                "linger.ms=5000",
            ],
            input=b"".join(b"line-%d abcdefghijabcdefghij\n" % i for i in range(20)),
            capture_output=True,
            timeout=TIMEOUT,
            check=False,
        )
        batches = _batches(_fetch_records(bootstrap, topic))
        obs[codec] = {
            "kcat_exit": run.returncode,
            "records": sum(b["records"] for b in batches),
            # Only "was the codec used" is deterministic: librdkafka sends a batch that its
            # codec does not shrink uncompressed, so a batch split by timing (a first record
            # alone) was sometimes stored with codec 0 beside the compressed rest, against
            # either broker (gzip/snappy: 1 run in 6-8 on Kafka vs pydmq).
            "codec_used": KCAT_CODECS[codec] in {b["codec"] for b in batches},
        }
    return obs


def _fetch_records(bootstrap: str, topic: str) -> bytes:
    request = fe.FetchRequest(
        replica_id=-1,
        max_wait=0,
        min_bytes=0,
        max_bytes=1 << 20,
        session_epoch=-1,
        topics=[
            fe.FetchTopic(
                topic=topic,
                partitions=[
                    fe.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
                ],
            )
        ],
    )
    with RawClient(bootstrap) as client:
        (t,) = client.request(1, 12, request).body.responses
    (p,) = t.partitions
    return bytes(p.records or b"")


# -- scenarios of issue 23 (differences other clients' suites found) -------------------------

# RE2/J syntax: accepted, or refused with INVALID_REGULAR_EXPRESSION (and RE2/J's reason).
REGEXES = [
    "__consumer.*",
    "a\\z",
    "a\\Z",
    "(?<n>a)",
    "(?P<n>a)",
    "(?=a)",
    "(a)\\1",
    "a*+",
    "\\Q.*\\E",
    "[[:alpha:]]+",
    "\\p{Greek}",
    "\\p{Foo}",
    "a{1001}",
    "(?i)x",
    "(?x)a",
    "\\C",
    "[z-a]",
    "a)",
]


def wait_for_group_coordinator(client: RawClient) -> None:
    """Until FindCoordinator answers (the offsets topic exists), at most TIMEOUT."""
    from pydmq.protocol.messages import find_coordinator as fc

    deadline = time.monotonic() + TIMEOUT
    while True:
        body = client.request(10, 4, fc.FindCoordinatorRequest(coordinator_keys=["x"])).body
        if body.coordinators[0].error_code == 0 or time.monotonic() > deadline:
            return
        time.sleep(0.2)


def scenario_consumer_regex(bootstrap: str) -> dict[str, Any]:
    """ConsumerGroupHeartbeat v1 joins with each regex: error name and message."""
    from pydmq.protocol.messages import consumer_group_heartbeat as hb

    out: dict[str, Any] = {}
    with RawClient(bootstrap) as client:
        wait_for_group_coordinator(client)
        for pattern in REGEXES:
            request = hb.ConsumerGroupHeartbeatRequest(
                group_id=unique("diff-regex"),
                member_id=str(uuid.uuid4()),
                member_epoch=0,
                rebalance_timeout=30_000,
                subscribed_topic_regex=pattern,
                topic_partitions=[],
            )
            body = client.request(68, 1, request).body
            out[pattern] = [code_name(body.error_code), body.error_message]
            if body.error_code == 0:
                leave = hb.ConsumerGroupHeartbeatRequest(
                    group_id=request.group_id, member_id=body.member_id, member_epoch=-1
                )
                client.request(68, 1, leave)
    return out


def scenario_describe_groups(bootstrap: str) -> dict[str, Any]:
    """DescribeGroups v0-v6 of an unknown group, of a group that has only committed offsets
    and of a consumer (KIP-848) group: v6 answers GROUP_ID_NOT_FOUND with a message where
    older versions answer a "Dead" group with no error."""
    from pydmq.protocol.messages import consumer_group_heartbeat as hb
    from pydmq.protocol.messages import describe_groups as dg
    from pydmq.protocol.messages import offset_commit as oc

    topic = unique("diff-dg")
    create_topic(bootstrap, topic, 1)
    unknown, committed, consumer = (
        unique("diff-dg-none"),
        unique("diff-dg-oc"),
        unique("diff-dg-cg"),
    )
    names = {unknown: "unknown", committed: "committed_only", consumer: "consumer", "": "empty_id"}
    out: dict[str, Any] = {}
    with RawClient(bootstrap) as client:
        wait_for_group_coordinator(client)
        commit = oc.OffsetCommitRequest(
            group_id=committed,
            topics=[
                oc.OffsetCommitRequestTopic(
                    name=topic,
                    partitions=[
                        oc.OffsetCommitRequestPartition(partition_index=0, committed_offset=0)
                    ],
                )
            ],
        )
        (t,) = client.request(8, 8, commit).body.topics
        out["commit"] = code_name(t.partitions[0].error_code)
        join = hb.ConsumerGroupHeartbeatRequest(
            group_id=consumer,
            member_id=str(uuid.uuid4()),
            member_epoch=0,
            rebalance_timeout=30_000,
            subscribed_topic_names=[topic],
            topic_partitions=[],
        )
        joined = client.request(68, 0, join).body
        out["join"] = code_name(joined.error_code)
        for version in range(7):
            body = client.request(15, version, dg.DescribeGroupsRequest(groups=list(names))).body
            for g in body.groups:
                seen = {
                    "error": code_name(g.error_code),
                    "message": (g.error_message or "").replace(g.group_id, "<group>") or None,
                    "state": g.group_state,
                    "protocol_type": g.protocol_type,
                    "members": len(g.members),
                }
                where = "classic_view_of_consumer_group" if g.group_id == consumer else "groups"
                out.setdefault(where, {}).setdefault(f"v{version}", {})[names[g.group_id]] = seen
        leave = hb.ConsumerGroupHeartbeatRequest(
            group_id=consumer, member_id=joined.member_id, member_epoch=-1
        )
        client.request(68, 0, leave)
    return out


def scenario_log_dirs(bootstrap: str) -> dict[str, Any]:
    """DescribeLogDirs v1-v4 (sizes, lags, which partitions; the dir and byte counts vary)
    and AlterReplicaLogDirs v1-v2 to the node's own dir and to another."""
    from pydmq.protocol.messages import alter_replica_log_dirs as ar
    from pydmq.protocol.messages import describe_log_dirs as dl

    topic = unique("diff-dirs")
    create_topic(bootstrap, topic, 2)
    assert raw_produce(bootstrap, topic, 0, [SimpleRecord(b"k", b"v" * 100)] * 3) == 0
    out: dict[str, Any] = {}
    own = ""
    with RawClient(bootstrap) as client:
        for version in range(1, 5):
            request = dl.DescribeLogDirsRequest(
                topics=[
                    dl.DescribableLogDirTopic(topic=topic, partitions=[0, 1, 9]),
                    dl.DescribableLogDirTopic(topic="diff-no-such-topic", partitions=[0]),
                ]
            )
            body = client.request(35, version, request).body
            (result,) = body.results
            own = result.log_dir
            out[f"describe_v{version}"] = {
                "error": code_name(body.error_code),
                "dir_error": code_name(result.error_code),
                "byte_counts": [result.total_bytes > 0, result.usable_bytes > 0],
                "cordoned": result.is_cordoned,
                "topics": {
                    ("topic" if t.name == topic else t.name): sorted(
                        [p.partition_index, p.partition_size, p.offset_lag, p.is_future_key]
                        for p in t.partitions
                    )
                    for t in result.topics
                },
            }
        everything = client.request(35, 4, dl.DescribeLogDirsRequest(topics=None)).body
        out["describe_all_has_topic"] = any(t.name == topic for t in everything.results[0].topics)
        nothing = client.request(35, 4, dl.DescribeLogDirsRequest(topics=[])).body
        out["describe_none"] = [t.name for t in nothing.results[0].topics]
        for version in (1, 2):
            for label, path in (("own", own), ("other", "/nowhere/diff"), ("relative", "x")):
                request = ar.AlterReplicaLogDirsRequest(
                    dirs=[
                        ar.AlterReplicaLogDir(
                            path=path,
                            topics=[
                                ar.AlterReplicaLogDirTopic(name=topic, partitions=[0, 7]),
                                ar.AlterReplicaLogDirTopic(name="diff-no-such", partitions=[0]),
                            ],
                        )
                    ]
                )
                body = client.request(34, version, request).body
                out[f"alter_v{version}_{label}"] = sorted(
                    [
                        "own" if r.topic_name == topic else r.topic_name,
                        p.partition_index,
                        code_name(p.error_code),
                    ]
                    for r in body.results
                    for p in r.partitions
                )
    return out


BROKER_CONFIG_NAMES = [
    "log.cleaner.backoff.ms",
    "log.cleaner.threads",
    "num.io.threads",
    "num.network.threads",
    "background.threads",
    "message.max.bytes",
    "log.segment.bytes",
    "log.retention.hours",
    "num.partitions",
    "compression.type",
    "ssl.keystore.password",
    "sasl.enabled.mechanisms",
    "log.cleaner.min.cleanable.ratio",
    "auto.leader.rebalance.enable",
]


def _broker_configs(client: RawClient, names: list[str] | None) -> dict[str, Any]:
    from pydmq.protocol.messages import describe_configs as dc

    request = dc.DescribeConfigsRequest(
        resources=[
            dc.DescribeConfigsResource(resource_type=4, resource_name="1", configuration_keys=names)
        ],
        include_synonyms=True,
    )
    (result,) = client.request(32, 4, request).body.results
    return {
        e.name: {
            "value": e.value,
            "source": e.config_source,
            "read_only": e.read_only,
            "sensitive": e.is_sensitive,
            "type": e.config_type,
            "synonyms": [[s.name, s.value, s.source] for s in e.synonyms],
        }
        for e in result.configs
    }


def _incremental_alter(
    client: RawClient,
    resource_type: int,
    name: str,
    ops: tuple[tuple[str, int, str | None], ...],
    validate_only: bool = False,
) -> tuple[str, str | None]:
    """IncrementalAlterConfigs v1 of one resource: (error code name, error message)."""
    from pydmq.protocol.messages import incremental_alter_configs as iac

    request = iac.IncrementalAlterConfigsRequest(
        resources=[
            iac.AlterConfigsResource(
                resource_type=resource_type,
                resource_name=name,
                configs=[
                    iac.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops
                ],
            )
        ],
        validate_only=validate_only,
    )
    (result,) = client.request(44, 1, request).body.responses
    return code_name(result.error_code), result.error_message


def scenario_broker_configs(bootstrap: str) -> dict[str, Any]:
    """DescribeConfigs of broker "1" (a few configs whole; every name Kafka lists is listed),
    IncrementalAlterConfigs on broker "1" (accepted, read back once it shows: Kafka applies it
    through its controller) and its refusals, AlterConfigs on broker "1"."""
    from pydmq.protocol.messages import alter_configs as ac

    def alter(*ops: tuple[str, int, str | None], name: str = "1") -> list[Any]:
        return list(_incremental_alter(client, 4, name, ops))

    out: dict[str, Any] = {}
    with RawClient(bootstrap) as client:
        out["described"] = _broker_configs(client, BROKER_CONFIG_NAMES)
        out["set"] = alter(("log.cleaner.backoff.ms", 0, "20000"))
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            seen = _broker_configs(client, ["log.cleaner.backoff.ms"])["log.cleaner.backoff.ms"]
            if seen["value"] == "20000":
                break
            time.sleep(0.1)
        out["after_set"] = seen
        out["read_only"] = alter(("num.partitions", 0, "5"))
        out["bad_value"] = alter(("log.cleaner.backoff.ms", 0, "abc"))
        out["append_non_list"] = alter(("log.cleaner.backoff.ms", 2, "1"))
        out["other_broker"] = alter(("log.cleaner.backoff.ms", 0, "1"), name="7")
        out["delete"] = alter(("log.cleaner.backoff.ms", 1, None))
        request = ac.AlterConfigsRequest(
            resources=[
                ac.AlterConfigsResource(
                    resource_type=4,
                    resource_name="1",
                    configs=[ac.AlterableConfig(name="num.partitions", value="4")],
                )
            ]
        )
        (result,) = client.request(33, 2, request).body.responses
        out["legacy_read_only"] = [code_name(result.error_code), result.error_message]
    return out


def scenario_broker_loggers(bootstrap: str) -> dict[str, Any]:
    """The BROKER_LOGGER resource (KIP-412/817) of broker "1": DescribeConfigs of ``root``,
    IncrementalAlterConfigs SET/DELETE of its level (read back, then put back), validate_only,
    and every refusal: unknown logger, unknown level, DELETE of root, APPEND, SUBTRACT,
    another broker's id, a bad entry next to a good one (nothing applied), AlterConfigs (33).
    Logger names other than root are each broker's own, so only root is named."""
    from pydmq.protocol.messages import alter_configs as ac
    from pydmq.protocol.messages import describe_configs as dc

    def alter(*ops: tuple[str, int, str | None], name: str = "1", check: bool = False) -> str:
        return _incremental_alter(client, 8, name, ops, validate_only=check)[0]

    def root_level() -> list[Any]:
        request = dc.DescribeConfigsRequest(
            resources=[
                dc.DescribeConfigsResource(
                    resource_type=8, resource_name="1", configuration_keys=["root"]
                )
            ]
        )
        (result,) = client.request(32, 4, request).body.results
        entries = {c.name: c for c in result.configs}
        root = entries.get("root")
        if root is None:
            return [code_name(result.error_code), None, None]
        return [code_name(result.error_code), root.value, root.config_source]

    out: dict[str, Any] = {}
    with RawClient(bootstrap) as client:
        code, level, source = root_level()
        out["describe_root"] = [code, level in LOG_LEVELS, source]
        out["set_root_debug"] = [alter(("root", 0, "DEBUG")), root_level()[1]]
        out["validate_only_trace"] = [alter(("root", 0, "TRACE"), check=True), root_level()[1]]
        out["unknown_logger"] = alter(("pydmq.diff.no.such.logger", 0, "DEBUG"))
        out["unknown_level"] = alter(("root", 0, "VERBOSE"))
        out["lower_case_level"] = alter(("root", 0, "info"))
        out["delete_root"] = alter(("root", 1, None))
        out["append"] = alter(("root", 2, "INFO"))
        out["subtract"] = alter(("root", 3, "INFO"))
        out["other_broker"] = alter(("root", 0, "INFO"), name="7")
        out["good_and_bad"] = [alter(("root", 0, "ERROR"), ("root2", 0, "DEBUG")), root_level()[1]]
        request = ac.AlterConfigsRequest(
            resources=[
                ac.AlterConfigsResource(
                    resource_type=8,
                    resource_name="1",
                    configs=[ac.AlterableConfig(name="root", value="INFO")],
                )
            ]
        )
        (result,) = client.request(33, 2, request).body.responses
        out["legacy_alter_configs"] = code_name(result.error_code)
        out["put_back"] = [alter(("root", 0, str(level))), root_level()[1] == level]
    return out


def scenario_metadata_auto_create(bootstrap: str) -> dict[str, Any]:
    """Metadata v0-v13 naming a new topic (allow_auto_topic_creation true and false from
    v4): the creating request's answer, then once the topic exists; v1 after DeleteTopics."""
    from pydmq.protocol.messages import delete_topics as dt

    def ask(client: RawClient, version: int, name: str, allow: bool) -> list[Any]:
        request = MetadataRequest(
            topics=[md.MetadataRequestTopic(name=name)], allow_auto_topic_creation=allow
        )
        (t,) = client.request(3, version, request).body.topics
        zero_id = getattr(t, "topic_id", None) in (None, uuid.UUID(int=0))
        return [code_name(t.error_code), t.is_internal, len(t.partitions), zero_id]

    def settled(client: RawClient, version: int, name: str) -> list[Any]:
        deadline = time.monotonic() + TIMEOUT
        while True:
            seen = ask(client, version, name, True)
            if seen[0] == "NONE" or time.monotonic() > deadline:
                return seen
            time.sleep(0.1)

    out: dict[str, Any] = {}
    with RawClient(bootstrap) as client:
        for version in range(14):
            for allow in (True, False) if version >= 4 else (True,):
                name = unique(f"diff-auto-v{version}")
                first = ask(client, version, name, allow)
                out[f"v{version}_allow_{allow}"] = (
                    [first, settled(client, version, name)]
                    if allow
                    else [first, ask(client, version, name, allow)]
                )
        name = unique("diff-auto-again")
        settled(client, 1, name)
        deleted = client.request(
            20, 6, dt.DeleteTopicsRequest(topics=[dt.DeleteTopicState(name=name)], timeout=10_000)
        ).body
        out["deleted"] = [code_name(r.error_code) for r in deleted.responses]
        out["v1_recreate"] = [ask(client, 1, name, True), settled(client, 1, name)]
    return out


SCENARIOS: dict[str, Callable[[str], dict[str, Any]]] = {
    "produce_fetch": scenario_produce_fetch,
    "list_offsets": scenario_list_offsets,
    "groups": scenario_groups,
    "admin_errors": scenario_admin_errors,
    "bad_requests": scenario_bad_requests,
    "kcat_compression": scenario_kcat_compression,
    "consumer_regex": scenario_consumer_regex,
    "log_dirs": scenario_log_dirs,
    "describe_groups": scenario_describe_groups,
    "broker_configs": scenario_broker_configs,
    "broker_loggers": scenario_broker_loggers,
}


# -- the tests -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario(brokers: Brokers, name: str) -> None:
    started = time.monotonic()
    on_kafka, on_pydmq = run_on_both(SCENARIOS[name], brokers)
    check_json_able(on_kafka, "kafka")
    check_json_able(on_pydmq, "pydmq")
    dump = os.environ.get("PYDMQ_DIFF_DUMP")
    if dump:  # both observations, for reading them whole
        Path(dump).mkdir(parents=True, exist_ok=True)
        for who, obs in (("kafka", on_kafka), ("pydmq", on_pydmq)):
            (Path(dump) / f"{name}.{who}.json").write_text(json.dumps(obs, indent=1) + "\n")
    diffs = diff_paths(on_kafka, on_pydmq)
    deliberate = DELIBERATE_DIFFERENCES.get(name, {})
    unexpected = {p: v for p, v in diffs.items() if not any(covers(e, p) for e in deliberate)}
    stale = [e for e in deliberate if not any(covers(e, p) for p in diffs)]

    lines = [f"\n== {name}: {len(diffs)} differing path(s) ({time.monotonic() - started:.1f} s)"]
    for entry, reason in deliberate.items():
        lines.append(f"  deliberate  {entry}: {reason}")
        for path, (k, p) in diffs.items():
            if covers(entry, path):
                lines.append(f"      {path}: kafka={short(k)} pydmq={short(p)}")
    for path, (k, p) in unexpected.items():
        lines.append(f"  UNEXPECTED  {path}: kafka={short(k)} pydmq={short(p)}")
    for entry in stale:
        lines.append(f"  STALE       {entry}: no longer differs")
    print("\n".join(lines))

    assert not unexpected, (
        f"{name}: pydmq differs from Apache Kafka at {len(unexpected)} path(s) "
        f"not in DELIBERATE_DIFFERENCES:\n"
        + "\n".join(f"  {p}: kafka={short(k)} pydmq={short(v)}" for p, (k, v) in unexpected.items())
    )
    assert not stale, f"{name}: DELIBERATE_DIFFERENCES entries that no longer differ: {stale}"


@pytest.fixture(scope="module")
def autocreating_brokers() -> Iterator[Brokers]:
    """Both brokers again with ``auto.create.topics.enable=true`` (static in Kafka): started
    only for ``metadata_auto_create``."""
    props = {**BROKER_PROPS, "auto.create.topics.enable": "true"}
    missing = reference_kafka_unavailable()
    if missing:
        pytest.skip(missing)
    kafka = ReferenceKafka(props).start()
    root = Path(tempfile.mkdtemp(prefix="pydmq-diff-auto-"))
    pydmq = BrokerProcess(root / "data", overrides=props, log_path=root / "broker.log")
    try:
        pydmq.start(30)
        wait_until_serving(pydmq.bootstrap, time.monotonic() + 30)
        kafka.wait_ready(KAFKA_START_TIMEOUT)
        yield Brokers(kafka=kafka.bootstrap, pydmq=pydmq.bootstrap)
    finally:
        pydmq.stop()
        kafka.stop()
        kafka.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def test_metadata_auto_create(autocreating_brokers: Brokers) -> None:
    """Every Metadata version's answer to a topic it auto-creates, as Kafka 4.4's (issue 23:
    pydmq answered the creating request with the new partitions)."""
    on_kafka, on_pydmq = run_on_both(scenario_metadata_auto_create, autocreating_brokers)
    diffs = diff_paths(on_kafka, on_pydmq)
    print(f"\n== metadata_auto_create: {len(diffs)} differing path(s)")
    for path, (k, p) in diffs.items():
        print(f"  UNEXPECTED  {path}: kafka={short(k)} pydmq={short(p)}")
    assert not diffs


def _advertised(bootstrap: str) -> dict[int, tuple[int, int]]:
    with RawClient(bootstrap) as client:
        body = client.request(
            18,
            3,
            ApiVersionsRequest(client_software_name="pydmq-diff", client_software_version="1.0"),
        ).body
    assert body.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}


def test_api_versions_ranges(brokers: Brokers) -> None:
    """Informational: the advertised ranges side by side (only the used keys are asserted)."""
    from pydmq.protocol.messages import API_SCHEMAS

    kafka, pydmq = _advertised(brokers.kafka), _advertised(brokers.pydmq)
    lines = ["\n== ApiVersions (v3) ranges: key name kafka pydmq"]
    for key in sorted(set(kafka) | set(pydmq)):
        schema = API_SCHEMAS.get(key)
        name = schema.name if schema is not None else "?"
        k, p = kafka.get(key), pydmq.get(key)
        mark = (
            ""
            if k == p
            else (
                "  <- only kafka"
                if p is None
                else "  <- only pydmq"
                if k is None
                else "  <- differs"
            )
        )
        lines.append(f"  {key:3d} {name:32s} {k!s:12s} {p!s:12s}{mark}")
    print("\n".join(lines))
    missing = {k: v for k, v in USED_API_KEYS.items() if k not in pydmq}
    assert not missing, f"pydmq does not advertise API keys the scenarios use: {missing}"
    not_in_kafka = {k: v for k, v in USED_API_KEYS.items() if k not in kafka}
    assert not not_in_kafka, f"the reference Kafka does not advertise {not_in_kafka}"
