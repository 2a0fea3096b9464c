"""Hostile and malformed input against a live broker process, and Kafka's answers to it.

Every case runs against one ``python -m pydmq serve`` child process and, after each case,
checks that a second, well-behaved connection is still served (ApiVersions + Metadata), and
that the process is alive. The last test does a confluent-kafka produce + consume round trip.

Kafka's behaviour that the cases pin (Kafka 4.x):
* garbage, absurd or negative size prefixes, unknown API keys, unsupported versions of any
  API but ApiVersions, and unparsable bodies close the connection (SocketServer /
  KafkaApis: InvalidRequestException -> close);
* ApiVersions with a version it does not know answers UNSUPPORTED_VERSION (35) in a v0 body
  that still lists the supported API keys;
* Produce per-partition errors: CRC mismatch -> CORRUPT_MESSAGE (2); a batch whose magic is
  not 2 in Produce v3+ -> INVALID_RECORD (87) (ProduceRequest.validateRecords throws
  InvalidRecordException "Produce requests with version N are only allowed to contain record
  batches with magic version 2", which KafkaApis maps per partition); acks not in {0,1,-1}
  -> INVALID_REQUIRED_ACKS (21); batch above max.message.bytes -> MESSAGE_TOO_LARGE (10);
  sequence gap -> OUT_OF_ORDER_SEQUENCE_NUMBER (45); a retry of one of the last five batches
  -> NONE with the original base offset; an older producer epoch -> INVALID_PRODUCER_EPOCH (47).
"""

from __future__ import annotations

import shutil
import struct
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydmq.protocol.messages.api_versions import ApiVersionsRequest
from pydmq.protocol.messages.metadata import MetadataRequest
from pydmq.protocol.primitives import Writer
from pydmq.protocol.records import SimpleRecord, build_batch
from pydmq.testing.process import BrokerProcess
from support.broker_checks import (
    EARLIEST,
    assert_serves,
    create_topic,
    init_producer_id,
    list_offset,
    metadata_topic_error,
    produce_raw,
    rss_kib,
    unique_topic,
)
from support.raw_client import (
    RawClient,
    decode_response_frame,
    encode_raw_frame,
    encode_request_frame,
)

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

