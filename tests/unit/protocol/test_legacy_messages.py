"""Keys 4-7 (LeaderAndIsr v7, StopReplica v4, UpdateMetadata v8, ControlledShutdown v3).

kio has no schemas for them, so there is no oracle: Hypothesis round trips check that the codecs
agree with themselves, and hand-assembled frames check the byte layout against Kafka's.
"""

from __future__ import annotations

import struct
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pydmq.client.client import KafkaClient
from pydmq.protocol.codegen.legacy import LEGACY_API_KEYS, build_legacy
from pydmq.protocol.codegen.model import ApiSpec, MessageSpec
from pydmq.protocol.errors import UnsupportedVersionError
from pydmq.protocol.headers import request_header_version, response_header_version
from pydmq.protocol.messages import API_SCHEMAS
from pydmq.protocol.messages.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    RemainingPartition,
)
from pydmq.protocol.messages.leader_and_isr import (
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrTopicState,
)
from pydmq.protocol.messages.stop_replica import (
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaTopicState,
)
from pydmq.protocol.messages.update_metadata import (
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataTopicConfig,
    UpdateMetadataTopicState,
)
from pydmq.protocol.primitives import Reader, Writer
from pydmq.testing.embedded import EmbeddedBroker

APIS = {api.api_key: api for api in build_legacy()}
VERSIONS = {4: 7, 5: 4, 6: 8, 7: 3}

_INTS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "error_code": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
_TEXT = st.text(max_size=8)


def _scalar(kafka_type: str, nullable: bool) -> st.SearchStrategy[Any]:
    base: st.SearchStrategy[Any]
    if kafka_type in _INTS:
        lo, hi = _INTS[kafka_type]
        base = st.integers(lo, hi)
    elif kafka_type == "bool":
        base = st.booleans()
    elif kafka_type == "string":
        base = _TEXT
    elif kafka_type == "uuid":
        base = st.uuids()
    elif kafka_type == "float64":
        base = st.floats(allow_nan=False)
    elif kafka_type == "bytes":
        base = st.binary(max_size=8)
    else:
        raise AssertionError(kafka_type)
    return st.none() | base if nullable else base


def _instances(api: ApiSpec, msg: MessageSpec, name: str) -> st.SearchStrategy[Any]:
    """Instances of the generated class ``name``, every field drawn (tagged ones included)."""
    cls = getattr(API_SCHEMAS[api.api_key].module, name)
    spec = msg.structs[name]
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for f in spec.fields:
        item: st.SearchStrategy[Any]
        if f.struct is not None:
            item = _instances(api, msg, f.struct)
        else:
            assert f.kafka_type is not None
            item = _scalar(f.kafka_type, f.nullable and not f.is_array)
        fields[f.name] = st.lists(item, max_size=3) if f.is_array else item
    fields["unknown_tagged_fields"] = st.dictionaries(
        st.integers(10, 40), st.binary(max_size=4), max_size=2
    )
    return st.builds(cls, **fields)


CASES = [(key, kind) for key in sorted(APIS) for kind in ("request", "response")]


