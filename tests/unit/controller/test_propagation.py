"""Propagation rules: which broker gets which LeaderAndIsr / StopReplica / UpdateMetadata."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from pydmq.controller.propagation import BrokerPush, delta_pushes, full_push
from pydmq.metadata.delta import MetadataDelta
from pydmq.metadata.image import MetadataImage
from pydmq.metadata.records import (
    ClientQuotaRecord,
    ConfigRecord,
    Endpoint,
    EntityData,
    FenceBrokerRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from pydmq.protocol.control_requests import FULL, INCREMENTAL, LEADER_DURING_DELETE

T1 = uuid.UUID(int=101)
T2 = uuid.UUID(int=102)
CONTROLLER = 3000
EPOCH = 7


def _register(
    broker_id: int, *, fenced: bool = False, rack: str | None = None
) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker_id,
        incarnation_id=uuid.UUID(int=broker_id),
        broker_epoch=10 + broker_id,
        endpoints=(
            Endpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id, 0),
            Endpoint("EXTERNAL", f"b{broker_id}.example", 19000 + broker_id, 0),
        ),
        rack=rack,
        fenced=fenced,
        in_controlled_shutdown=False,
    )


def _partition(
    topic_id: uuid.UUID, pid: int, replicas: tuple[int, ...], leader: int | None = None
) -> PartitionRecord:
    return PartitionRecord(
        partition_id=pid,
        topic_id=topic_id,
        replicas=replicas,
        isr=replicas,
        removing_replicas=(),
        adding_replicas=(),
        leader=replicas[0] if leader is None else leader,
        leader_recovery_state=0,
        leader_epoch=0,
        partition_epoch=0,
    )


def _replay(
    image: MetadataImage, records: Iterable[MetadataRecord]
) -> tuple[MetadataImage, MetadataDelta]:
    delta = MetadataDelta(image)
    records = list(records)
    for rec in records:
        delta.replay(rec)
    return delta.apply(offset=image.offset + len(records), epoch=EPOCH), delta


def _base() -> MetadataImage:
    image, _ = _replay(
        MetadataImage.EMPTY,
        [
            _register(1, rack="r1"),
            _register(2, rack="r2"),
            _register(3),
            TopicRecord("orders", T1),
            _partition(T1, 0, (1, 2)),
            _partition(T1, 1, (2, 3)),
            TopicRecord("audit", T2),
            _partition(T2, 0, (3,)),
            ConfigRecord(2, "orders", "retention.ms", "1000"),
        ],
    )
    return image


def _pushes(old: MetadataImage, records: list[MetadataRecord]) -> dict[int, BrokerPush]:
    new, delta = _replay(old, records)
    return delta_pushes(
        old, new, delta, controller_id=CONTROLLER, controller_epoch=EPOCH, listener_name="PLAINTEXT"
    )


def _lai_partitions(push: BrokerPush) -> set[tuple[str, int]]:
    assert push.leader_and_isr is not None
    return {
        (t.topic_name, p.partition_index)
        for t in push.leader_and_isr.topic_states
        for p in t.partition_states
    }


def test_leader_change_goes_to_the_replicas_only() -> None:
    old = _base()
    pushes = _pushes(old, [PartitionChangeRecord(partition_id=0, topic_id=T1, leader=2, isr=(2,))])
    assert {b for b, p in pushes.items() if p.leader_and_isr} == {1, 2}
    push = pushes[2]
    assert _lai_partitions(push) == {("orders", 0)}
    assert push.leader_and_isr is not None
    lai = push.leader_and_isr
    assert lai.type_ == INCREMENTAL
    assert lai.controller_id == CONTROLLER and lai.controller_epoch == EPOCH
    assert lai.broker_epoch == 12
    state = lai.topic_states[0].partition_states[0]
    assert (state.leader, state.leader_epoch, state.isr, state.partition_epoch) == (2, 1, [2], 1)
    assert state.replicas == [1, 2] and not state.is_new
    assert [(ll.broker_id, ll.host_name, ll.port) for ll in lai.live_leaders] == [
        (2, "127.0.0.1", 9002)
    ]
    # Everyone registered learns the new state through UpdateMetadata, nobody stops anything.
    assert set(pushes) == {1, 2, 3}
    assert all(p.stop_replica is None for p in pushes.values())
    um = pushes[3].update_metadata
    assert um is not None
    assert um.metadata_offset == old.offset + 1
    assert [(t.topic_name, [s.leader for s in t.partition_states]) for t in um.topic_states] == [
        ("orders", [2])
    ]
    assert [c.name for c in um.topic_states[0].configs] == ["retention.ms"]


def test_new_topic_marks_partitions_new() -> None:
    old = _base()
    t3 = uuid.UUID(int=103)
    pushes = _pushes(old, [TopicRecord("new", t3), _partition(t3, 0, (3, 1))])
    push = pushes[3]
    assert push.leader_and_isr is not None
    assert push.leader_and_isr.topic_states[0].partition_states[0].is_new
    assert push.leader_and_isr.topic_states[0].topic_id == t3
    assert 2 not in {b for b, p in pushes.items() if p.leader_and_isr}


def test_reassignment_stops_the_removed_replica() -> None:
    old = _base()
    pushes = _pushes(
        old,
        [PartitionChangeRecord(partition_id=0, topic_id=T1, replicas=(2, 3), isr=(2, 3), leader=2)],
    )
    stop = pushes[1].stop_replica
    assert stop is not None
    assert [
        (t.topic_name, [(s.partition_index, s.delete_partition) for s in t.partition_states])
        for t in stop.topic_states
    ] == [("orders", [(0, True)])]
    assert pushes[1].leader_and_isr is None
    assert _lai_partitions(pushes[3]) == {("orders", 0)}
    order = [key for key, _ in pushes[1].requests()]
    assert order == [5, 6]


def test_deleted_topic_stops_and_deletes_everywhere() -> None:
    old = _base()
    pushes = _pushes(old, [RemoveTopicRecord(T1)])
    for broker_id, pids in ((1, [0]), (2, [0, 1]), (3, [1])):
        stop = pushes[broker_id].stop_replica
        assert stop is not None
        assert [s.partition_index for t in stop.topic_states for s in t.partition_states] == pids
        assert all(s.delete_partition for t in stop.topic_states for s in t.partition_states)
        assert pushes[broker_id].leader_and_isr is None
    um = pushes[1].update_metadata
    assert um is not None
    (topic,) = um.topic_states
    assert topic.topic_name == "orders"
    assert {s.leader for s in topic.partition_states} == {LEADER_DURING_DELETE}


def test_fencing_changes_live_brokers_and_offline_replicas() -> None:
    old = _base()
    pushes = _pushes(
        old,
        [
            FenceBrokerRecord(id=1, epoch=11),
            PartitionChangeRecord(partition_id=0, topic_id=T1, leader=2, isr=(2,)),
        ],
    )
    um = pushes[2].update_metadata
    assert um is not None
    assert [b.id_ for b in um.live_brokers] == [2, 3]
    assert {e.listener for e in um.live_brokers[0].endpoints} == {"PLAINTEXT", "EXTERNAL"}
    assert um.live_brokers[0].rack == "r2"
    state = um.topic_states[0].partition_states[0]
    assert state.offline_replicas == [1]
    # The fenced broker still hears about it (it must catch up to be unfenced).
    assert pushes[1].update_metadata is not None


def test_broker_change_alone_sends_update_metadata_only() -> None:
    old, _ = _replay(_base(), [FenceBrokerRecord(id=3, epoch=13)])
    pushes = _pushes(old, [UnfenceBrokerRecord(id=3, epoch=13)])
    assert set(pushes) == {1, 2, 3}
    for push in pushes.values():
        assert push.leader_and_isr is None and push.stop_replica is None
        assert push.update_metadata is not None
        assert push.update_metadata.topic_states == []
        assert [b.id_ for b in push.update_metadata.live_brokers] == [1, 2, 3]


def test_config_change_carries_the_complete_overrides() -> None:
    old = _base()
    pushes = _pushes(old, [ConfigRecord(2, "orders", "cleanup.policy", "compact")])
    um = pushes[1].update_metadata
    assert um is not None
    (topic,) = um.topic_states
    assert topic.partition_states == []
    assert {(c.name, c.value) for c in topic.configs} == {
        ("retention.ms", "1000"),
        ("cleanup.policy", "compact"),
    }


def test_nothing_visible_changed_sends_nothing() -> None:
    assert _pushes(_base(), [NoOpRecord()]) == {}


def test_full_push_lists_every_replica_of_the_broker() -> None:
    image = _base()
    push = full_push(
        image, 3, controller_id=CONTROLLER, controller_epoch=EPOCH, listener_name="PLAINTEXT"
    )
    assert [key for key, _ in push.requests()] == [4, 6]
    assert push.leader_and_isr is not None and push.update_metadata is not None
    assert push.leader_and_isr.type_ == FULL
    assert _lai_partitions(push) == {("orders", 1), ("audit", 0)}
    assert {ll.broker_id for ll in push.leader_and_isr.live_leaders} == {2, 3}
    um = push.update_metadata
    assert um.type_ == FULL
    assert um.metadata_offset == image.offset
    assert {t.topic_name for t in um.topic_states} == {"orders", "audit"}
    assert sum(len(t.partition_states) for t in um.topic_states) == 3
    assert [b.id_ for b in um.live_brokers] == [1, 2, 3]


def test_full_push_for_a_broker_without_replicas_is_still_sent() -> None:
    image, _ = _replay(_base(), [_register(4, fenced=True)])
    push = full_push(
        image, 4, controller_id=CONTROLLER, controller_epoch=EPOCH, listener_name="PLAINTEXT"
    )
    assert push.leader_and_isr is not None and push.leader_and_isr.topic_states == []
    assert push.update_metadata is not None
    assert push.update_metadata.broker_epoch == 14
    assert 4 not in [b.id_ for b in push.update_metadata.live_brokers]


def test_requests_round_trip_through_the_codecs() -> None:
    from pydmq.protocol.messages import API_SCHEMAS
    from pydmq.protocol.primitives import Reader, Writer

    old = _base()
    pushes = _pushes(
        old, [RemoveTopicRecord(T2), PartitionChangeRecord(partition_id=1, topic_id=T1, leader=3)]
    )
    versions = {4: 7, 5: 4, 6: 8}
    for push in pushes.values():
        for key, request in push.requests():
            w = Writer()
            API_SCHEMAS[key].encode_request(w, request, versions[key])
            decoded = API_SCHEMAS[key].decode_request(Reader(bytes(w.buf)), versions[key])
            assert decoded == request


def test_stop_replica_always_carries_the_real_leader_epoch() -> None:
    """Brokers fence any StopReplica older than their applied leader epoch, sentinels
    included: the controller must never rely on -1 (no epoch) or -2 (deleting)."""
    old = _base()
    bumped, _ = _replay(
        old, [PartitionChangeRecord(partition_id=0, topic_id=T1, leader=2, isr=(2, 1))]
    )
    assert bumped.topics.by_id[T1].partitions[0].leader_epoch == 1
    reassigned = _pushes(
        bumped,
        [PartitionChangeRecord(partition_id=0, topic_id=T1, replicas=(2, 3), isr=(2, 3))],
    )
    deleted = _pushes(bumped, [RemoveTopicRecord(T1)])
    for push, broker_id, epochs in (
        (reassigned, 1, {0: 1}),
        (deleted, 2, {0: 1, 1: 0}),
        (deleted, 1, {0: 1}),
    ):
        stop = push[broker_id].stop_replica
        assert stop is not None
        assert {
            s.partition_index: s.leader_epoch for s in stop.topic_states[0].partition_states
        } == (epochs)
        assert stop.broker_epoch == 10 + broker_id


def test_update_metadata_carries_the_live_brokers_registration_epochs() -> None:
    """Leaders check a follower Fetch's replica_epoch against these."""
    pushes = _pushes(_base(), [FenceBrokerRecord(id=3, epoch=13)])
    um = pushes[1].update_metadata
    assert um is not None
    assert [(b.id_, b.broker_epoch) for b in um.live_brokers] == [(1, 11), (2, 12)]
    full = full_push(
        _base(), 2, controller_id=CONTROLLER, controller_epoch=EPOCH, listener_name="PLAINTEXT"
    )
    assert full.update_metadata is not None
    assert [b.broker_epoch for b in full.update_metadata.live_brokers] == [11, 12, 13]