CLOSE_TIMEOUT = 5.0
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC_EXCEPTION = 17
INVALID_REQUIRED_ACKS = 21
UNSUPPORTED_VERSION = 35
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
INVALID_RECORD = 87


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    root = Path(tempfile.mkdtemp(prefix="pydmq-badinput-"))
    proc = BrokerProcess(
        root / "data",
        overrides={"num.partitions": 1, "auto.create.topics.enable": "true"},
        log_path=root / "broker.log",
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def healthy(broker: BrokerProcess) -> Iterator[BrokerProcess]:
    """Run the case, then check the process is alive and still serves a new connection."""
    assert_serves(broker.bootstrap)
    yield broker
    assert broker.process is not None and broker.process.poll() is None, (
        f"broker process died; log tail:\n{broker.log_path.read_text()[-3000:]}"
    )
    assert_serves(broker.bootstrap)


def _records(n: int = 3, size: int = 10, **kwargs: int) -> bytes:
    return build_batch([SimpleRecord(b"k%d" % i, b"v" * size) for i in range(n)], **kwargs)


def _assert_closed(client: RawClient, what: str) -> None:
    assert client.wait_closed(CLOSE_TIMEOUT), f"broker kept the connection open after {what}"


# -- framing -------------------------------------------------------------------------------


def test_garbage_bytes_close_the_connection(healthy: BrokerProcess) -> None:
    # An HTTP request: its "size prefix" is 'GET ' = 1.2 GB, above socket.request.max.bytes.
    with RawClient(healthy.bootstrap) as client:
        client.send(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        _assert_closed(client, "an HTTP request")
    # A small, valid size prefix followed by junk: api key -1 is unknown.
    with RawClient(healthy.bootstrap) as client:
        client.send(struct.pack(">i", 16) + b"\xff" * 16)
        _assert_closed(client, "16 bytes of 0xff")
    # Random bytes with a plausible size.
    rnd = bytes((i * 73 + 41) & 0xFF for i in range(200))
    with RawClient(healthy.bootstrap) as client:
        client.send(struct.pack(">i", len(rnd)) + rnd)
        _assert_closed(client, "200 pseudo-random bytes")


@pytest.mark.parametrize("size", [0x7FFFFFFF, -1, -0x80000000, 104857601])
def test_absurd_size_prefix_closes_without_allocating(healthy: BrokerProcess, size: int) -> None:
    before = rss_kib(healthy.pid)
    with RawClient(healthy.bootstrap) as client:
        client.send(struct.pack(">i", size))
        started = time.monotonic()
        _assert_closed(client, f"a size prefix of {size}")
        assert time.monotonic() - started < 2.0, "close was not immediate"
    after = rss_kib(healthy.pid)
    assert after - before < 64 * 1024, f"broker RSS grew from {before} KiB to {after} KiB"


def test_zero_size_frame_closes(healthy: BrokerProcess) -> None:
    # An empty frame has no request header: Kafka closes (InvalidRequestException).
    with RawClient(healthy.bootstrap) as client:
        client.send(struct.pack(">i", 0))
        _assert_closed(client, "a zero-length frame")


def test_many_large_announced_frames_do_not_blow_up_rss(healthy: BrokerProcess) -> None:
    """Sizes at socket.request.max.bytes (100 MiB) announced but never sent.

    Kafka would reserve the buffer too; what we check is that the broker does not *touch*
    100 MiB per connection (RSS stays bounded) and that it still serves others meanwhile.
    """
    before = rss_kib(healthy.pid)
    clients = [RawClient(healthy.bootstrap) for _ in range(5)]
    try:
        for client in clients:
            client.send(struct.pack(">i", 104857600) + b"\x00\x03\x00\x01")
        time.sleep(0.5)
        assert_serves(healthy.bootstrap)
        grown = rss_kib(healthy.pid) - before
        assert grown < 200 * 1024, f"RSS grew by {grown} KiB for 5 announced 100 MiB frames"
    finally:
        for client in clients:
            client.close()


def test_large_frame_arriving_in_pieces_is_served(healthy: BrokerProcess, topic: str) -> None:
    """A legitimate 8 MiB frame, trickled in 64 KiB pieces, is reassembled and answered."""
    records = _records(8, 1_000_000)  # ~8 MB batch: above max.message.bytes
    frame = encode_request_frame(0, 9, _produce_request(topic, records), 99)
    with RawClient(healthy.bootstrap, timeout=30) as client:
        for start in range(0, len(frame), 65536):
            client.send(frame[start : start + 65536])
        answer = client.read_frame()
        assert answer is not None
        response = decode_response_frame(answer, 0, 9)
        assert response.correlation_id == 99
        assert response.body.responses[0].partition_responses[0].error_code == MESSAGE_TOO_LARGE
        assert client.request(18, 0, ApiVersionsRequest()).body.error_code == 0


def test_huge_array_count_in_metadata_closes(healthy: BrokerProcess) -> None:
    # Metadata v1 (classic encoding): topics int32 count 0x7fffffff, and nothing after it.
    with RawClient(healthy.bootstrap) as client:
        client.send(encode_raw_frame(3, 1, 1, struct.pack(">i", 0x7FFFFFFF)))
        _assert_closed(client, "a Metadata v1 with 2^31-1 topics")
    # Metadata v12 (flexible): compact array length varint 0x7fffffff + 1.
    w = Writer(bytearray())
    w.uvarint(0x7FFFFFFF)
    with RawClient(healthy.bootstrap) as client:
        client.send(encode_raw_frame(3, 12, 1, bytes(w.buf), flexible_header=True))
        _assert_closed(client, "a Metadata v12 with 2^31-2 topics")
    # A string length larger than what remains.
    with RawClient(healthy.bootstrap) as client:
        client.send(encode_raw_frame(3, 1, 1, struct.pack(">ih", 1, 0x7FFF) + b"abc"))
        _assert_closed(client, "a topic name of 32767 bytes in a 5-byte body")


def test_truncated_frame_then_client_close(healthy: BrokerProcess) -> None:
    with RawClient(healthy.bootstrap) as client:
        client.send(struct.pack(">i", 100) + b"\x00" * 50)
        client.shutdown_write()
        _assert_closed(client, "a half frame and EOF")


def test_valid_header_with_truncated_body_closes(healthy: BrokerProcess) -> None:
    # Metadata v1: 2 topics announced, one complete name, the second missing. The frame size
    # is consistent with what is sent, so the body decoder must notice the truncation.
    body = struct.pack(">i", 2) + struct.pack(">h", 3) + b"abc" + struct.pack(">h", 10) + b"xy"
    with RawClient(healthy.bootstrap) as client:
        client.send(encode_raw_frame(3, 1, 7, body))
        _assert_closed(client, "a Metadata body truncated inside a string")
    # A Produce v9 whose body stops in the middle of the records field.
    frame = encode_request_frame(0, 9, _produce_request("t-trunc", _records()), 8)
    cut = frame[4:-20]
    with RawClient(healthy.bootstrap) as client:
        client.send(struct.pack(">i", len(cut)) + cut)
        _assert_closed(client, "a Produce body truncated inside its records")


def _produce_request(topic: str, records: bytes, acks: int = -1):  # type: ignore[no-untyped-def]
    from pydmq.protocol.messages.produce import (
        PartitionProduceData,
        ProduceRequest,
        TopicProduceData,
    )

    return ProduceRequest(
        acks=acks,
        timeout=5000,
        topic_data=[
            TopicProduceData(
                name=topic, partition_data=[PartitionProduceData(index=0, records=records)]
            )
        ],
    )


# -- API keys and versions -------------------------------------------------------------------


@pytest.mark.parametrize("api_key", [9999, 200, -1, 4, 5, 6, 7, 1000])
def test_unknown_api_key_closes(healthy: BrokerProcess, api_key: int) -> None:
    with RawClient(healthy.bootstrap) as client:
        client.send(encode_raw_frame(api_key, 0, 1, b""))
        _assert_closed(client, f"api key {api_key}")


def test_api_versions_v127_answers_unsupported_version_in_v0_body(healthy: BrokerProcess) -> None:
    with RawClient(healthy.bootstrap) as client:
        # A v127 body cannot be known: send what a future client might (flexible-style bytes).
        client.send(encode_raw_frame(18, 127, 42, b"\x05probe\x041.0\x00", flexible_header=True))
        frame = client.read_frame()
        assert frame is not None, "broker closed instead of answering ApiVersions v127"
        # Response header v0 (correlation id only, never tagged fields), then a v0 body.
        response = decode_response_frame(frame, 18, 0)
        assert response.correlation_id == 42
        assert response.trailing == 0, f"{response.trailing} bytes after the v0 body"
        assert response.body.error_code == UNSUPPORTED_VERSION
        keys = {k.api_key: (k.min_version, k.max_version) for k in response.body.api_keys}
        assert keys.get(18) == (0, 4), keys
        assert 0 in keys and 3 in keys
        # The client can continue on the same connection with a supported version.
        again = client.request(18, 0, ApiVersionsRequest())
        assert again.body.error_code == 0


@pytest.mark.parametrize("version", [5, 99, 32767])
def test_api_versions_above_max_uses_v0_body(healthy: BrokerProcess, version: int) -> None:
    with RawClient(healthy.bootstrap) as client:
        client.send(encode_raw_frame(18, version, 9, b""))
        frame = client.read_frame()
        assert frame is not None
        response = decode_response_frame(frame, 18, 0)
        assert (response.correlation_id, response.body.error_code, response.trailing) == (9, 35, 0)


@pytest.mark.parametrize("api_key,version", [(0, 99), (0, 2), (3, 14), (1, 99), (2, -1)])
def test_unsupported_version_of_other_apis_closes(
    healthy: BrokerProcess, api_key: int, version: int
) -> None:
    with RawClient(healthy.bootstrap) as client:
        client.send(encode_raw_frame(api_key, version, 1, b"\x00" * 16))
        _assert_closed(client, f"api {api_key} v{version}")


# -- produce validation -----------------------------------------------------------------------


@pytest.fixture
def topic(broker: BrokerProcess) -> str:
    name = unique_topic("bad")
    with RawClient(broker.bootstrap) as client:
        assert create_topic(client, name, 1) == 0
    return name


def test_crc_mismatch_is_corrupt_message(healthy: BrokerProcess, topic: str) -> None:
    with RawClient(healthy.bootstrap) as client:
        assert produce_raw(client, topic, _records()).error_code == 0
        latest = list_offset(client, topic)
        assert latest == 3
        batch = bytearray(_records())
        batch[-1] ^= 0x01  # a record byte: covered by the CRC
        p = produce_raw(client, topic, bytes(batch))
        assert p.error_code == CORRUPT_MESSAGE, p
        assert p.base_offset == -1
        batch = bytearray(_records())
        batch[17] ^= 0xFF  # the stored CRC itself
        assert produce_raw(client, topic, bytes(batch)).error_code == CORRUPT_MESSAGE
        assert list_offset(client, topic) == latest
        assert list_offset(client, topic, timestamp=EARLIEST) == 0


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_magic_is_invalid_record(healthy: BrokerProcess, topic: str, magic: int) -> None:
    """Kafka: ProduceRequest.validateRecords -> InvalidRecordException -> INVALID_RECORD (87)."""
    batch = bytearray(_records())
    batch[16] = magic  # not covered by the CRC: the batch is otherwise intact
    with RawClient(healthy.bootstrap) as client:
        for version in (3, 9):
            p = produce_raw(client, topic, bytes(batch), version=version)
            assert p.error_code == INVALID_RECORD, (
                f"Produce v{version} with a magic-{magic} batch: error {p.error_code} "
                f"({p.error_message!r}); Kafka answers INVALID_RECORD (87)"
            )
        assert list_offset(client, topic) == 0


@pytest.mark.parametrize("magic", [3, 0x7F, 0xFF])
def test_unknown_magic_is_corrupt_message(healthy: BrokerProcess, topic: str, magic: int) -> None:
    """Kafka: ByteBufferLogInputStream "Invalid magic found in record" -> CORRUPT_MESSAGE (2)."""
    batch = bytearray(_records())
    batch[16] = magic
    with RawClient(healthy.bootstrap) as client:
        p = produce_raw(client, topic, bytes(batch))
        assert p.error_code == CORRUPT_MESSAGE, p
        assert list_offset(client, topic) == 0


def _recrc(batch: bytearray) -> bytes:
    from pydmq.protocol.records import crc32c

    struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[21:]))
    return bytes(batch)


