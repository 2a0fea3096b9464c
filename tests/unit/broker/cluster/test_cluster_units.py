"""Sans-network pieces of the broker role: truncation rule, metadata cache, forwarding test."""

from __future__ import annotations

import uuid

from pydmq.broker.cluster.forwarding import is_not_controller
from pydmq.broker.cluster.metadata_cache import UPDATE_FULL, MetadataCache
from pydmq.broker.cluster.replica_fetcher import truncation_offset
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.create_topics import CreatableTopicResult, CreateTopicsResponse
from pydmq.protocol.messages.update_metadata import (
    UpdateMetadataBroker,
    UpdateMetadataBrokerConfig,
    UpdateMetadataBrokerConfigs,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataTopicConfig,
    UpdateMetadataTopicState,
)
from pydmq.storage.api import TopicPartition


def _no_epoch(_epoch: int) -> tuple[int, int]:
    return -1, -1


def test_truncation_same_epoch_cuts_at_the_leaders_end() -> None:
    assert truncation_offset(3, 120, 100, 3, 110, _no_epoch) == (110, True)
    assert truncation_offset(3, 105, 100, 3, 110, _no_epoch) == (105, True)


def test_truncation_undefined_keeps_the_high_watermark() -> None:
    assert truncation_offset(3, 120, 100, -1, -1, _no_epoch) == (100, True)


def test_truncation_to_an_older_epoch_the_follower_knows() -> None:
    def ours(epoch: int) -> tuple[int, int]:
        return (2, 90) if epoch == 2 else (-1, -1)

    # Leader never saw our epoch 3: it ends epoch 2 at 95; we ended it at 90.
    assert truncation_offset(3, 120, 80, 2, 95, ours) == (90, True)


def test_truncation_to_an_epoch_the_follower_lacks_asks_again() -> None:
    def ours(epoch: int) -> tuple[int, int]:
        return (1, 70)  # our largest epoch <= 2 is 1, ending at 70

    assert truncation_offset(3, 120, 60, 2, 95, ours) == (70, False)


def _update(
    offset: int,
    *,
    type_: int = 0,
    leader: int = 1,
    configs: dict[str, str] | None = None,
    topic_id: uuid.UUID | None = None,
) -> UpdateMetadataRequest:
    return UpdateMetadataRequest(
        controller_id=9,
        controller_epoch=2,
        type_=type_,
        metadata_offset=offset,
        live_brokers=[
            UpdateMetadataBroker(
                id_=b,
                endpoints=[UpdateMetadataEndpoint(port=9000 + b, host="h", listener="PLAINTEXT")],
            )
            for b in (1, 2)
        ],
        topic_states=[
            UpdateMetadataTopicState(
                topic_name="t",
                topic_id=topic_id or _TOPIC_ID,
                partition_states=[
                    UpdateMetadataPartitionState(
                        partition_index=0,
                        leader=leader,
                        leader_epoch=4,
                        isr=[1, 2],
                        replicas=[1, 2, 3],
                        offline_replicas=[3],
                    )
                ],
                configs=[
                    UpdateMetadataTopicConfig(name=k, value=v) for k, v in (configs or {}).items()
                ],
            )
        ],
    )


_TOPIC_ID = uuid.uuid4()


def test_metadata_cache_applies_and_ignores_older_offsets() -> None:
    cache = MetadataCache(1)
    result = cache.update(_update(10, configs={"retention.ms": "5"}))
    assert result.applied and [t.name for t in result.created_topics] == ["t"]
    assert cache.alive_broker_ids() == [1, 2] and cache.endpoint(2, "PLAINTEXT") == ("h", 9002)
    p = cache.partition(TopicPartition("t", 0))
    assert p is not None and (p.leader, p.leader_epoch, p.isr) == (1, 4, [1, 2])
    assert cache.offline(TopicPartition("t", 0)) == [3]
    assert cache.topics.get("t").configs == {"retention.ms": "5"}  # type: ignore[union-attr]
    assert not cache.update(_update(9, leader=2)).applied
    changed = cache.update(_update(11, configs={}))
    assert changed.config_changed == {"t"}


