"""``pydmq consume``: print records with a kcat-like format (``-f '%k=%s\\n'``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import IO, Any

from pydmq.cli.common import add_bootstrap_argument, run_guarded
from pydmq.client import (
    EARLIEST,
    LATEST,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    ConsumedRecord,
    Consumer,
    KafkaClient,
    KafkaError,
)
from pydmq.protocol.errors import ErrorCode

__all__ = ["add_parser", "compile_format", "consume"]

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
        description="Fetch records (no consumer group) and print them with a kcat-like "
        "format. Starts at the end of each partition unless told otherwise.",
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


def consume(args: argparse.Namespace, stdout: IO[bytes] | None = None) -> int:
    out = sys.stdout.buffer if stdout is None else stdout
    render = compile_format(args.format)
    if args.count is not None and args.count <= 0:
        return 0
    with KafkaClient(args.bootstrap_server, timeout=args.timeout) as client:
        info = client.topic(args.topic, refresh=True)
        partitions: list[int] = sorted(set(args.partition or info.partitions))
        for p in partitions:
            if p not in info.partitions:
                raise KafkaError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"topic {args.topic!r} has no partition {p}",
                )
        consumer = Consumer(
            client,
            args.topic,
            _start_positions(client, args, partitions),
            max_wait_ms=args.max_wait_ms,
            isolation_level=READ_COMMITTED if args.read_committed else READ_UNCOMMITTED,
        )
        printed = 0
        while True:
            result = consumer.poll()
            for record in result.records:
                out.write(render(record))
                printed += 1
                if args.count is not None and printed >= args.count:
                    out.flush()
                    return 0
            out.flush()
            if args.exit_at_end and consumer.at_end():
                return 0
