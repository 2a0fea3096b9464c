"""Record batch compression codecs (sans-IO), with bounded decompression.

Kafka codec ids (the low three bits of a v2 batch's ``attributes``)::

    0 none | 1 gzip | 2 snappy | 3 lz4 | 4 zstd      (5..7 are invalid)

Decompression is always bounded by ``max_size``: a compression bomb raises
:class:`CompressionError` without materialising more than about ``max_size`` bytes.

* gzip: stdlib :mod:`zlib` with ``max_length`` per step; concatenated gzip members are accepted
  (as Java's ``GZIPInputStream`` does) and trailing bytes that are not a gzip member are ignored.
* snappy: the raw format (what librdkafka writes and what :func:`compress` writes) and the
  "xerial" block framing (what the Java client and kafka-python write). Every raw chunk carries
  its uncompressed length as a varint prefix, which is checked against the budget before the
  chunk is decompressed.
* lz4: the LZ4 frame format. When the frame header carries a content size it is checked against
  the budget first; otherwise cramjam decompresses into a fixed-size buffer (it stops with an
  error once the buffer is full, so the output can never exceed the buffer), grown geometrically
  up to ``max_size``.
* zstd: same strategy as lz4, using the frame header's Frame_Content_Size when present.
"""

from __future__ import annotations

import zlib
from typing import Final

import cramjam

from pydmq.protocol.records import CorruptRecordError

__all__ = [
    "CODEC_NAMES",
    "GZIP",
    "LZ4",
    "NONE",
    "SNAPPY",
    "ZSTD",
    "CompressionError",
    "codec_id",
    "compress",
    "decompress",
]

NONE: Final = 0
GZIP: Final = 1
SNAPPY: Final = 2
LZ4: Final = 3
ZSTD: Final = 4

CODEC_NAMES: Final[dict[int, str]] = {
    NONE: "none",
    GZIP: "gzip",
    SNAPPY: "snappy",
    LZ4: "lz4",
    ZSTD: "zstd",
}

# Kafka's defaults: compression.gzip.level -1 (zlib's 6), compression.zstd.level 3. For lz4 we
# use the fast (non-HC) compressor, as librdkafka does by default.
_GZIP_DEFAULT_LEVEL: Final = 6
_ZSTD_DEFAULT_LEVEL: Final = 3

XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE: Final = 16  # magic (8) + version int32 + compatible version int32

_LZ4_MAGIC: Final = b"\x04\x22\x4d\x18"
_ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"

_FIRST_GUESS_RATIO: Final = 8
_MIN_GUESS: Final = 64 * 1024
_GROWTH: Final = 4


class CompressionError(CorruptRecordError):
    """Compressed records that cannot be decoded, exceed their size budget or use a bad codec."""


def codec_id(name: str) -> int:
    """Codec id for a Kafka ``compression.type`` name (``none``, ``gzip``, ``snappy``, ...)."""
    for cid, cname in CODEC_NAMES.items():
        if cname == name.lower():
            return cid
    raise CompressionError(f"unknown compression type {name!r}")


