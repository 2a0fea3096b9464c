"""Cross-checks against kafka-python's independent RecordBatch v2 codec (a test oracle).

kafka-python writes snappy with the xerial framing (as the Java client does), lz4 as an LZ4
frame and zstd as a zstd frame, so decoding its batches covers the framings real clients send.
"""

from __future__ import annotations

import pytest

kafka_records = pytest.importorskip("kafka.record.default_records")
kafka_codec = pytest.importorskip("kafka.codec")

from pydmq.protocol.compression import XERIAL_MAGIC  # noqa: E402
from pydmq.protocol.records import (  # noqa: E402
    BATCH_HEADER_SIZE,
    SimpleRecord,
    build_batch,
    decode_records,
    parse_batch_header,
    validate_batch,
)

CODECS = {
    0: lambda: True,
    1: kafka_codec.has_gzip,
    2: kafka_codec.has_snappy,
    3: kafka_codec.has_lz4,
    4: kafka_codec.has_zstd,
}

RECORDS = [
    SimpleRecord(
        b"key-%d" % i, b"value %d " % i * 40, (("h1", b"x"), ("h2", None)), 1_700_000_000_000 + i
    )
    for i in range(50)
] + [SimpleRecord(None, None, (), 1_700_000_000_100), SimpleRecord(b"", b"", (("", b""),), 5)]


def _codec_or_skip(codec: int) -> None:
    if not CODECS[codec]():
        pytest.skip(f"kafka-python has no library for codec {codec}")


def _kafka_python_batch(codec: int, **producer: int) -> bytes:
    builder = kafka_records.DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=producer.get("producer_id", -1),
        producer_epoch=producer.get("producer_epoch", -1),
        base_sequence=producer.get("base_sequence", -1),
        batch_size=1 << 30,
    )
    for offset, record in enumerate(RECORDS):
        builder.append(
            offset,
            timestamp=record.timestamp,
            key=record.key,
            value=record.value,
            headers=list(record.headers),
        )
    return bytes(builder.build())


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_we_decode_kafka_python_batches(codec: int) -> None:
    _codec_or_skip(codec)
    data = _kafka_python_batch(codec, producer_id=9, producer_epoch=1, base_sequence=100)
    header = parse_batch_header(data)
    assert header.compression == codec  # the data compresses, so kafka-python kept the codec
    if codec == 2:
        assert data[BATCH_HEADER_SIZE : BATCH_HEADER_SIZE + 8] == XERIAL_MAGIC
    validate_batch(data, header)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (9, 1, 100)
    records = decode_records(data, header)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records] == [
        (i, r.timestamp, r.key, r.value, tuple(r.headers)) for i, r in enumerate(RECORDS)
    ]


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_kafka_python_decodes_our_batches(codec: int) -> None:
    _codec_or_skip(codec)
    data = build_batch(
        RECORDS,
        compression=codec,
        base_offset=1000,
        producer_id=4,
        producer_epoch=2,
        base_sequence=7,
    )
    batch = kafka_records.DefaultRecordBatch(data)
    assert batch.validate_crc()
    assert batch.base_offset == 1000
    assert batch.compression_type == codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (4, 2, 7)
    decoded = list(batch)
    assert len(decoded) == len(RECORDS)
    for i, (theirs, ours) in enumerate(zip(decoded, RECORDS, strict=True)):
        assert theirs.offset == 1000 + i
        assert theirs.timestamp == ours.timestamp
        assert theirs.key == ours.key
        assert theirs.value == ours.value
        assert [tuple(h) for h in theirs.headers] == list(ours.headers)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_kafka_python_codecs_decode_our_payloads(codec: int) -> None:
    _codec_or_skip(codec)
    from pydmq.protocol.compression import compress

    data = b"payload " * 5000
    decoders = {
        1: kafka_codec.gzip_decode,
        2: kafka_codec.snappy_decode,
        3: kafka_codec.lz4_decode,
        4: kafka_codec.zstd_decode,
    }
    assert decoders[codec](compress(codec, data)) == data
