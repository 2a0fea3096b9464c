"""MetadataDelta replay semantics, MetadataImage queries, snapshots and structure sharing."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pydmq.metadata import MetadataDelta, MetadataImage, MetadataReplayError
from pydmq.metadata.image import PartitionRegistration
from pydmq.metadata.records import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    Endpoint,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


def replay(image: MetadataImage, records: Iterable[MetadataRecord]) -> MetadataImage:
    delta = MetadataDelta(image)
    for rec in records:
        delta.replay(rec)
    return delta.apply(offset=image.offset + 1, epoch=1)


def register(broker_id: int, epoch: int = 1, fenced: bool = False) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id,
        uuid.UUID(int=100 + broker_id),
        epoch,
        (Endpoint("PLAINTEXT", f"b{broker_id}", 9092),),
        f"rack{broker_id % 2}",
        fenced,
        False,
    )


def partition(topic_id: uuid.UUID, pid: int, replicas: tuple[int, ...]) -> PartitionRecord:
    return PartitionRecord(pid, topic_id, replicas, replicas, (), (), replicas[0], 0, 0, 0)


def base_image() -> MetadataImage:
    return replay(
        MetadataImage.EMPTY,
        [
            FeatureLevelRecord("metadata.version", 1),
            register(1),
            register(2),
            register(3),
            TopicRecord("a", T1),
            partition(T1, 0, (1, 2, 3)),
            partition(T1, 1, (2, 3, 1)),
            TopicRecord("b", T2),
            partition(T2, 0, (3, 1)),
            ConfigRecord(2, "a", "retention.ms", "1000"),
            ConfigRecord(4, "1", "log.retention.ms", "5"),
            ProducerIdsRecord(1, 1, 1000),
        ],
    )


def test_replay_builds_queries() -> None:
    image = base_image()
    assert image.offset == 0 and image.epoch == 1
    assert image.features == {"metadata.version": 1}
    assert set(image.brokers) == {1, 2, 3}
    assert image.brokers[1].endpoint("PLAINTEXT") == Endpoint("PLAINTEXT", "b1", 9092)
    assert image.brokers[1].endpoint("SSL") is None
    assert image.topics.by_name["a"] is image.topics.by_id[T1]
    assert image.partition(T1, 1) == PartitionRegistration((2, 3, 1), (2, 3, 1), leader=2)
    assert image.partition(T1, 9) is None and image.partition(uuid.uuid4(), 0) is None
    assert image.topic_config("a") == {"retention.ms": "1000"}
    assert image.topic_config("b") == {}
    assert image.next_producer_id == 1000
    assert sorted(image.partitions_led_by(3)) == [(T2, 0)]
    assert sorted(image.partitions_with_replica(2)) == [(T1, 0), (T1, 1)]


def test_partition_change_bumps_epochs_only_on_real_leader_change() -> None:
    image = base_image()
    same_leader = replay(image, [PartitionChangeRecord(0, T1, isr=(1, 2), leader=1)])
    p = same_leader.partition(T1, 0)
    assert p is not None
    assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((1, 2), 1, 0, 1)
    moved = replay(same_leader, [PartitionChangeRecord(0, T1, leader=2)])
    p = moved.partition(T1, 0)
    assert p is not None
    assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((1, 2), 2, 1, 2)
    offline = replay(moved, [PartitionChangeRecord(0, T1, leader=-1, leader_recovery_state=1)])
    p = offline.partition(T1, 0)
    assert p is not None
    assert (p.leader, p.leader_epoch, p.partition_epoch, p.leader_recovery_state) == (-1, 2, 3, 1)


def test_partition_change_of_reassignment_fields() -> None:
    image = replay(
        base_image(),
        [
            PartitionChangeRecord(
                0, T2, replicas=(2, 3, 1), adding_replicas=(2,), removing_replicas=(1,)
            )
        ],
    )
    p = image.partition(T2, 0)
    assert p is not None and p.is_reassigning
    assert (p.replicas, p.isr, p.adding_replicas, p.removing_replicas) == (
        (2, 3, 1),
        (3, 1),
        (2,),
        (1,),
    )


def test_remove_topic_deletes_topic_and_configs() -> None:
    image = base_image()
    delta = MetadataDelta(image)
    delta.replay(RemoveTopicRecord(T1))
    after = delta.apply(1, 1)
    assert "a" not in after.topics.by_name and T1 not in after.topics.by_id
    assert after.topic_config("a") == {}
    assert (4, "1") in after.configs
    assert set(delta.deleted_topics()) == {T1}
    changed = delta.changed_partitions()
    assert set(changed) == {(T1, 0), (T1, 1)}
    assert all(new is None for _, new in changed.values())


def test_topic_recreated_with_same_name_in_one_delta() -> None:
    image = base_image()
    t3 = uuid.UUID(int=3)
    after = replay(
        image,
        [
            RemoveTopicRecord(T1),
            TopicRecord("a", t3),
            partition(t3, 0, (1,)),
            ConfigRecord(2, "a", "cleanup.policy", "compact"),
        ],
    )
    assert after.topics.by_name["a"].topic_id == t3
    assert after.topic_config("a") == {"cleanup.policy": "compact"}


def test_topic_created_and_deleted_in_one_delta_is_not_reported() -> None:
    delta = MetadataDelta(base_image())
    t3 = uuid.UUID(int=3)
    delta.replay(TopicRecord("c", t3))
    delta.replay(partition(t3, 0, (1,)))
    assert delta.created_topics() == {t3: "c"}
    delta.replay(RemoveTopicRecord(t3))
    assert delta.created_topics() == {} and delta.deleted_topics() == {}
    assert delta.changed_partitions() == {}


def test_broker_flags_and_epochs() -> None:
    image = base_image()
    after = replay(
        image,
        [
            FenceBrokerRecord(1, 1),
            BrokerRegistrationChangeRecord(2, 1, in_controlled_shutdown=True),
            FenceBrokerRecord(3, 99),  # stale epoch: ignored
            UnregisterBrokerRecord(3, 99),  # stale epoch: ignored
        ],
    )
    assert after.brokers[1].fenced and not after.brokers[1].in_controlled_shutdown
    assert after.brokers[2].in_controlled_shutdown and not after.brokers[2].fenced
    assert not after.brokers[3].fenced
    assert [b.id for b in after.live_brokers()] == [2, 3]
    again = replay(after, [UnfenceBrokerRecord(1, 1), UnregisterBrokerRecord(3, 1)])
    assert not again.brokers[1].fenced and 3 not in again.brokers


def test_reregistration_replaces_old_registration() -> None:
    image = base_image()
    delta = MetadataDelta(image)
    delta.replay(register(1, epoch=7, fenced=True))
    after = delta.apply(1, 1)
    assert after.brokers[1].epoch == 7 and after.brokers[1].fenced
    old, new = delta.changed_brokers()[1]
    assert old is image.brokers[1] and new is after.brokers[1]


def test_config_none_deletes_key_and_empty_resource_disappears() -> None:
    image = base_image()
    after = replay(image, [ConfigRecord(2, "a", "retention.ms", None)])
    assert (2, "a") not in after.configs
    assert replay(image, [ConfigRecord(2, "b", "x", "1")]).topic_config("b") == {"x": "1"}


def test_feature_level_zero_removes_feature() -> None:
    assert replay(base_image(), [FeatureLevelRecord("metadata.version", 0)]).features == {}


def test_unknown_references_raise() -> None:
    image = base_image()
    for rec in (
        PartitionChangeRecord(0, uuid.UUID(int=9), isr=(1,)),
        PartitionChangeRecord(5, T1, isr=(1,)),
        partition(uuid.UUID(int=9), 0, (1,)),
        RemoveTopicRecord(uuid.UUID(int=9)),
        TopicRecord("dup", T1),
    ):
        with pytest.raises(MetadataReplayError):
            MetadataDelta(image).replay(rec)


def test_structure_sharing() -> None:
    image = base_image()
    after = replay(image, [PartitionChangeRecord(0, T1, isr=(1, 2)), NoOpRecord()])
    assert after.topics.by_id[T2] is image.topics.by_id[T2]
    assert after.topics.by_id[T1].partitions[1] is image.topics.by_id[T1].partitions[1]
    assert after.brokers is image.brokers
    assert after.configs is image.configs
    assert after.features is image.features
    fenced = replay(image, [FenceBrokerRecord(1, 1)])
    assert fenced.topics is image.topics
    assert fenced.brokers[2] is image.brokers[2]
    configured = replay(image, [ConfigRecord(2, "b", "x", "1")])
    assert configured.configs[(2, "a")] is image.configs[(2, "a")]


def test_changed_partitions_reports_old_and_new() -> None:
    image = base_image()
    delta = MetadataDelta(image)
    delta.replay(PartitionChangeRecord(0, T1, leader=2))
    delta.replay(partition(T1, 2, (3,)))
    changed = delta.changed_partitions()
    assert set(changed) == {(T1, 0), (T1, 2)}
    old, new = changed[(T1, 0)]
    assert old is image.partition(T1, 0) and new is not None and new.leader == 2
    assert changed[(T1, 2)][0] is None


def test_images_are_frozen() -> None:
    image = base_image()
    with pytest.raises(AttributeError):
        image.offset = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        image.brokers[9] = image.brokers[1]  # type: ignore[index]


def test_to_records_rebuilds_an_equal_image() -> None:
    image = replay(
        base_image(),
        [FenceBrokerRecord(2, 1), PartitionChangeRecord(0, T1, leader=3, isr=(3,))],
    )
    rebuilt = replay(MetadataImage.EMPTY, image.to_records())
    assert rebuilt.to_records() == image.to_records()
    assert rebuilt == MetadataImage(
        rebuilt.offset,
        rebuilt.epoch,
        image.features,
        image.brokers,
        image.topics,
        image.configs,
        image.next_producer_id,
    )


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("fence"), st.integers(1, 3)),
        st.tuples(st.just("unfence"), st.integers(1, 3)),
        st.tuples(st.just("leader"), st.integers(0, 1), st.integers(-1, 3)),
        st.tuples(st.just("isr"), st.integers(0, 1), st.lists(st.integers(1, 3), max_size=3)),
        st.tuples(st.just("config"), st.sampled_from(["x", "y"]), st.none() | st.text(max_size=3)),
        st.tuples(st.just("pid"), st.integers(0, 10**6)),
    ),
    max_size=20,
)


@settings(max_examples=60, deadline=None)
@given(OPS)
def test_to_records_round_trip_after_random_changes(ops: list[tuple[object, ...]]) -> None:
    records: list[MetadataRecord] = []
    for op in ops:
        match op:
            case ("fence", int(b)):
                records.append(FenceBrokerRecord(b, 1))
            case ("unfence", int(b)):
                records.append(UnfenceBrokerRecord(b, 1))
            case ("leader", int(p), int(leader)):
                records.append(PartitionChangeRecord(p, T1, leader=leader))
            case ("isr", int(p), list(isr)):
                records.append(PartitionChangeRecord(p, T1, isr=tuple(isr)))
            case ("config", str(name), value):
                assert value is None or isinstance(value, str)
                records.append(ConfigRecord(2, "a", name, value))
            case ("pid", int(next_id)):
                records.append(ProducerIdsRecord(1, 1, next_id))
    image = replay(base_image(), records)
    rebuilt = replay(MetadataImage.EMPTY, image.to_records())
    assert rebuilt.brokers == image.brokers
    assert rebuilt.topics == image.topics
    assert rebuilt.configs == image.configs
    assert rebuilt.features == image.features
    assert rebuilt.next_producer_id == image.next_producer_id