def decompress(codec: int, data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    """Decompress ``data`` written with Kafka codec ``codec``; never more than ``max_size`` bytes.

    Raises :class:`CompressionError` for an unknown codec, corrupt input or output that would
    exceed ``max_size``.
    """
    if max_size < 0:
        raise ValueError("max_size must be >= 0")
    if codec == NONE:
        if len(data) > max_size:
            raise CompressionError(f"records of {len(data)} bytes exceed the limit of {max_size}")
        return bytes(data)
    if codec == GZIP:
        return _gzip_decompress(data, max_size)
    if codec == SNAPPY:
        return _snappy_decompress(data, max_size)
    if codec == LZ4:
        return _bounded_into(
            cramjam.lz4.decompress_into, "lz4", data, _lz4_content_size(data), max_size
        )
    if codec == ZSTD:
        return _bounded_into(
            cramjam.zstd.decompress_into, "zstd", data, _zstd_content_size(data), max_size
        )
    raise CompressionError(f"invalid compression codec id {codec}")


def compress(codec: int, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """Compress ``data`` with Kafka codec ``codec`` (raw snappy, lz4 frame, zstd frame, gzip)."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        compressor = zlib.compressobj(
            _GZIP_DEFAULT_LEVEL if level is None or level < 0 else level,
            zlib.DEFLATED,
            16 + zlib.MAX_WBITS,
        )
        return compressor.compress(data) + compressor.flush()
    if codec == SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == LZ4:
        # Kafka readers require independent blocks; no content checksum (as the Java client).
        lz4 = cramjam.lz4.Compressor(level=level, content_checksum=False, block_linked=False)
        lz4.compress(data if isinstance(data, bytes) else bytes(data))
        return bytes(lz4.finish())
    if codec == ZSTD:
        return bytes(
            cramjam.zstd.compress(data, level=_ZSTD_DEFAULT_LEVEL if level is None else level)
        )
    raise CompressionError(f"invalid compression codec id {codec}")


# -- gzip ----------------------------------------------------------------------------------------


def _gzip_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    out = bytearray()
    pending: bytes | bytearray | memoryview = data
    try:
        while True:
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            while not inflater.eof:
                chunk = inflater.decompress(pending, max_size - len(out) + 1)
                out += chunk
                if len(out) > max_size:
                    raise CompressionError(
                        f"gzip records decompress to more than the limit of {max_size} bytes"
                    )
                pending = inflater.unconsumed_tail
                if not chunk and not pending and not inflater.eof:
                    raise CompressionError("truncated gzip records")
            pending = inflater.unused_data
            # Another member follows only if it starts with the gzip magic; Java ignores the rest.
            if pending[:2] != b"\x1f\x8b":
                return bytes(out)
    except zlib.error as exc:
        raise CompressionError(f"corrupt gzip records: {exc}") from exc


# -- snappy --------------------------------------------------------------------------------------


def _snappy_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    view = memoryview(data)
    if bytes(view[:8]) != XERIAL_MAGIC:
        return _snappy_raw(view, max_size)
    # Xerial framing: 16-byte header (version and compat ints are ignored, like other readers:
    # some writers encode them little-endian), then [int32 length][raw snappy chunk]*.
    if len(view) < _XERIAL_HEADER_SIZE:
        raise CompressionError("truncated xerial snappy header")
    parts: list[bytes] = []
    total = 0
    position = _XERIAL_HEADER_SIZE
    end = len(view)
    while position < end:
        if end - position < 4:
            raise CompressionError("truncated xerial snappy block length")
        length = int.from_bytes(view[position : position + 4], "big", signed=True)
        position += 4
        if length < 0 or length > end - position:
            raise CompressionError(f"invalid xerial snappy block length {length}")
        chunk = _snappy_raw(view[position : position + length], max_size - total)
        total += len(chunk)
        parts.append(chunk)
        position += length
    return b"".join(parts)


def _snappy_raw(view: memoryview, max_size: int) -> bytes:
    try:
        size = int(cramjam.snappy.decompress_raw_len(view))
    except Exception as exc:
        raise CompressionError(f"corrupt snappy records: {exc}") from exc
    if size > max_size:
        raise CompressionError(
            f"snappy records declare {size} bytes, more than the limit of {max_size}"
        )
    out = bytearray(size)
    try:
        written = int(cramjam.snappy.decompress_raw_into(view, out))
    except Exception as exc:
        raise CompressionError(f"corrupt snappy records: {exc}") from exc
    if written != size:
        raise CompressionError("snappy records shorter than their declared length")
    return bytes(out)


# -- lz4 and zstd --------------------------------------------------------------------------------


def _lz4_content_size(data: bytes | bytearray | memoryview) -> int | None:
    """Content size from an LZ4 frame descriptor when its FLG.ContentSize bit is set."""
    if len(data) < 15 or bytes(data[:4]) != _LZ4_MAGIC:
        return None
    flg = data[4]
    if not flg & 0x08:
        return None
    return int.from_bytes(data[6:14], "little")


def _zstd_content_size(data: bytes | bytearray | memoryview) -> int | None:
    """Frame_Content_Size from a zstd frame header, when present."""
    if len(data) < 6 or bytes(data[:4]) != _ZSTD_MAGIC:
        return None
    descriptor = data[4]
    fcs_flag = descriptor >> 6
    single_segment = descriptor & 0x20
    dict_id_size = (0, 1, 2, 4)[descriptor & 0x03]
    position = 5 + (0 if single_segment else 1) + dict_id_size
    fcs_size = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    if fcs_size == 0 or len(data) < position + fcs_size:
        return None
    value = int.from_bytes(data[position : position + fcs_size], "little")
    return value + 256 if fcs_size == 2 else value


def _bounded_into(
    decompress_into: object,
    name: str,
    data: bytes | bytearray | memoryview,
    declared: int | None,
    max_size: int,
) -> bytes:
    """Decompress into fixed buffers: cramjam fails rather than write past a buffer's end."""
    if declared is not None and declared > max_size:
        raise CompressionError(
            f"{name} records declare {declared} bytes, more than the limit of {max_size}"
        )
    # A declared size may lie; one byte of slack tells "exactly full" from "wanted more".
    if declared is not None:
        capacity = declared + 1
    else:
        capacity = max(len(data) * _FIRST_GUESS_RATIO, _MIN_GUESS)
    capacity = min(capacity, max_size + 1)
    while True:
        out = bytearray(capacity)
        try:
            written = int(decompress_into(data, out))  # type: ignore[operator]
        except Exception as exc:
            full = "failed to write whole buffer" in str(exc)
            if not full:
                raise CompressionError(f"corrupt {name} records: {exc}") from exc
            if capacity > max_size:
                raise CompressionError(
                    f"{name} records decompress to more than the limit of {max_size} bytes"
                ) from None
            capacity = min(capacity * _GROWTH, max_size + 1)
            continue
        if written > max_size:
            raise CompressionError(
                f"{name} records decompress to more than the limit of {max_size} bytes"
            )
        if written == capacity:  # possibly truncated by the buffer: grow and retry
            if capacity > max_size:
                raise CompressionError(
                    f"{name} records decompress to more than the limit of {max_size} bytes"
                )
            capacity = min(capacity * _GROWTH, max_size + 1)
            continue
        del out[written:]
        return bytes(out)
