"""Codecs of pydmq.protocol.compression: round trips, framings and bounded decompression."""

from __future__ import annotations

import gzip
import os
import struct
import zlib

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pydmq.protocol import compression
from pydmq.protocol.compression import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    CompressionError,
    codec_id,
    compress,
    decompress,
)
from pydmq.protocol.records import CorruptRecordError

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
MIB = 1024 * 1024


def _xerial(data: bytes, block: int = 32 * 1024, *, little_endian_header: bool = False) -> bytes:
    """Xerial snappy framing, built from its description: magic, version, compat, blocks."""
    order = "<" if little_endian_header else ">"
    out = bytearray(b"\x82SNAPPY\x00" + struct.pack(order + "ii", 1, 1))
    for start in range(0, len(data), block):
        chunk = bytes(cramjam.snappy.compress_raw(data[start : start + block]))
        out += struct.pack(">i", len(chunk)) + chunk
    return bytes(out)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize(
    "data",
    [b"", b"x", b"hello kafka " * 1000, os.urandom(70_000)],
    ids=["empty", "1", "text", "random"],
)
def test_round_trip(codec: int, data: bytes) -> None:
    packed = compress(codec, data)
    assert decompress(codec, packed, len(data)) == data
    assert decompress(codec, memoryview(packed), len(data) + 10) == data
    assert decompress(codec, bytearray(packed), len(data)) == data


@pytest.mark.parametrize("codec", CODECS)
@given(data=st.binary(max_size=5000))
@settings(max_examples=40, deadline=None)
def test_round_trip_hypothesis(codec: int, data: bytes) -> None:
    assert decompress(codec, compress(codec, data), len(data)) == data


@pytest.mark.parametrize("codec", CODECS)
def test_one_byte_over_the_limit_is_rejected(codec: int) -> None:
    data = b"abcdefgh" * 20_000
    with pytest.raises(CompressionError, match="limit"):
        decompress(codec, compress(codec, data), len(data) - 1)


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_compression_bomb_is_rejected_cheaply(codec: int) -> None:
    bomb = compress(codec, bytes(64 * MIB))
    assert len(bomb) < 4 * MIB
    with pytest.raises(CompressionError):
        decompress(codec, bomb, MIB)


def test_gzip_streaming_bomb_without_declared_size() -> None:
    # A gzip stream's size is only known at its end: the bound must hold while inflating.
    bomb = gzip.compress(bytes(32 * MIB))
    with pytest.raises(CompressionError, match="limit"):
        decompress(GZIP, bomb, 1000)


@pytest.mark.parametrize("level", [None, 1, 9])
def test_levels(level: int | None) -> None:
    data = b"level " * 500
    for codec in CODECS:
        assert decompress(codec, compress(codec, data, level), len(data)) == data


def test_gzip_interoperates_with_stdlib() -> None:
    data = b"gzip " * 1000
    assert decompress(GZIP, gzip.compress(data), len(data)) == data
    assert gzip.decompress(compress(GZIP, data)) == data


def test_gzip_concatenated_members_and_trailing_garbage() -> None:
    data = gzip.compress(b"one ") + gzip.compress(b"two")
    assert decompress(GZIP, data, 100) == b"one two"
    assert decompress(GZIP, data + b"\x00\x00", 100) == b"one two"
    with pytest.raises(CompressionError, match="limit"):
        decompress(GZIP, data, 5)


def test_gzip_corrupt_and_truncated() -> None:
    packed = compress(GZIP, b"payload " * 100)
    with pytest.raises(CompressionError):
        decompress(GZIP, packed[:-12], 10_000)
    with pytest.raises(CompressionError):
        decompress(GZIP, b"not gzip at all", 10_000)
    corrupted = bytearray(packed)
    corrupted[15] ^= 0xFF
    with pytest.raises(CompressionError):
        decompress(GZIP, bytes(corrupted), 10_000)


def test_snappy_writes_raw_format() -> None:
    data = b"snappy " * 100
    packed = compress(SNAPPY, data)
    assert not packed.startswith(compression.XERIAL_MAGIC)
    assert bytes(cramjam.snappy.decompress_raw(packed)) == data


@pytest.mark.parametrize("little_endian_header", [False, True])
def test_snappy_xerial_framing(little_endian_header: bool) -> None:
    data = os.urandom(1000) * 100  # several 32 KiB blocks
    framed = _xerial(data, little_endian_header=little_endian_header)
    assert decompress(SNAPPY, framed, len(data)) == data
    with pytest.raises(CompressionError, match="limit"):
        decompress(SNAPPY, framed, len(data) - 1)


def test_snappy_xerial_empty_and_bad_blocks() -> None:
    assert decompress(SNAPPY, _xerial(b""), 0) == b""
    framed = _xerial(b"x" * 1000)
    with pytest.raises(CompressionError):
        decompress(SNAPPY, framed[:-3], 10_000)  # block shorter than its length
    with pytest.raises(CompressionError):
        decompress(SNAPPY, framed[:18], 10_000)  # truncated block length
    with pytest.raises(CompressionError):
        decompress(SNAPPY, framed[:16] + struct.pack(">i", -5), 10_000)
    with pytest.raises(CompressionError):
        decompress(SNAPPY, compression.XERIAL_MAGIC + b"\x00", 10_000)


