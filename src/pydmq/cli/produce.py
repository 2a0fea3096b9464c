"""``pydmq produce``: one record per input line (kcat -P style), idempotent by default."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from typing import IO, Any

from pydmq.cli.common import (
    add_bootstrap_argument,
    client_security,
    parse_key_values,
    run_guarded,
)
from pydmq.client import KafkaClient, Producer, raise_for_error
from pydmq.protocol.compression import CODEC_NAMES

__all__ = ["add_parser", "iter_lines", "split_key"]

_CODECS = {name: cid for cid, name in CODEC_NAMES.items()}


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "produce",
        help="produce lines from stdin or a file as records",
        description="Read lines and produce one record per line. Keyed records go to "
        "murmur2(key) mod partitions (Java's default partitioner), unkeyed ones round-robin.",
    )
    add_bootstrap_argument(parser)
    parser.add_argument("--topic", "-t", required=True)
    parser.add_argument("--partition", "-p", type=int, help="produce to this partition only")
    parser.add_argument(
        "--key-delimiter",
        "-K",
        metavar="SEP",
        help="split each line at the first SEP into key and value (lines without SEP: no key)",
    )
    parser.add_argument(
        "--header",
        "-H",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="add a header to every record (repeatable)",
    )
    parser.add_argument("--compression", "-z", choices=sorted(_CODECS), default="none")
    parser.add_argument("--acks", type=int, choices=(0, 1, -1), default=-1)
    parser.add_argument(
        "--no-idempotence", action="store_true", help="do not use a producer id (acks=-1)"
    )
    parser.add_argument("--file", "-f", help="read this file instead of stdin")
    parser.add_argument("--batch-records", type=int, default=500, help="records per batch")
    parser.add_argument("--batch-bytes", type=int, default=1_000_000, help="bytes per batch")
    parser.add_argument("--linger-ms", type=int, default=100, help="max wait to fill a batch")
    parser.add_argument(
        "--progress-every", type=float, default=1.0, metavar="SECONDS", help="progress interval"
    )
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress or summary")
    parser.set_defaults(run=_run)


def iter_lines(stream: IO[bytes]) -> Iterator[bytes]:
    """Lines without their ``\\n`` (a final line without one counts; a trailing \\n does not
    make an extra empty record)."""
    for line in stream:
        yield line[:-1] if line.endswith(b"\n") else line


def split_key(line: bytes, delimiter: bytes | None) -> tuple[bytes | None, bytes]:
    if delimiter is None:
        return None, line
    key, sep, value = line.partition(delimiter)
    if not sep:
        return None, line
    return key, value


def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"  # pragma: no cover


def _run(args: argparse.Namespace) -> int:
    return run_guarded("produce", lambda: produce(args))


def produce(args: argparse.Namespace, stdin: IO[bytes] | None = None) -> int:
    headers = [(k, v.encode()) for k, v in parse_key_values(args.header, "--header")]
    delimiter = args.key_delimiter.encode() if args.key_delimiter else None
    if args.file:
        stream: IO[bytes] = open(args.file, "rb")  # noqa: SIM115 - closed below
        interactive = False
    else:
        stream = sys.stdin.buffer if stdin is None else stdin
        interactive = bool(getattr(stream, "isatty", lambda: False)())
    started = time.monotonic()
    try:
        with KafkaClient(
            args.bootstrap_server,
            timeout=args.timeout,
            **client_security(args.command_config).kwargs(),
        ) as client:
            response = client.refresh_metadata([args.topic], allow_auto_create=True)
            for t in response.topics:
                if t.name == args.topic and t.error_code != 5:  # LEADER_NOT_AVAILABLE: wait
                    raise_for_error(t.error_code, f"topic {args.topic!r}")
            client.wait_for_topic(args.topic, timeout=args.timeout)
            producer = Producer(
                client,
                acks=args.acks,
                compression=_CODECS[args.compression],
                idempotent=False if args.no_idempotence or args.acks != -1 else None,
                batch_records=args.batch_records,
                batch_bytes=args.batch_bytes,
                linger=0.0 if interactive else args.linger_ms / 1000,
            )
            producer.keep_reports = False
            last_report = started
            last_count = 0
            read = 0
            for read, line in enumerate(iter_lines(stream), 1):
                key, value = split_key(line, delimiter)
                producer.send(args.topic, value, key=key, headers=headers, partition=args.partition)
                if not args.quiet and read % 1000 == 0:
                    now = time.monotonic()
                    if now - last_report >= args.progress_every:
                        rate = (read - last_count) / (now - last_report)
                        print(
                            f"pydmq produce: {read} records read, "
                            f"{producer.stats.records} acknowledged ({rate:,.0f} records/s)",
                            file=sys.stderr,
                            flush=True,
                        )
                        last_report, last_count = now, read
            producer.flush()
    finally:
        if args.file:
            stream.close()
    if not args.quiet:
        stats = producer.stats
        elapsed = time.monotonic() - started
        parts = ", ".join(f"{p}: {n}" for (_t, p), n in sorted(stats.per_partition.items()))
        verb = "sent" if args.acks == 0 else "produced"
        print(
            f"pydmq produce: {verb} {stats.records} records ({_human(stats.bytes)} in "
            f"{stats.batches} batches) to {args.topic} in {elapsed:.2f} s"
            + (f" [partitions {parts}]" if parts else ""),
            file=sys.stderr,
        )
    return 0
