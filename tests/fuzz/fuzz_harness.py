"""Fuzz targets shared by the Hypothesis tests, the corpus replay and the atheris script.

Every target takes one ``bytes`` input (so any input can be stored in ``corpus/<target>/`` and
replayed) and raises only the exceptions its contract allows (:data:`ALLOWED`); anything else is
a bug. Inputs are self-describing: the first bytes select the API, version or codec.

Settings: CI runs a fixed number of examples with ``derandomize=True`` and no example database
(the same inputs on every run). ``PYDMQ_FUZZ_EXAMPLES=N`` raises the count and switches to
random exploration (the long mode, see ``tests/fuzz/README.md``).
"""

from __future__ import annotations

import contextlib
import os
import time
import tracemalloc
import typing
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings

from pydmq.protocol.batch_header import CRC, CRC_AT, CRC_START
from pydmq.protocol.compression import CompressionError, decompress
from pydmq.protocol.errors import ProtocolError
from pydmq.protocol.headers import encode_request_header, parse_request_header
from pydmq.protocol.messages import API_SCHEMAS
from pydmq.protocol.primitives import Reader, Writer
from pydmq.protocol.records import (
    CorruptRecordError,
    SimpleRecord,
    build_batch,
    crc32c,
    decode_records,
    parse_batch_header,
    validate_batch,
    validate_crc,
)

CORPUS = Path(__file__).resolve().parent / "corpus"
LONG_EXAMPLES = int(os.environ.get("PYDMQ_FUZZ_EXAMPLES", "0"))

API_KEYS = sorted(API_SCHEMAS)
PAIRS = [
    (k, v)
    for k in API_KEYS
    for v in range(API_SCHEMAS[k].min_version, API_SCHEMAS[k].max_version + 1)
]

MAX_DECOMPRESSED = 256 * 1024  # the budget the record and decompression targets use
MAX_SECONDS = 2.0  # per input: anything slower is a hang


def fuzz_settings(ci_examples: int) -> settings:
    """CI: ``ci_examples`` fixed inputs. Long mode: ``PYDMQ_FUZZ_EXAMPLES`` random inputs."""
    return settings(
        max_examples=LONG_EXAMPLES or ci_examples,
        derandomize=not LONG_EXAMPLES,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )


# -- targets -----------------------------------------------------------------------------------


def pick_pair(selector: bytes) -> tuple[int, int]:
    """(api key, version) selected by two bytes (every pair reachable)."""
    index = int.from_bytes(selector[:2].ljust(2, b"\0"), "big") % len(PAIRS)
    return PAIRS[index]


def pair_selector(api_key: int, version: int) -> bytes:
    return PAIRS.index((api_key, version)).to_bytes(2, "big")


def target_request_body(data: bytes) -> None:
    """Two selector bytes, then a request body for that (api key, version)."""
    api_key, version = pick_pair(data)
    API_SCHEMAS[api_key].decode_request(Reader(memoryview(data)[2:]), version)


def target_request_frame(data: bytes) -> None:
    """A whole frame (no size prefix) decoded as the dispatcher does: header, then body."""
    frame = memoryview(data)
    header, offset = parse_request_header(frame)
    schema = API_SCHEMAS.get(header.api_key)
    if schema is None or not schema.min_version <= header.api_version <= schema.max_version:
        return  # the dispatcher closes the connection without decoding the body
    schema.decode_request(Reader(frame, offset), header.api_version)


def target_record_batch(data: bytes) -> None:
    """A record batch: the produce-path checks, then decoding (also with a repaired CRC)."""
    header = parse_batch_header(data)
    with contextlib.suppress(CorruptRecordError):
        validate_batch(data, header, max_size=1 << 20)
    records = decode_records(data, header, max_decompressed=MAX_DECOMPRESSED)
    assert len(records) == header.records_count
    # A CRC is no defence against a hostile client: it can compute a valid one.
    fixed = bytearray(data)
    CRC.pack_into(fixed, CRC_AT, crc32c(memoryview(fixed)[CRC_START : header.size]))
    validate_crc(fixed, header)


def target_record_batch_crc_fixed(data: bytes) -> None:
    """As :func:`target_record_batch` after repairing the CRC, so mutations reach the decoder."""
    fixed = bytearray(data)
    if len(fixed) >= 61:
        header = parse_batch_header(fixed)
        CRC.pack_into(fixed, CRC_AT, crc32c(memoryview(fixed)[CRC_START : header.size]))
    target_record_batch(bytes(fixed))


def target_decompress(data: bytes) -> None:
    """One codec byte (0..7), then a compressed payload; output bounded by the budget."""
    if not data:
        return
    out = decompress(data[0] % 8, data[1:], MAX_DECOMPRESSED)
    assert len(out) <= MAX_DECOMPRESSED