# Dynamic broker configs (issue 16 part 1, issue 23): pydmq's tagged ``broker_configs``.


def _layers(push: BrokerPush) -> dict[str, dict[str, str]]:
    assert push.update_metadata is not None
    return {
        layer.resource_name: {c.name: c.value for c in layer.configs}
        for layer in push.update_metadata.broker_configs
    }


def test_broker_config_changes_reach_the_brokers_they_concern() -> None:
    pushes = _pushes(_base(), [ConfigRecord(4, "", "log.retention.ms", "60000")])
    assert sorted(pushes) == [1, 2, 3]
    for push in pushes.values():
        assert [key for key, _ in push.requests()] == [6]
        assert _layers(push) == {"": {"log.retention.ms": "60000"}}
        assert push.update_metadata is not None
        assert [b.id_ for b in push.update_metadata.live_brokers] == [1, 2, 3]
    own = _pushes(_base(), [ConfigRecord(4, "2", "log.cleaner.threads", "2")])
    assert sorted(own) == [2] and _layers(own[2]) == {"2": {"log.cleaner.threads": "2"}}
    # a broker not registered: nobody to tell
    assert _pushes(_base(), [ConfigRecord(4, "9", "log.cleaner.threads", "2")]) == {}
    # a deleted key: the layer is sent whole, here empty
    image, _ = _replay(_base(), [ConfigRecord(4, "", "log.retention.ms", "60000")])
    cleared = _pushes(image, [ConfigRecord(4, "", "log.retention.ms", None)])
    assert _layers(cleared[1]) == {"": {}}
    # other changes carry no layer
    assert _layers(_pushes(_base(), [ConfigRecord(2, "orders", "retention.ms", "5")])[1]) == {}


