"""Controller operations: records and responses for each, errors, and elections through both
built-in replication strategies (``isr`` and ``quorum``)."""

from __future__ import annotations

import itertools
import random
import uuid
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from pydmq.assignment.placement import StripedReplicaPlacer
from pydmq.controller.operations import (
    ELECTION_PREFERRED,
    ELECTION_UNCLEAN,
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    AlterConfigsResource,
    AlterPartitionItem,
    CreatableTopic,
    CreatePartitionsTopic,
    IncrementalAlterConfigsResource,
    OperationContext,
    ReassignmentRequest,
    allocate_producer_ids,
    alter_configs,
    alter_partition,
    alter_partition_reassignments,
    broker_heartbeat,
    controlled_shutdown,
    create_partitions,
    create_topics,
    delete_topics,
    elect_leaders,
    fence_brokers,
    fence_stale_brokers,
    incremental_alter_configs,
    list_partition_reassignments,
    register_broker,
    unfence_broker,
    unregister_broker,
)
from pydmq.metadata import MetadataDelta, MetadataImage, PartitionRegistration
from pydmq.metadata.records import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    Endpoint,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from pydmq.protocol.errors import ErrorCode
from pydmq.replication.strategy import IsrStrategy, QuorumStrategy

E = ErrorCode


def make_ctx(**overrides: Any) -> OperationContext:
    ids = (uuid.UUID(int=i) for i in itertools.count(1000))
    values: dict[str, Any] = {
        "strategies": {"isr": IsrStrategy(), "quorum": QuorumStrategy()},
        "placer": StripedReplicaPlacer(random.Random(1)),
        "new_topic_id": lambda: next(ids),
    }
    values.update(overrides)
    return OperationContext(**values)


CTX = make_ctx()


def commit(image: MetadataImage, records: Sequence[MetadataRecord]) -> MetadataImage:
    delta = MetadataDelta(image)
    for rec in records:
        delta.replay(rec)
    return delta.apply(image.offset + len(records), 1)


def cluster(n: int = 3, racks: Sequence[str | None] | None = None) -> MetadataImage:
    """``n`` registered, unfenced brokers 1..n."""
    image = MetadataImage.EMPTY
    for i in range(1, n + 1):
        rack = racks[i - 1] if racks else None
        result = register_broker(
            image,
            CTX,
            broker_id=i,
            incarnation_id=uuid.UUID(int=i),
            endpoints=[Endpoint("PLAINTEXT", "localhost", 9090 + i)],
            rack=rack,
        )
        image = commit(image, result.records)
    for i in range(1, n + 1):
        b = image.brokers[i]
        beat = broker_heartbeat(
            image, CTX, broker_id=i, broker_epoch=b.epoch, current_metadata_offset=image.offset
        )
        image = commit(image, beat.records)
    return image


def with_topic(
    image: MetadataImage,
    name: str,
    layout: Sequence[Sequence[int]],
    configs: dict[str, str | None] | None = None,
    ctx: OperationContext = CTX,
) -> MetadataImage:
    topic = CreatableTopic(
        name, assignments={i: list(r) for i, r in enumerate(layout)}, configs=configs or {}
    )
    result = create_topics(image, ctx, [topic])
    assert result.response[0].error_code == E.NONE, result.response[0]
    return commit(image, result.records)


def part(image: MetadataImage, topic: str, pid: int = 0) -> PartitionRegistration:
    return image.topics.by_name[topic].partitions[pid]


def tid(image: MetadataImage, topic: str) -> uuid.UUID:
    return image.topics.by_name[topic].topic_id


def epoch(image: MetadataImage, broker_id: int) -> int:
    return image.brokers[broker_id].epoch


# -- brokers ----------------------------------------------------------------------------


def test_register_broker_is_fenced_with_offset_based_epoch() -> None:
    image = cluster(2)
    result = register_broker(
        image, CTX, broker_id=7, incarnation_id=uuid.uuid4(), endpoints=[], rack="r"
    )
    (rec,) = result.records
    assert isinstance(rec, RegisterBrokerRecord) and rec.fenced and not rec.in_controlled_shutdown
    assert rec.broker_epoch == image.offset + 1 == result.response.broker_epoch
    assert result.response.error_code == E.NONE


def test_reregistration_replaces_and_moves_leadership_away() -> None:
    image = with_topic(cluster(3), "t", [[1, 2, 3]])
    old_epoch = epoch(image, 1)
    result = register_broker(
        image, CTX, broker_id=1, incarnation_id=uuid.uuid4(), endpoints=[], rack=None
    )
    assert result.response.broker_epoch > old_epoch
    after = commit(image, result.records)
    assert after.brokers[1].fenced and after.brokers[1].epoch == result.response.broker_epoch
    p = part(after, "t")
    assert p.leader == 2 and p.isr == (2, 3) and p.leader_epoch == 1


def test_heartbeat_errors() -> None:
    image = cluster(1)
    unknown = broker_heartbeat(image, CTX, broker_id=9, broker_epoch=0, current_metadata_offset=0)
    assert unknown.response.error_code == E.BROKER_ID_NOT_REGISTERED
    stale = broker_heartbeat(
        image, CTX, broker_id=1, broker_epoch=epoch(image, 1) - 1, current_metadata_offset=0
    )
    assert stale.response.error_code == E.STALE_BROKER_EPOCH and not stale.records


def test_heartbeat_unfences_only_when_caught_up() -> None:
    image = MetadataImage.EMPTY
    reg = register_broker(
        image, CTX, broker_id=1, incarnation_id=uuid.uuid4(), endpoints=[], rack=None
    )
    image = commit(image, reg.records)
    e = reg.response.broker_epoch
    behind = broker_heartbeat(
        image, CTX, broker_id=1, broker_epoch=e, current_metadata_offset=e - 1
    )
    assert not behind.records
    assert behind.response.is_fenced and not behind.response.is_caught_up
    wants_fence = broker_heartbeat(
        image, CTX, broker_id=1, broker_epoch=e, current_metadata_offset=e, want_fence=True
    )
    assert not wants_fence.records and wants_fence.response.is_fenced
    caught_up = broker_heartbeat(image, CTX, broker_id=1, broker_epoch=e, current_metadata_offset=e)
    assert caught_up.records == [UnfenceBrokerRecord(1, e)]
    assert caught_up.response == type(caught_up.response)(E.NONE, True, False, False)