def test_inconsistent_record_count_is_invalid_record(healthy: BrokerProcess, topic: str) -> None:
    """Kafka LogValidator.validateBatch: InvalidRecordException -> INVALID_RECORD (87)."""
    with RawClient(healthy.bootstrap) as client:
        batch = bytearray(_records(3))
        struct.pack_into(">i", batch, 57, 2)  # recordsCount 2, lastOffsetDelta 2
        p = produce_raw(client, topic, _recrc(batch))
        assert p.error_code == INVALID_RECORD, p
        batch = bytearray(_records(3))
        struct.pack_into(">i", batch, 57, 0)  # recordsCount 0
        p = produce_raw(client, topic, _recrc(batch))
        assert p.error_code == INVALID_RECORD, p
        assert list_offset(client, topic) == 0


def test_control_batch_from_client_is_invalid_record(healthy: BrokerProcess, topic: str) -> None:
    """Kafka LogValidator: "Clients are not allowed to write control records" -> 87."""
    batch = bytearray(_records(1))
    struct.pack_into(">h", batch, 21, 0x20)  # attributes: control
    with RawClient(healthy.bootstrap) as client:
        p = produce_raw(client, topic, _recrc(batch))
        assert p.error_code == INVALID_RECORD, p
        assert list_offset(client, topic) == 0


