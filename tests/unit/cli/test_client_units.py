"""Pure unit tests of the client pieces the CLI relies on (no broker)."""

from __future__ import annotations

import pytest

from pydmq.cli.consume import compile_format
from pydmq.cli.produce import iter_lines, split_key
from pydmq.client import (
    ConsumedRecord,
    KafkaError,
    default_partition,
    murmur2,
    parse_address,
    parse_fetched_records,
    to_positive,
)
from pydmq.protocol.records import SimpleRecord, build_batch


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        # Values of Java's org.apache.kafka.common.utils.Utils.murmur2 for these inputs.
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"abc", 479470107),
    ],
)
def test_murmur2_matches_java(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_to_positive_and_partition() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0
    assert default_partition(b"foobar", 7) == to_positive(-790332482) % 7
    with pytest.raises(ValueError):
        default_partition(b"x", 0)


def test_parse_address() -> None:
    assert parse_address("h:1") == ("h", 1)
    assert parse_address("PLAINTEXT://h:2") == ("h", 2)
    assert parse_address("[::1]:3") == ("::1", 3)
    assert parse_address("host") == ("host", 9092)


def test_kafka_error_names() -> None:
    err = KafkaError(3, "topic 'x'")
    assert (
        err.name == "UNKNOWN_TOPIC_OR_PARTITION"
        and str(err) == "UNKNOWN_TOPIC_OR_PARTITION: topic 'x'"
    )
    assert err.retriable
    assert KafkaError(9999).name == "UNKNOWN_ERROR_9999"


def test_compile_format() -> None:
    record = ConsumedRecord("t", 2, 40, 1234, None, b"val", (("a", b"1"), ("b", None)))
    render = compile_format("%t|%p|%o|%T|[%k]|%s|%h|%K|%S|%%\\n")
    assert render(record) == b"t|2|40|1234|[]|val|a=1,b|-1|3|%\n"
    with pytest.raises(ValueError, match="%q"):
        compile_format("%q")


def test_lines_and_keys() -> None:
    import io

    assert list(iter_lines(io.BytesIO(b"a\n\nb\r\nc"))) == [b"a", b"", b"b\r", b"c"]
    assert split_key(b"k:v:w", b":") == (b"k", b"v:w")
    assert split_key(b"novalue", b":") == (None, b"novalue")
    assert split_key(b"k:v", None) == (None, b"k:v")


def test_parse_fetched_records_skips_and_truncates() -> None:
    first = build_batch(
        [SimpleRecord(b"k%d" % i, b"v%d" % i, (), 1000 + i) for i in range(5)], base_offset=10
    )
    second = build_batch([SimpleRecord(None, b"w", (), 2000)], base_offset=15, compression=1)
    data = first + second + second[:30]  # a torn batch at the end is ignored
    records, next_offset = parse_fetched_records("t", 0, data, 12)
    assert [(r.offset, r.value) for r in records] == [
        (12, b"v2"),
        (13, b"v3"),
        (14, b"v4"),
        (15, b"w"),
    ]
    assert next_offset == 16
    assert parse_fetched_records("t", 0, None, 3) == ([], 3)
    records, next_offset = parse_fetched_records("t", 0, first, 20)
    assert records == [] and next_offset == 20
