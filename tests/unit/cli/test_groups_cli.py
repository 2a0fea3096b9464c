"""``pydmq groups`` against an embedded broker, with a real librdkafka consumer in the group."""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pydmq.cli import main
from pydmq.cli.groups import parse_datetime, parse_topic_partitions
from pydmq.client import KafkaClient
from pydmq.client.admin import (
    ConsumerAssignment,
    ConsumerSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    offset_fetch,
)
from pydmq.testing import EmbeddedBroker

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer  # noqa: E402

pytestmark = pytest.mark.timeout(60)

_counter = itertools.count()
PARTITIONS = 3
PER_PARTITION = 10
EXTRA_ON_P0 = 5


# -- pure helpers ---------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_roundtrip(version: int) -> None:
    sub = ConsumerSubscription(version, ["a", "bb"], b"ud")
    if version >= 1:
        sub.owned_partitions = {"a": [0, 2]}
    if version >= 2:
        sub.generation_id = 7
    if version >= 3:
        sub.rack_id = "rack-1"
    assert decode_subscription(encode_subscription(sub)) == sub


def test_subscription_layout_is_kafkas() -> None:
    # v0: int16 version, [string topics], nullable bytes user data (classic, non-flexible)
    data = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"
    assert decode_subscription(data) == ConsumerSubscription(0, ["t"], None)
    # a newer version is read with the newest layout known; trailing fields are ignored
    v3 = encode_subscription(ConsumerSubscription(3, ["t"], None, {}, 4, None))
    newer = b"\x00\x09" + v3[2:] + b"\x00\x00\x00\x00"
    assert decode_subscription(newer).generation_id == 4


def test_assignment_roundtrip_and_layout() -> None:
    assignment = ConsumerAssignment(3, {"t": [0, 1, 2], "u": [5]}, None)
    data = encode_assignment(assignment)
    assert data[:2] == b"\x00\x03"
    assert data[2:6] == b"\x00\x00\x00\x02"  # two topics
    assert decode_assignment(data) == assignment
    assert decode_assignment(data).partition_count == 4
    assert decode_assignment(b"") == ConsumerAssignment(0, {})
    with pytest.raises(ValueError):
        decode_assignment(data[:-3])
    with pytest.raises(ValueError):
        decode_subscription(b"\xff\xff")


def test_parse_topic_partitions_and_datetime() -> None:
    assert parse_topic_partitions("t") == ("t", None)
    assert parse_topic_partitions("t:2,0,2") == ("t", [0, 2])
    for bad in ("t:", "t:x", ":1", "t:-1"):
        with pytest.raises(ValueError):
            parse_topic_partitions(bad)
    expected = int(datetime(2024, 5, 1, 12, 0, tzinfo=UTC).timestamp() * 1000)
    assert parse_datetime("2024-05-01T12:00:00.000Z") == expected
    assert parse_datetime("2024-05-01T14:00:00+02:00") == expected
    local = datetime(2024, 5, 1, 12, 0).astimezone()
    assert parse_datetime("2024-05-01T12:00:00") == int(local.timestamp() * 1000)
    with pytest.raises(ValueError):
        parse_datetime("yesterday")


def test_reset_offsets_needs_a_target_and_a_scope() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    from pydmq.cli.groups import add_parser

    add_parser(sub)
    with pytest.raises(SystemExit):
        parser.parse_args(["groups", "reset-offsets", "g", "--topic", "t"])
    with pytest.raises(SystemExit):
        parser.parse_args(["groups", "reset-offsets", "g", "--to-earliest"])
    with pytest.raises(SystemExit):
        parser.parse_args(
            ["groups", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--to-latest"]
        )


# -- against a broker -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    data: Path = tmp_path_factory.mktemp("groups") / "d"
    with EmbeddedBroker(data, overrides={"group.initial.rebalance.delay.ms": 0}) as b:
        yield b


class Cli:
    def __init__(self, capsys: pytest.CaptureFixture[str], bootstrap: str) -> None:
        self.capsys = capsys
        self.bootstrap = bootstrap

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        """Run ``pydmq groups argv... -b bootstrap``; returns (exit code, stdout, stderr)."""
        self.capsys.readouterr()
        rc = main(["groups", *argv, "-b", self.bootstrap])
        out, err = self.capsys.readouterr()
        return rc, out, err


def _rows(table: str) -> list[dict[str, str]]:
    """Parse a format_table table whose cells contain no blanks."""
    lines = [line for line in table.splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if line.startswith("GROUP "))
    header = lines[start].split()
    return [dict(zip(header, line.split(), strict=True)) for line in lines[start + 1 :]]


def _consumer(bootstrap: str, group: str, client_id: str, reset: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": client_id,
            "enable.auto.commit": False,
            "auto.offset.reset": reset,
            "session.timeout.ms": 10000,
        }
    )