def test_two_batches_in_one_partition_is_invalid_record(healthy: BrokerProcess, topic: str) -> None:
    with RawClient(healthy.bootstrap) as client:
        p = produce_raw(client, topic, _records() + _records())
        assert p.error_code == INVALID_RECORD
        assert list_offset(client, topic) == 0


def test_truncated_batch_is_refused(healthy: BrokerProcess, topic: str) -> None:
    with RawClient(healthy.bootstrap) as client:
        p = produce_raw(client, topic, _records()[:-5])
        assert p.error_code in (CORRUPT_MESSAGE, INVALID_RECORD), p
        p = produce_raw(client, topic, _records()[:30])
        assert p.error_code in (CORRUPT_MESSAGE, INVALID_RECORD), p
        assert list_offset(client, topic) == 0


def test_acks_2_is_invalid_required_acks(healthy: BrokerProcess, topic: str) -> None:
    with RawClient(healthy.bootstrap) as client:
        for acks in (2, -2, 100):
            assert (
                produce_raw(client, topic, _records(), acks=acks).error_code
                == INVALID_REQUIRED_ACKS
            )
        assert list_offset(client, topic) == 0


def test_batch_above_max_message_bytes(healthy: BrokerProcess) -> None:
    name = unique_topic("small")
    with RawClient(healthy.bootstrap) as client:
        assert create_topic(client, name, 1, {"max.message.bytes": "2000"}) == 0
        assert produce_raw(client, name, _records(3, 100)).error_code == 0
        p = produce_raw(client, name, _records(3, 1000))
        assert p.error_code == MESSAGE_TOO_LARGE, p
        assert list_offset(client, name) == 3
    # The broker default (message.max.bytes 1048588) on an auto-created topic.
    name = unique_topic("big")
    with RawClient(healthy.bootstrap, timeout=20) as client:
        # The creating request answers "being created" (as Kafka 4.4), the next one finds it.
        assert metadata_topic_error(client, name) == UNKNOWN_TOPIC_OR_PARTITION
        assert metadata_topic_error(client, name) == 0
        p = produce_raw(client, name, _records(2, 600_000))
        assert p.error_code == MESSAGE_TOO_LARGE, p
        assert list_offset(client, name) == 0


