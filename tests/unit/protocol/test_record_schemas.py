"""Record schemas (``protocol/codegen/schemas/records``): the committed files load, a schema
that breaks a rule is refused with the file and field named, and each construct the
generator supports produces a codec that round-trips."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pydmq.protocol.codegen.record_emit import emit_family
from pydmq.protocol.codegen.record_model import SchemaError, load_families, load_family
from pydmq.protocol.errors import MalformedFrameError


def _field(name: str, type_: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, "versions": "0+", "about": name, **extra}


def _family(*fields: dict[str, Any], frame: str = "version", **record: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "name": "ThingValue",
        "validVersions": "0-1",
        "about": "A thing.",
        "fields": list(fields),
        **record,
    }
    if frame == "version":
        rec.setdefault("kind", "value")
    else:
        rec.setdefault("recordType", 1)
    family: dict[str, Any] = {
        "about": "Test records.",
        "module": "pydmq_test_records",
        "frame": frame,
        "trailingBytes": "reject",
        "records": [rec],
    }
    if frame == "typeAndVersion":
        family["union"] = "Thing"
    return family


def _write(tmp_path: Path, family: dict[str, Any]) -> Path:
    path = tmp_path / "things.json"
    path.write_text(json.dumps(family))
    return path


def _module(tmp_path: Path, family: dict[str, Any]) -> ModuleType:
    source = emit_family(load_family(_write(tmp_path, family)))
    path = tmp_path / "pydmq_test_records.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("pydmq_test_records", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["pydmq_test_records"] = module  # dataclasses resolve annotations through it
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules["pydmq_test_records"]
    return module


def test_committed_schemas_load() -> None:
    families = {f.source: f for f in load_families()}
    assert set(families) == {
        "classic_group.json",
        "consumer_group.json",
        "cluster_metadata.json",
        "share_group_state.json",
        "transaction_log.json",
    }
    assert len(families["cluster_metadata.json"].records) == 19  # 1000: RestAnswerRecord


@pytest.mark.parametrize(
    ("family", "message"),
    [
        (_family(_field("a", "int32", versions="1+")), "needs a default"),
        (_family(_field("a", "int32", nullableVersions="0+")), "nullValue"),
        (_family(_field("a", "int32", nullableVersions="1+", nullValue=-1)), "some of its"),
        (_family(_field("a", "uuid", nullableVersions="0+")), "cannot be nullable"),
        (_family(_field("a", "string", validValues=[1])), "constrain integers"),
        (_family(_field("a", "int32", default=None)), "cannot be null"),
        (_family(_field("a", "int32", default=1), _field("b", "int32")), "follows one"),
        (_family(_field("a", "float")), "unknown type"),
        (_family(_field("a", "[]tristate")), "never an array"),
        (_family(_field("a", "int32", versions="0-2")), "outside the record"),
        (_family(_field("a", "int32"), _field("a", "int64")), "duplicate"),
        (_family(_field("a", "int32"), colour="red"), "unknown keys"),
        (_family(_field("a", "int32"), frame="typeAndVersion", kind="value"), "kind or recordType"),
        (_family(_field("a", "int32"), versionField="kind"), "only a key"),
    ],
)
def test_broken_schemas_are_refused(tmp_path: Path, family: dict[str, Any], message: str) -> None:
    with pytest.raises(SchemaError, match=message) as info:
        load_family(_write(tmp_path, family))
    assert "things.json" in str(info.value)


def test_every_construct_round_trips(tmp_path: Path) -> None:
    family = _family(
        _field("count", "int32", minValue=0),
        _field("flag", "bool", validValues=[0, 1]),
        _field("state", "tristate"),
        _field("ids", "[]int64", nullableVersions="0+"),
        _field(
            "items",
            "[]Item",
            fields=[_field("name", "string"), _field("blob", "bytes", nullableVersions="0+")],
        ),
        _field("port", "uint16"),
        _field("leader", "int32", nullableVersions="0+", nullValue=-2, default=None),
        _field("extra", "string", versions="1+", default="none"),
        _field("later", "[]int32", versions="1+", nullableVersions="1+", default=None),
    )
    m = _module(tmp_path, family)
    value = m.ThingValue(
        3, True, False, (1, -(2**63)), (m.Item("x", None), m.Item("", b"b")), 65535
    )
    assert value.encode()[:2] == b"\x00\x01"  # the highest version
    assert m.decode_thing_value(value.encode()) == m.ThingValue(
        3, True, False, (1, -(2**63)), (m.Item("x", None), m.Item("", b"b")), 65535, None, "none"
    )
    other = m.ThingValue(0, False, None, None, (), 0, -1, "", (5, 6))
    assert m.decode_thing_value(other.encode()) == other
    v0 = b"\x00\x00" + other.encode()[2:-14]  # version 0 has no ``extra`` and ``later``
    assert m.decode_thing_value(v0) == m.ThingValue(0, False, None, None, (), 0, -1, "none")
    for bad in (
        value.encode() + b"\x00",  # trailing bytes are rejected by this family
        b"\x00\x02" + value.encode()[2:],  # unknown version
        b"\x00\x01\xff\xff\xff\xff" + value.encode()[6:],  # count below its minimum
    ):
        with pytest.raises(MalformedFrameError):
            m.decode_thing_value(bad)


def test_keys_dispatch_on_their_version(tmp_path: Path) -> None:
    family = _family(_field("name", "string"), kind="key", validVersions="0-1")
    family["records"].append(
        {
            "name": "OtherKey",
            "kind": "key",
            "validVersions": "2,4",
            "versionField": "kind",
            "about": "Another key.",
            "fields": [_field("id", "int32", versions="4")],
        }
    )
    family["records"][1]["fields"][0]["default"] = 0
    m = _module(tmp_path, family)
    assert frozenset({0, 1, 2, 4}) == m.KEY_VERSIONS
    assert m.decode_key(m.ThingValue("a").encode()) == m.ThingValue("a")
    assert m.OtherKey(2, 5).encode() == b"\x00\x02"
    assert m.decode_key(m.OtherKey(4, 5).encode()) == m.OtherKey(4, 5)
    with pytest.raises(ValueError):
        m.OtherKey(3).encode()
    with pytest.raises(MalformedFrameError):
        m.decode_key(b"\x00\x03")


def test_records_framed_by_type(tmp_path: Path) -> None:
    family = _family(_field("a", "int8"), frame="typeAndVersion")
    m = _module(tmp_path, family)
    assert m.ThingValue(-1).encode() == b"\x00\x01\x00\x01\xff"
    assert m.decode_record(b"\x00\x01\x00\x00\x07") == m.ThingValue(7)
    assert {1: m.ThingValue} == m.RECORD_CLASSES
    with pytest.raises(MalformedFrameError):
        m.decode_record(b"\x00\x02\x00\x00\x07")