def _consume(consumer: Consumer, count: int, timeout: float = 20.0) -> list[tuple[int, int]]:
    got: list[tuple[int, int]] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None or msg.error() is not None:
            continue
        partition, offset = msg.partition(), msg.offset()
        assert partition is not None and offset is not None
        got.append((partition, offset))
    assert len(got) == count, f"consumed {len(got)} of {count}"
    return got


def _produce(bootstrap: str, topic: str, per_partition: dict[int, int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, n in per_partition.items():
        for i in range(n):
            producer.produce(topic, value=f"v{partition}-{i}".encode(), partition=partition)
    assert producer.flush(15) == 0


def test_group_lifecycle(broker: EmbeddedBroker, capsys: pytest.CaptureFixture[str]) -> None:
    cli = Cli(capsys, broker.bootstrap)
    n = next(_counter)
    topic, group = f"grp-topic-{n}", f"grp-{n}"
    create = ["topics", "create", topic, "--partitions", str(PARTITIONS), "-b", cli.bootstrap]
    assert main(create) == 0
    _produce(cli.bootstrap, topic, dict.fromkeys(range(PARTITIONS), PER_PARTITION))

    consumer = _consumer(cli.bootstrap, group, "lag-client", "earliest")
    try:
        consumer.subscribe([topic])
        got = _consume(consumer, PARTITIONS * PER_PARTITION)
        assert sorted(got) == [(p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)]
        consumer.commit(asynchronous=False)
        _produce(cli.bootstrap, topic, {0: EXTRA_ON_P0})
        member_id = consumer.memberid()

        # list: the group, Stable, with its type; state filter
        rc, out, err = cli("list")
        assert rc == 0, err
        listed = {r["GROUP"]: r for r in _rows(out)}
        assert listed[group] == {
            "GROUP": group,
            "STATE": "Stable",
            "TYPE": "classic",
            "PROTOCOL-TYPE": "consumer",
        }
        rc, out, _ = cli("list", "--state", "Stable", "--type", "classic")
        assert rc == 0 and group in {r["GROUP"] for r in _rows(out)}
        rc, out, _ = cli("list", "--state", "empty,dead")
        assert rc == 0 and group not in out
        rc, _, err = cli("list", "--state", "Sleepy")
        assert rc == 2 and "unknown group state" in err

        # describe (offsets): exact committed offsets, log end offsets and lag
        rc, out, err = cli("describe", group)
        assert rc == 0, err
        rows = {int(r["PARTITION"]): r for r in _rows(out)}
        assert sorted(rows) == list(range(PARTITIONS))
        for p, row in rows.items():
            end = PER_PARTITION + (EXTRA_ON_P0 if p == 0 else 0)
            assert row == {
                "GROUP": group,
                "TOPIC": topic,
                "PARTITION": str(p),
                "CURRENT-OFFSET": str(PER_PARTITION),
                "LOG-END-OFFSET": str(end),
                "LAG": str(end - PER_PARTITION),
                "CONSUMER-ID": member_id,
                "HOST": row["HOST"],
                "CLIENT-ID": "lag-client",
            }
            assert "127.0.0.1" in row["HOST"]

        # describe --members --state: the decoded assignment
        rc, out, err = cli("describe", group, "--members", "--state")
        assert rc == 0, err
        state_block, members_block = out.strip().split("\n\n")
        (state,) = _rows(state_block)
        assert state["STATE"] == "Stable" and state["#MEMBERS"] == "1"
        assert state["ASSIGNMENT-STRATEGY"] in ("range", "roundrobin", "cooperative-sticky")
        (member,) = _rows(members_block)
        assert member["CONSUMER-ID"] == member_id
        assert member["CLIENT-ID"] == "lag-client"
        assert member["GROUP-INSTANCE-ID"] == "-"
        assert member["#PARTITIONS"] == str(PARTITIONS)
        assert member["ASSIGNMENT"] == f"{topic}(0,1,2)"

        # an active group: the broker refuses the admin commit and the deletion
        rc, out, err = cli("reset-offsets", group, "--topic", topic, "--to-earliest", "--execute")
        assert rc == 1
        assert "cannot reset offsets" in err and "Stable" in err, err
        rc, _, err = cli("delete", group)
        assert rc == 1 and "NON_EMPTY_GROUP" in err, err
    finally:
        consumer.close()

    with KafkaClient(cli.bootstrap) as client:
        assert {k: c.offset for k, c in offset_fetch(client, group).items()} == {
            (topic, p): PER_PARTITION for p in range(PARTITIONS)
        }

    # inactive: describe says so and still shows the offsets
    rc, out, err = cli("describe", group, "--state", "--offsets")
    assert rc == 0, err
    assert "has no active members" in out
    assert _rows(out.split("\n\n")[0])[0]["STATE"] == "Empty"
    assert [r["CONSUMER-ID"] for r in _rows(out.split("\n\n")[-1])] == ["-"] * PARTITIONS

    # dry run (the default) prints the plan and commits nothing; clamping to the log
    rc, out, err = cli("reset-offsets", group, "--topic", f"{topic}:0,2", "--to-offset", "100")
    assert rc == 0 and "--execute" in err
    plan = {int(r["PARTITION"]): r["NEW-OFFSET"] for r in _rows(out)}
    assert plan == {0: str(PER_PARTITION + EXTRA_ON_P0), 2: str(PER_PARTITION)}
    rc, out, _ = cli("reset-offsets", group, "--all-topics", "--shift-by", "-3")
    assert rc == 0
    assert {r["NEW-OFFSET"] for r in _rows(out)} == {str(PER_PARTITION - 3)}
    rc, out, _ = cli("reset-offsets", group, "--all-topics", "--to-datetime", "2999-01-01T00:00Z")
    assert rc == 0
    ends = [PER_PARTITION + EXTRA_ON_P0] + [PER_PARTITION] * (PARTITIONS - 1)
    assert [r["NEW-OFFSET"] for r in _rows(out)] == [str(e) for e in ends]
    with KafkaClient(cli.bootstrap) as client:
        assert {c.offset for c in offset_fetch(client, group).values()} == {PER_PARTITION}

    # --execute: every partition back to 0, and a new member starts there
    rc, out, err = cli("reset-offsets", group, "--topic", topic, "--to-earliest", "--execute")
    assert rc == 0, err
    assert "Committed new offsets" in out
    rc, out, _ = cli("describe", group)
    rows = {int(r["PARTITION"]): r for r in _rows(out)}
    assert {p: r["CURRENT-OFFSET"] for p, r in rows.items()} == dict.fromkeys(
        range(PARTITIONS), "0"
    )
    assert rows[0]["LAG"] == str(PER_PARTITION + EXTRA_ON_P0)

    # "latest": only the committed offsets can make it start at 0
    again = _consumer(cli.bootstrap, group, "second-client", "latest")
    try:
        again.subscribe([topic])
        got = _consume(again, PARTITIONS * PER_PARTITION + EXTRA_ON_P0)
        firsts = {p: min(o for q, o in got if q == p) for p in range(PARTITIONS)}
        assert firsts == dict.fromkeys(range(PARTITIONS), 0)
    finally:
        again.close()

    # delete: gone from list and describe; deleting again says it does not exist
    rc, out, err = cli("delete", group)
    assert rc == 0, err
    assert f"Deleted consumer group '{group}'." in out
    rc, out, _ = cli("list")
    assert group not in out
    rc, _, err = cli("describe", group)
    assert rc == 1 and "does not exist" in err
    rc, _, err = cli("delete", group)
    assert rc == 1 and "GROUP_ID_NOT_FOUND" in err and "does not exist" in err
