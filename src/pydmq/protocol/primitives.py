"""Bounded readers and writers for the Kafka wire protocol's primitive types.

Sans-IO: a :class:`Reader` walks a buffer it was given; a :class:`Writer` appends to a
``bytearray``. Every length and count read from the wire is checked against the bytes that
remain before anything is allocated for it, so a hostile frame cannot make us reserve memory
it did not send.

The bytes alone do not bound the work: a 10 MiB Produce of 3.5 M empty topic entries is
3.5 M objects, seconds of decoding. A reader may therefore carry a decode budget: every
array count and tagged-field count is charged against it when it is read, before any
element is built, and a count past what is left raises DecodeBudgetExceededError. Requests
get their budget per API key (:mod:`pydmq.protocol.budgets`); other readers (responses from
our own peers, stored records) are bounded by their bytes only.
"""

from __future__ import annotations

import builtins
import struct
from collections.abc import Iterable
from typing import TypeAlias
from uuid import UUID

from pydmq.protocol.errors import DecodeBudgetExceededError, MalformedFrameError

__all__ = ["UNBOUNDED", "Buffer", "Reader", "Writer"]

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_F64 = struct.Struct(">d")

_i8_unpack = _I8.unpack_from
_i16_unpack = _I16.unpack_from
_i32_unpack = _I32.unpack_from
_i64_unpack = _I64.unpack_from
_u16_unpack = _U16.unpack_from
_u32_unpack = _U32.unpack_from
_f64_unpack = _F64.unpack_from

_i8_pack = _I8.pack
_i16_pack = _I16.pack
_i32_pack = _I32.pack
_i64_pack = _I64.pack
_u16_pack = _U16.pack
_u32_pack = _U32.pack
_f64_pack = _F64.pack

_ZERO_UUID = UUID(int=0)
# The budget of a reader that is bounded by its bytes only.
UNBOUNDED = 1 << 62

_Bytes: TypeAlias = builtins.bytes
_Bool: TypeAlias = builtins.bool
Buffer: TypeAlias = builtins.bytes | bytearray | memoryview


def _short(what: str) -> MalformedFrameError:
    return MalformedFrameError(f"frame truncated while reading {what}")


