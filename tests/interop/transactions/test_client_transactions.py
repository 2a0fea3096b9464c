"""Clients' transactional scenarios, differential: the same scenario on Kafka 4.4 and pydmq.

Each scenario is a function ``scenario(bootstrap) -> observation``: it drives real clients
(confluent-kafka/librdkafka, kafka-python, aiokafka) through a transactional flow, asserts
what Kafka's transactions guarantee (committed records visible read_committed, aborted ones
only read_uncommitted, control records never returned, positions past the markers, the last
stable offset, fencing, pending offsets) and returns what the clients saw as plain data:
records with their partitions and offsets, positions, ListOffsets answers by isolation level,
committed group offsets, error names. Topic, group and transactional ids are unique per run
and left out of the observation.

``test_differential[*]`` runs each scenario on the reference Kafka and on pydmq at once: the
scenario's own assertions must hold on Kafka (which proves the scenario) and on pydmq, and the
two observations must be equal.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import (  # noqa: E402
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from pydmq.protocol.errors import ErrorCode  # noqa: E402
from pydmq.protocol.messages import offset_fetch as of  # noqa: E402
from support.raw_client import RawClient  # noqa: E402  (tests/ is on sys.path)

from ..differential_support import check_json_able, diff_paths, short  # noqa: E402
from .clients import (  # noqa: E402
    TIMEOUT,
    Seen,
    create_topics,
    end_offsets,
    read_to_end,
    unique,
)
from .targets import KAFKA, PYDMQ, Target, running_target  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.timeout(600)]

PARTITIONS = 3

Observation = dict[str, Any]


# -- targets ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kafka_target() -> Iterator[Target]:
    with running_target(KAFKA) as target:
        yield target


@pytest.fixture(scope="module")
def pydmq_target() -> Iterator[Target]:
    with running_target(PYDMQ) as target:
        yield target


# -- what a scenario observes ----------------------------------------------------------------


def records(seen: list[Seen]) -> list[list[Any]]:
    return [[s.partition, s.offset, s.key, s.value] for s in seen]


def log_view(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> Observation:
    """What each isolation level shows of ``topic``: records, positions at the end, and
    ListOffsets ``latest`` (the last stable offset / the high watermark)."""
    view: Observation = {}
    for isolation in ("read_committed", "read_uncommitted"):
        seen, positions = read_to_end(bootstrap, topic, partitions, isolation)
        view[isolation] = {
            "records": records(seen),
            "positions": positions,
            "list_offsets_latest": end_offsets(bootstrap, topic, partitions, isolation),
        }
    return view


def error_name(exc: BaseException) -> str:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return str(exc.args[0].name())
    return type(exc).__name__


def txn_producer(bootstrap: str, transactional_id: str) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "linger.ms": 5,
        }
    )
    producer.init_transactions(TIMEOUT)
    return producer


def produce(producer: Producer, topic: str, items: list[tuple[int, str]]) -> None:
    """(partition, text) pairs: key and value both ``text``; flushed (so in the log)."""
    for partition, text in items:
        producer.produce(topic, text.encode(), text.encode(), partition=partition)
    assert producer.flush(TIMEOUT) == 0


def spread(prefix: str, count: int) -> list[tuple[int, str]]:
    return [(i % PARTITIONS, f"{prefix}-{i}") for i in range(count)]


def committed_values(view: Observation) -> list[str]:
    return [r[3] for r in view["read_committed"]["records"]]


def uncommitted_values(view: Observation) -> list[str]:
    return [r[3] for r in view["read_uncommitted"]["records"]]


# -- confluent-kafka scenarios ---------------------------------------------------------------


def scenario_commit_multi_partition(bootstrap: str) -> Observation:
    """One transaction over two topics of three partitions each, committed."""
    first, second = unique("txn-a"), unique("txn-b")
    create_topics(bootstrap, [first, second], PARTITIONS, 1)
    producer = txn_producer(bootstrap, unique("tid"))
    producer.begin_transaction()
    produce(producer, first, spread("a", 9))
    produce(producer, second, spread("b", 6))
    producer.commit_transaction(TIMEOUT)
    views = {"first": log_view(bootstrap, first), "second": log_view(bootstrap, second)}
    for name, count in (("first", 9), ("second", 6)):
        assert len(committed_values(views[name])) == count
        assert committed_values(views[name]) == uncommitted_values(views[name])
    return views


def scenario_abort(bootstrap: str) -> Observation:
    """Records in the log, then the transaction aborted: only read_uncommitted sees them,
    and both positions end past the abort markers."""
    topic = unique("txn-abort")
    create_topics(bootstrap, [topic], PARTITIONS, 1)
    producer = txn_producer(bootstrap, unique("tid"))
    producer.begin_transaction()
    produce(producer, topic, spread("aborted", 6))
    producer.abort_transaction(TIMEOUT)
    view = log_view(bootstrap, topic)
    assert committed_values(view) == []
    assert len(uncommitted_values(view)) == 6
    assert view["read_committed"]["positions"] == view["read_uncommitted"]["positions"]
    return view


def scenario_abort_retry_commit(bootstrap: str) -> Observation:
    """The same records aborted, sent again in a new transaction and committed."""
    topic = unique("txn-retry")
    create_topics(bootstrap, [topic], PARTITIONS, 1)
    producer = txn_producer(bootstrap, unique("tid"))
    items = spread("r", 6)
    producer.begin_transaction()
    produce(producer, topic, items)
    producer.abort_transaction(TIMEOUT)
    producer.begin_transaction()
    produce(producer, topic, items)
    producer.commit_transaction(TIMEOUT)
    view = log_view(bootstrap, topic)
    assert sorted(committed_values(view)) == sorted(text for _, text in items)
    assert len(uncommitted_values(view)) == 12
    return view


def scenario_open_transaction_lso(bootstrap: str) -> Observation:
    """Non-transactional records before and after an open transaction on one partition:
    read_committed stops at the last stable offset (the transaction's first offset) until
    the commit; ListOffsets latest answers the LSO read_committed, the high watermark
    read_uncommitted."""
    topic = unique("txn-lso")
    create_topics(bootstrap, [topic], 1, 1)
    plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    produce(plain, topic, [(0, "before-0"), (0, "before-1")])
    producer = txn_producer(bootstrap, unique("tid"))
    producer.begin_transaction()
    produce(producer, topic, [(0, "txn-0"), (0, "txn-1")])
    produce(plain, topic, [(0, "after-0")])
    open_view = log_view(bootstrap, topic, 1)
    producer.commit_transaction(TIMEOUT)
    closed_view = log_view(bootstrap, topic, 1)
    assert committed_values(open_view) == ["before-0", "before-1"]
    assert open_view["read_committed"]["list_offsets_latest"] == {0: 2}
    assert open_view["read_uncommitted"]["list_offsets_latest"] == {0: 5}
    assert committed_values(closed_view) == ["before-0", "before-1", "txn-0", "txn-1", "after-0"]
    return {"open": open_view, "committed": closed_view}


def scenario_fenced_producer(bootstrap: str) -> Observation:
    """A second producer with the same transactional.id: the first is fenced, its open
    transaction aborted; its commit fails; the second's transaction commits."""
    topic = unique("txn-fence")
    create_topics(bootstrap, [topic], PARTITIONS, 1)
    transactional_id = unique("tid")
    first = txn_producer(bootstrap, transactional_id)
    first.begin_transaction()
    produce(first, topic, spread("zombie", 3))
    second = txn_producer(bootstrap, transactional_id)  # fences the first
    fatal = False
    try:
        first.commit_transaction(TIMEOUT)
        first_commit = "ok"
    except KafkaException as exc:
        first_commit = error_name(exc)
        error = exc.args[0]
        fatal = bool(error.fatal())
    second.begin_transaction()
    produce(second, topic, spread("live", 3))
    second.commit_transaction(TIMEOUT)
    view = log_view(bootstrap, topic)
    assert first_commit != "ok"
    assert sorted(committed_values(view)) == ["live-0", "live-1", "live-2"]
    assert len(uncommitted_values(view)) == 6
    return {"first_commit": first_commit, "first_commit_fatal": fatal, "log": view}


def _offset_fetch(bootstrap: str, group: str, topic: str, require_stable: bool) -> list[Any]:
    """OffsetFetch v7 of partition 0: [committed offset, error name]."""
    request = of.OffsetFetchRequest(
        group_id=group,
        topics=[of.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])],
        require_stable=require_stable,
    )
    with RawClient(bootstrap) as client:
        body = client.request(9, 7, request).body
    (t,) = body.topics
    (p,) = t.partitions
    return [int(p.committed_offset), ErrorCode(p.error_code).name, ErrorCode(body.error_code).name]


