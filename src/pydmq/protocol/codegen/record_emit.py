"""Emit one Python codec module per record family (see :mod:`record_model`).

Records are values: each struct becomes a frozen slotted dataclass (fields in schema order,
positional, arrays as tuples) with straight-line ``_read_*``/``_write_*`` functions over the
bounded :class:`~pydmq.protocol.primitives.Reader` and the
:class:`~pydmq.protocol.primitives.Writer`. A record class encodes itself (``encode()``:
its frame, then its fields at its highest version, or at the version its ``versionField``
holds); the module decodes keys (``decode_key``, dispatching on the key's version), values
(``decode_<value>``) or, for a ``typeAndVersion`` family, every record (``decode_record``).
Decoders raise :class:`~pydmq.protocol.errors.MalformedFrameError` on anything malformed.
"""

from __future__ import annotations

import re
import textwrap

from pydmq.protocol.codegen.emit import Lines
from pydmq.protocol.codegen.record_model import (
    ARRAY_TYPES,
    RecordFamily,
    RecordField,
    RecordSchema,
    StructSchema,
)

__all__ = ["emit_family", "module_path"]

_PY_SCALAR = {
    "bool": "bool",
    "tristate": "bool",
    "float64": "float",
    "uuid": "UUID",
    "string": "str",
    "bytes": "bytes",
}


def module_path(family: RecordFamily) -> str:
    """The generated module's path below the source root, e.g. ``pydmq/groups/x.py``."""
    return family.module.replace(".", "/") + ".py"


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _py_type(f: RecordField) -> str:
    base = f.type if f.is_struct else _PY_SCALAR.get(f.type, "int")
    if f.is_array:
        base = f"tuple[{base}, ...]"
    nullable = f.nullable_versions or f.default is None or f.type == "tristate"
    return f"{base} | None" if nullable else base


def _default_expr(f: RecordField) -> str:
    return "()" if f.default == [] else repr(f.default)


def _version_test(versions: frozenset[int]) -> str:
    lo, hi = min(versions), max(versions)
    if len(versions) == hi - lo + 1:
        return f"version == {lo}" if lo == hi else f"{lo} <= version <= {hi}"
    return f"version in {tuple(sorted(versions))!r}"


def _version_cond(versions: frozenset[int], universe: frozenset[int]) -> str | None:
    """A test of ``version`` true for ``versions`` among ``universe``; None if always."""
    return None if versions == universe else _version_test(versions)


_NEVER = "never"
_ALWAYS = "always"
_SOMETIMES = "sometimes"


def _flex_mode(versions: frozenset[int], spec: StructSchema) -> str:
    """Whether ``versions`` (a field's, or the struct's) are flexible in ``spec``: never,
    always, or in some (then the generated code tests its ``flex`` variable)."""
    flexible = versions & spec.flexible
    if not flexible:
        return _NEVER
    return _ALWAYS if flexible == versions else _SOMETIMES


def _flexed(
    obj: str, method: str, arg: str, flex: str, classic: str | None = None, classic_arg: str = ""
) -> str:
    """The call of ``obj``'s ``method`` in the field's versions: its ``compact_`` form when
    flexible (``classic`` names the non-flexible method when it is not ``method`` itself)."""
    compact = (
        method if method.startswith("compact_") or method == "uvarint" else f"compact_{method}"
    )
    plain = classic or method
    plain_arg = classic_arg or arg
    if flex == _NEVER:
        return f"{obj}.{plain}({plain_arg})"
    if flex == _ALWAYS:
        return f"{obj}.{compact}({arg})"
    return f"({obj}.{compact}({arg}) if flex else {obj}.{plain}({plain_arg}))"


def _docstring(out: Lines, text: str) -> None:
    width = 96 - 4 * out.level
    lines = textwrap.wrap(text, width) or [""]
    if len(lines) == 1 and len(lines[0]) + 6 <= width:
        out.add(f'"""{lines[0]}"""')
        return
    out.add(f'"""{lines[0]}')
    for line in lines[1:]:
        out.add(line)
    out.add('"""')


