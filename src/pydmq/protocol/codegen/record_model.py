"""Schemas of the records pydmq stores, read from ``codegen/schemas/records/*.json``.

One JSON file declares one record family: the records of ``__consumer_offsets`` written by
one coordinator, or the metadata records of ``__cluster_metadata``. Its shape follows Kafka's
JSON message specs (our own files, describing our own layouts):

- ``about`` (a string, or a list of strings joined by spaces), ``module`` (the generated
  module's dotted name), ``frame`` (``version``: every key and value starts with an int16
  version, and a key's version says which record it is; ``typeAndVersion``: every record
  starts with an int16 ``recordType`` and an int16 version), ``trailingBytes`` (``ignore`` or
  ``reject`` bytes after the last field), optional ``union`` (the name of the type alias of
  every record of a ``typeAndVersion`` family) and ``commonStructs``, then ``records``.
- a record: ``name``, ``about``, ``validVersions`` (``"3"``, ``"0-1"``), ``kind`` (``key`` or
  ``value``; ``version`` frame) or ``recordType`` (``typeAndVersion`` frame), optional
  ``versionField`` (a key whose version is a field of its class, e.g. the kind of a consumer
  group key), and ``fields``.
- a field: ``name``, ``type`` (``bool``, ``int8``, ``int16``, ``int32``, ``int64``,
  ``uint16``, ``float64``, ``uuid``, ``string``, ``bytes``, ``tristate``, a struct name, or ``[]`` and one of
  those for an array; a struct declared inline has ``fields``), ``versions`` (``"0+"``,
  ``"5,7-8"``), optional ``nullableVersions``, ``default`` (a field with one is optional in the
  class; a field absent from some versions needs one), ``nullValue`` (the int written for
  null in a nullable integer), ``validValues`` / ``minValue`` (an integer or bool outside them
  does not decode), ``about``.
- flexible versions (Kafka's ``flexibleVersions`` of a record, ``"1+"`` or ``"none"``, the
  default): in them strings, bytes and arrays are compact (unsigned varint lengths) and every
  struct ends with a tagged-fields section. A field with ``taggedVersions`` and ``tag`` (an
  integer scalar with a default, in flexible versions only) lives in that section, written
  only when it differs from its default; unknown tags are skipped when read.

``tristate`` is an int8 read as ``bool | None``: 1 true, -1 false, 0 null (Kafka's encoding of
the flags of BrokerRegistrationChangeRecord). A string with a null default is written empty
when null. Arrays are tuples in Python. Loading checks every rule above and raises
:class:`SchemaError` naming the file and the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "RECORD_SCHEMA_DIR",
    "RecordFamily",
    "RecordField",
    "RecordSchema",
    "SchemaError",
    "StructSchema",
    "load_families",
    "load_family",
]

RECORD_SCHEMA_DIR = Path(__file__).resolve().parent / "schemas" / "records"

INT_TYPES = frozenset({"int8", "int16", "int32", "int64", "uint16"})
PRIMITIVE_TYPES = INT_TYPES | {"bool", "tristate", "float64", "uuid", "string", "bytes"}
ARRAY_TYPES = frozenset({"int8", "int16", "int32", "int64"})  # read and written in bulk


class SchemaError(ValueError):
    """A record schema file that breaks a rule of :mod:`record_model`."""


class _NoDefault:
    def __repr__(self) -> str:
        return "<no default>"


NO_DEFAULT: Any = _NoDefault()


@dataclass(frozen=True)
class RecordField:
    """One field: its wire type (an element type when ``is_array``) and its constraints."""

    name: str
    type: str  # a primitive type or a struct name
    is_array: bool
    versions: frozenset[int]
    nullable_versions: frozenset[int]
    default: Any  # NO_DEFAULT, None, [] or a scalar
    null_value: int | None
    valid_values: tuple[int, ...] | None
    min_value: int | None
    about: str
    tag: int | None = None  # a tagged field's tag (its versions are its taggedVersions)

    @property
    def is_struct(self) -> bool:
        return self.type not in PRIMITIVE_TYPES

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT


@dataclass(frozen=True)
class StructSchema:
    """A class of the generated module: a record, or a struct its fields contain."""

    name: str
    about: str
    versions: frozenset[int]  # the versions its fields are read and written at
    fields: tuple[RecordField, ...]
    flexible: frozenset[int] = frozenset()  # the versions with compact types and tagged fields


@dataclass(frozen=True)
class RecordSchema:
    """A record (key or value) and the versions its first int16 may carry."""

    struct: StructSchema
    versions: frozenset[int]
    kind: str  # "key" | "value" | "record" (typeAndVersion frame)
    record_type: int | None
    version_field: str | None

    @property
    def name(self) -> str:
        return self.struct.name


@dataclass(frozen=True)
class RecordFamily:
    """Every record of one schema file, which becomes one generated module."""

    source: str  # the schema file's name
    module: str
    about: str
    frame: str  # "version" | "typeAndVersion"
    reject_trailing_bytes: bool
    union: str | None
    structs: tuple[StructSchema, ...]  # children before parents, records included
    records: tuple[RecordSchema, ...]


def parse_versions(text: str, valid: frozenset[int] | None = None) -> frozenset[int]:
    """``"3"``, ``"0-1"``, ``"3+"`` (up to the highest of ``valid``), ``"5,7-8"``."""
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if part.endswith("+"):
            if valid is None:
                raise SchemaError(f"open version range {text!r} outside a record")
            lo = int(part[:-1])
            out.update(range(lo, max(valid) + 1))
        elif "-" in part:
            lo_s, hi_s = part.split("-")
            out.update(range(int(lo_s), int(hi_s) + 1))
        else:
            out.add(int(part))
    if not out:
        raise SchemaError(f"empty version range {text!r}")
    return frozenset(out)


def _about(value: Any) -> str:
    if isinstance(value, list):
        return " ".join(str(v) for v in value)
    return str(value)


def _check_keys(obj: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = set(obj) - allowed
    if unknown:
        raise SchemaError(f"{where}: unknown keys {sorted(unknown)}")


class _Loader:
    def __init__(self, source: str) -> None:
        self.source = source
        self.structs: list[StructSchema] = []

    def struct(
        self,
        name: str,
        about: str,
        fields: list[dict[str, Any]],
        valid: frozenset[int],
        flexible: frozenset[int] = frozenset(),
    ) -> StructSchema:
        where = f"{self.source}: {name}"
        if any(s.name == name for s in self.structs):
            raise SchemaError(f"{where}: struct defined twice")
        parsed = tuple(self.field(f, valid, flexible, where) for f in fields)
        names = [f.name for f in parsed]
        if len(set(names)) != len(names):
            raise SchemaError(f"{where}: duplicate field names")
        tags = [f.tag for f in parsed if f.tag is not None]
        if len(set(tags)) != len(tags):
            raise SchemaError(f"{where}: duplicate tags")
        defaults = [f.has_default for f in parsed]
        if defaults != sorted(defaults):
            raise SchemaError(f"{where}: a field without a default follows one with a default")
        spec = StructSchema(name, about, valid, parsed, flexible)
        self.structs.append(spec)
        return spec

    def field(
        self, obj: dict[str, Any], valid: frozenset[int], flexible: frozenset[int], where: str
    ) -> RecordField:
        _check_keys(
            obj,
            {"name", "type", "versions", "nullableVersions", "default", "nullValue"}
            | {"validValues", "minValue", "about", "fields", "taggedVersions", "tag"},
            where,
        )
        name = obj["name"]
        where = f"{where}.{name}"
        type_ = str(obj["type"])
        is_array = type_.startswith("[]")
        elem = type_[2:] if is_array else type_
        tag = obj.get("tag")
        if (tag is None) == ("taggedVersions" in obj) or ("versions" in obj) == (tag is not None):
            raise SchemaError(f"{where}: a field has versions, or taggedVersions and a tag")
        versions = parse_versions(obj["versions" if tag is None else "taggedVersions"], valid)
        if tag is not None and (
            not versions <= flexible
            or is_array
            or elem not in INT_TYPES
            or "default" not in obj
            or not isinstance(tag, int)
        ):
            raise SchemaError(f"{where}: a tagged field is an integer with a default, flexible")
        nullable = (
            parse_versions(obj["nullableVersions"], valid)
            if "nullableVersions" in obj
            else frozenset()
        )
        if not versions <= valid or not nullable <= versions:
            raise SchemaError(f"{where}: versions outside the record's")
        if "fields" in obj:
            about = f"An element of ``{where.split(': ')[-1]}``."
            self.struct(elem, about, obj["fields"], valid, flexible)
        elif elem not in PRIMITIVE_TYPES and not any(s.name == elem for s in self.structs):
            raise SchemaError(f"{where}: unknown type {elem!r}")
        f = RecordField(
            name=name,
            type=elem,
            is_array=is_array,
            versions=versions,
            nullable_versions=nullable,
            default=obj.get("default", NO_DEFAULT),
            null_value=obj.get("nullValue"),
            valid_values=tuple(obj["validValues"]) if "validValues" in obj else None,
            min_value=obj.get("minValue"),
            about=_about(obj.get("about", "")),
            tag=tag,
        )
        self._check_field(f, valid, where)
        return f

    @staticmethod
    def _check_field(f: RecordField, valid: frozenset[int], where: str) -> None:
        scalar_int = not f.is_array and f.type in INT_TYPES
        if f.is_array and f.type == "tristate":
            raise SchemaError(f"{where}: a tristate is a single flag, never an array element")
        if f.nullable_versions:
            if f.nullable_versions != f.versions:
                raise SchemaError(f"{where}: nullable in some of its versions only")
            if not f.is_array and f.type not in ("string", "bytes") and not scalar_int:
                raise SchemaError(f"{where}: a {f.type} cannot be nullable")
            if f.is_array and f.type not in ARRAY_TYPES and not f.is_struct:
                raise SchemaError(f"{where}: only integer and struct arrays can be nullable")
        if (f.null_value is not None) != (scalar_int and bool(f.nullable_versions)):
            raise SchemaError(f"{where}: nullValue goes with nullable integers, and only there")
        constrained = f.valid_values is not None or f.min_value is not None
        if constrained and not (scalar_int or (f.type == "bool" and f.min_value is None)):
            raise SchemaError(f"{where}: validValues and minValue constrain integers")
        if f.versions != valid and not f.has_default:
            raise SchemaError(f"{where}: absent from some versions, so it needs a default")
        if f.default is None and not (f.nullable_versions or f.type in ("string", "tristate")):
            raise SchemaError(f"{where}: a null default for a field that cannot be null")
        if f.default == [] and not f.is_array:
            raise SchemaError(f"{where}: an empty-array default for a scalar")

    def record(self, obj: dict[str, Any], frame: str) -> RecordSchema:
        _check_keys(
            obj,
            {"name", "kind", "recordType", "validVersions", "versionField", "about", "fields"}
            | {"flexibleVersions"},
            f"{self.source}: record",
        )
        valid = parse_versions(obj["validVersions"])
        flexible_text = obj.get("flexibleVersions", "none")
        flexible = frozenset() if flexible_text == "none" else parse_versions(flexible_text, valid)
        if not flexible <= valid:
            raise SchemaError(f"{self.source}: {obj['name']}: flexible versions outside its own")
        kind = obj.get("kind", "record")
        framed_by_type = frame == "typeAndVersion"
        if framed_by_type == (kind in ("key", "value")) or framed_by_type != ("recordType" in obj):
            raise SchemaError(f"{self.source}: {obj['name']}: kind or recordType wrong for {frame}")
        version_field = obj.get("versionField")
        if version_field is not None and kind != "key":
            raise SchemaError(f"{self.source}: {obj['name']}: only a key has a versionField")
        struct = self.struct(obj["name"], _about(obj["about"]), obj["fields"], valid, flexible)
        return RecordSchema(struct, valid, kind, obj.get("recordType"), version_field)


def load_family(path: Path) -> RecordFamily:
    obj = json.loads(path.read_text())
    _check_keys(
        obj,
        {"about", "module", "frame", "trailingBytes", "union", "commonStructs", "records"},
        path.name,
    )
    frame = obj["frame"]
    if frame not in ("version", "typeAndVersion") or obj["trailingBytes"] not in (
        "ignore",
        "reject",
    ):
        raise SchemaError(f"{path.name}: unknown frame or trailingBytes")
    loader = _Loader(path.name)
    every = frozenset(range(0, 1 << 15))
    for common in obj.get("commonStructs", []):
        _check_keys(common, {"name", "about", "fields"}, f"{path.name}: commonStructs")
        loader.struct(common["name"], _about(common["about"]), common["fields"], every)
    records = tuple(loader.record(r, frame) for r in obj["records"])
    keys = [r for r in records if r.kind == "key"]
    for i, a in enumerate(keys):
        if any(a.versions & b.versions for b in keys[i + 1 :]):
            raise SchemaError(f"{path.name}: two keys share a version")
    types = [r.record_type for r in records if r.record_type is not None]
    if len(set(types)) != len(types):
        raise SchemaError(f"{path.name}: two records share a recordType")
    if (frame == "typeAndVersion") != ("union" in obj):
        raise SchemaError(f"{path.name}: a union names the records of a typeAndVersion frame")
    return RecordFamily(
        source=path.name,
        module=obj["module"],
        about=_about(obj["about"]),
        frame=frame,
        reject_trailing_bytes=obj["trailingBytes"] == "reject",
        union=obj.get("union"),
        structs=tuple(loader.structs),
        records=records,
    )


def load_families(schema_dir: Path = RECORD_SCHEMA_DIR) -> list[RecordFamily]:
    """Every family, in file-name order."""
    return [load_family(p) for p in sorted(schema_dir.glob("*.json"))]
