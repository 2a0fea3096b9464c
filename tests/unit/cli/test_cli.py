"""``pydmq topics|produce|consume`` run in-process against an embedded broker."""

from __future__ import annotations

import io
import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pydmq.cli import main
from pydmq.client import (
    ApiKey,
    Consumer,
    KafkaClient,
    default_partition,
)
from pydmq.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from pydmq.protocol.records import iter_batch_headers
from pydmq.testing.embedded import EmbeddedBroker

_counter = itertools.count()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path_factory.mktemp("cli") / "d") as b:
        yield b


@pytest.fixture
def bootstrap(broker: EmbeddedBroker) -> str:
    return broker.bootstrap


def topic_name(prefix: str) -> str:
    return f"{prefix}-{next(_counter)}-{time.monotonic_ns() % 1_000_000}"


class Cli:
    def __init__(self, capsysbinary: pytest.CaptureFixture[bytes], bootstrap: str) -> None:
        self.cap = capsysbinary
        self.bootstrap = bootstrap

    def __call__(self, *argv: str, stdin: bytes | None = None) -> tuple[int, str, str]:
        """Run ``pydmq argv... -b bootstrap``; returns (exit code, stdout, stderr)."""
        self.cap.readouterr()
        args = [*argv, "-b", self.bootstrap]
        if stdin is not None:
            mp = pytest.MonkeyPatch()
            mp.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin)))
            try:
                rc = main(args)
            finally:
                mp.undo()
        else:
            rc = main(args)
        out, err = self.cap.readouterr()
        return rc, out.decode(), err.decode()

    def ok(self, *argv: str, stdin: bytes | None = None) -> str:
        rc, out, err = self(*argv, stdin=stdin)
        assert rc == 0, f"pydmq {' '.join(argv)} failed ({rc}): {err}"
        return out


@pytest.fixture
def cli(capsysbinary: pytest.CaptureFixture[bytes], bootstrap: str) -> Cli:
    return Cli(capsysbinary, bootstrap)


# -- topics ---------------------------------------------------------------------------------------


