"""Records in bulk (``metadata.image_codec``): the same bytes and the same image as one by one.

* ``image_payloads(image)`` is byte for byte ``encode_record`` of ``image.to_records()``;
* a :class:`RecordReplayer` builds the image that decoding and replaying each record builds,
  partitions whose records are equal past their ids share one registration, and it refuses
  what one-by-one replay refuses (an unknown topic, a torn or corrupt record, a deleted
  topic's partition), even when the bytes repeat a placement already seen.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pydmq.metadata import MetadataDelta, MetadataImage, MetadataReplayError
from pydmq.metadata.image_codec import RecordReplayer, image_payloads
from pydmq.metadata.records import (
    RESOURCE_TOPIC,
    ConfigRecord,
    CorruptRecordError,
    Endpoint,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    decode_record,
    encode_payload,
    encode_record,
)

pytestmark = pytest.mark.timeout(60)

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


def partition(
    topic_id: uuid.UUID, pid: int, replicas: tuple[int, ...], epoch: int = 0
) -> PartitionRecord:
    return PartitionRecord(pid, topic_id, replicas, replicas, (), (), replicas[0], 0, epoch, 0)


def one_by_one(records: list[MetadataRecord]) -> MetadataImage:
    delta = MetadataDelta(MetadataImage.EMPTY)
    for rec in records:
        delta.replay(decode_record(encode_record(rec)))
    return delta.apply(0, 0)


def in_bulk(records: list[MetadataRecord]) -> MetadataImage:
    replayer = RecordReplayer(MetadataDelta(MetadataImage.EMPTY))
    for rec in records:
        replayer.replay_record(encode_record(rec))
    return replayer.apply(0, 0)


def mixed() -> list[MetadataRecord]:
    return [
        FeatureLevelRecord("metadata.version", 7),
        RegisterBrokerRecord(
            1, uuid.UUID(int=9), 3, (Endpoint("PLAINTEXT", "h", 9092),), None, False, False
        ),
        TopicRecord("a", T1),
        *(partition(T1, pid, (1,)) for pid in range(5)),
        ConfigRecord(RESOURCE_TOPIC, "a", "retention.ms", "1000"),
        TopicRecord("b", T2),
        partition(T2, 0, (1, 2)),
        partition(T2, 1, (2, 1), epoch=4),
        partition(T2, 2, (1, 2)),
        partition(T1, 5, (1,)),  # back to the first topic
        ProducerIdsRecord(-1, -1, 2000),
    ]


def test_bulk_replay_builds_the_same_image_and_shares_equal_placements() -> None:
    records = mixed()
    image = in_bulk(records)
    assert image == one_by_one(records)
    a = image.topics.by_name["a"].partitions
    assert len(a) == 6 and len({id(p) for p in a.values()}) == 1
    b = image.topics.by_name["b"].partitions
    assert b[0] is b[2] and b[1] is not b[0] and b[1].leader_epoch == 4


def test_image_payloads_are_the_records_of_the_image_encoded() -> None:
    image = one_by_one(mixed())
    assert image_payloads(image) == [encode_record(rec) for rec in image.to_records()]
    replayer = RecordReplayer(MetadataDelta(MetadataImage.EMPTY))
    for payload in image_payloads(image):
        replayer.replay_record(payload)
    assert replayer.apply(image.offset, image.epoch) == image


def test_an_entry_is_replayed_record_by_record() -> None:
    records = mixed()
    replayer = RecordReplayer(MetadataDelta(MetadataImage.EMPTY))
    assert replayer.replay_payload(encode_payload(records)) == len(records)
    assert replayer.apply(0, 0) == one_by_one(records)


def test_bulk_replay_refuses_what_replay_refuses() -> None:
    known = [TopicRecord("a", T1), partition(T1, 0, (1,))]
    with pytest.raises(MetadataReplayError):  # a placement seen before, an unknown topic
        in_bulk([*known, partition(T2, 0, (1,))])
    with pytest.raises(MetadataReplayError):  # the topic was deleted in the same delta
        in_bulk([*known, RemoveTopicRecord(T1), partition(T1, 1, (1,))])
    replayer = RecordReplayer(MetadataDelta(MetadataImage.EMPTY))
    for rec in known:
        replayer.replay_record(encode_record(rec))
    good = encode_record(partition(T1, 1, (1,)))
    for bad in (good[:-1], good + b"\0", good[:24] + b"\xff" * (len(good) - 24)):
        with pytest.raises(CorruptRecordError):
            replayer.replay_record(bad)


placements = st.tuples(
    st.lists(st.integers(0, 4), min_size=1, max_size=3).map(tuple),
    st.integers(0, 3),
)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 20), placements), max_size=40))
def test_bulk_replay_matches_one_by_one(
    parts: list[tuple[int, int, tuple[tuple[int, ...], int]]],
) -> None:
    ids = (T1, T2)
    records: list[MetadataRecord] = [TopicRecord("a", T1), TopicRecord("b", T2)]
    records += [partition(ids[t], pid, replicas, epoch) for t, pid, (replicas, epoch) in parts]
    assert in_bulk(records) == one_by_one(records)