def test_full_push_carries_the_default_and_the_brokers_own_layer() -> None:
    image, _ = _replay(
        _base(),
        [
            ConfigRecord(4, "", "log.retention.ms", "60000"),
            ConfigRecord(4, "3", "log.cleaner.threads", "2"),
            ConfigRecord(4, "1", "log.cleaner.threads", "4"),
        ],
    )
    push = full_push(
        image, 3, controller_id=CONTROLLER, controller_epoch=EPOCH, listener_name="PLAINTEXT"
    )
    assert _layers(push) == {"": {"log.retention.ms": "60000"}, "3": {"log.cleaner.threads": "2"}}
    bare = full_push(
        _base(), 2, controller_id=CONTROLLER, controller_epoch=EPOCH, listener_name="PLAINTEXT"
    )
    assert _layers(bare) == {"": {}, "2": {}}
    from pydmq.protocol.messages import API_SCHEMAS
    from pydmq.protocol.primitives import Reader, Writer

    assert push.update_metadata is not None
    w = Writer()
    API_SCHEMAS[6].encode_request(w, push.update_metadata, 8)
    assert API_SCHEMAS[6].decode_request(Reader(bytes(w.buf)), 8) == push.update_metadata


def _quota(
    client_id: str | None, key: str, value: float, remove: bool = False
) -> ClientQuotaRecord:
    return ClientQuotaRecord((EntityData("client-id", client_id),), key, value, remove)