def test_topics_create_list_describe_delete(cli: Cli, bootstrap: str) -> None:
    name = topic_name("admin")
    out = cli.ok("topics", "create", name, "--partitions", "3", "--config", "retention.ms=123456")
    assert out == f"Created topic {name}.\n"
    assert name in cli.ok("topics", "list").splitlines()

    cli.ok("produce", "-t", name, "-p", "1", "-q", stdin=b"a\nb\nc\n")
    out = cli.ok("topics", "describe", name)
    head, table = out.split("\n", 1)
    assert head.startswith(f"Topic: {name}  TopicId: ")
    assert "PartitionCount: 3  ReplicationFactor: 1  Configs: " in head
    with KafkaClient(bootstrap) as client:
        if client.supports(ApiKey.DESCRIBE_CONFIGS):
            assert head.endswith("Configs: retention.ms=123456")
    rows = [line.split() for line in table.splitlines()]
    assert rows[0] == ["PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "LOG-START", "LOG-END"]
    assert [r[0] for r in rows[1:]] == ["0", "1", "2"]
    assert [r[1:5] for r in rows[1:]] == [["1", "0", "1", "1"]] * 3
    assert [(r[5], r[6]) for r in rows[1:]] == [("0", "0"), ("0", "3"), ("0", "0")]

    rc, _, err = cli("topics", "create", name, "--partitions", "1")
    assert rc == 1 and err.startswith("pydmq topics: TOPIC_ALREADY_EXISTS")
    assert cli.ok("topics", "create", name, "--if-not-exists") == f"Topic {name} already exists.\n"

    assert cli.ok("topics", "delete", name) == f"Deleted topic {name}.\n"
    assert name not in cli.ok("topics", "list").splitlines()


def test_describe_unknown_topic_fails(cli: Cli) -> None:
    rc, out, err = cli("topics", "describe", "no-such-topic")
    assert rc == 1
    assert out == ""
    assert err.startswith("pydmq topics: UNKNOWN_TOPIC_OR_PARTITION")


def test_unreachable_broker(capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    rc = main(["topics", "list", "-b", "127.0.0.1:1", "--timeout", "2"])
    err = capsysbinary.readouterr().err.decode()
    assert rc == 1 and err.startswith("pydmq topics: NETWORK_EXCEPTION: cannot connect")


def test_alter_partitions_and_configs(cli: Cli, bootstrap: str) -> None:
    name = topic_name("alter")
    cli.ok("topics", "create", name, "--partitions", "1")
    with KafkaClient(bootstrap) as client:
        can_partition = client.supports(ApiKey.CREATE_PARTITIONS)
        can_config = client.supports(ApiKey.INCREMENTAL_ALTER_CONFIGS)
        can_describe = client.supports(ApiKey.DESCRIBE_CONFIGS)
    rc, out, err = cli("topics", "alter", name, "--partitions", "2")
    if can_partition:
        assert rc == 0 and out == f"Topic {name} now has 2 partitions.\n"
        assert "PartitionCount: 2" in cli.ok("topics", "describe", name)
    else:
        assert rc == 1 and "UNSUPPORTED_VERSION" in err and "CreatePartitions" in err
    rc, out, err = cli("topics", "alter", name, "--config", "retention.ms=5000")
    if can_config:
        assert rc == 0, err
        if can_describe:
            head = cli.ok("topics", "describe", name).splitlines()[0]
            assert head.endswith("Configs: retention.ms=5000")
            cli.ok("topics", "alter", name, "--delete-config", "retention.ms")
            head = cli.ok("topics", "describe", name).splitlines()[0]
            assert head.endswith("Configs: -")
    else:
        assert rc == 1 and "IncrementalAlterConfigs" in err


def test_degrades_without_admin_apis(
    cli: Cli, bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker that does not advertise DescribeConfigs/CreatePartitions/IncrementalAlterConfigs."""
    name = topic_name("old")
    cli.ok("topics", "create", name, "--partitions", "1")
    hidden = {ApiKey.DESCRIBE_CONFIGS, ApiKey.CREATE_PARTITIONS, ApiKey.INCREMENTAL_ALTER_CONFIGS}
    real = KafkaClient.supports

    def supports(self: KafkaClient, api_key: int, node_id: int | None = None) -> bool:
        return api_key not in hidden and real(self, api_key, node_id)

    monkeypatch.setattr(KafkaClient, "supports", supports)
    head = cli.ok("topics", "describe", name).splitlines()[0]
    assert head.endswith("Configs: (DescribeConfigs not supported by the broker)")
    rc, _, err = cli("topics", "alter", name, "--partitions", "4")
    assert rc == 1
    assert err == (
        "pydmq topics: UNSUPPORTED_VERSION: the broker does not support "
        "CreatePartitions (adding partitions)\n"
    )
    rc, _, err = cli("topics", "alter", name, "--config", "retention.ms=1")
    assert rc == 1 and "IncrementalAlterConfigs" in err


# -- produce / consume ----------------------------------------------------------------------------


def test_produce_keys_headers_and_consume_format(cli: Cli) -> None:
    name = topic_name("kv")
    cli.ok("topics", "create", name, "--partitions", "3")
    lines = [b"alpha:1", b"beta:2", b"nokey", b"alpha:3", b"gamma:4", b"beta:5", b"plain"]
    rc, out, err = cli(
        "produce",
        "-t",
        name,
        "-K",
        ":",
        "-H",
        "src=cli",
        "-H",
        "n=7",
        "--compression",
        "gzip",
        stdin=b"\n".join(lines) + b"\n",
    )
    assert rc == 0 and out == ""
    assert err.startswith("pydmq produce: produced 7 records")

    # Where each record must be: murmur2 for keys, round-robin from partition 0 otherwise.
    expected: dict[int, list[str]] = {0: [], 1: [], 2: []}
    round_robin = 0
    for line in lines:
        if b":" in line:
            key, value = line.split(b":", 1)
            p = default_partition(key, 3)
        else:
            key, value, p = b"", line, round_robin % 3
            round_robin += 1
        expected[p].append(f"{p}|{len(expected[p])}|{key.decode()}|{value.decode()}|src=cli,n=7")

    out = cli.ok(
        "consume", "-t", name, "--from-beginning", "--exit-at-end", "-f", "%p|%o|%k|%s|%h\\n"
    )
    got: dict[int, list[str]] = {0: [], 1: [], 2: []}
    for line in out.splitlines():
        got[int(line.split("|", 1)[0])].append(line)
    assert got == expected
    assert len(out.splitlines()) == 7

    # One partition, exact output with every token.
    out = cli.ok(
        "consume",
        "-t",
        name,
        "-p",
        str(default_partition(b"alpha", 3)),
        "--from-beginning",
        "-c",
        "2",
        "-f",
        "%t:%k=%s (%K/%S) %%\\t|\\n",
    )
    assert out == f"{name}:alpha=1 (5/1) %\t|\n{name}:alpha=3 (5/1) %\t|\n"


def test_consume_from_middle_of_batch(cli: Cli) -> None:
    name = topic_name("mid")
    cli.ok("topics", "create", name, "--partitions", "1")
    data = b"".join(b"v%d\n" % i for i in range(10))
    cli.ok("produce", "-t", name, "--compression", "lz4", "-q", stdin=data)  # one batch
    out = cli.ok("consume", "-t", name, "--offset", "4", "-c", "3", "-f", "%o=%s\\n")
    assert out == "4=v4\n5=v5\n6=v6\n"
    out = cli.ok("consume", "-t", name, "--offset", "-2", "-e", "-f", "%o=%s\\n")
    assert out == "8=v8\n9=v9\n"
    out = cli.ok("consume", "-t", name, "-o", "9", "-e")
    assert out == "v9\n"
    assert cli.ok("consume", "-t", name, "-e") == ""  # default start: the end
    rc, _, err = cli("consume", "-t", name, "--offset", "50", "-e")
    assert rc == 1 and err.startswith("pydmq consume: OFFSET_OUT_OF_RANGE")


def test_consume_offset_time(cli: Cli) -> None:
    name = topic_name("time")
    cli.ok("topics", "create", name, "--partitions", "1")
    cli.ok("produce", "-t", name, "-q", stdin=b"old1\nold2\nold3\n")
    time.sleep(0.02)
    cut = time.time_ns() // 1_000_000
    time.sleep(0.02)
    cli.ok("produce", "-t", name, "-q", stdin=b"new1\nnew2\n")
    out = cli.ok("consume", "-t", name, "--offset-time", str(cut), "-e", "-f", "%o %s\\n")
    assert out == "3 new1\n4 new2\n"
    future = str(cut + 3_600_000)
    assert cli.ok("consume", "-t", name, "--offset-time", future, "-e") == ""


def test_produce_file_acks_and_codecs(cli: Cli, tmp_path: Path) -> None:
    name = topic_name("codecs")
    cli.ok("topics", "create", name, "--partitions", "1")
    expected: list[str] = []
    for codec, acks in [("none", "0"), ("gzip", "1"), ("snappy", "-1"), ("zstd", "-1")]:
        path = tmp_path / f"{codec}.txt"
        values = [f"{codec}-{i}-" + "x" * (i % 50) for i in range(300)]
        path.write_text("\n".join(values))  # no final newline: the last line still counts
        cli.ok(
            "produce", "-t", name, "--file", str(path), "--compression", codec, "--acks", acks, "-q"
        )
        expected += values
    out = cli.ok("consume", "-t", name, "--from-beginning", "-e")
    assert out.splitlines() == expected


def test_idempotent_batches_and_sequences(cli: Cli, bootstrap: str) -> None:
    name = topic_name("idem")
    cli.ok("topics", "create", name, "--partitions", "1")
    cli.ok(
        "produce",
        "-t",
        name,
        "--batch-records",
        "3",
        "-q",
        stdin=b"".join(b"r%d\n" % i for i in range(7)),
    )
    with KafkaClient(bootstrap) as client:
        client.wait_for_topic(name)
        version = client.version_for(ApiKey.FETCH)
        request = FetchRequest(
            max_wait=100,
            topics=[
                FetchTopic(
                    topic=name,
                    topic_id=client.topic_id(name),
                    partitions=[FetchPartition(partition=0, partition_max_bytes=1 << 20)],
                )
            ],
        )
        response = client.send(ApiKey.FETCH, request, version=version)
        data = bytes(response.responses[0].partitions[0].records)
        headers = list(iter_batch_headers(data))
        assert [h.records_count for h in headers] == [3, 3, 1]
        assert [h.base_sequence for h in headers] == [0, 3, 6]
        assert len({h.producer_id for h in headers}) == 1 and headers[0].producer_id >= 0

        consumer = Consumer(client, name, {0: 0})
        records = []
        while not consumer.at_end():
            records += consumer.poll().records
        assert [r.value for r in records] == [b"r%d" % i for i in range(7)]


def test_produce_unknown_partition(cli: Cli) -> None:
    name = topic_name("badp")
    cli.ok("topics", "create", name, "--partitions", "1")
    rc, _, err = cli("produce", "-t", name, "-p", "5", stdin=b"x\n")
    assert rc == 1 and err.startswith("pydmq produce: UNKNOWN_TOPIC_OR_PARTITION")


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"pydmq {version('pydmq')}\n"