def test_unfence_elects_leaders_of_offline_partitions() -> None:
    image = with_topic(cluster(2), "t", [[1]])
    image = commit(
        image,
        fence_stale_brokers(
            image, CTX, now_ms=10_000, last_heartbeat_ms={1: 0}, session_timeout_ms=9000
        ).records,
    )
    assert part(image, "t").leader == -1 and part(image, "t").isr == (1,)
    beat = broker_heartbeat(
        image, CTX, broker_id=1, broker_epoch=epoch(image, 1), current_metadata_offset=image.offset
    )
    after = commit(image, beat.records)
    assert part(after, "t").leader == 1 and part(after, "t").leader_epoch == 2


def test_fenced_broker_wanting_shutdown_is_told_to_shut_down() -> None:
    image = MetadataImage.EMPTY
    reg = register_broker(
        image, CTX, broker_id=1, incarnation_id=uuid.uuid4(), endpoints=[], rack=None
    )
    image = commit(image, reg.records)
    beat = broker_heartbeat(
        image,
        CTX,
        broker_id=1,
        broker_epoch=epoch(image, 1),
        current_metadata_offset=0,
        want_shut_down=True,
    )
    assert beat.response.should_shut_down and not beat.records


def test_heartbeat_want_fence_fences_an_unfenced_broker() -> None:
    image = with_topic(cluster(2), "t", [[1, 2]])
    beat = broker_heartbeat(
        image,
        CTX,
        broker_id=1,
        broker_epoch=epoch(image, 1),
        current_metadata_offset=image.offset,
        want_fence=True,
    )
    assert beat.records[0] == FenceBrokerRecord(1, epoch(image, 1))
    assert beat.response.is_fenced
    assert part(commit(image, beat.records), "t").leader == 2


def test_controlled_shutdown_through_heartbeats() -> None:
    image = with_topic(with_topic(cluster(3), "t", [[1, 2, 3], [2, 1, 3]]), "s", [[1]])
    e = epoch(image, 1)
    beat = broker_heartbeat(
        image,
        CTX,
        broker_id=1,
        broker_epoch=e,
        current_metadata_offset=image.offset,
        want_shut_down=True,
    )
    assert beat.records[0] == BrokerRegistrationChangeRecord(1, e, in_controlled_shutdown=True)
    assert beat.response.should_shut_down and not beat.response.is_fenced
    after = commit(image, beat.records)
    assert part(after, "t", 0).leader == 2 and part(after, "t", 0).isr == (2, 3)
    assert part(after, "t", 1).leader == 2 and part(after, "t", 1).isr == (2, 3)
    # the only replica is shutting down: the partition goes offline, its ISR is kept
    assert part(after, "s").leader == -1 and part(after, "s").isr == (1,)
    assert after.partitions_led_by(1) == []
    again = broker_heartbeat(
        after, CTX, broker_id=1, broker_epoch=e, current_metadata_offset=after.offset
    )
    assert not again.records and again.response.should_shut_down


def test_controlled_shutdown_request_reports_nothing_left() -> None:
    image = with_topic(cluster(2), "t", [[1, 2], [2, 1]])
    result = controlled_shutdown(image, CTX, broker_id=1, broker_epoch=epoch(image, 1))
    assert result.response.error_code == E.NONE and result.response.remaining_partitions == ()
    assert commit(image, result.records).brokers[1].in_controlled_shutdown
    stale = controlled_shutdown(image, CTX, broker_id=1, broker_epoch=-5)
    assert stale.response.error_code == E.STALE_BROKER_EPOCH


def test_fence_stale_brokers_with_isr_strategy() -> None:
    image = with_topic(cluster(3), "t", [[1, 2, 3], [2, 3, 1]])
    result = fence_stale_brokers(
        image, CTX, now_ms=20_000, last_heartbeat_ms={1: 1_000, 2: 19_000}, session_timeout_ms=9000
    )
    assert result.response == [1]
    assert result.records[0] == FenceBrokerRecord(1, epoch(image, 1))
    after = commit(image, result.records)
    assert after.brokers[1].fenced
    p0, p1 = part(after, "t", 0), part(after, "t", 1)
    assert (p0.leader, p0.isr, p0.leader_epoch, p0.partition_epoch) == (2, (2, 3), 1, 1)
    assert (p1.leader, p1.isr, p1.leader_epoch, p1.partition_epoch) == (2, (2, 3), 0, 1)


def test_fence_stale_brokers_limit_fences_the_stalest_first() -> None:
    image = with_topic(cluster(3), "t", [[1, 2, 3]])
    result = fence_stale_brokers(
        image,
        CTX,
        now_ms=20_000,
        last_heartbeat_ms={1: 5_000, 2: 1_000, 3: 19_000},
        session_timeout_ms=9000,
        limit=1,
    )
    assert result.response == [2]
    assert not commit(image, result.records).brokers[1].fenced


def test_fence_stale_brokers_with_quorum_strategy_keeps_a_majority_in_the_isr() -> None:
    image = with_topic(cluster(3), "q", [[1, 2, 3]], {"pydmq.replication.strategy": "quorum"})
    result = fence_stale_brokers(
        image,
        CTX,
        now_ms=20_000,
        last_heartbeat_ms={1: 0, 2: 0, 3: 20_000},
        session_timeout_ms=9000,
    )
    assert result.response == [1, 2]
    p = part(commit(image, result.records), "q")
    # 1 may leave ([2, 3] is a majority), 2 may not: [3] alone would be a minority
    assert p.isr == (2, 3) and p.leader == 3