@pytest.mark.parametrize(("key", "kind"), CASES)
def test_round_trip(key: int, kind: str) -> None:
    api = APIS[key]
    msg = api.request if kind == "request" else api.response
    schema = API_SCHEMAS[key]
    decode = schema.decode_request if kind == "request" else schema.decode_response
    encode = schema.encode_request if kind == "request" else schema.encode_response
    version = VERSIONS[key]

    @settings(
        max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(_instances(api, msg, msg.root))
    def check(instance: Any) -> None:
        w = Writer()
        encode(w, instance, version)
        data = w.getvalue()
        reader = Reader(data)
        again = decode(reader, version)
        assert reader.pos == len(data)
        assert again == instance
        w2 = Writer()
        encode(w2, again, version)
        assert w2.getvalue() == data

    check()


def test_schemas_registered_with_one_flexible_version() -> None:
    assert {4, 5, 6, 7} == LEGACY_API_KEYS
    for key, version in VERSIONS.items():
        schema = API_SCHEMAS[key]
        assert (schema.min_version, schema.max_version) == (version, version)
        assert schema.is_flexible(version)
        assert request_header_version(key, version) == 2
        assert response_header_version(key, version) == 1
        with pytest.raises(UnsupportedVersionError):
            schema.encode_request(Writer(), schema.request_type(), version - 1)
        with pytest.raises(UnsupportedVersionError):
            schema.decode_request(Reader(b""), version + 1)
    names = {k: (API_SCHEMAS[k].request_root, API_SCHEMAS[k].response_root) for k in VERSIONS}
    assert names == {
        4: ("LeaderAndIsrRequest", "LeaderAndIsrResponse"),
        5: ("StopReplicaRequest", "StopReplicaResponse"),
        6: ("UpdateMetadataRequest", "UpdateMetadataResponse"),
        7: ("ControlledShutdownRequest", "ControlledShutdownResponse"),
    }


# -- byte layouts, assembled by hand --------------------------------------------------------------


def _cstr(s: str) -> bytes:
    b = s.encode()
    return bytes([len(b) + 1]) + b


def _carr_i32(values: list[int]) -> bytes:
    return bytes([len(values) + 1]) + b"".join(struct.pack(">i", v) for v in values)


def _encode(key: int, msg: Any, *, response: bool = False) -> bytes:
    w = Writer()
    schema = API_SCHEMAS[key]
    (schema.encode_response if response else schema.encode_request)(w, msg, VERSIONS[key])
    return w.getvalue()


def test_controlled_shutdown_layout() -> None:
    assert _encode(7, ControlledShutdownRequest(broker_id=3, broker_epoch=12)) == (
        struct.pack(">iq", 3, 12) + b"\x00"
    )
    response = ControlledShutdownResponse(
        error_code=0, remaining_partitions=[RemainingPartition(topic_name="t", partition_index=1)]
    )
    assert _encode(7, response, response=True) == (
        b"\x00\x00" + b"\x02" + _cstr("t") + struct.pack(">i", 1) + b"\x00" + b"\x00"
    )


def test_leader_and_isr_layout() -> None:
    topic_id = uuid.UUID(int=0x0102030405060708090A0B0C0D0E0F10)
    request = LeaderAndIsrRequest(
        controller_id=1,
        is_k_raft_controller=True,
        controller_epoch=5,
        broker_epoch=77,
        type_=1,
        topic_states=[
            LeaderAndIsrTopicState(
                topic_name="t",
                topic_id=topic_id,
                partition_states=[
                    LeaderAndIsrPartitionState(
                        partition_index=0,
                        controller_epoch=5,
                        leader=2,
                        leader_epoch=9,
                        isr=[2, 3],
                        partition_epoch=4,
                        replicas=[2, 3, 1],
                        is_new=True,
                        leader_recovery_state=1,
                    )
                ],
            )
        ],
        live_leaders=[LeaderAndIsrLiveLeader(broker_id=2, host_name="h", port=9093)],
    )
    partition = (
        struct.pack(">iiii", 0, 5, 2, 9)
        + _carr_i32([2, 3])
        + struct.pack(">i", 4)
        + _carr_i32([2, 3, 1])
        + _carr_i32([])
        + _carr_i32([])
        + b"\x01\x01"
        + b"\x00"
    )
    topic = _cstr("t") + topic_id.bytes + b"\x02" + partition + b"\x00"
    leader = struct.pack(">i", 2) + _cstr("h") + struct.pack(">i", 9093) + b"\x00"
    expected = (
        struct.pack(">i?iqb", 1, True, 5, 77, 1) + b"\x02" + topic + b"\x02" + leader + b"\x00"
    )
    assert _encode(4, request) == expected


def test_stop_replica_layout() -> None:
    request = StopReplicaRequest(
        controller_id=1,
        controller_epoch=2,
        broker_epoch=3,
        topic_states=[
            StopReplicaTopicState(
                topic_name="t",
                partition_states=[
                    StopReplicaPartitionState(partition_index=4, delete_partition=True)
                ],
            )
        ],
    )
    partition = struct.pack(">ii?", 4, -1, True) + b"\x00"
    expected = (
        struct.pack(">i?iq", 1, False, 2, 3)
        + b"\x02"
        + _cstr("t")
        + b"\x02"
        + partition
        + b"\x00"
        + b"\x00"
    )
    assert _encode(5, request) == expected


def test_update_metadata_layout_with_pydmq_tagged_fields() -> None:
    topic_id = uuid.UUID(int=7)
    request = UpdateMetadataRequest(
        controller_id=1,
        controller_epoch=2,
        broker_epoch=-1,
        topic_states=[
            UpdateMetadataTopicState(
                topic_name="t",
                topic_id=topic_id,
                partition_states=[
                    UpdateMetadataPartitionState(
                        partition_index=0,
                        controller_epoch=2,
                        leader=1,
                        leader_epoch=0,
                        isr=[1],
                        zk_version=0,
                        replicas=[1],
                        offline_replicas=[],
                    )
                ],
                configs=[
                    UpdateMetadataTopicConfig(name="a", value="b"),
                    UpdateMetadataTopicConfig(name="c", value=None),
                ],
            )
        ],
        live_brokers=[
            UpdateMetadataBroker(
                id_=1,
                endpoints=[
                    UpdateMetadataEndpoint(
                        port=9092, host="h", listener="PLAINTEXT", security_protocol=0
                    )
                ],
                rack=None,
            )
        ],
        metadata_offset=300,
    )
    partition = (
        struct.pack(">iiii", 0, 2, 1, 0)
        + _carr_i32([1])
        + struct.pack(">i", 0)
        + _carr_i32([1])
        + _carr_i32([])
        + b"\x00"
    )
    configs = b"\x03" + _cstr("a") + _cstr("b") + b"\x00" + _cstr("c") + b"\x00" + b"\x00"
    topic = (
        _cstr("t")
        + topic_id.bytes
        + b"\x02"
        + partition
        + b"\x01"  # one tagged field
        + b"\x00"  # tag 0: configs
        + bytes([len(configs)])
        + configs
    )
    endpoint = struct.pack(">i", 9092) + _cstr("h") + _cstr("PLAINTEXT") + b"\x00\x00" + b"\x00"
    broker = struct.pack(">i", 1) + b"\x02" + endpoint + b"\x00" + b"\x00"
    expected = (
        struct.pack(">i?iq", 1, False, 2, -1)
        + b"\x02"
        + topic
        + b"\x02"
        + broker
        + b"\x01"  # one tagged field: metadata_offset (type_ 0 is the default, omitted)
        + b"\x01"
        + b"\x08"
        + struct.pack(">q", 300)
    )
    data = _encode(6, request)
    assert data == expected
    decoded = API_SCHEMAS[6].decode_request(Reader(data), 8)
    assert decoded.metadata_offset == 300
    assert decoded.type_ == 0
    assert [(c.name, c.value) for c in decoded.topic_states[0].configs] == [("a", "b"), ("c", None)]


def test_update_metadata_defaults_and_unknown_tags_kept() -> None:
    request = UpdateMetadataRequest(controller_id=1, controller_epoch=1)
    assert (request.metadata_offset, request.type_, request.broker_epoch) == (-1, 0, -1)
    assert UpdateMetadataTopicState().configs == []
    data = _encode(6, request)
    assert data.endswith(b"\x00")  # no tagged fields when both are at their defaults
    request.unknown_tagged_fields = {99: b"xy"}  # a tag no pydmq extension uses
    request.type_ = 2
    again = API_SCHEMAS[6].decode_request(Reader(_encode(6, request)), 8)
    assert again.unknown_tagged_fields == {99: b"xy"}
    assert again.type_ == 2


# -- not advertised --------------------------------------------------------------------------------


def test_api_versions_does_not_advertise_keys_4_to_7(tmp_path: Path) -> None:
    """Schemas alone advertise nothing: ApiVersions lists the keys that have handlers."""
    with EmbeddedBroker(tmp_path) as broker, KafkaClient(broker.bootstrap) as client:
        advertised = set(client.connect().broker_versions)
    assert 3 in advertised and 18 in advertised
    assert not advertised & LEGACY_API_KEYS
