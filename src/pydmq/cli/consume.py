"""``pydmq consume``: print records with a kcat-like format (``-f '%k=%s\\n'``).

With ``--group G`` it reads as a simple consumer of group G (Kafka's name for a consumer that
commits offsets for a group without joining it): it starts from G's committed offsets and
commits the positions it has printed up to, every ``--commit-interval-ms`` and at exit.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import IO, Any

from pydmq.cli.common import add_bootstrap_argument, client_security, run_guarded
from pydmq.client import (
    EARLIEST,
    LATEST,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    ConsumedRecord,
    Consumer,
    KafkaClient,
    KafkaError,
    error_name,
)
from pydmq.client.admin import describe_groups, offset_commit, offset_fetch
from pydmq.protocol.errors import ErrorCode

__all__ = ["GroupPositions", "add_parser", "compile_format", "consume"]

_Piece = Callable[[ConsumedRecord], bytes]

_ESCAPES = {"n": b"\n", "t": b"\t", "r": b"\r", "0": b"\0", "\\": b"\\"}


def _headers(record: ConsumedRecord) -> bytes:
    return b",".join(k.encode() if v is None else k.encode() + b"=" + v for k, v in record.headers)


_TOKENS: dict[str, _Piece] = {
    "t": lambda r: r.topic.encode(),
    "p": lambda r: str(r.partition).encode(),
    "o": lambda r: str(r.offset).encode(),
    "k": lambda r: r.key or b"",
    "s": lambda r: r.value or b"",
    "K": lambda r: str(-1 if r.key is None else len(r.key)).encode(),
    "S": lambda r: str(-1 if r.value is None else len(r.value)).encode(),
    "T": lambda r: str(r.timestamp).encode(),
    "h": _headers,
}


def compile_format(fmt: str) -> Callable[[ConsumedRecord], bytes]:
    """Compile a kcat-style format: %t %p %o %k %s %K %S %T %h, %%, and \\n \\t \\r \\0 \\\\."""
    pieces: list[bytes | _Piece] = []
    literal = bytearray()
    i = 0
    while i < len(fmt):
        ch = fmt[i]
        nxt = fmt[i + 1] if i + 1 < len(fmt) else ""
        if ch == "%" and nxt:
            if nxt == "%":
                literal += b"%"
            elif nxt in _TOKENS:
                if literal:
                    pieces.append(bytes(literal))
                    literal.clear()
                pieces.append(_TOKENS[nxt])
            else:
                raise ValueError(f"unknown format token %{nxt}")
            i += 2
        elif ch == "\\" and nxt in _ESCAPES:
            literal += _ESCAPES[nxt]
            i += 2
        else:
            literal += ch.encode()
            i += 1
    if literal:
        pieces.append(bytes(literal))

    def render(record: ConsumedRecord) -> bytes:
        return b"".join(p if isinstance(p, bytes) else p(record) for p in pieces)

    return render


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "consume",
        help="print a topic's records",
        description="Fetch records and print them with a kcat-like format. Starts at the end "
        "of each partition unless told otherwise; with --group, at the group's committed "
        "offsets, and commits what it printed.",
    )
    add_bootstrap_argument(parser)
    parser.add_argument("--topic", "-t", required=True)
    parser.add_argument("--partition", "-p", type=int, action="append", help="repeatable")
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at log start")
    start.add_argument(
        "--offset", "-o", type=int, help="start offset; negative: that many before the end"
    )
    start.add_argument(
        "--offset-time", type=int, metavar="MS", help="first offset with timestamp >= MS"
    )
    parser.add_argument("--count", "-c", type=int, help="exit after COUNT records")
    parser.add_argument(
        "--format",
        "-f",
        default="%s\\n",
        help="output format: %%t topic, %%p partition, %%o offset, %%k key, %%s value, "
        "%%K/%%S key/value length, %%T timestamp, %%h headers (default '%%s\\n')",
    )
    parser.add_argument(
        "--exit-at-end", "-e", action="store_true", help="exit at the end of every partition"
    )
    parser.add_argument("--read-committed", action="store_true", help="skip aborted records")
    parser.add_argument("--max-wait-ms", type=int, default=500, help="Fetch max wait")
    parser.add_argument(
        "--group",
        "-G",
        metavar="GROUP",
        help="start at GROUP's committed offsets (the start option applies where it has none) "
        "and commit the positions printed up to; the group must have no active members",
    )
    parser.add_argument(
        "--commit-interval-ms",
        type=int,
        default=5000,
        metavar="MS",
        help="with --group: commit this often while running, and at exit (default 5000, "
        "Kafka's auto.commit.interval.ms)",
    )
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    return run_guarded("consume", lambda: consume(args))


def _start_positions(
    client: KafkaClient, args: argparse.Namespace, partitions: Sequence[int]
) -> dict[int, int]:
    topic = args.topic
    if args.from_beginning:
        return {
            p: o
            for p, (o, _) in client.list_offsets(topic, dict.fromkeys(partitions, EARLIEST)).items()
        }
    ends = {
        p: o for p, (o, _) in client.list_offsets(topic, dict.fromkeys(partitions, LATEST)).items()
    }
    if args.offset is not None:
        if args.offset >= 0:
            return dict.fromkeys(partitions, args.offset)
        starts = client.list_offsets(topic, dict.fromkeys(partitions, EARLIEST))
        return {p: max(starts[p][0], ends[p] + args.offset) for p in partitions}
    if args.offset_time is not None:
        found = client.list_offsets(topic, dict.fromkeys(partitions, args.offset_time))
        return {p: found[p][0] if found[p][0] >= 0 else ends[p] for p in partitions}
    return ends


class GroupPositions:
    """The offsets ``pydmq consume --group`` reads from and commits for one topic.

    A simple consumer of the group: OffsetCommit with generation -1 and an empty member id,
    which a coordinator accepts while the group has no members (Kafka's rule). Tracks the
    position each partition has been printed up to and commits the ones that moved, at most
    every ``interval`` seconds from :meth:`maybe_commit` and whenever :meth:`commit` is
    called. Owned by the thread running the command.
    """

    def __init__(
        self,
        client: KafkaClient,
        group_id: str,
        topic: str,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.group_id = group_id
        self.topic = topic
        self.interval = interval
        self.clock = clock
        self.printed: dict[int, int] = {}
        self.committed: dict[int, int] = {}
        self._next_commit = clock() + interval

    def check_inactive(self) -> None:
        """Raise if the group has active members: their coordinator refuses our commits."""
        (group,) = describe_groups(self.client, [self.group_id])
        if group.error_code and group.error_code != ErrorCode.GROUP_ID_NOT_FOUND:
            raise KafkaError(group.error_code, f"group {self.group_id!r}")
        if group.exists and group.members:
            raise ValueError(
                f"group {self.group_id!r} has {len(group.members)} active member(s) "
                f"(state {group.state}); --group commits as a consumer outside the group, "
                "which the broker accepts only while the group has no members"
            )

    def start_positions(
        self, fallback: Mapping[int, int], bounds: Mapping[int, tuple[int, int]]
    ) -> dict[int, int]:
        """The committed offset of each partition, or ``fallback`` where the group has none
        or it lies outside the partition's (log start, log end) ``bounds`` (Kafka's
        auto.offset.reset)."""
        committed = offset_fetch(self.client, self.group_id, {self.topic: sorted(fallback)})
        positions = dict(fallback)
        for partition in fallback:
            offset = committed.get((self.topic, partition))
            if offset is None or offset.offset < 0:
                continue
            self.committed[partition] = offset.offset
            low, high = bounds[partition]
            if low <= offset.offset <= high:
                positions[partition] = offset.offset
        self.printed = dict(positions)
        return positions

    def printed_up_to(self, positions: Iterable[tuple[int, int]]) -> None:
        """Every record of these partitions before these offsets has been printed."""
        self.printed.update(positions)

    def maybe_commit(self) -> None:
        if self.clock() >= self._next_commit:
            self.commit()

    def commit(self) -> None:
        """Commit the positions that moved since the last commit; raise if one is refused."""
        self._next_commit = self.clock() + self.interval
        moved = {p: o for p, o in self.printed.items() if self.committed.get(p) != o}
        if not moved:
            return
        results = offset_commit(
            self.client, self.group_id, {(self.topic, p): o for p, o in moved.items()}
        )
        refused = sorted((key, code) for key, code in results.items() if code)
        if refused:
            (topic, partition), code = refused[0]
            why = (
                ": the group has active members now"
                if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION)
                else ""
            )
            raise KafkaError(
                code,
                f"group {self.group_id!r} refused the offset of {topic}-{partition} "
                f"({error_name(code)}){why}",
            )
        self.committed.update(moved)


def _bounds(
    client: KafkaClient, topic: str, partitions: Sequence[int]
) -> dict[int, tuple[int, int]]:
    """(log start offset, log end offset) of each partition."""
    starts = client.list_offsets(topic, dict.fromkeys(partitions, EARLIEST))
    ends = client.list_offsets(topic, dict.fromkeys(partitions, LATEST))
    return {p: (starts[p][0], ends[p][0]) for p in partitions}


def consume(args: argparse.Namespace, stdout: IO[bytes] | None = None) -> int:
    render = compile_format(args.format)
    if args.count is not None and args.count <= 0:
        return 0
    with KafkaClient(
        args.bootstrap_server, timeout=args.timeout, **client_security(args.command_config).kwargs()
    ) as client:
        info = client.topic(args.topic, refresh=True)
        partitions: list[int] = sorted(set(args.partition or info.partitions))
        for p in partitions:
            if p not in info.partitions:
                raise KafkaError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"topic {args.topic!r} has no partition {p}",
                )
        positions = _start_positions(client, args, partitions)
        group: GroupPositions | None = None
        if args.group is not None:
            group = GroupPositions(client, args.group, args.topic, args.commit_interval_ms / 1000)
            group.check_inactive()
            positions = group.start_positions(positions, _bounds(client, args.topic, partitions))
        consumer = Consumer(
            client,
            args.topic,
            positions,
            max_wait_ms=args.max_wait_ms,
            isolation_level=READ_COMMITTED if args.read_committed else READ_UNCOMMITTED,
        )
        out = sys.stdout.buffer if stdout is None else stdout
        if group is None:
            return _print_records(consumer, render, out, args, None)
        try:
            status = _print_records(consumer, render, out, args, group)
        except BaseException as exc:
            # A request may have been cut short (Ctrl-C): commit over fresh connections.
            client.close()
            if isinstance(exc, KeyboardInterrupt):  # how a consumer without -e stops
                group.commit()
            else:  # the error that stopped us is the one to report
                with contextlib.suppress(KafkaError, OSError):
                    group.commit()
            raise
        group.commit()
        return status


def _print_records(
    consumer: Consumer,
    render: Callable[[ConsumedRecord], bytes],
    out: IO[bytes],
    args: argparse.Namespace,
    group: GroupPositions | None,
) -> int:
    """Poll and print until --count or (with --exit-at-end) the end; tells ``group`` what
    has been printed once it is flushed."""
    printed = 0
    while True:
        result = consumer.poll()
        done: dict[int, int] = {}
        for record in result.records:
            out.write(render(record))
            done[record.partition] = record.offset + 1
            printed += 1
            if args.count is not None and printed >= args.count:
                out.flush()
                if group is not None:
                    group.printed_up_to(done.items())
                return 0
        out.flush()
        if group is not None:
            group.printed_up_to((p, st.position) for p, st in consumer.state.items())
            group.maybe_commit()
        if args.exit_at_end and consumer.at_end():
            return 0