def test_fence_leaves_no_leader_when_nobody_is_electable() -> None:
    image = with_topic(cluster(2), "t", [[1, 2]])
    image = commit(image, [PartitionChangeRecord(0, tid(image, "t"), isr=(1,))])
    result = fence_stale_brokers(
        image, CTX, now_ms=10_000, last_heartbeat_ms={1: 0}, session_timeout_ms=9000
    )
    p = part(commit(image, result.records), "t")
    assert p.leader == -1 and p.isr == (1,)


def test_fence_with_unclean_election_enabled() -> None:
    image = with_topic(cluster(2), "t", [[1, 2]], {"unclean.leader.election.enable": "true"})
    image = commit(image, [PartitionChangeRecord(0, tid(image, "t"), isr=(1,))])
    result = fence_stale_brokers(
        image, CTX, now_ms=10_000, last_heartbeat_ms={1: 0}, session_timeout_ms=9000
    )
    p = part(commit(image, result.records), "t")
    assert (p.leader, p.isr, p.leader_recovery_state) == (2, (2,), 1)


def test_fence_stale_brokers_ignores_untracked_and_fresh_brokers() -> None:
    image = cluster(2)
    result = fence_stale_brokers(
        image, CTX, now_ms=10_000, last_heartbeat_ms={1: 5_000}, session_timeout_ms=9000
    )
    assert result.records == [] and result.response == []


def test_unregister_broker() -> None:
    image = with_topic(cluster(2), "t", [[1, 2]])
    result = unregister_broker(image, CTX, broker_id=1)
    assert result.records[0] == UnregisterBrokerRecord(1, epoch(image, 1))
    after = commit(image, result.records)
    assert 1 not in after.brokers and part(after, "t").leader == 2
    assert unregister_broker(image, CTX, broker_id=9).response == E.BROKER_ID_NOT_REGISTERED


def test_allocate_producer_ids_hands_out_consecutive_blocks() -> None:
    image = cluster(1)
    first = allocate_producer_ids(image, CTX, broker_id=1, broker_epoch=epoch(image, 1))
    assert first.records == [ProducerIdsRecord(1, epoch(image, 1), 1000)]
    assert (first.response.producer_id_start, first.response.producer_id_len) == (0, 1000)
    image = commit(image, first.records)
    second = allocate_producer_ids(image, CTX, broker_id=1, broker_epoch=epoch(image, 1))
    assert second.response.producer_id_start == 1000
    stale = allocate_producer_ids(image, CTX, broker_id=1, broker_epoch=epoch(image, 1) + 9)
    assert stale.response.error_code == E.STALE_BROKER_EPOCH and not stale.records


# -- topics -----------------------------------------------------------------------------


def test_create_topics_records_and_balanced_leaders() -> None:
    image = cluster(3, racks=["a", "b", "c"])
    result = create_topics(
        image,
        CTX,
        [CreatableTopic("orders", 6, 3, configs={"retention.ms": "1000"})],
    )
    (res,) = result.response
    assert (res.error_code, res.num_partitions, res.replication_factor) == (E.NONE, 6, 3)
    assert res.configs == {"retention.ms": "1000"}
    topic_rec, config_rec, *partitions = result.records
    assert topic_rec == TopicRecord("orders", res.topic_id)  # type: ignore[arg-type]
    assert config_rec == ConfigRecord(2, "orders", "retention.ms", "1000")
    assert all(isinstance(p, PartitionRecord) for p in partitions) and len(partitions) == 6
    leaders = Counter(p.leader for p in partitions if isinstance(p, PartitionRecord))
    assert set(leaders.values()) == {2}
    for p in partitions:
        assert isinstance(p, PartitionRecord)
        assert p.isr == p.replicas and p.leader == p.replicas[0] and sorted(p.replicas) == [1, 2, 3]
    after = commit(image, result.records)
    assert after.topic_config("orders") == {"retention.ms": "1000"}


def test_create_topics_uses_broker_defaults() -> None:
    ctx = make_ctx(num_partitions=4, default_replication_factor=2)
    result = create_topics(cluster(3), ctx, [CreatableTopic("d")])
    assert (result.response[0].num_partitions, result.response[0].replication_factor) == (4, 2)


def test_create_topics_validate_only_writes_nothing() -> None:
    result = create_topics(cluster(1), CTX, [CreatableTopic("v", 1, 1)], validate_only=True)
    assert result.records == [] and result.response[0].error_code == E.NONE


@pytest.mark.parametrize(
    ("topic", "code"),
    [
        (CreatableTopic("bad name!"), E.INVALID_TOPIC_EXCEPTION),
        (CreatableTopic(""), E.INVALID_TOPIC_EXCEPTION),
        (CreatableTopic("ex.ists"), E.TOPIC_ALREADY_EXISTS),
        (CreatableTopic("n", configs={"retention.ms": None}), E.INVALID_CONFIG),
        (CreatableTopic("ex_ists"), E.INVALID_TOPIC_EXCEPTION),  # collides with ex.ists
        (CreatableTopic("p", 0, 1), E.INVALID_PARTITIONS),
        (CreatableTopic("p", 1_000_000, 1), E.POLICY_VIOLATION),  # over 10,000 per request
        (CreatableTopic("r", 1, 0), E.INVALID_REPLICATION_FACTOR),
        (CreatableTopic("r", 1, 3), E.INVALID_REPLICATION_FACTOR),  # broker 3 is fenced
        (CreatableTopic("a", assignments={0: [1, 9]}), E.INVALID_REPLICA_ASSIGNMENT),
        (CreatableTopic("a", assignments={0: [1, 1]}), E.INVALID_REPLICA_ASSIGNMENT),
        (CreatableTopic("a", assignments={0: [1], 1: [1, 2]}), E.INVALID_REPLICA_ASSIGNMENT),
        (CreatableTopic("a", assignments={1: [1]}), E.INVALID_REPLICA_ASSIGNMENT),
        (CreatableTopic("a", assignments={0: [3]}), E.INVALID_REPLICA_ASSIGNMENT),  # fenced
        (CreatableTopic("a", 1, -1, assignments={0: [1]}), E.INVALID_REQUEST),
        (CreatableTopic("c", configs={"no.such.config": "1"}), E.INVALID_CONFIG),
        (CreatableTopic("c", configs={"retention.ms": "soon"}), E.INVALID_CONFIG),
        (CreatableTopic("c", configs={"pydmq.replication.strategy": "paxos"}), E.INVALID_CONFIG),
    ],
)
def test_create_topics_errors(topic: CreatableTopic, code: ErrorCode) -> None:
    image = with_topic(cluster(3), "ex.ists", [[1]])
    image = commit(image, [FenceBrokerRecord(3, epoch(image, 3))])
    result = create_topics(image, CTX, [topic])
    assert result.response[0].error_code == code, result.response[0].error_message
    assert result.records == []