# -- topic names ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["bad topic!", "a/b", "x" * 250, ".", "..", "caf\u00e9"])
def test_invalid_topic_names(healthy: BrokerProcess, name: str) -> None:
    with RawClient(healthy.bootstrap) as client:
        assert metadata_topic_error(client, name, auto_create=True) == INVALID_TOPIC_EXCEPTION
        assert create_topic(client, name) == INVALID_TOPIC_EXCEPTION
        assert metadata_topic_error(client, name, auto_create=False) in (INVALID_TOPIC_EXCEPTION, 3)
        # Nothing was created: a full Metadata does not list it.
        full = client.request(3, 12, MetadataRequest(topics=None))
        assert name not in {t.name for t in full.body.topics}
    if healthy.data_dir.exists():
        assert not [p for p in healthy.data_dir.iterdir() if p.name.startswith(name + "-")]


def test_249_char_topic_name_is_legal(healthy: BrokerProcess) -> None:
    name = "y" * 240 + unique_topic("")[-9:]
    assert len(name) == 249
    with RawClient(healthy.bootstrap) as client:
        assert create_topic(client, name) == 0


# -- idempotent producer state ----------------------------------------------------------------


def test_idempotent_sequence_checks(healthy: BrokerProcess, topic: str) -> None:
    with RawClient(healthy.bootstrap) as client:
        pid, epoch = init_producer_id(client)
        assert pid >= 0

        def batch(seq: int, n: int = 2, ep: int = epoch, tag: bytes = b"") -> bytes:
            return build_batch(
                [SimpleRecord(b"k%d" % (seq + i), b"v%d" % (seq + i) + tag) for i in range(n)],
                producer_id=pid,
                producer_epoch=ep,
                base_sequence=seq,
            )

        sent = []
        for k in range(6):  # sequences 0..11, offsets 0..11
            data = batch(2 * k)
            p = produce_raw(client, topic, data)
            assert (p.error_code, p.base_offset) == (0, 2 * k)
            sent.append(data)
        assert list_offset(client, topic) == 12

        # A gap: expected 12, got 14.
        p = produce_raw(client, topic, batch(14))
        assert p.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER, p
        assert list_offset(client, topic) == 12

        # Exact retries of the last five batches: NONE with the original base offset.
        for k in range(1, 6):
            p = produce_raw(client, topic, sent[k])
            assert (p.error_code, p.base_offset) == (0, 2 * k), f"retry of batch {k}: {p}"
        assert list_offset(client, topic) == 12

        # The first batch fell out of the five retained: Kafka answers OUT_OF_ORDER_SEQUENCE.
        p = produce_raw(client, topic, sent[0])
        assert p.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER, p
        assert list_offset(client, topic) == 12

        # The next in-sequence batch still lands at 12.
        p = produce_raw(client, topic, batch(12))
        assert (p.error_code, p.base_offset) == (0, 12)

        # A new epoch starts at sequence 0; afterwards the old epoch is fenced.
        p = produce_raw(client, topic, batch(0, ep=epoch + 1, tag=b"e1"))
        assert (p.error_code, p.base_offset) == (0, 14), p
        p = produce_raw(client, topic, batch(14, ep=epoch))
        assert p.error_code == INVALID_PRODUCER_EPOCH, p
        assert list_offset(client, topic) == 16

        # A new epoch that does not start at 0 is out of order.
        p = produce_raw(client, topic, batch(5, ep=epoch + 2))
        assert p.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER, p
        assert list_offset(client, topic) == 16