def test_metadata_cache_deletes_on_leader_during_delete_and_full() -> None:
    cache = MetadataCache(1)
    cache.update(_update(1))
    deleted = cache.update(_update(2, leader=-2))
    assert [t.name for t in deleted.deleted_topics] == ["t"] and cache.topics.get("t") is None
    cache.update(_update(3))
    full = UpdateMetadataRequest(controller_epoch=2, type_=UPDATE_FULL, metadata_offset=4)
    assert [t.name for t in cache.update(full).deleted_topics] == ["t"]


def test_not_controller_detection_on_per_item_responses() -> None:
    nc = CreateTopicsResponse(
        topics=[CreatableTopicResult(name="a", error_code=ErrorCode.NOT_CONTROLLER)]
    )
    ok = CreateTopicsResponse(topics=[CreatableTopicResult(name="a", error_code=ErrorCode.NONE)])
    mixed = CreateTopicsResponse(
        topics=[
            CreatableTopicResult(name="a", error_code=ErrorCode.NOT_CONTROLLER),
            CreatableTopicResult(name="b", error_code=ErrorCode.TOPIC_ALREADY_EXISTS),
        ]
    )
    assert is_not_controller(nc) and not is_not_controller(ok) and not is_not_controller(mixed)


def test_incremental_update_keeps_topics_it_does_not_list() -> None:
    """Kafka's UpdateMetadata types: 1 incremental (upsert), 2 full (replace the topic set)."""
    from pydmq.broker.cluster.metadata_cache import UPDATE_INCREMENTAL

    assert (UPDATE_INCREMENTAL, UPDATE_FULL) == (1, 2)
    cache = MetadataCache(1)
    cache.update(_update(1))
    other = UpdateMetadataRequest(
        controller_epoch=2,
        type_=UPDATE_INCREMENTAL,
        metadata_offset=2,
        topic_states=[UpdateMetadataTopicState(topic_name="u", topic_id=uuid.uuid4())],
    )
    result = cache.update(other)
    assert not result.deleted_topics
    assert cache.topics.get("t") is not None and cache.topics.get("u") is not None


def test_metadata_update_lists_net_topic_changes() -> None:
    """What the topic hooks fire from (each change once): a FULL update repeating the known
    topics changes nothing; a topic re-created under its name is the old one deleted and the
    new one created."""
    cache = MetadataCache(1)
    first = cache.update(_update(1, type_=UPDATE_FULL))
    assert [t.name for t in first.created_topics] == ["t"] and not first.deleted_topics
    again = cache.update(_update(2, type_=UPDATE_FULL))
    assert (again.created_topics, again.deleted_topics) == ([], [])
    new_id = uuid.uuid4()
    recreated = cache.update(_update(3, topic_id=new_id))
    assert [t.topic_id for t in recreated.deleted_topics] == [_TOPIC_ID]
    assert [t.topic_id for t in recreated.created_topics] == [new_id]


def _layer(name: str, **configs: str) -> UpdateMetadataBrokerConfigs:
    return UpdateMetadataBrokerConfigs(
        resource_name=name,
        configs=[
            UpdateMetadataBrokerConfig(name=k.replace("_", "."), value=v)
            for k, v in configs.items()
        ],
    )


def test_metadata_cache_keeps_the_default_and_its_own_broker_config_layers() -> None:
    """Issue 16 part 1: the controller pushes dynamic broker configs in ``broker_configs``."""
    from pydmq.broker.cluster.metadata_cache import UPDATE_INCREMENTAL

    cache = MetadataCache(1)
    first = UpdateMetadataRequest(
        controller_epoch=2,
        type_=UPDATE_INCREMENTAL,
        metadata_offset=1,
        broker_configs=[_layer("", log_retention_ms="60000"), _layer("2", x="y")],
    )
    assert cache.update(first).broker_configs_changed
    assert cache.broker_configs == {"": {"log.retention.ms": "60000"}, "1": {}}
    own = UpdateMetadataRequest(
        controller_epoch=2,
        type_=UPDATE_INCREMENTAL,
        metadata_offset=2,
        broker_configs=[_layer("1", log_cleaner_threads="2")],
    )
    assert cache.update(own).broker_configs_changed
    assert cache.broker_configs == {
        "": {"log.retention.ms": "60000"},
        "1": {"log.cleaner.threads": "2"},
    }
    unrelated = UpdateMetadataRequest(
        controller_epoch=2, type_=UPDATE_INCREMENTAL, metadata_offset=3
    )
    assert not cache.update(unrelated).broker_configs_changed
    full = UpdateMetadataRequest(
        controller_epoch=2,
        type_=UPDATE_FULL,
        metadata_offset=4,
        broker_configs=[_layer("1", log_cleaner_threads="2")],
    )
    assert cache.update(full).broker_configs_changed
    assert cache.broker_configs == {"": {}, "1": {"log.cleaner.threads": "2"}}