def _pushed_quotas(push: BrokerPush) -> list[tuple[object, object]]:
    assert push.update_metadata is not None
    return [
        (
            [(e.entity_type, e.entity_name) for e in q.entity],
            [(v.key, v.value) for v in q.values],
        )
        for q in push.update_metadata.client_quotas
    ]


def test_client_quota_changes_go_to_every_broker_with_the_entities_values() -> None:
    base, _ = _replay(_base(), [_quota("a", "producer_byte_rate", 10.0)])
    pushes = _pushes(
        base,
        [_quota(None, "consumer_byte_rate", 5.0), _quota("a", "producer_byte_rate", 0.0, True)],
    )
    assert sorted(pushes) == [1, 2, 3]
    for push in pushes.values():
        assert push.leader_and_isr is None
        assert _pushed_quotas(push) == [
            ([("client-id", "a")], []),  # removed
            ([("client-id", None)], [("consumer_byte_rate", 5.0)]),
        ]


def test_the_full_update_metadata_lists_every_client_quota_and_others_none() -> None:
    image, _ = _replay(_base(), [_quota("a", "producer_byte_rate", 10.0)])
    push = full_push(
        image, 1, controller_id=CONTROLLER, controller_epoch=EPOCH, listener_name="PLAINTEXT"
    )
    assert _pushed_quotas(push) == [([("client-id", "a")], [("producer_byte_rate", 10.0)])]
    other = _pushes(image, [ConfigRecord(2, "orders", "retention.ms", "5")])
    assert all(_pushed_quotas(p) == [] for p in other.values())


def _pushed_groups(push: BrokerPush) -> list[tuple[str, list[tuple[str, str]]]]:
    assert push.update_metadata is not None
    return [
        (g.resource_name, [(c.name, c.value) for c in g.configs])
        for g in push.update_metadata.group_configs
    ]


def test_group_config_changes_go_to_every_broker_complete_and_in_full_pushes() -> None:
    """GROUP config resources (type 32: share.auto.offset.reset...) reach every broker, each
    group's configs complete (empty: removed), and a FULL UpdateMetadata carries them all."""
    base, _ = _replay(_base(), [ConfigRecord(32, "g1", "share.auto.offset.reset", "earliest")])
    pushes = _pushes(
        base,
        [
            ConfigRecord(32, "g2", "share.record.lock.duration.ms", "20000"),
            ConfigRecord(32, "g1", "share.auto.offset.reset", None),
        ],
    )
    assert sorted(pushes) == [1, 2, 3]
    for push in pushes.values():
        assert push.leader_and_isr is None
        assert _pushed_groups(push) == [
            ("g1", []),
            ("g2", [("share.record.lock.duration.ms", "20000")]),
        ]
    push = full_push(
        base, 2, controller_id=CONTROLLER, controller_epoch=EPOCH, listener_name="PLAINTEXT"
    )
    assert _pushed_groups(push) == [("g1", [("share.auto.offset.reset", "earliest")])]
    other = _pushes(base, [ConfigRecord(2, "orders", "retention.ms", "5")])
    assert all(_pushed_groups(p) == [] for p in other.values())