def test_create_topics_duplicates_in_one_request_and_collisions_between_them() -> None:
    result = create_topics(
        cluster(1),
        CTX,
        [CreatableTopic("d"), CreatableTopic("d"), CreatableTopic("a.b"), CreatableTopic("a_b")],
    )
    assert [r.error_code for r in result.response] == [
        E.INVALID_REQUEST,
        E.INVALID_REQUEST,
        E.NONE,
        E.INVALID_TOPIC_EXCEPTION,
    ]


def test_create_topic_with_manual_assignment_and_fenced_replica() -> None:
    image = cluster(3)
    image = commit(image, [FenceBrokerRecord(2, epoch(image, 2))])
    result = create_topics(image, CTX, [CreatableTopic("m", assignments={0: [2, 1], 1: [3, 2]})])
    parts = [r for r in result.records if isinstance(r, PartitionRecord)]
    assert [(p.replicas, p.isr, p.leader) for p in parts] == [
        ((2, 1), (1,), 1),
        ((3, 2), (3,), 3),
    ]


def test_delete_topics_by_name_and_id() -> None:
    image = with_topic(with_topic(cluster(1), "a", [[1]]), "b", [[1]])
    result = delete_topics(image, CTX, ["a", tid(image, "b"), "nope", uuid.UUID(int=5)])
    assert [r.error_code for r in result.response] == [
        E.NONE,
        E.NONE,
        E.UNKNOWN_TOPIC_OR_PARTITION,
        E.UNKNOWN_TOPIC_ID,
    ]
    assert result.records == [
        RemoveTopicRecord(tid(image, "a")),
        RemoveTopicRecord(tid(image, "b")),
    ]
    disabled = delete_topics(image, make_ctx(delete_topic_enable=False), ["a"])
    assert disabled.response[0].error_code == E.TOPIC_DELETION_DISABLED and not disabled.records


def test_create_topics_refuses_an_unregistered_storage_engine() -> None:
    ctx = make_ctx(engines=frozenset({"segment", "memory"}))
    result = create_topics(
        cluster(1),
        ctx,
        [
            CreatableTopic("kept", 1, 1, configs={"pydmq.engine": "memory"}),
            CreatableTopic("refused", 1, 1, configs={"pydmq.engine": "nope"}),
        ],
    )
    assert [(r.error_code, r.error_message) for r in result.response] == [
        (E.NONE, None),
        (E.INVALID_CONFIG, "unknown storage engine 'nope'"),
    ]


def test_the_storage_engine_of_a_topic_cannot_change_but_may_be_named() -> None:
    ctx = make_ctx(engines=frozenset({"segment", "memory"}), default_engine="segment")
    image = with_topic(cluster(1), "t", [[1]])
    named = alter_configs(image, ctx, [AlterConfigsResource(2, "t", {"pydmq.engine": "segment"})])
    moved = alter_configs(image, ctx, [AlterConfigsResource(2, "t", {"pydmq.engine": "memory"})])
    assert named.response[0].error_code == E.NONE  # the engine it already had
    assert (moved.response[0].error_code, moved.response[0].error_message) == (
        E.INVALID_CONFIG,
        "pydmq.engine cannot change after a topic is created",
    )


