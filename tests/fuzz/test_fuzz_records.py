"""Fuzzing RecordBatch validation and decoding, and decompression (bombs included).

Only the CorruptRecordError family may escape (CompressionError is one of them). Mutated
batches are also tried with their CRC repaired: a hostile client computes a valid CRC, so the
record decoder must hold on its own. Decompression bombs of every codec are checked in a
fresh child process so that native allocations (zlib, cramjam) count: its peak RSS may grow
by at most a few times the budget.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import pytest
from fuzz_harness import MAX_DECOMPRESSED, Budget, fuzz_settings, run, sample_batch
from hypothesis import given
from hypothesis import strategies as st
from test_fuzz_decoders import mutated

from pydmq.protocol.compression import CODEC_NAMES, compress

pytestmark = pytest.mark.timeout(120)

_BATCHES = [sample_batch(codec) for codec in sorted(CODEC_NAMES)]
_PAYLOADS = [
    bytes([codec]) + compress(codec, b"abc" * 50 + bytes(range(256))) for codec in CODEC_NAMES
]


@fuzz_settings(1500)
@given(data=st.sampled_from(_BATCHES).flatmap(mutated))
def test_mutated_batches(data: bytes) -> None:
    budget = Budget(trace=False)
    budget.check("record_batch", data)
    budget.check("record_batch_crc_fixed", data)


@fuzz_settings(500)
@given(head=st.sampled_from(_BATCHES), body=st.binary(max_size=400))
def test_valid_header_random_records(head: bytes, body: bytes) -> None:
    """A well-formed header (length fixed up) over random record bytes, CRC repaired."""
    data = bytearray(head[:61] + body)
    data[8:12] = (len(data) - 12).to_bytes(4, "big")
    Budget(trace=False).check("record_batch_crc_fixed", bytes(data))


def test_sweep_hostile_bytes_in_every_batch() -> None:
    for batch in _BATCHES:
        for pos in range(len(batch)):
            for value in (0x00, 0x01, 0x7F, 0x80, 0xFF):
                mutated_batch = batch[:pos] + bytes([value]) + batch[pos + 1 :]
                run("record_batch_crc_fixed", mutated_batch)
        for end in range(len(batch)):
            run("record_batch_crc_fixed", batch[:end])


@fuzz_settings(1000)
@given(data=st.sampled_from(_PAYLOADS).flatmap(mutated))
def test_mutated_compressed_payloads(data: bytes) -> None:
    Budget(trace=False).check("decompress", data)


@fuzz_settings(500)
@given(codec=st.integers(0, 7), body=st.binary(max_size=300))
def test_random_compressed_payloads(codec: int, body: bytes) -> None:
    Budget(trace=False).check("decompress", bytes([codec]) + body)


def test_record_decoding_memory_is_bounded() -> None:
    """Many tiny records (the worst objects-per-byte case), compressed and not."""
    from pydmq.protocol.records import SimpleRecord, build_batch

    tracemalloc.start()
    try:
        budget = Budget(trace=True)
        records = [SimpleRecord(None, None, (), 0)] * 5000
        for codec in sorted(CODEC_NAMES):
            budget.check("record_batch", build_batch(records, compression=codec))
        print(f"\n5000 empty records: peak {budget.worst_peak / 1e6:.1f} MB (traced)")
    finally:
        tracemalloc.stop()


BOMB_SIZE = 64 * 1024 * 1024
BOMB_LIMIT = 1024 * 1024


def _zstd_lying_size(payload: bytes) -> bytes:
    """Patch a zstd frame's Frame_Content_Size to 10 bytes (the header carries no checksum)."""
    data = bytearray(payload)
    fhd = data[4]
    single_segment = bool(fhd & 0x20)
    fcs_size = (0, 2, 4, 8)[fhd >> 6] or (1 if single_segment else 0)
    assert fcs_size, "frame carries no content size"
    start = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[fhd & 3]
    value = 10 - 256 if fcs_size == 2 else 10
    data[start : start + fcs_size] = max(value, 10).to_bytes(fcs_size, "little")
    return bytes(data)


def _make_bomb(codec: int, kind: str) -> bytes:
    from pydmq.protocol.records import SimpleRecord, build_batch

    if kind == "batch":
        return build_batch([SimpleRecord(None, bytes(BOMB_SIZE), (), 0)], compression=codec)
    if kind == "xerial":
        chunk = compress(2, bytes(BOMB_LIMIT // 2))
        header = b"\x82SNAPPY\x00" + b"\0\0\0\1\0\0\0\1"
        return header + (len(chunk).to_bytes(4, "big") + chunk) * 64
    payload = compress(codec, bytes(BOMB_SIZE))
    return _zstd_lying_size(payload) if kind == "lying-size" else payload


# The child reads the (small) compressed bomb from a file, so its peak RSS before the attempt
# is the interpreter's; the VmHWM watermark is reset just before the attempt, so its growth is
# what decompression itself touched (zlib and cramjam allocations included).
BOMB_CHILD = textwrap.dedent(
    """
    import json, sys
    from pydmq.protocol.compression import CompressionError, decompress
    from pydmq.protocol.records import decode_records, parse_batch_header

    codec, kind, limit, path = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
    data = open(path, "rb").read()
    def hwm():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    def rss():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    try:  # reset the peak-RSS watermark to the current RSS (Linux >= 4.0)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    before = rss()
    try:
        if kind == "batch":
            decode_records(data, parse_batch_header(data), max_decompressed=limit)
        else:
            decompress(codec, data, limit)
        outcome = "decoded"
    except CompressionError:
        outcome = "refused"
    print(json.dumps({"outcome": outcome, "growth": hwm() - before, "input": len(data)}))
    """
)

BOMBS = [(c, "plain") for c in (1, 2, 3, 4)] + [(c, "batch") for c in (1, 2, 3, 4)]
BOMBS += [(4, "lying-size"), (2, "xerial")]


@pytest.mark.parametrize(("codec", "kind"), BOMBS)
def test_decompression_bombs_are_bounded(tmp_path: Path, codec: int, kind: str) -> None:
    """64 MiB of zeros (compressed to KBs) against a 1 MiB budget: refused, RSS bounded."""
    path = tmp_path / "bomb"
    path.write_bytes(_make_bomb(codec, kind))
    out = subprocess.run(
        [sys.executable, "-c", BOMB_CHILD, str(codec), kind, str(BOMB_LIMIT), str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["outcome"] == "refused", result
    assert result["growth"] < 8 * BOMB_LIMIT, f"{CODEC_NAMES[codec]} {kind}: {result}"
    print(
        f"\n{CODEC_NAMES[codec]} {kind} bomb ({result['input']} B in): refused, "
        f"peak RSS +{result['growth'] / 1e6:.2f} MB"
    )


def test_budget_constant_is_small() -> None:
    assert MAX_DECOMPRESSED <= 1 << 20
