"""``pydmq serve``: run one node (broker + controller) until SIGTERM/SIGINT.

Before anything else the data directory is created if needed and a probe file is written,
fsynced and removed in it: a read-only or unwritable ``log.dirs`` is reported in one line
naming the path and the error, with exit status 1. With ``PYDMQ_FAILPOINTS_FILE`` set,
SIGUSR2 re-reads the failpoint file (:func:`pydmq.failpoints.reload`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydmq.config.broker import BrokerConfig, load_properties
from pydmq.config.definitions import ConfigError
from pydmq.config.log_format import LOG_FORMATS, configure_logging

if TYPE_CHECKING:
    from pydmq.security.sasl.credentials import ScramSeed

__all__ = ["add_parser", "build_config", "run_broker"]

log = logging.getLogger("pydmq")


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "serve",
        help="start a broker (defaults: PLAINTEXT://127.0.0.1:9092, data in ./pydmq-data)",
        description="Start a pydmq node. Settings use Kafka's property names; later sources win: "
        "defaults < --config file < the explicit flags < --override. A Kafka "
        "server.properties loads as it is: Kafka properties without effect here are named in "
        "one warning, unknown keys are refused.",
        epilog="The supported properties and their defaults: pydmq config list [WORD]; the "
        "Kafka properties accepted without effect: pydmq config list --kafka-only.",
    )
    parser.add_argument("--config", "-c", type=Path, help="a .properties or .toml file")
    parser.add_argument("--listeners", help="e.g. PLAINTEXT://127.0.0.1:9092")
    parser.add_argument("--advertised-listeners", help="listeners published to clients")
    parser.add_argument("--log-dirs", help="data directory")
    parser.add_argument(
        "--http-listener",
        metavar="URI,...",
        help="pydmq.http.listeners: where /metrics and /v1/health/* listen (default "
        "http://127.0.0.1:8082; an empty value turns the HTTP listener off)",
    )
    parser.add_argument("--node-id", type=int, help="node.id")
    parser.add_argument("--process-roles", help="process.roles, e.g. broker,controller")
    parser.add_argument(
        "--controller-quorum-voters",
        metavar="ID@HOST:PORT,...",
        help="controller.quorum.voters; set it to run as a node of a cluster",
    )
    parser.add_argument(
        "--override",
        "-o",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set any broker property (repeatable), e.g. -o num.partitions=3",
    )
    parser.add_argument(
        "--add-scram",
        action="append",
        default=[],
        metavar="MECHANISM=[name=...,password=...]",
        help="a SCRAM user to create at the first start of a single node, as Kafka's "
        "kafka-storage.sh format --add-scram (repeatable)",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        help="TRACE, DEBUG, INFO, WARN, ERROR (change it at run time with kafka-configs "
        "--entity-type broker-loggers)",
    )
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="text",
        help="text lines (default) or one JSON object per line",
    )
    parser.set_defaults(run=_run)


def build_config(args: argparse.Namespace) -> BrokerConfig:
    values: dict[str, object] = {}
    if args.config is not None:
        values.update(load_properties(args.config))
    for flag, name in (
        ("listeners", "listeners"),
        ("advertised_listeners", "advertised.listeners"),
        ("log_dirs", "log.dirs"),
        ("node_id", "node.id"),
        ("process_roles", "process.roles"),
        ("controller_quorum_voters", "controller.quorum.voters"),
        ("http_listener", "pydmq.http.listeners"),
    ):
        value = getattr(args, flag)
        if value is not None:
            values[name] = value
    for item in args.override:
        if "=" not in item:
            raise ConfigError(f"--override expects KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        values[key.strip()] = value.strip()
    config = BrokerConfig(values)
    config.check_cluster_mode()
    return config


class LogDirError(Exception):
    """The data directory cannot be written: the node cannot start."""


def check_log_dir(path: Path) -> None:
    """Create ``path`` if needed and write, fsync and remove a probe file in it; raises
    :class:`LogDirError` naming the path and the errno text when that fails."""
    from pydmq.storage.checkpoint import make_dirs_durably, write_atomically

    probe = path / ".pydmq-write-probe"
    try:
        make_dirs_durably(str(path))
        write_atomically(str(probe), b"probe")
        os.unlink(probe)
    except OSError as exc:
        name = errno.errorcode.get(exc.errno or 0, "?")
        raise LogDirError(
            f"log dir {path} is not writable: {exc.strerror or exc} ({name})"
        ) from None


def _reload_failpoints() -> None:
    from pydmq import failpoints

    try:
        failpoints.reload()
    except ValueError as exc:
        log.error("failpoints not reloaded: %s", exc)
        return
    log.warning("failpoints reloaded from %s", os.environ.get(failpoints.FILE_ENV_VAR))


async def run_broker(
    config: BrokerConfig, ready: asyncio.Event | None = None, seeds: Sequence[ScramSeed] = ()
) -> None:
    """Start a node, serve until SIGTERM/SIGINT, stop it. A signal during start-up (a cluster
    node waits for its quorum before it serves clients) stops the node as well. ``seeds``:
    the ``--add-scram`` users."""
    from pydmq.node import Node

    started = time.perf_counter()
    node = Node(config)
    node.seed_scram_credentials(seeds)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if os.environ.get("PYDMQ_FAILPOINTS_FILE"):
        loop.add_signal_handler(signal.SIGUSR2, _reload_failpoints)
    try:
        starting = asyncio.ensure_future(node.start())
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():
            log.info("stopping before the node was ready")
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting
            return
        stopping.cancel()
        starting.result()
        log.info("ready in %.3f s on %s", time.perf_counter() - started, node.bootstrap())
        if ready is not None:
            ready.set()
        await stop.wait()
    finally:
        await node.stop()


def _run(args: argparse.Namespace) -> int:
    configure_logging(str(args.log_level), str(args.log_format))
    try:
        config = build_config(args)
        seeds = []
        if args.add_scram:
            from pydmq.security.sasl.credentials import parse_add_scram

            seeds = [parse_add_scram(text) for text in args.add_scram]
    except (ConfigError, OSError, ValueError) as exc:
        print(f"pydmq serve: {exc}", file=sys.stderr)
        return 2
    ignored = config.without_effect_warning()
    if ignored is not None:
        log.warning(ignored)
    try:
        check_log_dir(config.log_dir)
    except LogDirError as exc:
        print(f"pydmq serve: {exc}", file=sys.stderr)
        return 1
    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:
        runner = asyncio.run
    try:
        runner(run_broker(config, seeds=seeds))
    except (OSError, ConfigError) as exc:
        print(f"pydmq serve: {exc}", file=sys.stderr)
        return 1
    return 0