def test_delete_topics_as_kafka_answers_unknown_topics_and_disabled_deletion() -> None:
    image = with_topic(cluster(1), "a", [[1]])
    unknown = delete_topics(image, CTX, ["nope", uuid.UUID(int=5)])
    assert [(r.error_code, r.error_message) for r in unknown.response] == [
        (E.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."),
        (E.UNKNOWN_TOPIC_ID, "This server does not host this topic ID."),
    ]
    disabled = delete_topics(image, make_ctx(delete_topic_enable=False), ["a", "nope"])
    assert [(r.name, r.error_code) for r in disabled.response] == [
        ("a", E.TOPIC_DELETION_DISABLED),
        ("nope", E.TOPIC_DELETION_DISABLED),
    ]
    assert not disabled.records


def test_create_partitions() -> None:
    image = with_topic(cluster(3), "t", [[1, 2], [2, 3]])
    result = create_partitions(image, CTX, [CreatePartitionsTopic("t", 5)])
    assert result.response[0].error_code == E.NONE
    parts = [r for r in result.records if isinstance(r, PartitionRecord)]
    assert [p.partition_id for p in parts] == [2, 3, 4]
    assert all(len(p.replicas) == 2 for p in parts)
    after = commit(image, result.records)
    assert len(after.topics.by_name["t"].partitions) == 5
    manual = create_partitions(image, CTX, [CreatePartitionsTopic("t", 3, [[3, 1]])])
    assert isinstance(manual.records[0], PartitionRecord) and manual.records[0].replicas == (3, 1)


@pytest.mark.parametrize(
    ("req", "code"),
    [
        (CreatePartitionsTopic("nope", 3), E.UNKNOWN_TOPIC_OR_PARTITION),
        (CreatePartitionsTopic("t", 1), E.INVALID_PARTITIONS),
        (CreatePartitionsTopic("t", 2), E.INVALID_PARTITIONS),
        (CreatePartitionsTopic("t", 4, [[1, 2]]), E.INVALID_REPLICA_ASSIGNMENT),
        (CreatePartitionsTopic("t", 3, [[1]]), E.INVALID_REPLICA_ASSIGNMENT),
        (CreatePartitionsTopic("t", 3, [[1, 7]]), E.INVALID_REPLICA_ASSIGNMENT),
    ],
)
def test_create_partitions_errors(req: CreatePartitionsTopic, code: ErrorCode) -> None:
    image = with_topic(cluster(3), "t", [[1, 2], [2, 3]])
    result = create_partitions(image, CTX, [req])
    assert result.response[0].error_code == code and not result.records


# -- AlterPartition ---------------------------------------------------------------------


def alter(
    image: MetadataImage,
    topic: str,
    new_isr: Sequence[int],
    *,
    broker: int | None = None,
    leader_epoch: int | None = None,
    partition_epoch: int | None = None,
    pid: int = 0,
) -> tuple[ErrorCode, MetadataImage, Any]:
    p = part(image, topic, pid)
    leader = p.leader if broker is None else broker
    item = AlterPartitionItem(
        tid(image, topic),
        pid,
        p.leader_epoch if leader_epoch is None else leader_epoch,
        list(new_isr),
        p.partition_epoch if partition_epoch is None else partition_epoch,
    )
    result = alter_partition(
        image, CTX, broker_id=leader, broker_epoch=epoch(image, leader), partitions=[item]
    )
    (res,) = result.response.partitions
    return ErrorCode(res.error_code), commit(image, result.records), res


def test_alter_partition_shrinks_and_expands_the_isr() -> None:
    image = with_topic(cluster(3), "t", [[1, 2, 3]])
    code, image, res = alter(image, "t", [1, 2])
    assert code == E.NONE and part(image, "t").isr == (1, 2)
    assert (res.isr, res.partition_epoch, res.leader_epoch, res.leader) == ((1, 2), 1, 0, 1)
    code, image, res = alter(image, "t", [1])
    assert code == E.NONE and part(image, "t").isr == (1,)
    code, image, res = alter(image, "t", [1, 3])
    assert code == E.NONE and part(image, "t").isr == (1, 3) and res.partition_epoch == 3


def test_alter_partition_without_change_writes_nothing() -> None:
    image = with_topic(cluster(2), "t", [[1, 2]])
    p = part(image, "t")
    result = alter_partition(
        image,
        CTX,
        broker_id=1,
        broker_epoch=epoch(image, 1),
        partitions=[AlterPartitionItem(tid(image, "t"), 0, 0, [1, 2], p.partition_epoch)],
    )
    assert result.records == [] and result.response.partitions[0].error_code == E.NONE


def test_alter_partition_quorum_strategy_refuses_minority_isr() -> None:
    image = with_topic(cluster(3), "q", [[1, 2, 3]], {"pydmq.replication.strategy": "quorum"})
    code, image, _ = alter(image, "q", [1, 2])
    assert code == E.NONE
    code, after, _ = alter(image, "q", [1])
    assert code == E.INVALID_REQUEST and part(after, "q").isr == (1, 2)


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"broker": 2}, E.NOT_LEADER_OR_FOLLOWER),
        ({"leader_epoch": 5}, E.FENCED_LEADER_EPOCH),
        ({"partition_epoch": 7}, E.INVALID_UPDATE_VERSION),
        ({"new_isr": [2, 3]}, E.INVALID_REQUEST),  # leader not in its own ISR
        ({"new_isr": [1, 1]}, E.INVALID_REQUEST),
        ({"new_isr": [1, 4]}, E.INELIGIBLE_REPLICA),  # not a replica
        ({"new_isr": [1, 3]}, E.INELIGIBLE_REPLICA),  # 3 is fenced and would join
    ],
)
def test_alter_partition_errors(kwargs: dict[str, Any], code: ErrorCode) -> None:
    image = with_topic(cluster(4), "t", [[1, 2, 3]])
    image = commit(image, [PartitionChangeRecord(0, tid(image, "t"), isr=(1, 2))])
    image = commit(image, [FenceBrokerRecord(3, epoch(image, 3))])
    new_isr = kwargs.pop("new_isr", [1])
    got, after, _ = alter(image, "t", new_isr, **kwargs)
    assert got == code and after == image


def test_alter_partition_stale_broker_epoch_and_unknown_partitions() -> None:
    image = with_topic(cluster(2), "t", [[1, 2]])
    stale = alter_partition(
        image, CTX, broker_id=1, broker_epoch=epoch(image, 1) + 9, partitions=[]
    )
    assert stale.response.error_code == E.STALE_BROKER_EPOCH
    result = alter_partition(
        image,
        CTX,
        broker_id=1,
        broker_epoch=epoch(image, 1),
        partitions=[
            AlterPartitionItem(uuid.UUID(int=1), 0, 0, [1], 0),
            AlterPartitionItem(tid(image, "t"), 5, 0, [1], 0),
        ],
    )
    assert [p.error_code for p in result.response.partitions] == [
        E.UNKNOWN_TOPIC_ID,
        E.UNKNOWN_TOPIC_OR_PARTITION,
    ]


# -- reassignment -----------------------------------------------------------------------


