"""Every API, every version, request and response: kio's serializer is the oracle.

kio encodes a Hypothesis-built instance; our decoder must consume exactly those bytes, our
encoder must reproduce them byte for byte, and decode(encode(x)) == x for our classes.
"""

from __future__ import annotations

import importlib
import io
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_writer
from kio.static.constants import EntityType
from kio.static.primitive import Records

from pydmq.protocol.codegen.legacy import LEGACY_API_KEYS
from pydmq.protocol.messages import API_SCHEMAS
from pydmq.protocol.primitives import Reader, Writer

st.register_type_strategy(Records, st.binary(max_size=12).map(Records))

CASES = [
    (key, version, kind)
    for key, name in sorted(api_key_map.items())
    for version in sorted(schema_name_map[name])
    for kind in ("request", "response")
]


def _kio_class(key: int, version: int, kind: str) -> type[Any]:
    entity = EntityType.request if kind == "request" else EntityType.response
    module, cls = schema_name_map[api_key_map[key]][version][entity].split(":")
    result = getattr(importlib.import_module(module), cls)
    assert isinstance(result, type)
    return result


def test_every_kio_api_has_a_schema() -> None:
    # Keys 4-7 come from pydmq.protocol.codegen.legacy (tests/unit/protocol/test_legacy_messages.py).
    assert set(API_SCHEMAS) == set(api_key_map) | LEGACY_API_KEYS
    assert not set(api_key_map) & LEGACY_API_KEYS
    for key, name in api_key_map.items():
        schema = API_SCHEMAS[key]
        assert schema.name == name
        assert schema.min_version == min(schema_name_map[name])
        assert schema.max_version == max(schema_name_map[name])


@pytest.mark.parametrize(("key", "version", "kind"), CASES)
def test_kio_oracle_round_trip(key: int, version: int, kind: str) -> None:
    kio_cls = _kio_class(key, version, kind)
    schema = API_SCHEMAS[key]
    decode = schema.decode_request if kind == "request" else schema.decode_response
    encode = schema.encode_request if kind == "request" else schema.encode_response
    write = entity_writer(kio_cls)

    @settings(
        max_examples=2,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.from_type(kio_cls))
    def check(instance: Any) -> None:
        buf = io.BytesIO()
        write(buf, instance)
        data = buf.getvalue()
        reader = Reader(data)
        ours = decode(reader, version)
        assert reader.pos == len(data)
        w = Writer()
        encode(w, ours, version)
        assert w.getvalue() == data
        again = decode(Reader(w.getvalue()), version)
        assert again == ours

    check()