def _settled_offset_fetch(bootstrap: str, group: str, topic: str) -> list[Any]:
    """OffsetFetch with require_stable, asked again while it answers UNSTABLE_OFFSET_COMMIT
    (retriable: EndTxn returns before the coordinator has written the marker to
    ``__consumer_offsets``, so a completed transaction's offsets settle a moment later)."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        answer = _offset_fetch(bootstrap, group, topic, True)
        if answer[1] != "UNSTABLE_OFFSET_COMMIT":
            return answer
        assert time.monotonic() < deadline, f"offsets of {group} never settled"
        time.sleep(0.05)


def scenario_send_offsets_require_stable(bootstrap: str) -> Observation:
    """Offsets sent to a transaction are pending until it completes: OffsetFetch with
    require_stable answers UNSTABLE_OFFSET_COMMIT meanwhile, without it the last committed
    offset; committed, they show; aborted, they are dropped."""
    topic, group = unique("txn-offsets"), unique("group")
    create_topics(bootstrap, [topic], 1, 1)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    metadata = consumer.consumer_group_metadata()
    producer = txn_producer(bootstrap, unique("tid"))
    out: Observation = {}
    try:
        for step, offset, commit in (("first", 5, True), ("second", 8, False)):
            producer.begin_transaction()
            producer.send_offsets_to_transaction(
                [TopicPartition(topic, 0, offset)], metadata, TIMEOUT
            )
            pending = {
                "stable": _offset_fetch(bootstrap, group, topic, True),
                "unstable": _offset_fetch(bootstrap, group, topic, False),
            }
            if commit:
                producer.commit_transaction(TIMEOUT)
            else:
                producer.abort_transaction(TIMEOUT)
            after = _settled_offset_fetch(bootstrap, group, topic)
            out[step] = {"pending": pending, "after": after}
    finally:
        consumer.close()
    assert out["first"]["pending"]["stable"][1] == "UNSTABLE_OFFSET_COMMIT"
    assert out["first"]["pending"]["unstable"][0] == -1
    assert out["first"]["after"][0] == 5
    assert out["second"]["pending"]["stable"][1] == "UNSTABLE_OFFSET_COMMIT"
    assert out["second"]["pending"]["unstable"][0] == 5
    assert out["second"]["after"][0] == 5
    return out


def scenario_consume_transform_produce(bootstrap: str) -> Observation:
    """A group member reads an input topic; each record is transformed and written to the
    output partition of the same number in its own transaction, with the member's position
    sent to that transaction. The transaction of input ``in-7`` is aborted once, the member
    seeks back and processes it again. At the end the group's committed offsets are the
    input's ends and the output holds every record once (read_committed)."""
    source, sink, group = unique("ctp-in"), unique("ctp-out"), unique("ctp-group")
    create_topics(bootstrap, [source, sink], PARTITIONS, 1)
    count = 15
    plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    produce(plain, source, spread("in", count))
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    producer = txn_producer(bootstrap, unique("tid"))
    aborted_once = False
    done = 0
    try:
        consumer.subscribe([source])
        deadline = time.monotonic() + TIMEOUT * 4
        while done < count:
            assert time.monotonic() < deadline, f"processed {done} of {count}"
            msgs = consumer.consume(1, 1.0)
            if not msgs:
                continue
            (msg,) = msgs
            assert msg.error() is None, msg.error()
            value, partition, offset = msg.value(), msg.partition(), msg.offset()
            assert value is not None and partition is not None and offset is not None
            text = value.decode()
            producer.begin_transaction()
            produce(producer, sink, [(partition, text.replace("in-", "out-"))])
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()),
                consumer.consumer_group_metadata(),
                TIMEOUT,
            )
            if text == "in-7" and not aborted_once:
                producer.abort_transaction(TIMEOUT)
                aborted_once = True
                consumer.seek(TopicPartition(source, partition, offset))
                continue
            producer.commit_transaction(TIMEOUT)
            done += 1
        committed = consumer.committed(
            [TopicPartition(source, p) for p in range(PARTITIONS)], TIMEOUT
        )
    finally:
        consumer.close()
    group_offsets = {tp.partition: tp.offset for tp in committed}
    view = log_view(bootstrap, sink)
    assert group_offsets == {p: count // PARTITIONS for p in range(PARTITIONS)}
    assert sorted(committed_values(view)) == sorted(f"out-{i}" for i in range(count))
    assert len(uncommitted_values(view)) == count + 1
    return {"group_offsets": group_offsets, "output": view}


# -- kafka-python and aiokafka ---------------------------------------------------------------


def scenario_kafka_python_producer(bootstrap: str) -> Observation:
    """kafka-python's transactional producer: a committed and an aborted transaction."""
    kafka = pytest.importorskip("kafka")
    topic = unique("kp-txn")
    create_topics(bootstrap, [topic], PARTITIONS, 1)
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, transactional_id=unique("tid"))
    try:
        producer.init_transactions()
        for label, commit in (("kept", True), ("dropped", False)):
            producer.begin_transaction()
            for partition, text in spread(label, 6):
                producer.send(topic, text.encode(), text.encode(), partition=partition)
            producer.flush(TIMEOUT)
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
    finally:
        producer.close(TIMEOUT)
    view = log_view(bootstrap, topic)
    assert sorted(committed_values(view)) == sorted(t for _, t in spread("kept", 6))
    assert len(uncommitted_values(view)) == 12
    return view