class Reader:
    """A cursor over ``buf[pos:end]`` that never reads or allocates past ``end``.

    ``budget`` is how many more elements (array entries and tagged fields, counted as their
    counts are read) this reader may let the decoder build. Owned by whoever decodes with it:
    one request, on the event loop or on the dispatcher's decoding thread.
    """

    __slots__ = ("budget", "buf", "end", "pos")

    def __init__(
        self, buf: Buffer, pos: int = 0, end: int | None = None, *, budget: int = UNBOUNDED
    ) -> None:
        self.budget = budget
        if isinstance(buf, memoryview):
            mv = buf if buf.format == "B" and buf.ndim == 1 else buf.cast("B")
        else:
            mv = memoryview(buf)
        self.buf: memoryview = mv
        self.pos = pos
        size = len(mv)
        self.end = size if end is None else end
        if pos < 0 or pos > self.end or self.end > size:
            raise MalformedFrameError("reader bounds outside the buffer")

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def charge(self, n: int) -> None:
        """Spend ``n`` elements of the budget, before any of them is built."""
        left = self.budget - n
        if left < 0:
            raise DecodeBudgetExceededError(n, self.budget)
        self.budget = left

    def _take(self, n: int, what: str) -> int:
        pos = self.pos
        if n > self.end - pos:
            raise _short(what)
        self.pos = pos + n
        return pos

    # -- fixed size -------------------------------------------------------------------

    def int8(self) -> int:
        pos = self.pos
        if pos + 1 > self.end:
            raise _short("int8")
        self.pos = pos + 1
        return int(_i8_unpack(self.buf, pos)[0])

    def bool(self) -> _Bool:
        pos = self.pos
        if pos + 1 > self.end:
            raise _short("bool")
        self.pos = pos + 1
        return self.buf[pos] != 0

    def int16(self) -> int:
        pos = self.pos
        if pos + 2 > self.end:
            raise _short("int16")
        self.pos = pos + 2
        return int(_i16_unpack(self.buf, pos)[0])

    def uint16(self) -> int:
        pos = self.pos
        if pos + 2 > self.end:
            raise _short("uint16")
        self.pos = pos + 2
        return int(_u16_unpack(self.buf, pos)[0])

    def int32(self) -> int:
        pos = self.pos
        if pos + 4 > self.end:
            raise _short("int32")
        self.pos = pos + 4
        return int(_i32_unpack(self.buf, pos)[0])

    def uint32(self) -> int:
        pos = self.pos
        if pos + 4 > self.end:
            raise _short("uint32")
        self.pos = pos + 4
        return int(_u32_unpack(self.buf, pos)[0])

    def int64(self) -> int:
        pos = self.pos
        if pos + 8 > self.end:
            raise _short("int64")
        self.pos = pos + 8
        return int(_i64_unpack(self.buf, pos)[0])

    def float64(self) -> float:
        pos = self.pos
        if pos + 8 > self.end:
            raise _short("float64")
        self.pos = pos + 8
        return float(_f64_unpack(self.buf, pos)[0])

    def uuid(self) -> UUID:
        pos = self.pos
        if pos + 16 > self.end:
            raise _short("uuid")
        self.pos = pos + 16
        return UUID(bytes=bytes(self.buf[pos : pos + 16]))

    # -- varints ----------------------------------------------------------------------

    def uvarint(self) -> int:
        """Unsigned varint of at most 5 bytes (32 bits)."""
        buf, pos, end = self.buf, self.pos, self.end
        if pos < end:
            b = buf[pos]
            if b < 0x80:
                self.pos = pos + 1
                return b
        result = 0
        shift = 0
        for i in range(5):
            if pos + i >= end:
                raise _short("varint")
            b = buf[pos + i]
            result |= (b & 0x7F) << shift
            if b < 0x80:
                if i == 4 and b > 0x0F:
                    raise MalformedFrameError("varint overflows 32 bits")
                self.pos = pos + i + 1
                return result
            shift += 7
        raise MalformedFrameError("varint longer than 5 bytes")

    def uvarlong(self) -> int:
        """Unsigned varint of at most 10 bytes (64 bits)."""
        buf, pos, end = self.buf, self.pos, self.end
        result = 0
        shift = 0
        for i in range(10):
            if pos + i >= end:
                raise _short("varlong")
            b = buf[pos + i]
            result |= (b & 0x7F) << shift
            if b < 0x80:
                if i == 9 and b > 0x01:
                    raise MalformedFrameError("varlong overflows 64 bits")
                self.pos = pos + i + 1
                return result
            shift += 7
        raise MalformedFrameError("varlong longer than 10 bytes")

    def varint(self) -> int:
        """Signed (zigzag) varint, 32 bits."""
        n = self.uvarint()
        return (n >> 1) ^ -(n & 1)

    def varlong(self) -> int:
        """Signed (zigzag) varlong, 64 bits."""
        n = self.uvarlong()
        return (n >> 1) ^ -(n & 1)

    # -- strings and bytes ----------------------------------------------------------

    def _utf8(self, start: int, n: int) -> str:
        try:
            return str(self.buf[start : start + n], "utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedFrameError(f"invalid UTF-8 in string: {exc}") from None

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise MalformedFrameError(f"non-nullable string has length {n}")
        return self._utf8(self._take(n, "string"), n)

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n < 0:
            if n == -1:
                return None
            raise MalformedFrameError(f"negative string length {n}")
        return self._utf8(self._take(n, "string"), n)

    def compact_string(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            raise MalformedFrameError("non-nullable compact string is null")
        return self._utf8(self._take(n, "compact string"), n)

    def compact_nullable_string(self) -> str | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        return self._utf8(self._take(n, "compact string"), n)

    def bytes(self) -> _Bytes:
        n = self.int32()
        if n < 0:
            raise MalformedFrameError(f"non-nullable bytes has length {n}")
        pos = self._take(n, "bytes")
        return self.buf[pos : pos + n].tobytes()

    def nullable_bytes(self) -> _Bytes | None:
        n = self.int32()
        if n < 0:
            if n == -1:
                return None
            raise MalformedFrameError(f"negative bytes length {n}")
        pos = self._take(n, "bytes")
        return self.buf[pos : pos + n].tobytes()

    def compact_bytes(self) -> _Bytes:
        n = self.uvarint() - 1
        if n < 0:
            raise MalformedFrameError("non-nullable compact bytes is null")
        pos = self._take(n, "compact bytes")
        return self.buf[pos : pos + n].tobytes()

    def compact_nullable_bytes(self) -> _Bytes | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        pos = self._take(n, "compact bytes")
        return self.buf[pos : pos + n].tobytes()

    def records(self) -> memoryview | None:
        """Nullable int32-length records: a zero-copy slice of the input."""
        n = self.int32()
        if n < 0:
            if n == -1:
                return None
            raise MalformedFrameError(f"negative records length {n}")
        pos = self._take(n, "records")
        return self.buf[pos : pos + n]

    def compact_records(self) -> memoryview | None:
        """Nullable compact records: a zero-copy slice of the input."""
        n = self.uvarint() - 1
        if n < 0:
            return None
        pos = self._take(n, "compact records")
        return self.buf[pos : pos + n]

    def raw(self, n: int) -> _Bytes:
        pos = self._take(n, "raw bytes")
        return self.buf[pos : pos + n].tobytes()

    # -- arrays -----------------------------------------------------------------------
    # Each count is checked against the remaining bytes (every element needs >= 1 byte) and
    # then charged against the budget, before the caller builds any element.

    def array_length(self) -> int:
        """int32 element count of a non-nullable array."""
        n = self.int32()
        if n < 0:
            raise MalformedFrameError(f"non-nullable array has length {n}")
        if n > self.end - self.pos:
            raise MalformedFrameError(f"array of {n} elements exceeds the remaining bytes")
        if n > self.budget:
            raise DecodeBudgetExceededError(n, self.budget)
        self.budget -= n
        return n

    def nullable_array_length(self) -> int:
        """int32 element count; -1 means null."""
        n = self.int32()
        if n < 0:
            if n == -1:
                return -1
            raise MalformedFrameError(f"negative array length {n}")
        if n > self.end - self.pos:
            raise MalformedFrameError(f"array of {n} elements exceeds the remaining bytes")
        if n > self.budget:
            raise DecodeBudgetExceededError(n, self.budget)
        self.budget -= n
        return n

    def compact_array_length(self) -> int:
        n = self.uvarint() - 1
        if n < 0:
            raise MalformedFrameError("non-nullable compact array is null")
        if n > self.end - self.pos:
            raise MalformedFrameError(f"array of {n} elements exceeds the remaining bytes")
        if n > self.budget:
            raise DecodeBudgetExceededError(n, self.budget)
        self.budget -= n
        return n

    def compact_nullable_array_length(self) -> int:
        """Compact element count; -1 means null."""
        n = self.uvarint() - 1
        if n > self.end - self.pos:
            raise MalformedFrameError(f"array of {n} elements exceeds the remaining bytes")
        if n > self.budget:
            raise DecodeBudgetExceededError(n, self.budget)
        if n > 0:
            self.budget -= n
        return n

    def _fixed_array(self, n: int, code: str, size: int) -> list[int]:
        pos = self.pos
        if n * size > self.end - pos:
            raise _short("array")
        self.pos = pos + n * size
        return list(struct.unpack_from(f">{n}{code}", self.buf, pos))

    def int8_array(self, n: int) -> list[int]:
        return self._fixed_array(n, "b", 1)

    def int16_array(self, n: int) -> list[int]:
        return self._fixed_array(n, "h", 2)

    def int32_array(self, n: int) -> list[int]:
        return self._fixed_array(n, "i", 4)

    def int64_array(self, n: int) -> list[int]:
        return self._fixed_array(n, "q", 8)

    # -- tagged fields ----------------------------------------------------------------

    def tagged_fields(self) -> dict[int, _Bytes]:
        """Read a whole tagged-fields section, keeping every field as raw bytes."""
        n = self.uvarint()
        if n == 0:
            return {}
        if n > self.end - self.pos:
            raise MalformedFrameError(f"{n} tagged fields exceed the remaining bytes")
        self.charge(n)
        out: dict[int, _Bytes] = {}
        for _ in range(n):
            tag = self.uvarint()
            size = self.uvarint()
            out[tag] = self.raw(size)
        return out

    def tagged_field_header(self) -> tuple[int, int]:
        """Read one tag and its size; returns (tag, end offset of its value)."""
        tag = self.uvarint()
        size = self.uvarint()
        end = self.pos + size
        if end > self.end:
            raise _short("tagged field")
        return tag, end

    def tagged_count(self) -> int:
        n = self.uvarint()
        if n == 0:
            return 0
        if n > self.end - self.pos:
            raise MalformedFrameError(f"{n} tagged fields exceed the remaining bytes")
        self.charge(n)
        return n

    def expect_end_of_tag(self, end: int) -> None:
        if self.pos != end:
            raise MalformedFrameError("tagged field size does not match its content")


class Writer:
    """Appends encoded primitives to ``self.buf`` (a bytearray)."""

    __slots__ = ("buf",)

    def __init__(self, buf: bytearray | None = None) -> None:
        self.buf: bytearray = bytearray() if buf is None else buf

    def getvalue(self) -> _Bytes:
        return bytes(self.buf)

    def __len__(self) -> int:
        return len(self.buf)

    def int8(self, v: int) -> None:
        self.buf += _i8_pack(v)

    def bool(self, v: _Bool) -> None:
        self.buf.append(1 if v else 0)

    def int16(self, v: int) -> None:
        self.buf += _i16_pack(v)

    def uint16(self, v: int) -> None:
        self.buf += _u16_pack(v)

    def int32(self, v: int) -> None:
        self.buf += _i32_pack(v)

    def uint32(self, v: int) -> None:
        self.buf += _u32_pack(v)

    def int64(self, v: int) -> None:
        self.buf += _i64_pack(v)

    def float64(self, v: float) -> None:
        self.buf += _f64_pack(v)

    def uuid(self, v: UUID | None) -> None:
        self.buf += (v or _ZERO_UUID).bytes

    def uvarint(self, v: int) -> None:
        if 0 <= v < 0x80:
            self.buf.append(v)
            return
        if v < 0 or v > 0xFFFFFFFF:
            raise ValueError(f"unsigned varint out of range: {v}")
        self._varint_body(v)

    def uvarlong(self, v: int) -> None:
        if v < 0 or v > 0xFFFFFFFFFFFFFFFF:
            raise ValueError(f"unsigned varlong out of range: {v}")
        self._varint_body(v)

    def _varint_body(self, v: int) -> None:
        buf = self.buf
        while v >= 0x80:
            buf.append((v & 0x7F) | 0x80)
            v >>= 7
        buf.append(v)

    def varint(self, v: int) -> None:
        if not -(2**31) <= v < 2**31:
            raise ValueError(f"varint out of range: {v}")
        self._varint_body(((v << 1) ^ (v >> 31)) & 0xFFFFFFFF)

    def varlong(self, v: int) -> None:
        if not -(2**63) <= v < 2**63:
            raise ValueError(f"varlong out of range: {v}")
        self._varint_body(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)

    def string(self, v: str | None) -> None:
        if v is None:
            v = ""
        data = v.encode()
        if len(data) > 0x7FFF:
            raise ValueError("string longer than 32767 bytes")
        self.buf += _i16_pack(len(data))
        self.buf += data

    def nullable_string(self, v: str | None) -> None:
        if v is None:
            self.buf += b"\xff\xff"
            return
        self.string(v)

    def compact_string(self, v: str | None) -> None:
        data = b"" if v is None else v.encode()
        self.uvarint(len(data) + 1)
        self.buf += data

    def compact_nullable_string(self, v: str | None) -> None:
        if v is None:
            self.buf.append(0)
            return
        data = v.encode()
        self.uvarint(len(data) + 1)
        self.buf += data

    def bytes(self, v: Buffer | None) -> None:
        if v is None:
            v = b""
        self.buf += _i32_pack(len(v))
        self.buf += v

    def nullable_bytes(self, v: Buffer | None) -> None:
        if v is None:
            self.buf += b"\xff\xff\xff\xff"
            return
        self.buf += _i32_pack(len(v))
        self.buf += v

    def compact_bytes(self, v: Buffer | None) -> None:
        if v is None:
            v = b""
        self.uvarint(len(v) + 1)
        self.buf += v

    def compact_nullable_bytes(self, v: Buffer | None) -> None:
        if v is None:
            self.buf.append(0)
            return
        self.uvarint(len(v) + 1)
        self.buf += v

    def records(self, v: Buffer | None) -> None:
        """Nullable int32-length records."""
        self.nullable_bytes(v)

    def compact_records(self, v: Buffer | None) -> None:
        """Nullable compact records."""
        self.compact_nullable_bytes(v)

    def raw(self, v: Buffer) -> None:
        self.buf += v

    def array_length(self, n: int) -> None:
        self.buf += _i32_pack(n)

    def nullable_array_length(self, items: list[object] | None) -> None:
        self.buf += _i32_pack(-1 if items is None else len(items))

    def compact_array_length(self, n: int) -> None:
        self.uvarint(n + 1)

    def int8_array(self, items: list[int]) -> None:
        self.buf += struct.pack(f">{len(items)}b", *items)

    def int16_array(self, items: list[int]) -> None:
        self.buf += struct.pack(f">{len(items)}h", *items)

    def int32_array(self, items: list[int]) -> None:
        self.buf += struct.pack(f">{len(items)}i", *items)

    def int64_array(self, items: list[int]) -> None:
        self.buf += struct.pack(f">{len(items)}q", *items)

    def tagged_fields(self, fields: dict[int, _Bytes]) -> None:
        """Write a tagged-fields section holding only raw (already encoded) fields."""
        if not fields:
            self.buf.append(0)
            return
        self.uvarint(len(fields))
        for tag in sorted(fields):
            value = fields[tag]
            self.uvarint(tag)
            self.uvarint(len(value))
            self.buf += value

    def merged_tagged_fields(
        self, known: Iterable[tuple[int, _Bytes]], unknown: dict[int, _Bytes]
    ) -> None:
        """Write known (already encoded) and unknown tagged fields in ascending tag order."""
        merged = dict(unknown)
        merged.update(known)
        self.tagged_fields(merged)
