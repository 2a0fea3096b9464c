"""Merged, version-ranged message schemas built from kio's per-version dataclasses.

kio ships one frozen dataclass per (API, version, request/response) and per nested struct.
This module folds every version of one API into a single schema per message, in the shape
of Kafka's JSON message definitions: each field knows the versions it is present in, the
versions it is nullable in, and (for tagged fields) its tag. kio is imported here only, at
generation time.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import importlib
import types
import typing
import uuid
from dataclasses import dataclass, field
from typing import Any

PRIMITIVE_TYPES = frozenset(
    {
        "bool",
        "bytes",
        "datetime_i64",
        "error_code",
        "float64",
        "int8",
        "int16",
        "int32",
        "int64",
        "records",
        "string",
        "timedelta_i32",
        "timedelta_i64",
        "uint16",
        "uuid",
    }
)


@dataclass
class FieldSpec:
    name: str
    kafka_type: str | None  # None for struct fields
    struct: str | None  # struct class name for struct fields
    is_array: bool
    versions: set[int] = field(default_factory=set)
    nullable_versions: set[int] = field(default_factory=set)
    tag: int | None = None
    default: Any = None  # python literal value (already converted), or _STRUCT_DEFAULT
    has_explicit_default: bool = False

    @property
    def nullable(self) -> bool:
        return bool(self.nullable_versions)

    def shape(self) -> tuple[Any, ...]:
        return (
            self.name,
            self.kafka_type,
            self.struct,
            self.is_array,
            tuple(sorted(self.versions)),
            tuple(sorted(self.nullable_versions)),
            self.tag,
            repr(self.default),
        )


@dataclass
class StructSpec:
    name: str
    versions: set[int] = field(default_factory=set)
    fields: list[FieldSpec] = field(default_factory=list)
    # The ordered non-tagged field names seen in each version, to validate the merge.
    version_orders: dict[int, list[str]] = field(default_factory=dict)

    def field_by_name(self, name: str) -> FieldSpec | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None

    def shape(self) -> tuple[Any, ...]:
        return (tuple(sorted(self.versions)), tuple(f.shape() for f in self.fields))


@dataclass
class MessageSpec:
    kind: str  # "request" | "response"
    root: str  # root class name
    structs: dict[str, StructSpec]  # by (possibly renamed) class name, root included


@dataclass
class ApiSpec:
    api_key: int
    name: str  # kio snake name
    min_version: int
    max_version: int
    flexible_versions: set[int]
    request: MessageSpec
    response: MessageSpec
    renamed: dict[str, str] = field(default_factory=dict)
    # Where the schema came from, for the generated module's header; "" means kio.
    source: str = ""

    @property
    def flexible_min_version(self) -> int:
        return min(self.flexible_versions) if self.flexible_versions else NEVER_FLEXIBLE


NEVER_FLEXIBLE = 32767


class StructDefault:
    """Marker default: a default-constructed instance of the field's struct."""

    def __repr__(self) -> str:
        return "<struct default>"


STRUCT_DEFAULT = StructDefault()


def _load(path: str) -> type[Any]:
    module_name, class_name = path.split(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    assert isinstance(cls, type)
    return cls


def _unwrap(tp: Any) -> tuple[Any, bool]:
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        assert len(args) == 1, tp
        return args[0], True
    return tp, False


def _convert_default(value: Any, kafka_type: str | None, is_array: bool) -> Any:
    """Turn a kio default into the plain Python value our classes use."""
    if value is None and is_array:
        return None
    if value is None:
        if kafka_type == "datetime_i64":
            return -1
        if kafka_type == "uuid":
            return uuid.UUID(int=0)
        return None
    if isinstance(value, tuple):
        assert value == (), value
        return []
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1000)
    if isinstance(value, enum.Enum):
        return int(value.value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bytes):
        return bytes(value)
    if isinstance(value, uuid.UUID):
        return value
    if dataclasses.is_dataclass(value):
        return STRUCT_DEFAULT
    raise TypeError(f"unsupported default {value!r}")


def implicit_default(f: FieldSpec) -> Any:
    if f.is_array:
        return None if f.nullable and not f.has_explicit_default else []
    if f.struct is not None:
        return None if f.nullable else STRUCT_DEFAULT
    kt = f.kafka_type
    if kt == "uuid":
        return uuid.UUID(int=0)
    if kt == "datetime_i64":
        return -1 if f.nullable else 0
    if f.nullable or kt == "records":
        return None
    if kt == "bool":
        return False
    if kt == "float64":
        return 0.0
    if kt == "string":
        return ""
    if kt == "bytes":
        return b""
    return 0