class FamilyEmitter:
    """Builds the text of one family's module."""

    def __init__(self, family: RecordFamily) -> None:
        self.family = family
        self.records = {r.name: r for r in family.records}
        self.uses_uuid = any(f.type == "uuid" for s in family.structs for f in s.fields)

    # -- classes -----------------------------------------------------------------------
    def emit_class(self, out: Lines, spec: StructSchema) -> None:
        record = self.records.get(spec.name)
        out.add("@dataclass(frozen=True, slots=True)")
        out.add(f"class {spec.name}:")
        out.indent()
        _docstring(out, spec.about)
        out.add()
        if record is not None:
            if record.record_type is not None:
                out.add(f"record_type: ClassVar[int] = {record.record_type}")
            out.add(f"LOWEST_SUPPORTED_VERSION: ClassVar[int] = {min(record.versions)}")
            out.add(f"HIGHEST_SUPPORTED_VERSION: ClassVar[int] = {max(record.versions)}")
            out.add()
            if record.version_field is not None:
                out.add(f"{record.version_field}: int")
                _docstring(out, "The version this key is written at, which says which record.")
        for f in spec.fields:
            default = f" = {_default_expr(f)}" if f.has_default else ""
            out.add(f"{f.name}: {_py_type(f)}{default}")
            if f.about:
                _docstring(out, f.about)
        if record is not None:
            out.add()
            self.emit_encode(out, record)
        out.dedent()
        out.add()
        out.add()

    def emit_encode(self, out: Lines, record: RecordSchema) -> None:
        # A record with flexible versions may be written at an older one (Kafka picks the
        # version of a transaction's record by the finalized transaction.version).
        chosen = record.version_field is None and bool(record.struct.flexible)
        if chosen:
            out.add(f"def encode(self, version: int = {max(record.versions)}) -> bytes:")
        else:
            out.add("def encode(self) -> bytes:")
        out.indent()
        if chosen:
            frame = "int16 version" if record.record_type is None else "int16 record type, version"
            _docstring(out, f"The record's bytes at ``version``: {frame}, then its fields.")
            version = "version"
            out.add(f"if not ({_version_test(record.versions)}):")
            out.indent()
            out.add(f'raise ValueError(f"{record.name} has no version {{version}}")')
            out.dedent()
        elif record.version_field is not None:
            _docstring(out, "The key's bytes: its int16 version, then its fields.")
            version = "version"
            out.add(f"version = self.{record.version_field}")
            out.add(f"if not ({_version_test(record.versions)}):")
            out.indent()
            out.add(f'raise ValueError(f"{record.name} has no version {{version}}")')
            out.dedent()
        else:
            version = str(max(record.versions))
            frame = "int16 version" if record.record_type is None else "int16 record type, version"
            _docstring(out, f"The record's bytes: {frame}, then its fields at version {version}.")
        out.add("w = Writer()")
        if record.record_type is not None:
            out.add(f"w.int16({record.record_type})")
        out.add(f"w.int16({version})")
        out.add(f"_write_{record.name}(w, self, {version})")
        out.add("return w.getvalue()")
        out.dedent()

    # -- readers -----------------------------------------------------------------------
    def _read_value(self, out: Lines, f: RecordField, target: str, flex: str) -> None:
        """Lines that set ``target`` to the field's value (in every version it has); ``flex``
        is :func:`_flex_mode` of the field."""
        nullable = bool(f.nullable_versions)
        if f.is_array:
            length = "nullable_array_length" if nullable else "array_length"
            out.add(f"n = {_flexed('r', length, '', flex)}")
            if f.type in ARRAY_TYPES:
                expr = f"tuple(r.{f.type}_array(n))"
            else:
                item = (
                    f"_read_{f.type}(r, version)"
                    if f.is_struct
                    else self._scalar(f.type, False, flex)
                )
                expr = f"tuple([{item} for _ in range(n)])"
            out.add(f"{target} = None if n < 0 else {expr}" if nullable else f"{target} = {expr}")
            return
        if f.is_struct:
            out.add(f"{target} = _read_{f.type}(r, version)")
            return
        if f.type == "tristate":
            out.add("v = r.int8()")
            out.add("if v not in (-1, 0, 1):")
            out.indent()
            out.add(f'raise _invalid("{f.name}", v)')
            out.dedent()
            out.add(f"{target} = None if v == 0 else v == 1")
            return
        checked = f.valid_values is not None or f.min_value is not None or f.null_value is not None
        if not checked:
            out.add(f"{target} = {self._scalar(f.type, nullable, flex)}")
            return
        out.add(f"v = r.{'int8' if f.type == 'bool' else f.type}()")
        bad = []
        if f.valid_values is not None:
            bad.append(f"v not in {f.valid_values!r}")
        if f.min_value is not None:
            bad.append(f"v < {f.min_value}")
        cond = " or ".join(bad)
        if f.null_value is not None:
            guarded = cond if len(bad) == 1 else f"({cond})"
            cond = f"v != {f.null_value} and {guarded}" if cond else ""
            value = f"None if v == {f.null_value} else v"
        else:
            value = "v == 1" if f.type == "bool" else "v"
        if cond:
            out.add(f"if {cond}:")
            out.indent()
            out.add(f'raise _invalid("{f.name}", v)')
            out.dedent()
        out.add(f"{target} = {value}")

    @staticmethod
    def _scalar(type_: str, nullable: bool = False, flex: str = _NEVER) -> str:
        if type_ in ("string", "bytes"):
            return _flexed("r", f"nullable_{type_}" if nullable else type_, "", flex)
        if type_ == "bool":
            return "r.bool()"
        return f"r.{type_}()"

    @staticmethod
    def _flex_variable(out: Lines, spec: StructSchema) -> None:
        """``flex = <test>`` when some versions of ``spec`` are flexible and others are not."""
        if spec.flexible and spec.flexible != spec.versions:
            out.add(f"flex = {_version_test(spec.flexible)}")

    def _read_tagged(self, out: Lines, spec: StructSchema) -> None:
        """The tagged-fields section that ends ``spec`` in its flexible versions: known tags
        set their ``f_`` variable, unknown ones are skipped."""
        mode = _flex_mode(spec.versions, spec)
        if mode == _NEVER:
            return
        if mode == _SOMETIMES:
            out.add("if flex:")
            out.indent()
        out.add("for _ in range(r.tagged_count()):")
        out.indent()
        tagged = [f for f in spec.fields if f.tag is not None]
        out.add(f"{'tag' if tagged else '_'}, end = r.tagged_field_header()")
        for i, f in enumerate(tagged):
            cond = _version_cond(f.versions, spec.flexible)
            test = f"tag == {f.tag}" if cond is None else f"tag == {f.tag} and {cond}"
            out.add(f"{'if' if i == 0 else 'elif'} {test}:")
            out.indent()
            out.add(f"f_{f.name} = r.{f.type}()")
            out.add("r.expect_end_of_tag(end)")
            out.dedent()
        if tagged:
            out.add("else:")
            out.indent()
        out.add("r.raw(end - r.pos)")
        if tagged:
            out.dedent()
        out.dedent()
        if mode == _SOMETIMES:
            out.dedent()

    def emit_reader(self, out: Lines, spec: StructSchema) -> None:
        record = self.records.get(spec.name)
        out.add(f"def _read_{spec.name}(r: Reader, version: int) -> {spec.name}:")
        out.indent()
        args = [] if record is None or record.version_field is None else ["version"]
        self._flex_variable(out, spec)
        for f in spec.fields:
            target = f"f_{f.name}"
            args.append(target)
            if f.tag is not None:
                out.add(f"{target}: {_py_type(f)} = {_default_expr(f)}")
                continue
            cond = _version_cond(f.versions, spec.versions)
            sub = Lines()
            sub.level = out.level if cond is None else out.level + 1
            self._read_value(sub, f, target, _flex_mode(f.versions, spec))
            head = f"{'    ' * sub.level}{target} = "
            *before, last = sub.lines
            if last.startswith(head) and (cond is None or not before):
                # One assignment ends the read: annotate it (a ternary if version-dependent).
                expr = last[len(head) :]
                if cond is not None:
                    expr = f"{expr} if {cond} else {_default_expr(f)}"
                out.lines.extend(before)
                out.add(f"{target}: {_py_type(f)} = {expr}")
                continue
            out.add(f"{target}: {_py_type(f)}")
            if cond is None:
                out.lines.extend(sub.lines)
                continue
            out.add(f"if {cond}:")
            out.lines.extend(sub.lines)
            out.add("else:")
            out.indent()
            out.add(f"{target} = {_default_expr(f)}")
            out.dedent()
        self._read_tagged(out, spec)
        if not spec.fields and not spec.flexible:
            out.add("del r, version")
        out.add(f"return {spec.name}({', '.join(args)})")
        out.dedent()
        out.add()
        out.add()

    # -- writers -----------------------------------------------------------------------
    def _write_value(self, out: Lines, f: RecordField, value: str, flex: str) -> None:
        nullable = bool(f.nullable_versions)
        if f.is_array:
            if nullable:
                out.add(f"if {value} is None:")
                out.indent()
                out.add(_flexed("w", "uvarint", "0", flex, "int32", "-1"))
                out.dedent()
                out.add("else:")
                out.indent()
            out.add(_flexed("w", "compact_array_length", f"len({value})", flex, "int32"))
            if f.type in ARRAY_TYPES:
                out.add(f"w.{f.type}_array(list({value}))")
            else:
                out.add(f"for e in {value}:")
                out.indent()
                if f.is_struct:
                    out.add(f"_write_{f.type}(w, e, version)")
                else:
                    out.add(f"w.{f.type}(e)")
                out.dedent()
            if nullable:
                out.dedent()
            return
        if f.is_struct:
            out.add(f"_write_{f.type}(w, {value}, version)")
        elif f.type == "tristate":
            out.add(f"w.int8(0 if {value} is None else 1 if {value} else -1)")
        elif f.null_value is not None:
            out.add(f"w.{f.type}({f.null_value} if {value} is None else {value})")
        elif f.type in ("string", "bytes"):
            out.add(_flexed("w", f"nullable_{f.type}" if nullable else f.type, value, flex))
        elif nullable:
            out.add(f"w.nullable_{f.type}({value})")
        else:
            out.add(f"w.{f.type}({value})")

    @staticmethod
    def _write_tagged(out: Lines, spec: StructSchema) -> None:
        """The tagged-fields section of ``spec`` in its flexible versions: each tagged field
        whose value is not its default, in tag order."""
        mode = _flex_mode(spec.versions, spec)
        if mode == _NEVER:
            return
        if mode == _SOMETIMES:
            out.add("if flex:")
            out.indent()
        tagged = sorted((f for f in spec.fields if f.tag is not None), key=lambda f: f.tag or 0)
        if not tagged:
            out.add("w.uvarint(0)")
        else:
            out.add("tagged: dict[int, bytes] = {}")
            for f in tagged:
                cond = _version_cond(f.versions, spec.flexible)
                test = f"msg.{f.name} != {_default_expr(f)}"
                out.add(f"if {test}:" if cond is None else f"if {cond} and {test}:")
                out.indent()
                out.add("t = Writer()")
                out.add(f"t.{f.type}(msg.{f.name})")
                out.add(f"tagged[{f.tag}] = t.getvalue()")
                out.dedent()
            out.add("w.tagged_fields(tagged)")
        if mode == _SOMETIMES:
            out.dedent()

    def emit_writer(self, out: Lines, spec: StructSchema) -> None:
        out.add(f"def _write_{spec.name}(w: Writer, msg: {spec.name}, version: int) -> None:")
        out.indent()
        self._flex_variable(out, spec)
        for f in spec.fields:
            if f.tag is not None:
                continue
            cond = _version_cond(f.versions, spec.versions)
            if cond is not None:
                out.add(f"if {cond}:")
                out.indent()
            self._write_value(out, f, f"msg.{f.name}", _flex_mode(f.versions, spec))
            if cond is not None:
                out.dedent()
        self._write_tagged(out, spec)
        if not spec.fields and not spec.flexible:
            out.add("del w, msg, version")
        out.dedent()
        out.add()
        out.add()

    # -- entry points ------------------------------------------------------------------
    def _trailing(self, out: Lines, value: str) -> None:
        if self.family.reject_trailing_bytes:
            out.add("if r.remaining:")
            out.indent()
            out.add(
                f'raise MalformedFrameError(f"{{r.remaining}} trailing bytes after '
                f'{{type({value}).__name__}}")'
            )
            out.dedent()

    def emit_decode_key(self, out: Lines, keys: list[RecordSchema]) -> None:
        union = " | ".join(k.name for k in keys)
        out.add(f"def decode_key(buf: Buffer) -> {union}:")
        out.indent()
        _docstring(out, "The key in ``buf``, of the record its int16 version says.")
        out.add("r = Reader(buf)")
        out.add("version = r.int16()")
        out.add(f"key: {union}")
        for i, k in enumerate(keys):
            out.add(f"{'if' if i == 0 else 'elif'} {_version_test(k.versions)}:")
            out.indent()
            out.add(f"key = _read_{k.name}(r, version)")
            out.dedent()
        out.add("else:")
        out.indent()
        out.add('raise MalformedFrameError(f"unknown key version {version}")')
        out.dedent()
        self._trailing(out, "key")
        out.add("return key")
        out.dedent()
        out.add()
        out.add()

    def emit_decode_value(self, out: Lines, record: RecordSchema) -> None:
        out.add(f"def decode_{_snake(record.name)}(buf: Buffer) -> {record.name}:")
        out.indent()
        _docstring(out, f"The {record.name} in ``buf``.")
        out.add("r = Reader(buf)")
        out.add("version = r.int16()")
        out.add(f"if not ({_version_test(record.versions)}):")
        out.indent()
        out.add(f'raise MalformedFrameError(f"unknown {record.name} version {{version}}")')
        out.dedent()
        out.add(f"value = _read_{record.name}(r, version)")
        self._trailing(out, "value")
        out.add("return value")
        out.dedent()
        out.add()
        out.add()

    def emit_decode_record(self, out: Lines) -> None:
        union = self.family.union
        assert union is not None
        out.add(f"_READERS: dict[int, tuple[int, int, Callable[[Reader, int], {union}]]] = {{")
        out.indent()
        for r in sorted(self.family.records, key=lambda r: r.record_type or 0):
            lo, hi = min(r.versions), max(r.versions)
            out.add(f"{r.record_type}: ({lo}, {hi}, _read_{r.name}),")
        out.dedent()
        out.add("}")
        out.add()
        out.add()
        out.add(f"def decode_record(buf: Buffer) -> {union}:")
        out.indent()
        _docstring(
            out, "The record in ``buf``: its int16 record type and version, then its fields."
        )
        out.add("r = Reader(buf)")
        out.add("record_type = r.int16()")
        out.add("version = r.int16()")
        out.add("reader = _READERS.get(record_type)")
        out.add("if reader is None:")
        out.indent()
        out.add('raise MalformedFrameError(f"unknown record type {record_type}")')
        out.dedent()
        out.add("lo, hi, read = reader")
        out.add("if not lo <= version <= hi:")
        out.indent()
        out.add(
            'raise MalformedFrameError(f"unsupported version {version} of record type '
            '{record_type}")'
        )
        out.dedent()
        out.add("record = read(r, version)")
        self._trailing(out, "record")
        out.add("return record")
        out.dedent()
        out.add()
        out.add()

    def emit(self) -> str:
        fam = self.family
        body = Lines()
        uses_invalid = any(
            f.type == "tristate" or f.valid_values is not None or f.min_value is not None
            for s in fam.structs
            for f in s.fields
        )
        if uses_invalid:
            body.add("def _invalid(name: str, value: int) -> MalformedFrameError:")
            body.indent()
            body.add('return MalformedFrameError(f"invalid {name} {value}")')
            body.dedent()
            body.add()
            body.add()
        for spec in fam.structs:
            self.emit_class(body, spec)
        if fam.union is not None:
            names = " | ".join(r.name for r in fam.records)
            body.add(f"{fam.union}: TypeAlias = {names}")
            body.add()
            body.add(f"RECORD_CLASSES: dict[int, type[{fam.union}]] = {{")
            body.indent()
            for r in sorted(fam.records, key=lambda r: r.record_type or 0):
                body.add(f"{r.record_type}: {r.name},")
            body.dedent()
            body.add("}")
            _docstring(body, "Every record class, by record type.")
            body.add()
            body.add()
        for spec in fam.structs:
            self.emit_reader(body, spec)
            self.emit_writer(body, spec)
        exports = [s.name for s in fam.structs]
        keys = [r for r in fam.records if r.kind == "key"]
        if keys:
            versions = sorted(v for k in keys for v in k.versions)
            exports += ["KEY_VERSIONS", "decode_key"]
            self.emit_decode_key(body, keys)
        for r in fam.records:
            if r.kind == "value":
                exports.append(f"decode_{_snake(r.name)}")
                self.emit_decode_value(body, r)
        if fam.frame == "typeAndVersion":
            assert fam.union is not None
            exports += ["RECORD_CLASSES", fam.union, "decode_record"]
            self.emit_decode_record(body)

        head = Lines()
        head.add(f'"""Generated by ``python -m pydmq.protocol.codegen`` from {fam.source}.')
        head.add()
        for line in textwrap.wrap(fam.about, 96):
            head.add(line)
        head.add()
        head.add("Do not edit: change the schema and regenerate.")
        head.add('"""')
        head.add()
        head.add("from __future__ import annotations")
        head.add()
        if fam.union is not None:
            head.add("from collections.abc import Callable")
        head.add("from dataclasses import dataclass")
        typing_names = ["ClassVar"] + (["TypeAlias"] if fam.union is not None else [])
        head.add(f"from typing import {', '.join(typing_names)}")
        if self.uses_uuid:
            head.add("from uuid import UUID")
        head.add()
        head.add("from pydmq.protocol.errors import MalformedFrameError")
        head.add("from pydmq.protocol.primitives import Buffer, Reader, Writer")
        head.add()
        exports.sort(key=lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, n))
        head.add("__all__ = [" + ", ".join(f'"{n}"' for n in exports) + "]")
        head.add()
        if keys:
            head.add(f"KEY_VERSIONS = frozenset({tuple(versions)!r})")
            _docstring(head, "The versions that start the keys of this family.")
            head.add()
        head.add()
        return head.text() + body.text()


def emit_family(family: RecordFamily) -> str:
    return FamilyEmitter(family).emit()