def test_reassignment_adds_then_completes_when_the_isr_catches_up() -> None:
    image = with_topic(cluster(4), "t", [[1, 2]])
    result = alter_partition_reassignments(image, CTX, [ReassignmentRequest("t", 0, [3, 4])])
    assert result.response[0].error_code == E.NONE
    image = commit(image, result.records)
    p = part(image, "t")
    assert (p.replicas, p.adding_replicas, p.removing_replicas, p.leader) == (
        (3, 4, 1, 2),
        (3, 4),
        (1, 2),
        1,
    )
    listed = list_partition_reassignments(image).response
    assert [(r.topic, r.replicas, r.adding_replicas) for r in listed] == [
        ("t", (3, 4, 1, 2), (3, 4))
    ]
    named = list_partition_reassignments(image, [("t", 0), ("x", 1)]).response
    assert [(r.topic, r.partition_id) for r in named] == [("t", 0)]
    code, image, _ = alter(image, "t", [1, 2, 3])
    assert code == E.NONE and part(image, "t").is_reassigning
    code, image, res = alter(image, "t", [1, 2, 3, 4])
    p = part(image, "t")
    assert code == E.NONE and not p.is_reassigning
    assert (p.replicas, p.isr, p.leader) == ((3, 4), (3, 4), 3)
    assert res.leader == 3
    assert list_partition_reassignments(image).response == []


def test_reassignment_within_the_isr_completes_at_once() -> None:
    image = with_topic(cluster(3), "t", [[1, 2, 3]])
    result = alter_partition_reassignments(image, CTX, [ReassignmentRequest("t", 0, [2, 3])])
    p = part(commit(image, result.records), "t")
    assert (p.replicas, p.isr, p.leader, p.is_reassigning) == ((2, 3), (2, 3), 2, False)


def test_reassignment_cancel_and_errors() -> None:
    image = with_topic(cluster(4), "t", [[1, 2]])
    image = commit(
        image, alter_partition_reassignments(image, CTX, [ReassignmentRequest("t", 0, [3])]).records
    )
    result = alter_partition_reassignments(
        image,
        CTX,
        [
            ReassignmentRequest("t", 0, None),
            ReassignmentRequest("t", 9, [1]),
            ReassignmentRequest("t", 0, []),
            ReassignmentRequest("t", 0, [1, 1]),
            ReassignmentRequest("t", 0, [8]),
        ],
    )
    assert [r.error_code for r in result.response] == [
        E.NONE,
        E.UNKNOWN_TOPIC_OR_PARTITION,
        E.INVALID_REPLICA_ASSIGNMENT,
        E.INVALID_REPLICA_ASSIGNMENT,
        E.INVALID_REPLICA_ASSIGNMENT,
    ]
    cancelled = commit(image, result.records)
    p = part(cancelled, "t")
    assert (p.replicas, p.isr, p.is_reassigning) == ((1, 2), (1, 2), False)
    again = alter_partition_reassignments(cancelled, CTX, [ReassignmentRequest("t", 0, None)])
    assert again.response[0].error_code == E.NO_REASSIGNMENT_IN_PROGRESS


# -- elections --------------------------------------------------------------------------


def test_preferred_leader_election() -> None:
    image = with_topic(cluster(3), "t", [[1, 2, 3], [2, 3, 1]])
    t = tid(image, "t")
    image = commit(image, [PartitionChangeRecord(0, t, leader=2)])
    result = elect_leaders(image, CTX, election_type=ELECTION_PREFERRED, partitions=None)
    assert [(r.partition_id, r.error_code) for r in result.response] == [(0, E.NONE)]
    assert part(commit(image, result.records), "t").leader == 1
    named = elect_leaders(
        image, CTX, election_type=ELECTION_PREFERRED, partitions=[("t", 1), ("x", 0)]
    )
    assert [r.error_code for r in named.response] == [
        E.UNKNOWN_TOPIC_OR_PARTITION,
        E.ELECTION_NOT_NEEDED,
    ]
    image = commit(image, [PartitionChangeRecord(0, t, isr=(2, 3))])
    unavailable = elect_leaders(image, CTX, election_type=ELECTION_PREFERRED, partitions=[("t", 0)])
    assert unavailable.response[0].error_code == E.PREFERRED_LEADER_NOT_AVAILABLE


@pytest.mark.parametrize(("strategy", "elected"), [("isr", 2), ("quorum", -1)])
def test_unclean_election_depends_on_the_strategy(strategy: str, elected: int) -> None:
    image = with_topic(cluster(3), "t", [[1, 2, 3]], {"pydmq.replication.strategy": strategy})
    t = tid(image, "t")
    image = commit(
        image,
        [
            PartitionChangeRecord(0, t, isr=(1,)),
            PartitionChangeRecord(0, t, leader=-1),
            FenceBrokerRecord(1, epoch(image, 1)),
        ],
    )
    result = elect_leaders(image, CTX, election_type=ELECTION_UNCLEAN, partitions=[("t", 0)])
    if elected == -1:
        assert result.response[0].error_code == E.ELIGIBLE_LEADERS_NOT_AVAILABLE
        assert not result.records
    else:
        assert result.response[0].error_code == E.NONE
        p = part(commit(image, result.records), "t")
        assert (p.leader, p.isr, p.leader_recovery_state) == (elected, (elected,), 1)


def test_unclean_election_not_needed_with_a_leader() -> None:
    image = with_topic(cluster(1), "t", [[1]])
    result = elect_leaders(image, CTX, election_type=ELECTION_UNCLEAN, partitions=[("t", 0)])
    assert result.response[0].error_code == E.ELECTION_NOT_NEEDED


# -- configs ----------------------------------------------------------------------------


def test_incremental_alter_configs() -> None:
    image = with_topic(cluster(1), "t", [[1]], {"retention.ms": "5"})
    ops = [
        ("retention.ms", OP_DELETE, None),
        ("segment.ms", OP_SET, "1000"),
        ("cleanup.policy", OP_APPEND, "compact"),
    ]
    result = incremental_alter_configs(image, CTX, [IncrementalAlterConfigsResource(2, "t", ops)])
    assert result.response[0].error_code == E.NONE
    after = commit(image, result.records)
    assert after.topic_config("t") == {"segment.ms": "1000", "cleanup.policy": "delete,compact"}
    sub = incremental_alter_configs(
        after,
        CTX,
        [IncrementalAlterConfigsResource(2, "t", [("cleanup.policy", OP_SUBTRACT, "delete")])],
    )
    assert commit(after, sub.records).topic_config("t")["cleanup.policy"] == "compact"
    dry = incremental_alter_configs(
        image, CTX, [IncrementalAlterConfigsResource(2, "t", ops)], validate_only=True
    )
    assert dry.records == [] and dry.response[0].error_code == E.NONE