def test_idempotent_retry_after_pipelined_requests(healthy: BrokerProcess, topic: str) -> None:
    """Five in flight on one connection (as librdkafka does), then all five retried."""
    with RawClient(healthy.bootstrap) as client:
        pid, epoch = init_producer_id(client)
        batches = [
            build_batch(
                [SimpleRecord(None, b"%d" % s)],
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=s,
            )
            for s in range(5)
        ]
        ids = [client.send_request_no_response(0, 9, _produce_request(topic, b)) for b in batches]
        for expected_offset, cid in enumerate(ids):
            frame = client.read_frame()
            assert frame is not None
            response = decode_response_frame(frame, 0, 9)
            assert response.correlation_id == cid
            p = response.body.responses[0].partition_responses[0]
            assert (p.error_code, p.base_offset) == (0, expected_offset)
        for expected_offset, b in enumerate(batches):
            p = produce_raw(client, topic, b)
            assert (p.error_code, p.base_offset) == (0, expected_offset)
        assert list_offset(client, topic) == 5


# -- the end: real clients still work -------------------------------------------------------


def test_zz_confluent_kafka_round_trip_after_abuse(broker: BrokerProcess) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    assert broker.process is not None and broker.process.poll() is None
    name = unique_topic("after")
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    acked: list[int] = []

    def on_delivery(err, msg):  # type: ignore[no-untyped-def]
        assert err is None, err
        acked.append(msg.offset())

    for i in range(200):
        producer.produce(name, key=b"%d" % i, value=b"value-%d" % i, on_delivery=on_delivery)
    assert producer.flush(20) == 0
    assert sorted(acked) == list(range(200))
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(name, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < 200 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.append(msg.value())
        assert got == [b"value-%d" % i for i in range(200)]
    finally:
        consumer.close()
    producer.flush(5)
    # Not a Kafka semantic: the log did not record an unexpected server error.
    log = broker.log_path.read_text(errors="replace")
    assert "Traceback" not in log, log[-4000:]
