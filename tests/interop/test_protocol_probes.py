"""Probe every (api key, version) the broker advertises (PITFALLS #2 and #1).

For each pair in the broker's own ApiVersions answer, every version from min to max (so the
min and the max are always covered) gets:

* a minimal request: the default-constructed generated request class, with only what the
  wire format forces (Metadata v0 cannot say "all topics" with null, Produce needs acks != 0 to
  be answered);
* a request naming a real topic (and its topic id where the version needs one), whose
  per-partition errors must be NONE;

and the answer must decode with our decoder at that version, with no trailing bytes, the
right correlation id, and the connection must stay open (a follow-up ApiVersions v0 on the same
connection is answered). Versions just outside the advertised ranges must close the
connection, as Kafka does. ApiVersions v0..v4 are checked in detail.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydmq.protocol.messages import API_SCHEMAS
from pydmq.protocol.messages import api_versions as av
from pydmq.protocol.messages import create_topics as ct
from pydmq.protocol.messages import delete_topics as dt
from pydmq.protocol.messages import fetch as fe
from pydmq.protocol.messages import init_producer_id as ip
from pydmq.protocol.messages import list_offsets as lo
from pydmq.protocol.messages import metadata as md
from pydmq.protocol.messages import offset_for_leader_epoch as ofle
from pydmq.protocol.messages import produce as pr
from pydmq.protocol.records import SimpleRecord, build_batch
from pydmq.testing.process import BrokerProcess
from support.broker_checks import create_topic, unique_topic
from support.raw_client import RawClient, decode_response_frame, encode_request_frame

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    root = Path(tempfile.mkdtemp(prefix="pydmq-probes-"))
    proc = BrokerProcess(
        root / "data", overrides={"num.partitions": 1}, log_path=root / "broker.log"
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def advertised(broker: BrokerProcess) -> dict[int, tuple[int, int]]:
    with RawClient(broker.bootstrap) as client:
        response = client.request(
            18,
            3,
            av.ApiVersionsRequest(client_software_name="probe", client_software_version="1.0"),
        )
    assert response.body.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in response.body.api_keys}


class Topic:
    def __init__(self, name: str, topic_id: uuid.UUID) -> None:
        self.name = name
        self.topic_id = topic_id


@pytest.fixture(scope="module")
def topic(broker: BrokerProcess) -> Topic:
    name = unique_topic("probe")
    with RawClient(broker.bootstrap) as client:
        assert create_topic(client, name, 1) == 0
        response = client.request(
            3, 12, md.MetadataRequest(topics=[md.MetadataRequestTopic(name=name)])
        )
    (t,) = response.body.topics
    assert t.error_code == 0 and t.topic_id != uuid.UUID(int=0)
    return Topic(name, t.topic_id)


# -- request builders --------------------------------------------------------------------------


def _minimal(api_key: int, version: int) -> Any:
    request = API_SCHEMAS[api_key].request_type()
    if api_key == 0:
        request.acks = -1  # acks=0 is never answered
        request.timeout = 1000
    elif api_key == 3 and version == 0:
        request.topics = []  # v0 has no null array: empty means all topics
    elif api_key == 18 and version >= 3:
        request.client_software_name = "pydmq-probe"
        request.client_software_version = "0.1"
    return request


def _with_topic(api_key: int, version: int, topic: Topic, client: RawClient) -> Any:
    name, tid = topic.name, topic.topic_id
    if api_key == 0:
        return pr.ProduceRequest(
            acks=-1,
            timeout=5000,
            topic_data=[
                pr.TopicProduceData(
                    name=name,
                    topic_id=tid,
                    partition_data=[
                        pr.PartitionProduceData(
                            index=0, records=build_batch([SimpleRecord(b"k", b"v%d" % version)])
                        )
                    ],
                )
            ],
        )
    if api_key == 1:
        return fe.FetchRequest(
            max_wait=0,
            min_bytes=0,
            max_bytes=1 << 20,
            session_epoch=-1,
            topics=[
                fe.FetchTopic(
                    topic=name,
                    topic_id=tid,
                    partitions=[
                        fe.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
                    ],
                )
            ],
        )
    if api_key == 2:
        return lo.ListOffsetsRequest(
            replica_id=-1,
            topics=[
                lo.ListOffsetsTopic(
                    name=name, partitions=[lo.ListOffsetsPartition(partition_index=0, timestamp=-1)]
                )
            ],
        )
    if api_key == 3:
        return md.MetadataRequest(
            topics=[md.MetadataRequestTopic(name=name)], allow_auto_topic_creation=False
        )
    if api_key == 18:
        return _minimal(18, version)
    if api_key == 19:
        return ct.CreateTopicsRequest(
            topics=[
                ct.CreatableTopic(
                    name=unique_topic(f"ct-v{version}"), num_partitions=1, replication_factor=1
                )
            ],
            timeout=10_000,
        )
    if api_key == 20:
        victim = unique_topic(f"dt-v{version}")
        assert create_topic(client, victim, 1) == 0
        if version >= 6:
            return dt.DeleteTopicsRequest(topics=[dt.DeleteTopicState(name=victim)], timeout=10_000)
        return dt.DeleteTopicsRequest(topic_names=[victim], timeout=10_000)
    if api_key == 22:
        return ip.InitProducerIdRequest(transaction_timeout=60_000)
    if api_key == 23:
        return ofle.OffsetForLeaderEpochRequest(
            replica_id=-1,
            topics=[
                ofle.OffsetForLeaderTopic(
                    topic=name,
                    partitions=[ofle.OffsetForLeaderPartition(partition=0, leader_epoch=0)],
                )
            ],
        )
    return _minimal(api_key, version)  # an API without a topic-specific builder yet


def _errors(api_key: int, version: int, body: Any, topic: Topic) -> list[int]:
    """Every error code of a with-topic response that must be NONE."""
    if api_key == 0:
        return [p.error_code for t in body.responses for p in t.partition_responses]
    if api_key == 1:
        return [body.error_code] + [p.error_code for t in body.responses for p in t.partitions]
    if api_key == 2:
        return [p.error_code for t in body.topics for p in t.partitions]
    if api_key == 3:
        return [t.error_code for t in body.topics] + [
            p.error_code for t in body.topics for p in t.partitions
        ]
    if api_key == 18:
        return [body.error_code]
    if api_key == 19:
        return [t.error_code for t in body.topics]
    if api_key == 20:
        return [t.error_code for t in body.responses]
    if api_key == 22:
        return [body.error_code]
    if api_key == 23:
        return [p.error_code for t in body.topics for p in t.partitions]
    return []


def _probe(bootstrap: str, api_key: int, version: int, build: Callable[[RawClient], Any]) -> Any:
    with RawClient(bootstrap, timeout=10) as client:
        request = build(client)
        correlation_id = 1000 + version
        client.send(encode_request_frame(api_key, version, request, correlation_id, "probe"))
        frame = client.read_frame()
        assert frame is not None, "connection closed instead of a response"
        response = decode_response_frame(frame, api_key, version)
        assert response.correlation_id == correlation_id
        assert response.trailing == 0, f"{response.trailing} undecoded bytes after the body"
        # The connection stays usable.
        follow = client.request(18, 0, av.ApiVersionsRequest())
        assert follow.body.error_code == 0
        return response.body


# Advertised, yet closed when used, as Kafka 4 does (KAFKA-18659): Produce v0-v2. Older
# librdkafka turns compression off when Produce's advertised minimum is above 0.
ADVERTISED_BUT_CLOSED = {0: range(0, 3)}


def _served(key: int, version: int) -> bool:
    return version not in ADVERTISED_BUT_CLOSED.get(key, range(0))


def _all_pairs(advertised: dict[int, tuple[int, int]]) -> list[tuple[int, int]]:
    return [
        (k, v)
        for k, (lo_v, hi_v) in sorted(advertised.items())
        for v in range(lo_v, hi_v + 1)
        if _served(k, v)
    ]


# -- the probes ---------------------------------------------------------------------------------


def test_advertised_pairs_have_schemas(advertised: dict[int, tuple[int, int]]) -> None:
    for key, (lo_v, hi_v) in advertised.items():
        schema = API_SCHEMAS.get(key)
        assert schema is not None, f"api key {key} advertised without a schema"
        served_lo = min(v for v in range(lo_v, hi_v + 1) if _served(key, v))
        assert schema.min_version <= served_lo <= hi_v <= schema.max_version, (key, lo_v, hi_v)
    # Kafka 4.0 removed the inter-broker keys 4-7 from what clients see (PITFALLS #18).
    assert not {4, 5, 6, 7} & set(advertised)


def test_minimal_request_at_every_advertised_version(
    broker: BrokerProcess, advertised: dict[int, tuple[int, int]]
) -> None:
    failures: list[str] = []
    for key, version in _all_pairs(advertised):
        try:
            _probe(broker.bootstrap, key, version, lambda _c, k=key, v=version: _minimal(k, v))
        except Exception as exc:  # collect them all, then fail once
            failures.append(
                f"{API_SCHEMAS[key].name} (key {key}) v{version}: {type(exc).__name__}: {exc}"
            )
    assert not failures, "minimal probes failed:\n" + "\n".join(failures)


def test_request_with_topic_at_every_advertised_version(
    broker: BrokerProcess, advertised: dict[int, tuple[int, int]], topic: Topic
) -> None:
    failures: list[str] = []
    for key, version in _all_pairs(advertised):
        try:
            body = _probe(
                broker.bootstrap,
                key,
                version,
                lambda c, k=key, v=version: _with_topic(k, v, topic, c),
            )
            errors = [e for e in _errors(key, version, body, topic) if e != 0]
            assert not errors, f"error codes {errors} in {body}"
        except Exception as exc:
            failures.append(
                f"{API_SCHEMAS[key].name} (key {key}) v{version}: {type(exc).__name__}: {exc}"
            )
    assert not failures, "probes with a topic failed:\n" + "\n".join(failures)


def test_probes_pipelined_on_one_connection(
    broker: BrokerProcess, advertised: dict[int, tuple[int, int]]
) -> None:
    """All minimal probes written back to back; answers come back in order."""
    pairs = [(k, v) for k, v in _all_pairs(advertised) if k not in (19, 20)]
    with RawClient(broker.bootstrap, timeout=20) as client:
        frames = b"".join(
            encode_request_frame(k, v, _minimal(k, v), i, "pipeline")
            for i, (k, v) in enumerate(pairs)
        )
        client.send(frames)
        for i, (k, v) in enumerate(pairs):
            frame = client.read_frame()
            assert frame is not None, f"closed before the answer to key {k} v{v}"
            response = decode_response_frame(frame, k, v)
            assert (response.correlation_id, response.trailing) == (i, 0), (k, v)


def test_versions_outside_the_advertised_ranges_close(
    broker: BrokerProcess, advertised: dict[int, tuple[int, int]]
) -> None:
    for key, (lo_v, hi_v) in advertised.items():
        if key == 18:
            continue
        closed = ADVERTISED_BUT_CLOSED.get(key, range(0))
        if closed:
            assert (lo_v, closed.start) == (0, 0), (key, lo_v)
            lo_v = closed.stop  # the first served version; the closed ones are probed below
        for version in (*closed, lo_v - 1, hi_v + 1):
            if version < 0:
                continue
            with RawClient(broker.bootstrap) as client:
                schema = API_SCHEMAS[key]
                if schema.min_version <= version <= schema.max_version:
                    frame = encode_request_frame(key, version, _minimal(key, version), 5)
                else:
                    frame = encode_request_frame(key, lo_v, _minimal(key, lo_v), 5)
                    frame = frame[:6] + version.to_bytes(2, "big") + frame[8:]
                client.send(frame)
                assert client.wait_closed(5), (
                    f"key {key} v{version} (advertised {lo_v}-{hi_v}) was not closed"
                )


# -- ApiVersions in detail ------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_each_version(
    broker: BrokerProcess, advertised: dict[int, tuple[int, int]], version: int
) -> None:
    request = av.ApiVersionsRequest()
    if version >= 3:
        request = av.ApiVersionsRequest(
            client_software_name="confluent-kafka-python",
            client_software_version="2.5.0-rdkafka-2.5.0",
        )
    with RawClient(broker.bootstrap) as client:
        response = client.request(18, version, request)
        assert response.trailing == 0
        body = response.body
        assert body.error_code == 0
        assert {k.api_key: (k.min_version, k.max_version) for k in body.api_keys} == advertised
        if version >= 3:
            names = {f.name: (f.min_version, f.max_version) for f in body.supported_features}
            assert "metadata.version" in names
            zero_min = [n for n, (mn, _mx) in names.items() if mn == 0]
            if version == 3:
                # KAFKA-17011: a v3 reader (older Java clients) chokes on min version 0.
                assert not zero_min, names
            if version >= 4:
                assert names["transaction.version"] == (0, 2)
            finalized = {f.name: f.max_version_level for f in body.finalized_features}
            assert "metadata.version" in finalized
            # a new cluster is formatted at pydmq.bootstrap.transaction.version (2, as Kafka 4.x)
            assert finalized["transaction.version"] == 2
            assert body.finalized_features_epoch >= 0


def test_api_versions_v3_with_bad_software_name(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as client:
        response = client.request(
            18,
            3,
            av.ApiVersionsRequest(client_software_name="bad name!", client_software_version="1"),
        )
        assert response.body.error_code == 42  # INVALID_REQUEST, as Kafka
        # Still usable afterwards.
        assert client.request(18, 3, _minimal(18, 3)).body.error_code == 0


def test_api_versions_v3_header_v2_with_tagged_fields(broker: BrokerProcess) -> None:
    """A flexible request header carrying an (unknown) tagged field is accepted."""
    from pydmq.protocol.primitives import Writer

    w = Writer(bytearray())
    w.int16(18)
    w.int16(3)
    w.int32(77)
    w.nullable_string("probe")
    w.tagged_fields({5: b"xyz"})
    av.encode_request(w, _minimal(18, 3), 3)
    with RawClient(broker.bootstrap) as client:
        client.send(len(w.buf).to_bytes(4, "big") + bytes(w.buf))
        frame = client.read_frame()
        assert frame is not None
        response = decode_response_frame(frame, 18, 3)
        assert (response.correlation_id, response.body.error_code, response.trailing) == (77, 0, 0)