TARGETS: dict[str, Callable[[bytes], None]] = {
    "request_body": target_request_body,
    "request_frame": target_request_frame,
    "record_batch": target_record_batch,
    "record_batch_crc_fixed": target_record_batch_crc_fixed,
    "decompress": target_decompress,
}

ALLOWED: dict[str, tuple[type[BaseException], ...]] = {
    "request_body": (ProtocolError,),
    "request_frame": (ProtocolError,),
    "record_batch": (CorruptRecordError,),
    "record_batch_crc_fixed": (CorruptRecordError,),
    "decompress": (CompressionError,),
}


def run(target: str, data: bytes) -> None:
    """Run one input; allowed errors are swallowed, anything else propagates."""
    try:
        TARGETS[target](data)
    except ALLOWED[target]:
        pass


def memory_bound(size: int) -> int:
    """Peak Python allocation allowed for one input of ``size`` bytes (measured worst: see
    test_fuzz_decoders.py). Decoding turns every byte or so into a Python object."""
    return 2 * 1024 * 1024 + 256 * size


class Budget:
    """tracemalloc peak and wall time of one call, checked against the bounds."""

    def __init__(self, *, trace: bool) -> None:
        self.trace = trace
        self.worst_ratio = 0.0
        self.worst_peak = 0
        self.slowest = 0.0

    def check(self, target: str, data: bytes) -> None:
        if not self.trace:
            started = time.perf_counter()
            run(target, data)
            elapsed = time.perf_counter() - started
            self.slowest = max(self.slowest, elapsed)
            assert elapsed < MAX_SECONDS, f"{target}: {elapsed:.2f} s for {len(data)} bytes"
            return
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        started = time.perf_counter()
        run(target, data)
        elapsed = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1] - base
        self.slowest = max(self.slowest, elapsed)
        self.worst_peak = max(self.worst_peak, peak)
        if data:
            self.worst_ratio = max(self.worst_ratio, peak / len(data))
        assert elapsed < MAX_SECONDS, f"{target}: {elapsed:.2f} s for {len(data)} bytes"
        assert peak < memory_bound(len(data)), (
            f"{target}: peak {peak} B of Python allocations for a {len(data)}-byte input"
        )


# -- valid seeds ---------------------------------------------------------------------------------


def sample_batch(codec: int = 0) -> bytes:
    return build_batch(
        [
            SimpleRecord(b"key-1", b"value-1" * 4, (("h", b"x"), ("n", None)), 1_700_000_000_000),
            SimpleRecord(None, b"", (), 1_700_000_000_005),
            SimpleRecord(b"k", None, (), 1_700_000_000_001),
        ],
        compression=codec,
        producer_id=7,
        producer_epoch=0,
        base_sequence=0,
    )


def _populate(tp: Any, module: Any, name: str, depth: int) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Union or origin is getattr(__import__("types"), "UnionType", None):
        non_none = [a for a in args if a is not type(None)]
        if name == "records" or memoryview in non_none:
            return sample_batch()
        return _populate(non_none[0], module, name, depth)
    if origin is list:
        if depth > 4:
            return []
        return [_populate(args[0], module, name, depth + 1) for _ in range(2)]
    if origin is dict:
        return {}
    if tp is bool:
        return True
    if tp is int:
        return 3
    if tp is float:
        return 1.5
    if tp is str:
        return "t-1"
    if tp is bytes:
        return b"\x01\x02\x03"
    if tp is uuid.UUID:
        return uuid.UUID(int=0x1234)
    if isinstance(tp, type) and tp.__module__ == module.__name__:
        return populate(tp, module, depth + 1)
    raise TypeError(f"cannot populate {tp!r}")


def populate(cls: type[Any], module: Any, depth: int = 0) -> Any:
    """An instance of a generated message class with every field set (lists of two)."""
    hints = typing.get_type_hints(cls, vars(module))
    values = {
        name: _populate(tp, module, name, depth)
        for name, tp in hints.items()
        if name != "unknown_tagged_fields" and not name.startswith("_")
    }
    return cls(**values)


def valid_request_body(api_key: int, version: int) -> bytes:
    schema = API_SCHEMAS[api_key]
    w = Writer(bytearray())
    schema.encode_request(w, populate(schema.request_type, schema.module), version)
    return bytes(w.buf)


def valid_request_frame(api_key: int, version: int) -> bytes:
    w = Writer()
    encode_request_header(w, api_key, version, 42, "fuzz")
    return bytes(w.buf) + valid_request_body(api_key, version)


def corpus_files(target: str) -> Iterator[Path]:
    directory = CORPUS / target
    if directory.is_dir():
        yield from sorted(p for p in directory.iterdir() if p.is_file() and p.name[0] != ".")
