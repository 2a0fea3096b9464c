"""``pydmq consume --group``: a simple consumer of a group (starts at its committed offsets,
commits what it printed), and what ``pydmq groups list|describe`` then show for the group."""

from __future__ import annotations

import argparse
import io
import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pydmq.cli import main
from pydmq.cli.consume import GroupPositions, consume
from pydmq.client import KafkaClient
from pydmq.client.admin import offset_commit, offset_fetch
from pydmq.testing import EmbeddedBroker

pytestmark = pytest.mark.timeout(60)

_counter = itertools.count()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    data: Path = tmp_path_factory.mktemp("consume-group") / "d"
    with EmbeddedBroker(data, overrides={"group.initial.rebalance.delay.ms": 0}) as b:
        yield b


class Cli:
    """Runs ``pydmq ARGV -b BOOTSTRAP`` in-process; returns (exit code, stdout, stderr)."""

    def __init__(self, capsysbinary: pytest.CaptureFixture[bytes], bootstrap: str) -> None:
        self.cap = capsysbinary
        self.bootstrap = bootstrap

    def __call__(self, *argv: str, stdin: bytes | None = None) -> tuple[int, str, str]:
        self.cap.readouterr()
        with pytest.MonkeyPatch.context() as mp:
            if stdin is not None:
                mp.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin)))
            rc = main([*argv, "-b", self.bootstrap])
        out, err = self.cap.readouterr()
        return rc, out.decode(), err.decode()

    def ok(self, *argv: str, stdin: bytes | None = None) -> str:
        rc, out, err = self(*argv, stdin=stdin)
        assert rc == 0, f"pydmq {' '.join(argv)} failed ({rc}): {err}"
        return out


@pytest.fixture
def cli(capsysbinary: pytest.CaptureFixture[bytes], broker: EmbeddedBroker) -> Cli:
    return Cli(capsysbinary, broker.bootstrap)


def _names() -> tuple[str, str]:
    n = next(_counter)
    return f"cg-topic-{n}", f"cg-group-{n}"


def _rows(table: str) -> list[dict[str, str]]:
    """The rows of the table whose header starts with GROUP (cells contain no blanks)."""
    lines = [line for line in table.splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if line.startswith("GROUP "))
    header = lines[start].split()
    return [dict(zip(header, line.split(), strict=True)) for line in lines[start + 1 :]]


def _committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    with KafkaClient(bootstrap) as client:
        return {k: c.offset for k, c in offset_fetch(client, group).items()}


def _topic_with_records(cli: Cli, topic: str, lines: bytes) -> None:
    cli.ok("topics", "create", topic, "--partitions", "2")
    for partition in (0, 1):
        cli.ok("produce", "-t", topic, "-p", str(partition), stdin=lines)


FORMAT = "%p/%o %s\\n"