class _Builder:
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.structs: dict[str, StructSpec] = {}
        # class object -> name, to detect two different parents using one name differently
        self.root: str | None = None

    def add(self, cls: type[Any], version: int) -> None:
        name = cls.__name__
        if self.root is None:
            self.root = name
        assert self.root == name, (self.root, name)
        self._walk(cls, version)

    def _walk(self, cls: type[Any], version: int) -> None:
        spec = self.structs.setdefault(cls.__name__, StructSpec(cls.__name__))
        if version in spec.versions:
            # Same struct name reached twice in one version: must be the same definition.
            seen = [f.name for f in dataclasses.fields(cls) if "tag" not in f.metadata]
            if spec.version_orders[version] != seen:
                raise ValueError(f"struct {cls.__name__} has two shapes in v{version}")
            return
        spec.versions.add(version)
        order: list[str] = []
        prev_index = -1
        for fld in dataclasses.fields(cls):
            tp, nullable = _unwrap(fld.type)
            is_array = typing.get_origin(tp) is tuple
            if is_array:
                tp = typing.get_args(tp)[0]
                tp, _elem_nullable = _unwrap(tp)  # only uuid elements, never null for us
            struct_name: str | None = None
            kafka_type: str | None = fld.metadata.get("kafka_type")
            if dataclasses.is_dataclass(tp):
                assert isinstance(tp, type)
                struct_name = tp.__name__
                kafka_type = None
                self._walk(tp, version)
            else:
                assert kafka_type in PRIMITIVE_TYPES, (cls, fld.name, kafka_type)
            tag = fld.metadata.get("tag")
            existing = spec.field_by_name(fld.name)
            if existing is None:
                existing = FieldSpec(
                    name=fld.name,
                    kafka_type=kafka_type,
                    struct=struct_name,
                    is_array=is_array,
                    tag=tag,
                )
                if tag is None:
                    spec.fields.insert(prev_index + 1, existing)
                else:
                    spec.fields.append(existing)
            else:
                if (existing.kafka_type, existing.struct, existing.is_array, existing.tag) != (
                    kafka_type,
                    struct_name,
                    is_array,
                    tag,
                ):
                    raise ValueError(f"field {cls.__name__}.{fld.name} changes shape at v{version}")
            existing.versions.add(version)
            if nullable:
                existing.nullable_versions.add(version)
            if fld.default is not dataclasses.MISSING:
                existing.default = _convert_default(fld.default, kafka_type, is_array)
                existing.has_explicit_default = True
            if tag is None:
                order.append(fld.name)
                prev_index = spec.fields.index(existing)
        spec.version_orders[version] = order

    def finish(self) -> MessageSpec:
        assert self.root is not None
        for spec in self.structs.values():
            # Keep non-tagged fields in merged order, tagged ones sorted by tag, last.
            plain = [f for f in spec.fields if f.tag is None]
            tagged = sorted((f for f in spec.fields if f.tag is not None), key=lambda f: f.tag or 0)
            spec.fields = plain + tagged
            for v, order in spec.version_orders.items():
                merged = [f.name for f in plain if v in f.versions]
                if merged != order:
                    raise ValueError(f"cannot merge field order of {spec.name} at v{v}")
            for f in spec.fields:
                if not f.has_explicit_default:
                    f.default = implicit_default(f)
        return MessageSpec(kind=self.kind, root=self.root, structs=self.structs)


def _rename_collisions(api: ApiSpec) -> None:
    """Request and response of one API share a module: rename clashing response structs.

    A struct name defined by both the request and the response with the same merged shape is
    emitted once and shared. With different shapes the response's struct is renamed by
    appending ``Response`` (repeatedly if that name is taken too); field references are
    updated accordingly.
    """
    req, resp = api.request.structs, api.response.structs

    def same(a: str, b: str, seen: set[str]) -> bool:
        if a in seen:
            return True
        seen.add(a)
        sa, sb = req[a], resp[b]
        if sa.shape() != sb.shape():
            return False
        return all(same(f.struct, f.struct, seen) for f in sa.fields if f.struct is not None)

    renames: dict[str, str] = {}
    for name in list(resp):
        if name == api.response.root or name not in req:
            continue
        if same(name, name, set()):
            continue
        new = name + "Response"
        while new in req or new in resp:
            new += "Response"
        renames[name] = new
    api.renamed = dict(renames)
    if not renames:
        return
    new_structs: dict[str, StructSpec] = {}
    for name, spec in resp.items():
        spec.name = renames.get(name, name)
        for f in spec.fields:
            if f.struct is not None:
                f.struct = renames.get(f.struct, f.struct)
        new_structs[spec.name] = spec
    api.response.structs = new_structs


def build_api(api_key: int) -> ApiSpec:
    from kio.schema.index import api_key_map, schema_name_map
    from kio.static.constants import EntityType

    name = api_key_map[api_key]
    version_map = schema_name_map[name]
    versions = sorted(version_map)
    req_b, resp_b = _Builder("request"), _Builder("response")
    flexible: set[int] = set()
    for v in versions:
        req_cls = _load(version_map[v][EntityType.request])
        resp_cls = _load(version_map[v][EntityType.response])
        if req_cls.__flexible__:
            flexible.add(v)
        assert bool(req_cls.__flexible__) == bool(resp_cls.__flexible__)
        assert int(req_cls.__version__) == v and int(req_cls.__api_key__) == api_key
        req_b.add(req_cls, v)
        resp_b.add(resp_cls, v)
    if flexible:
        assert flexible == set(range(min(flexible), versions[-1] + 1)), name
    api = ApiSpec(
        api_key=api_key,
        name=name,
        min_version=versions[0],
        max_version=versions[-1],
        flexible_versions=flexible,
        request=req_b.finish(),
        response=resp_b.finish(),
    )
    _rename_collisions(api)
    return api


def build_all() -> list[ApiSpec]:
    """Every API: kio's, plus the hand-written controller-to-broker APIs (keys 4-7)."""
    from kio.schema.index import api_key_map

    from pydmq.protocol.codegen.legacy import build_legacy

    apis = [build_api(k) for k in sorted(api_key_map)]
    legacy = build_legacy()
    clash = {a.api_key for a in legacy} & set(api_key_map)
    if clash:
        raise ValueError(f"kio now defines the hand-written API keys {sorted(clash)}")
    return sorted(apis + legacy, key=lambda a: a.api_key)
