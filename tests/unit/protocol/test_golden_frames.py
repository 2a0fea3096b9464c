"""Golden frames captured from real Kafka clients (DESIGN.md §7).

``golden/`` holds, per client, the first request of every (api_key, api_version) the client
sent to a pydmq broker and the broker's response, recorded on the wire by
``scripts/capture_golden_frames.py`` (frames without their 4-byte size prefix; see
``golden/index.json``).

Requests were built by the real clients, so decoding them and re-encoding byte for byte checks
our codecs against independent serialisers. Responses were built by OUR broker: their round
trip is a regression check of the response codecs (and a frozen record of what we answered).

No byte-level exceptions are needed so far: every captured frame re-encodes identically.
The one frame that is not decoded with a body schema is Java's ApiVersions v5 probe, which is
newer than anything we know; it is checked as the version-negotiation exchange it is.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from pydmq.protocol.headers import (
    encode_response_header,
    parse_request_header,
    response_header_version,
)
from pydmq.protocol.messages import API_SCHEMAS
from pydmq.protocol.primitives import Reader, Writer
from pydmq.protocol.records import crc32c, iter_batch_headers

GOLDEN = Path(__file__).parent / "golden"
INDEX: list[dict[str, Any]] = json.loads((GOLDEN / "index.json").read_text())

UNSUPPORTED_VERSION = 35
API_VERSIONS, PRODUCE, FETCH, METADATA, INIT_PRODUCER_ID = 18, 0, 1, 3, 22

# Compression codec of the first Produce each capture session sends (attributes & 0x07).
FIRST_PRODUCE_CODEC = {"confluent_kafka": 0, "kafka_python": 1, "kcat": 4, "aiokafka": 3, "java": 4}
# Clients whose capture session produces with idempotence on (kcat keeps librdkafka's default).
IDEMPOTENT = {"confluent_kafka", "kafka_python", "aiokafka", "java"}


def _id(entry: dict[str, Any]) -> str:
    return f"{entry['client']}-{entry['api_name']}-v{entry['api_version']}"


def _in_range(key: int, version: int) -> bool:
    schema = API_SCHEMAS.get(key)
    return schema is not None and schema.min_version <= version <= schema.max_version


KNOWN = [e for e in INDEX if _in_range(e["api_key"], e["api_version"])]
WITH_RESPONSE = [e for e in KNOWN if e["response_file"] is not None]


def _entry(client: str, key: int, version: int | None = None) -> dict[str, Any]:
    for e in INDEX:
        if (e["client"], e["api_key"]) == (client, key) and version in (None, e["api_version"]):
            return e
    pytest.fail(f"no golden frame for {client} api {key} v{version}")


def _request(entry: dict[str, Any]) -> tuple[Any, Any]:
    frame = memoryview((GOLDEN / entry["request_file"]).read_bytes())
    header, pos = parse_request_header(frame)
    reader = Reader(frame, pos)
    body = API_SCHEMAS[header.api_key].decode_request(reader, header.api_version)
    return header, body


def _response(entry: dict[str, Any]) -> Any:
    frame = memoryview((GOLDEN / entry["response_file"]).read_bytes())
    key, version = entry["api_key"], entry["api_version"]
    reader = Reader(frame)
    reader.int32()
    if response_header_version(key, version) == 1:
        reader.tagged_fields()
    return API_SCHEMAS[key].decode_response(reader, version)


# --------------------------------------------------------------------------- the index


def test_index_matches_files() -> None:
    assert INDEX, "no golden frames: run scripts/capture_golden_frames.py"
    listed = set()
    for e in INDEX:
        req = GOLDEN / e["request_file"]
        assert req.stat().st_size == e["request_size"], e
        listed.add(req)
        if e["response_file"] is not None:
            resp = GOLDEN / e["response_file"]
            assert resp.stat().st_size == e["response_size"], e
            listed.add(resp)
        assert e["request_size"] <= 64 * 1024
    assert set(GOLDEN.glob("*/*.bin")) == listed
    clients = {e["client"] for e in INDEX}
    assert clients == set(FIRST_PRODUCE_CODEC)


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("entry", KNOWN, ids=_id)
def test_request_round_trip(entry: dict[str, Any]) -> None:
    raw = (GOLDEN / entry["request_file"]).read_bytes()
    frame = memoryview(raw)
    header, pos = parse_request_header(frame)
    assert (header.api_key, header.api_version) == (entry["api_key"], entry["api_version"])
    assert header.correlation_id == entry["correlation_id"]
    assert header.client_id == entry["client_id"]

    # The header re-built from its parsed fields is the captured header.
    client_id = b"" if header.client_id is None else header.client_id.encode()
    rebuilt = struct.pack(
        ">hhih", header.api_key, header.api_version, header.correlation_id, len(client_id)
    )
    rebuilt = rebuilt + client_id if header.client_id is not None else rebuilt[:-2] + b"\xff\xff"
    if header.header_version == 2:
        w = Writer()
        w.tagged_fields(header.unknown_tagged_fields)
        rebuilt += bytes(w.getvalue())
    assert rebuilt == raw[:pos]

    schema = API_SCHEMAS[header.api_key]
    reader = Reader(frame, pos)
    body = schema.decode_request(reader, header.api_version)
    assert reader.pos == len(raw), f"{len(raw) - reader.pos} trailing bytes not consumed"
    w = Writer()
    schema.encode_request(w, body, header.api_version)
    assert bytes(w.getvalue()) == raw[pos:]


@pytest.mark.parametrize("entry", WITH_RESPONSE, ids=_id)
def test_response_round_trip(entry: dict[str, Any]) -> None:
    raw = (GOLDEN / entry["response_file"]).read_bytes()
    key, version = entry["api_key"], entry["api_version"]
    reader = Reader(memoryview(raw))
    assert reader.int32() == entry["correlation_id"]
    tags = reader.tagged_fields() if response_header_version(key, version) == 1 else {}
    assert tags == {}
    pos = reader.pos
    assert raw[:pos] == encode_response_header(entry["correlation_id"], key, version)

    schema = API_SCHEMAS[key]
    body = schema.decode_response(reader, version)
    assert reader.pos == len(raw), f"{len(raw) - reader.pos} trailing bytes not consumed"
    w = Writer()
    schema.encode_response(w, body, version)
    assert bytes(w.getvalue()) == raw[pos:]


# --------------------------------------------------------------------------- semantics


@pytest.mark.parametrize(
    ("client", "name", "version"),
    [
        ("confluent_kafka", "confluent-kafka-python", "-rdkafka-"),
        ("kcat", "librdkafka", ""),
        ("java", "apache-kafka-java", ""),
        ("kafka_python", "kafka-python", ""),
    ],
)
def test_api_versions_software_name(client: str, name: str, version: str) -> None:
    entry = max(
        (e for e in KNOWN if e["client"] == client and e["api_key"] == API_VERSIONS),
        key=lambda e: e["api_version"],
    )
    assert entry["api_version"] >= 3
    _, body = _request(entry)
    assert body.client_software_name == name
    assert version in body.client_software_version
    assert body.client_software_version
    expected = entry["client_version"].split(" ")[0]
    if client != "kcat":  # kcat reports librdkafka's version, not its own
        assert body.client_software_version.startswith(expected)


def test_aiokafka_api_versions_v0_has_an_empty_body() -> None:
    header, body = _request(_entry("aiokafka", API_VERSIONS, 0))
    assert header.header_version == 1
    assert (body.client_software_name, body.client_software_version) == ("", "")


def test_java_api_versions_probe_above_our_range() -> None:
    """kafka-clients 4.4 opens with ApiVersions v5; we answer v0 UNSUPPORTED_VERSION with our
    ranges (KIP-511), and the client retries at v4."""
    entry = _entry("java", API_VERSIONS, 5)
    assert not _in_range(API_VERSIONS, 5)
    frame = memoryview((GOLDEN / entry["request_file"]).read_bytes())
    header, _ = parse_request_header(frame)
    assert (header.api_version, header.client_id) == (5, "adminclient-1")
    raw = (GOLDEN / entry["response_file"]).read_bytes()
    reader = Reader(memoryview(raw))
    assert reader.int32() == entry["correlation_id"]
    body = API_SCHEMAS[API_VERSIONS].decode_response(reader, 0)
    assert reader.pos == len(raw)
    assert body.error_code == UNSUPPORTED_VERSION
    ranges = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
    assert ranges[API_VERSIONS][1] == 4
    retry = _entry("java", API_VERSIONS, 4)
    assert _response(retry).error_code == 0


@pytest.mark.parametrize("client", sorted(FIRST_PRODUCE_CODEC))
def test_produce_request_batches(client: str) -> None:
    _, body = _request(_entry(client, PRODUCE))
    assert body.transactional_id is None
    assert body.acks == -1
    batches = [
        h
        for topic in body.topic_data
        for part in topic.partition_data
        for h in iter_batch_headers(part.records)
        if part.records is not None
    ]
    assert batches
    for topic in body.topic_data:
        for part in topic.partition_data:
            for h in iter_batch_headers(part.records):
                data = memoryview(part.records)[h.position : h.position + h.size]
                assert h.magic == 2
                assert crc32c(data[21:]) == h.crc
    for h in batches:
        assert h.compression == FIRST_PRODUCE_CODEC[client]
        assert not h.is_transactional
        if client in IDEMPOTENT:
            assert h.producer_id >= 0 and h.producer_epoch >= 0 and h.base_sequence >= 0
        else:
            assert h.producer_id == -1


@pytest.mark.parametrize("client", sorted(IDEMPOTENT))
def test_init_producer_id_for_idempotence(client: str) -> None:
    entry = _entry(client, INIT_PRODUCER_ID)
    _, body = _request(entry)
    assert body.transactional_id is None
    resp = _response(entry)
    assert resp.error_code == 0 and resp.producer_id >= 0


@pytest.mark.parametrize("client", sorted(FIRST_PRODUCE_CODEC))
def test_produce_responses_succeeded(client: str) -> None:
    resp = _response(_entry(client, PRODUCE))
    parts = [p for t in resp.responses for p in t.partition_responses]
    assert parts and all(p.error_code == 0 and p.base_offset >= 0 for p in parts)


@pytest.mark.parametrize("client", sorted(FIRST_PRODUCE_CODEC))
def test_fetch_sessions(client: str) -> None:
    entry = _entry(client, FETCH)
    _, body = _request(entry)
    assert entry["api_version"] >= 7
    assert body.session_id == 0  # every first Fetch is full
    if client in ("java", "kafka_python"):
        assert body.session_epoch == 0  # asks for a new incremental session (KIP-227)
    else:
        assert body.session_epoch == -1  # librdkafka/aiokafka: sessionless full fetches
    if entry["api_version"] >= 13:
        assert all(t.topic == "" and t.topic_id.int != 0 for t in body.topics)
    else:
        assert all(t.topic for t in body.topics)
    resp = _response(entry)
    assert resp.error_code == 0
    assert all(p.error_code == 0 for t in resp.responses for p in t.partitions)


@pytest.mark.parametrize("client", sorted(FIRST_PRODUCE_CODEC))
def test_metadata_advertises_one_loopback_broker(client: str) -> None:
    resp = _response(_entry(client, METADATA))
    assert [(b.node_id, b.host) for b in resp.brokers] == [(1, "127.0.0.1")]
    assert resp.brokers[0].port > 0