def test_group_offsets_are_committed_and_resumed(cli: Cli) -> None:
    topic, group = _names()
    _topic_with_records(cli, topic, b"a\nb\nc\n")

    out = cli.ok("consume", "-t", topic, "--group", group, "--from-beginning", "-e", "-f", FORMAT)
    assert sorted(out.splitlines()) == ["0/0 a", "0/1 b", "0/2 c", "1/0 a", "1/1 b", "1/2 c"]
    assert _committed(cli.bootstrap, group) == {(topic, 0): 3, (topic, 1): 3}

    # groups list and describe show the group: Empty, no members, its offsets and lag
    listed = {r["GROUP"]: r for r in _rows(cli.ok("groups", "list"))}
    assert listed[group]["STATE"] == "Empty"
    cli.ok("produce", "-t", topic, "-p", "1", stdin=b"d\n")
    out = cli.ok("groups", "describe", group)
    assert f"Consumer group '{group}' has no active members (state Empty)." in out
    rows = {r["PARTITION"]: r for r in _rows(out.split("\n\n")[-1])}
    assert {p: (r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"]) for p, r in rows.items()} == {
        "0": ("3", "3", "0"),
        "1": ("3", "4", "1"),
    }
    assert {r["CONSUMER-ID"] for r in rows.values()} == {"-"}

    # the next run starts at the committed offsets: only the new record; the start option
    # (--from-beginning) applies only where the group has nothing committed
    out = cli.ok("consume", "-t", topic, "--group", group, "--from-beginning", "-e", "-f", FORMAT)
    assert out == "1/3 d\n"
    assert _committed(cli.bootstrap, group) == {(topic, 0): 3, (topic, 1): 4}
    assert cli.ok("consume", "-t", topic, "--group", group, "-e", "-f", FORMAT) == ""

    # reset-offsets works on such a group, and consume --group reads again from there
    cli.ok(
        "groups", "reset-offsets", group, "--topic", f"{topic}:0", "--to-offset", "1", "--execute"
    )
    out = cli.ok("consume", "-t", topic, "--group", group, "-e", "-f", FORMAT)
    assert out == "0/1 b\n0/2 c\n"


def test_count_commits_only_what_was_printed(cli: Cli) -> None:
    topic, group = _names()
    _topic_with_records(cli, topic, b"a\nb\nc\n")
    out = cli.ok("consume", "-t", topic, "-p", "0", "--group", group, "--from-beginning", "-c", "2")
    assert out == "a\nb\n"
    assert _committed(cli.bootstrap, group) == {(topic, 0): 2}
    out = cli.ok("consume", "-t", topic, "-p", "0", "--group", group, "-c", "1")
    assert out == "c\n"
    assert _committed(cli.bootstrap, group) == {(topic, 0): 3}


def test_without_committed_offsets_the_start_option_applies(cli: Cli) -> None:
    topic, group = _names()
    _topic_with_records(cli, topic, b"a\nb\n")
    # default start: the end of each partition, as Kafka's auto.offset.reset=latest
    assert cli.ok("consume", "-t", topic, "--group", group, "-e") == ""
    assert _committed(cli.bootstrap, group) == {(topic, 0): 2, (topic, 1): 2}

    # a committed offset outside the log falls back to the start option as well
    _, other = _names()
    with KafkaClient(cli.bootstrap) as client:
        assert offset_commit(client, other, {(topic, 0): 100, (topic, 1): 1}) == {
            (topic, 0): 0,
            (topic, 1): 0,
        }
    out = cli.ok("consume", "-t", topic, "--group", other, "--offset", "-1", "-e", "-f", FORMAT)
    assert sorted(out.splitlines()) == ["0/1 b", "1/1 b"]
    assert _committed(cli.bootstrap, other) == {(topic, 0): 2, (topic, 1): 2}


def test_group_with_active_members_is_refused(cli: Cli) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic, group = _names()
    _topic_with_records(cli, topic, b"a\n")
    member = confluent_kafka.Consumer(
        {"bootstrap.servers": cli.bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    )
    try:
        member.subscribe([topic])
        deadline = time.monotonic() + 20
        while not member.assignment() and time.monotonic() < deadline:
            member.poll(0.2)
        assert member.assignment(), "the member never got its assignment"
        rc, out, err = cli("consume", "-t", topic, "--group", group, "-e")
    finally:
        member.close()
    assert rc == 2 and out == ""
    assert f"group {group!r} has 1 active member(s) (state Stable)" in err, err


def _args(bootstrap: str, topic: str, group: str, interval_ms: int) -> argparse.Namespace:
    return argparse.Namespace(
        bootstrap_server=bootstrap,
        timeout=10.0,
        command_config=None,
        topic=topic,
        partition=None,
        from_beginning=True,
        offset=None,
        offset_time=None,
        count=None,
        format="%s\\n",
        exit_at_end=False,
        read_committed=False,
        max_wait_ms=50,
        group=group,
        commit_interval_ms=interval_ms,
    )


class _InterruptOnFlush(io.BytesIO):
    """stdout whose ``flush`` raises KeyboardInterrupt (Ctrl-C) from its Nth call on."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.flushes = 0
        self.at = at

    def flush(self) -> None:
        self.flushes += 1
        if self.flushes >= self.at:
            raise KeyboardInterrupt


def test_ctrl_c_commits_the_printed_positions(cli: Cli) -> None:
    """Without --exit-at-end a consumer stops with Ctrl-C; what it printed is committed."""
    topic, group = _names()
    _topic_with_records(cli, topic, b"a\nb\n")
    out = _InterruptOnFlush(at=3)  # a first round with the records, an empty one, Ctrl-C
    with pytest.raises(KeyboardInterrupt):
        consume(_args(cli.bootstrap, topic, group, interval_ms=3_600_000), stdout=out)
    assert out.getvalue() == b"a\nb\na\nb\n"
    assert _committed(cli.bootstrap, group) == {(topic, 0): 2, (topic, 1): 2}


def test_periodic_commits_follow_the_interval(cli: Cli) -> None:
    topic, group = _names()
    _topic_with_records(cli, topic, b"a\n")
    now = [100.0]
    with KafkaClient(cli.bootstrap) as client:
        positions = GroupPositions(client, group, topic, interval=5.0, clock=lambda: now[0])
        assert positions.start_positions({0: 0, 1: 0}, {0: (0, 1), 1: (0, 1)}) == {0: 0, 1: 0}
        positions.printed_up_to([(0, 1)])
        positions.maybe_commit()  # not due yet
        assert _committed(cli.bootstrap, group) == {}
        now[0] += 5.0
        positions.maybe_commit()
        assert _committed(cli.bootstrap, group) == {(topic, 0): 1, (topic, 1): 0}
        positions.printed_up_to([(1, 1)])
        now[0] += 4.0
        positions.maybe_commit()  # 4 s after the last commit: not yet
        assert _committed(cli.bootstrap, group)[(topic, 1)] == 0
        positions.commit()  # at exit: whatever moved
        assert _committed(cli.bootstrap, group) == {(topic, 0): 1, (topic, 1): 1}


def test_groups_list_says_when_there_are_none(
    pydmq_bootstrap: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["groups", "list", "-b", pydmq_bootstrap]) == 0
    out, err = capsys.readouterr()
    assert (out, err) == ("", "No consumer groups.\n")