def test_snappy_declared_length_checked_before_decompressing() -> None:
    # A raw chunk that claims 1 GiB of output (varint prefix) with almost no input.
    claim = bytearray()
    value = 1 << 30
    while value > 0x7F:
        claim.append((value & 0x7F) | 0x80)
        value >>= 7
    claim.append(value)
    with pytest.raises(CompressionError, match="declare"):
        decompress(SNAPPY, bytes(claim) + b"\x00" * 10, MIB)


def test_lz4_frame_with_content_size_checked_first() -> None:
    lz4_frame = pytest.importorskip("lz4.frame")

    data = b"lz4 " * 10_000
    framed = lz4_frame.compress(data, store_size=True, block_linked=False)
    assert compression._lz4_content_size(framed) == len(data)
    assert decompress(LZ4, framed, len(data)) == data
    with pytest.raises(CompressionError, match="declare"):
        decompress(LZ4, framed, len(data) - 1)


def test_lz4_linked_blocks_and_checksums_decode() -> None:
    lz4_frame = pytest.importorskip("lz4.frame")

    data = os.urandom(200) * 2000
    for linked in (True, False):
        for checksum in (True, False):
            framed = lz4_frame.compress(
                data, block_linked=linked, content_checksum=checksum, store_size=False
            )
            assert decompress(LZ4, framed, len(data)) == data


def test_lz4_we_write_independent_blocks() -> None:
    packed = compress(LZ4, b"x" * 1000)
    flg = packed[4]
    assert flg & 0x20  # block independence, required by Kafka's Java reader
    assert not flg & 0x04  # no content checksum


def test_zstd_content_size_parsing_and_streaming_frames() -> None:
    zstandard = pytest.importorskip("zstandard")

    data = b"zstd " * 50_000
    with_size = zstandard.ZstdCompressor(write_content_size=True).compress(data)
    without = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    assert compression._zstd_content_size(with_size) == len(data)
    assert compression._zstd_content_size(without) is None
    for packed in (with_size, without):
        assert decompress(ZSTD, packed, len(data)) == data
        with pytest.raises(CompressionError, match="limit"):
            decompress(ZSTD, packed, len(data) - 1)


def test_zstd_declared_size_that_lies_is_still_bounded() -> None:
    data = b"a" * 100_000
    packed = bytearray(compress(ZSTD, data))
    assert compression._zstd_content_size(packed) == len(data)
    # Patch the declared size down to 10 bytes: the real output must still be refused.
    descriptor = packed[4]
    assert descriptor >> 6 == 2 and descriptor & 0x03 == 0  # 4-byte size, no dictionary id
    struct.pack_into("<I", packed, 5 if descriptor & 0x20 else 6, 10)
    assert compression._zstd_content_size(packed) == 10
    with pytest.raises(CompressionError):
        decompress(ZSTD, bytes(packed), 1000)


def test_growth_path_when_size_unknown() -> None:
    # Highly compressible data and no declared size: the buffer grows until it fits.
    zstandard = pytest.importorskip("zstandard")

    data = bytes(5 * MIB)
    packed = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    assert decompress(ZSTD, packed, 5 * MIB) == data
    assert decompress(LZ4, compress(LZ4, data), 5 * MIB) == data


@pytest.mark.parametrize("codec", [LZ4, ZSTD, SNAPPY])
def test_corrupt_input(codec: int) -> None:
    with pytest.raises(CompressionError, match="corrupt"):
        decompress(codec, b"\x00garbage-garbage-garbage", 10_000)


@pytest.mark.parametrize("codec", [5, 6, 7, -1, 8])
def test_invalid_codec(codec: int) -> None:
    with pytest.raises(CompressionError, match="invalid compression codec"):
        decompress(codec, b"", 10)
    with pytest.raises(CompressionError):
        compress(codec, b"")


def test_error_hierarchy_and_codec_names() -> None:
    assert issubclass(CompressionError, CorruptRecordError)
    assert CompressionError("x").error_code == 2
    assert [codec_id(n) for n in ("none", "gzip", "snappy", "lz4", "ZSTD")] == CODECS
    with pytest.raises(CompressionError):
        codec_id("brotli")
    with pytest.raises(ValueError):
        decompress(NONE, b"", -1)


def test_none_codec_bounded() -> None:
    assert decompress(NONE, memoryview(b"abc"), 3) == b"abc"
    with pytest.raises(CompressionError):
        decompress(NONE, b"abcd", 3)


def test_zlib_raw_stream_is_not_gzip() -> None:
    with pytest.raises(CompressionError):
        decompress(GZIP, zlib.compress(b"zlib wrapper, not gzip"), 1000)


def test_zstd_bomb_without_declared_size() -> None:
    zstandard = pytest.importorskip("zstandard")
    bomb = zstandard.ZstdCompressor(write_content_size=False).compress(bytes(64 * MIB))
    assert compression._zstd_content_size(bomb) is None
    with pytest.raises(CompressionError, match="limit"):
        decompress(ZSTD, bomb, MIB)


def test_lz4_bomb_without_declared_size() -> None:
    bomb = compress(LZ4, bytes(64 * MIB))
    assert compression._lz4_content_size(bomb) is None
    with pytest.raises(CompressionError, match="limit"):
        decompress(LZ4, bomb, MIB)