def scenario_aiokafka_producer(bootstrap: str) -> Observation:
    """aiokafka's transactional producer: a committed and an aborted transaction."""
    aiokafka = pytest.importorskip("aiokafka")
    topic = unique("aio-txn")
    create_topics(bootstrap, [topic], PARTITIONS, 1)

    async def run() -> None:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=bootstrap, transactional_id=unique("tid")
        )
        await producer.start()
        try:
            for label, commit in (("kept", True), ("dropped", False)):
                await producer.begin_transaction()
                for partition, text in spread(label, 6):
                    await producer.send_and_wait(
                        topic, text.encode(), text.encode(), partition=partition
                    )
                if commit:
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(run(), TIMEOUT * 2))
    view = log_view(bootstrap, topic)
    assert sorted(committed_values(view)) == sorted(t for _, t in spread("kept", 6))
    assert len(uncommitted_values(view)) == 12
    return view


SCENARIOS: dict[str, Callable[[str], Observation]] = {
    "commit_multi_partition": scenario_commit_multi_partition,
    "abort": scenario_abort,
    "abort_retry_commit": scenario_abort_retry_commit,
    "open_transaction_lso": scenario_open_transaction_lso,
    "fenced_producer": scenario_fenced_producer,
    "send_offsets_require_stable": scenario_send_offsets_require_stable,
    "consume_transform_produce": scenario_consume_transform_produce,
    "kafka_python_producer": scenario_kafka_python_producer,
    "aiokafka_producer": scenario_aiokafka_producer,
}


@pytest.mark.transactions
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_differential(kafka_target: Target, pydmq_target: Target, name: str) -> None:
    """The same scenario on both: equal observations."""
    with ThreadPoolExecutor(2, thread_name_prefix="txn-diff") as pool:
        on_kafka = pool.submit(SCENARIOS[name], kafka_target.bootstrap)
        on_pydmq = pool.submit(SCENARIOS[name], pydmq_target.bootstrap)
        kafka_obs, pydmq_obs = on_kafka.result(), on_pydmq.result()
    check_json_able(kafka_obs, kafka_target.name)
    check_json_able(pydmq_obs, pydmq_target.name)
    differences = diff_paths(kafka_obs, pydmq_obs)
    assert not differences, "\n".join(
        f"{path}: kafka {short(a)} / pydmq {short(b)}" for path, (a, b) in differences.items()
    )