@pytest.mark.parametrize(
    ("resource", "code"),
    [
        (IncrementalAlterConfigsResource(2, "nope", []), E.UNKNOWN_TOPIC_OR_PARTITION),
        (IncrementalAlterConfigsResource(4, "one", []), E.INVALID_REQUEST),
        (IncrementalAlterConfigsResource(8, "1", []), E.INVALID_REQUEST),
        (IncrementalAlterConfigsResource(2, "t", [("x.y", OP_SET, "1")]), E.INVALID_CONFIG),
        (IncrementalAlterConfigsResource(2, "t", [("retention.ms", 9, "1")]), E.INVALID_REQUEST),
        (
            IncrementalAlterConfigsResource(2, "t", [("retention.ms", OP_SET, None)]),
            E.INVALID_REQUEST,
        ),
        (
            IncrementalAlterConfigsResource(2, "t", [("retention.ms", OP_APPEND, "1")]),
            E.INVALID_CONFIG,
        ),
        (
            IncrementalAlterConfigsResource(2, "t", [("retention.ms", OP_SET, "x")]),
            E.INVALID_CONFIG,
        ),
        (
            IncrementalAlterConfigsResource(
                2, "t", [("pydmq.replication.strategy", OP_SET, "quorum")]
            ),
            E.INVALID_CONFIG,
        ),
    ],
)
def test_incremental_alter_configs_errors(
    resource: IncrementalAlterConfigsResource, code: ErrorCode
) -> None:
    image = with_topic(cluster(1), "t", [[1]])
    result = incremental_alter_configs(image, CTX, [resource])
    assert result.response[0].error_code == code and not result.records


def test_alter_configs_replaces_the_whole_set() -> None:
    image = with_topic(cluster(1), "t", [[1]], {"retention.ms": "5", "segment.ms": "7"})
    result = alter_configs(image, CTX, [AlterConfigsResource(2, "t", {"segment.ms": "8"})])
    assert result.response[0].error_code == E.NONE
    assert sorted(result.records, key=str) == sorted(
        [ConfigRecord(2, "t", "retention.ms", None), ConfigRecord(2, "t", "segment.ms", "8")],
        key=str,
    )
    # the strategy is fixed at creation, also when it is restated as its default
    same = alter_configs(
        image, CTX, [AlterConfigsResource(2, "t", {"pydmq.replication.strategy": "isr"})]
    )
    assert same.response[0].error_code == E.NONE


# Dynamic broker configs (issue 16 part 1, issue 23): BROKER resources are controller state,
# ConfigRecords of the cluster default "" or of one broker id (INVALID_REQUEST on 4a2e8d9).


def test_broker_configs_become_config_records() -> None:
    image = cluster(2)
    result = incremental_alter_configs(
        image,
        CTX,
        [
            IncrementalAlterConfigsResource(4, "", [("log.retention.ms", OP_SET, "5000")]),
            IncrementalAlterConfigsResource(4, "2", [("log.cleaner.threads", OP_SET, "2")]),
            # a broker not registered (yet): Kafka's controller takes it too
            IncrementalAlterConfigsResource(4, "7", [("custom.key", OP_SET, "x")]),
        ],
    )
    assert [r.error_code for r in result.response] == [E.NONE] * 3
    assert result.records == [
        ConfigRecord(4, "", "log.retention.ms", "5000"),
        ConfigRecord(4, "2", "log.cleaner.threads", "2"),
        ConfigRecord(4, "7", "custom.key", "x"),
    ]
    after = commit(image, result.records)
    assert after.broker_config("") == {"log.retention.ms": "5000"}
    assert after.broker_config("2") == {"log.cleaner.threads": "2"}
    # a snapshot carries them
    assert commit(MetadataImage.EMPTY, after.to_records()).configs == after.configs
    deleted = incremental_alter_configs(
        after,
        CTX,
        [IncrementalAlterConfigsResource(4, "", [("log.retention.ms", OP_DELETE, None)])],
    )
    assert deleted.records == [ConfigRecord(4, "", "log.retention.ms", None)]
    assert commit(after, deleted.records).broker_config("") == {}
    dry = incremental_alter_configs(
        image,
        CTX,
        [IncrementalAlterConfigsResource(4, "", [("log.retention.ms", OP_SET, "1")])],
        validate_only=True,
    )
    assert dry.records == [] and dry.response[0].error_code == E.NONE


def test_broker_config_list_edits_start_from_the_layers_then_the_static_config() -> None:
    ctx = make_ctx(static_broker_configs={"log.cleanup.policy": "delete"})
    image = cluster(1)
    append = [("log.cleanup.policy", OP_APPEND, "compact")]
    first = incremental_alter_configs(image, ctx, [IncrementalAlterConfigsResource(4, "1", append)])
    assert first.records == [ConfigRecord(4, "1", "log.cleanup.policy", "delete,compact")]
    image = commit(image, [ConfigRecord(4, "", "log.cleanup.policy", "compact,delete")])
    subtract = [("log.cleanup.policy", OP_SUBTRACT, "compact")]
    second = incremental_alter_configs(
        image, ctx, [IncrementalAlterConfigsResource(4, "1", subtract)]
    )
    assert second.records == [ConfigRecord(4, "1", "log.cleanup.policy", "delete")]