def _quotas_update(
    offset: int, type_: int, *quotas: tuple[str | None, dict[str, float]]
) -> UpdateMetadataRequest:
    from pydmq.protocol.messages.update_metadata import (
        UpdateMetadataClientQuota,
        UpdateMetadataQuotaEntity,
        UpdateMetadataQuotaValue,
    )

    return UpdateMetadataRequest(
        controller_epoch=2,
        type_=type_,
        metadata_offset=offset,
        client_quotas=[
            UpdateMetadataClientQuota(
                entity=[UpdateMetadataQuotaEntity(entity_type="client-id", entity_name=name)],
                values=[UpdateMetadataQuotaValue(key=k, value=v) for k, v in values.items()],
            )
            for name, values in quotas
        ],
    )


def test_client_quotas_follow_update_metadata() -> None:
    cache = MetadataCache(1)
    a, default = (("client-id", "a"),), (("client-id", None),)
    result = cache.update(_quotas_update(1, 1, ("a", {"producer_byte_rate": 1.0})))
    assert result.client_quotas_changed
    assert cache.client_quotas == {a: {"producer_byte_rate": 1.0}}
    # an incremental update touches only what it lists; no values: removed
    cache.update(_quotas_update(2, 1, (None, {"consumer_byte_rate": 2.0})))
    assert cache.client_quotas == {
        a: {"producer_byte_rate": 1.0},
        default: {"consumer_byte_rate": 2.0},
    }
    assert not cache.update(_quotas_update(3, 1)).client_quotas_changed
    cache.update(_quotas_update(4, 1, ("a", {})))
    assert cache.client_quotas == {default: {"consumer_byte_rate": 2.0}}
    # FULL replaces everything
    cache.update(_quotas_update(5, UPDATE_FULL, ("b", {"request_percentage": 3.0})))
    assert cache.client_quotas == {(("client-id", "b"),): {"request_percentage": 3.0}}
    assert cache.update(_quotas_update(6, UPDATE_FULL)).client_quotas_changed
    assert cache.client_quotas == {}


def test_group_configs_follow_update_metadata() -> None:
    """GROUP config resources (pydmq's tagged ``group_configs``): an incremental update
    replaces the groups it names (empty: removed), a FULL one replaces them all."""
    from pydmq.broker.cluster.metadata_cache import UPDATE_INCREMENTAL
    from pydmq.protocol.messages.update_metadata import (
        UpdateMetadataBrokerConfig,
        UpdateMetadataBrokerConfigs,
    )

    def update(offset: int, type_: int, **groups: dict[str, str]) -> UpdateMetadataRequest:
        return UpdateMetadataRequest(
            controller_epoch=2,
            type_=type_,
            metadata_offset=offset,
            group_configs=[
                UpdateMetadataBrokerConfigs(
                    resource_name=name,
                    configs=[UpdateMetadataBrokerConfig(name=k, value=v) for k, v in c.items()],
                )
                for name, c in groups.items()
            ],
        )

    cache = MetadataCache(1)
    cache.update(update(1, UPDATE_INCREMENTAL, g1={"share.auto.offset.reset": "earliest"}))
    cache.update(update(2, UPDATE_INCREMENTAL, g2={"share.isolation.level": "read_committed"}))
    assert cache.group_configs == {
        "g1": {"share.auto.offset.reset": "earliest"},
        "g2": {"share.isolation.level": "read_committed"},
    }
    cache.update(update(3, UPDATE_INCREMENTAL, g1={}))
    assert cache.group_configs == {"g2": {"share.isolation.level": "read_committed"}}
    cache.update(update(4, UPDATE_FULL, g3={"share.record.lock.duration.ms": "20000"}))
    assert cache.group_configs == {"g3": {"share.record.lock.duration.ms": "20000"}}