def test_alter_configs_replaces_a_broker_layer() -> None:
    image = commit(
        cluster(1),
        [ConfigRecord(4, "1", "log.cleaner.threads", "2"), ConfigRecord(4, "1", "a.b", "c")],
    )
    result = alter_configs(image, CTX, [AlterConfigsResource(4, "1", {"a.b": "d"})])
    assert result.response[0].error_code == E.NONE
    assert result.records == [
        ConfigRecord(4, "1", "log.cleaner.threads", None),
        ConfigRecord(4, "1", "a.b", "d"),
    ]
    null = alter_configs(image, CTX, [AlterConfigsResource(4, "1", {"a.b": None})])
    assert (null.response[0].error_code, null.response[0].error_message) == (
        E.INVALID_REQUEST,
        "Null value not supported for : a.b",
    )


@pytest.mark.parametrize(
    ("name", "ops", "code", "message"),
    [
        (
            "1",
            [("num.partitions", OP_SET, "5")],
            E.INVALID_REQUEST,
            "Cannot update these configs dynamically: [num.partitions]",
        ),
        (
            "1",
            [("log.cleaner.backoff.ms", OP_SET, "abc")],
            E.INVALID_REQUEST,
            "Invalid value abc for configuration log.cleaner.backoff.ms: Not a number of type LONG",
        ),
        (
            "",
            [("log.cleaner.backoff.ms", OP_APPEND, "1")],
            E.INVALID_CONFIG,
            "Config value append is not allowed for config key: log.cleaner.backoff.ms",
        ),
        ("1", [("log.retention.ms", 9, "1")], E.INVALID_REQUEST, "Unknown config operation 9"),
        ("x", [], E.INVALID_REQUEST, "Unable to parse broker name as a base 10 number."),
        ("-1", [], E.INVALID_REQUEST, "Invalid negative broker ID."),
        ("2147483648", [], E.INVALID_REQUEST, "Unable to parse broker name as a base 10 number."),
    ],
)
def test_broker_config_refusals_as_kafka(
    name: str, ops: list[tuple[str, int, str | None]], code: ErrorCode, message: str
) -> None:
    result = incremental_alter_configs(
        cluster(1), CTX, [IncrementalAlterConfigsResource(4, name, ops)]
    )
    assert (result.response[0].error_code, result.response[0].error_message) == (code, message)
    assert result.records == []


def test_fence_and_unfence_operations() -> None:
    image = with_topic(cluster(2), "t", [[1, 2]])
    fenced = fence_brokers(image, CTX, [1, 9])
    assert fenced.response == [1]
    image = commit(image, fenced.records)
    assert image.brokers[1].fenced and part(image, "t").leader == 2
    assert fence_brokers(image, CTX, [1]).records == []
    unfenced = unfence_broker(image, CTX, broker_id=1)
    assert unfenced.response and unfenced.records == [UnfenceBrokerRecord(1, epoch(image, 1))]
    assert unfence_broker(image, CTX, broker_id=2).response is False


# -- admission: partitions per request and per broker (POLICY_VIOLATION) -------------------
# Before: up to 100,000 partitions were accepted whatever the brokers hosted, and 1,000,000
# got "Number of partitions must be larger than 0".


def limited() -> OperationContext:
    """Every broker may host 10 partition replicas."""
    return make_ctx(max_broker_partitions=10)


def test_a_million_partitions_gets_the_request_limit() -> None:
    result = create_topics(cluster(3), make_ctx(), [CreatableTopic("huge", 1_000_000, 1)])
    [answer] = result.response
    assert answer.error_code == ErrorCode.POLICY_VIOLATION and result.records == []
    assert answer.error_message is not None and "limit of 10000" in answer.error_message


def test_the_request_limit_counts_every_topic_of_the_request() -> None:
    result = create_topics(
        cluster(3),
        make_ctx(),
        [CreatableTopic("a", 6_000, 1), CreatableTopic("b", 6_000, 1), CreatableTopic("c", 10)],
    )
    codes = [r.error_code for r in result.response]
    assert codes == [ErrorCode.NONE, ErrorCode.POLICY_VIOLATION, ErrorCode.NONE]
    assert "after 6000 earlier" in (result.response[1].error_message or "")


def test_no_broker_may_exceed_its_partition_limit() -> None:
    ctx = limited()
    image = with_topic(cluster(2), "t", [[1, 2]] * 6, ctx=ctx)  # 6 replicas on each
    result = create_topics(image, ctx, [CreatableTopic("u", 5, 2)])
    [answer] = result.response
    assert answer.error_code == ErrorCode.POLICY_VIOLATION and result.records == []
    assert "Broker 1 hosts 6 partitions; 5 more would exceed its limit of 10" in (
        answer.error_message or ""
    )
    fits = create_topics(image, ctx, [CreatableTopic("u", 4, 2), CreatableTopic("v", 1, 1)])
    assert [r.error_code for r in fits.response] == [ErrorCode.NONE, ErrorCode.POLICY_VIOLATION]
    manual = create_topics(image, ctx, [CreatableTopic("m", assignments={0: [1], 1: [1]})])
    assert manual.response[0].error_code == ErrorCode.NONE  # broker 1: 6 + 2


def test_create_partitions_is_admitted_like_create_topics() -> None:
    ctx = limited()
    image = with_topic(cluster(2), "t", [[1, 2]] * 6, ctx=ctx)
    over = create_partitions(image, ctx, [CreatePartitionsTopic("t", 11)])
    assert over.response[0].error_code == ErrorCode.POLICY_VIOLATION and over.records == []
    grown = create_partitions(image, ctx, [CreatePartitionsTopic("t", 10)])
    assert grown.response[0].error_code == ErrorCode.NONE
    image = commit(image, grown.records)
    assert sum(isinstance(r, PartitionRecord) for r in grown.records) == 4
    full = create_partitions(image, ctx, [CreatePartitionsTopic("t", 11)])
    assert full.response[0].error_code == ErrorCode.POLICY_VIOLATION
    huge = create_partitions(image, make_ctx(), [CreatePartitionsTopic("t", 1_000_000)])
    assert huge.response[0].error_code == ErrorCode.POLICY_VIOLATION
    assert "limit of 10000" in (huge.response[0].error_message or "")
