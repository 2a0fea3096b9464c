"""Link-controlling TCP proxy for the chaos harness.

Every listener of every node is advertised at a proxy port, so all traffic
(client to node and node to node) crosses this proxy.  Each listening port is a
:class:`Route` whose destination label names the node behind it (``node-2``).
The source label of a connection comes from the ``client_id`` of its first
Kafka request frame (see :func:`classify`); the proxy buffers only until that
header is complete, then streams raw bytes unchanged in both directions.

Link rules live in a :class:`LinkTable` keyed by ``(src, dst)``; either side of
a rule may be ``"*"``.

Semantics:

* **cut** -- a connection on a cut link is switched to *blackhole* mode: bytes
  in both directions are read and discarded, nothing is forwarded, and both
  sockets stay open, like a partition that drops packets.  Peers only notice
  through their own timeouts.  A close on one side of a blackholed connection
  is not propagated to the other side either.  New connections on a cut link
  are accepted and classified, then blackholed without ever connecting
  upstream, so none of their bytes reach the target.
* **heal** (or any rule change that un-cuts a link) -- every blackholed
  connection of a link that is no longer cut is aborted on both sides (RST):
  its byte stream lost data and cannot resume, so clients must reconnect.
* **delay** -- bytes in both directions are forwarded ``ms`` after they were
  received, in order (per-direction FIFO with release times).  A rule change
  affects bytes received after it; ordering is kept across changes.

Outside blackhole mode, when either side closes (or the upstream connect
fails) the other side is closed once its queued bytes are flushed.  Memory is
bounded: reading from a side pauses while the peer's write buffer is above
:data:`HIGH_WATER` or the delay queue holds more than :data:`HIGH_WATER` bytes;
blackholed data is dropped on arrival.

Run as a process: ``python -m pydmq.chaos.proxy --route
DST=LISTEN_HOST:LISTEN_PORT=TARGET_HOST:TARGET_PORT ...``.  It prints
``{"ready": true, "ports": [...]}`` once listening, then answers one JSON
command per stdin line with one JSON line on stdout (a request's ``"id"`` is
echoed back).  EOF on stdin or SIGTERM closes everything and exits 0.
:class:`ProxyProcess` drives such a process synchronously.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import logging
import os
import queue
import re
import signal
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final, cast

__all__ = [
    "HIGH_WATER",
    "ChaosProxy",
    "LinkTable",
    "ProxyProcess",
    "Route",
    "classify",
    "main",
    "parse_route",
    "sniff_client_id",
]

log = logging.getLogger(__name__)

HIGH_WATER: Final = 4 * 1024 * 1024
"""Per-direction byte bound (peer write buffer, delay queue) before reads pause."""
LOW_WATER: Final = 1024 * 1024
WILDCARD: Final = "*"

_HEADER_FIXED: Final = 14  # size(4) api_key(2) api_version(2) correlation_id(4) len(2)
_TIMER_SLACK: Final = 0.001  # asyncio may fire call_at() timers up to ~1 ms early
_INTERNAL_ID: Final = re.compile(r"(?:broker|replica-fetcher|pydmq-raft|pydmq-controller)-(\d+)")


def classify(client_id: str | None) -> str:
    """Source label for a client id: ``node-N`` for pydmq's internal ids, else the id."""
    if not client_id:
        return "unknown"
    match = _INTERNAL_ID.fullmatch(client_id)
    if match is not None:
        return f"node-{match.group(1)}"
    return client_id


def sniff_client_id(data: bytes | bytearray) -> tuple[bool, str | None]:
    """Parse the client id out of the start of a Kafka request stream.

    Returns ``(False, None)`` while more bytes are needed, else ``(True,
    client_id)``; a null or malformed header yields ``(True, None)``.
    """
    if len(data) < _HEADER_FIXED:
        return False, None
    size, length = struct.unpack_from(">i8xh", data, 0)
    if size < _HEADER_FIXED - 4 or length < 0 or length > size - (_HEADER_FIXED - 4):
        return True, None
    if len(data) < _HEADER_FIXED + length:
        return False, None
    return True, bytes(data[_HEADER_FIXED : _HEADER_FIXED + length]).decode("utf-8", "replace")


@dataclass(frozen=True, slots=True)
class Route:
    """One listening port of the proxy and the node listener behind it."""

    dst_label: str
    listen_host: str
    listen_port: int
    target_host: str
    target_port: int

    @property
    def spec(self) -> str:
        """The ``--route`` argument form ``DST=LHOST:LPORT=THOST:TPORT``."""
        return (
            f"{self.dst_label}={self.listen_host}:{self.listen_port}"
            f"={self.target_host}:{self.target_port}"
        )


def parse_route(spec: str) -> Route:
    """Parse ``DST=LISTEN_HOST:LISTEN_PORT=TARGET_HOST:TARGET_PORT``."""
    parts = spec.split("=")
    if len(parts) != 3 or not parts[0]:
        raise ValueError(f"bad route {spec!r}: want DST=LHOST:LPORT=THOST:TPORT")
    try:
        lhost, lport = parts[1].rsplit(":", 1)
        thost, tport = parts[2].rsplit(":", 1)
        return Route(parts[0], lhost, int(lport), thost, int(tport))
    except ValueError:
        raise ValueError(f"bad route {spec!r}: want DST=LHOST:LPORT=THOST:TPORT") from None


class LinkTable:
    """Cut and delay rules over ``(src, dst)`` labels; ``"*"`` matches any label."""

    def __init__(self) -> None:
        self._cuts: set[tuple[str, str]] = set()
        self._delays: dict[tuple[str, str], float] = {}

    @staticmethod
    def _keys(src: str, dst: str) -> tuple[tuple[str, str], ...]:
        return ((src, dst), (src, WILDCARD), (WILDCARD, dst), (WILDCARD, WILDCARD))

    def cut(self, src: str, dst: str) -> None:
        """Drop all traffic of connections from ``src`` through ``dst``'s routes."""
        self._cuts.add((src, dst))

    def uncut(self, src: str, dst: str) -> None:
        """Remove the exact rule ``(src, dst)`` (other matching rules stay)."""
        self._cuts.discard((src, dst))

    def delay(self, src: str, dst: str, ms: float) -> None:
        """Delay both directions of ``src``→``dst`` connections; ``ms <= 0`` removes the rule."""
        if ms > 0:
            self._delays[(src, dst)] = ms / 1000.0
        else:
            self._delays.pop((src, dst), None)

    def heal(self) -> None:
        """Clear all cuts and delays."""
        self._cuts.clear()
        self._delays.clear()

    def is_cut(self, src: str, dst: str) -> bool:
        """Whether any cut rule matches the link."""
        return any(key in self._cuts for key in self._keys(src, dst))

    def delay_of(self, src: str, dst: str) -> float:
        """Delay in seconds for the link: the largest matching rule, else 0."""
        return max((self._delays.get(key, 0.0) for key in self._keys(src, dst)), default=0.0)

    def isolate_node(self, node: str, peers: Iterable[str]) -> None:
        """Cut ``node`` from each peer in both directions; clients are unaffected."""
        for peer in peers:
            if peer != node:
                self.cut(node, peer)
                self.cut(peer, node)

    def isolate_client(self, client: str) -> None:
        """Cut every connection opened by ``client``."""
        self.cut(client, WILDCARD)

    def describe(self) -> dict[str, Any]:
        """JSON-friendly snapshot of the rules."""
        return {
            "cuts": sorted([src, dst] for src, dst in self._cuts),
            "delays": sorted([src, dst, sec * 1000.0] for (src, dst), sec in self._delays.items()),
        }


# Side states.
_NEW, _CONNECTING, _OPEN, _CLOSED = range(4)


class _Side(asyncio.Protocol):
    """One socket of a proxied connection (client or upstream)."""

    def __init__(self, conn: _Conn, state: int) -> None:
        self.conn = conn
        self.state = state
        self.transport: asyncio.Transport | None = None
        self.inbound: _Pipe | None = None  # the pipe that writes to this side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.transport.set_write_buffer_limits(high=HIGH_WATER, low=LOW_WATER)
        self.state = _OPEN
        self.conn.side_made(self)

    def data_received(self, data: bytes) -> None:
        self.conn.received(self, data)

    def eof_received(self) -> bool:
        return False  # no half-close: the transport closes, connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.state = _CLOSED
        self.conn.side_lost(self)

    def pause_writing(self) -> None:
        if self.inbound is not None:
            self.inbound.writer_paused = True
            self.inbound.update_reading()

    def resume_writing(self) -> None:
        if self.inbound is not None:
            self.inbound.writer_paused = False
            self.inbound.resumed()

    def close(self) -> None:
        if self.transport is not None and self.state == _OPEN:
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None and self.state == _OPEN:
            self.transport.abort()


class _Pipe:
    """One direction of a connection: ordered, optionally delayed, flow-controlled."""

    __slots__ = (
        "conn",
        "dst",
        "eof",
        "queue",
        "queued",
        "reading_paused",
        "src",
        "timer",
        "writer_paused",
    )

    def __init__(self, conn: _Conn, src: _Side, dst: _Side) -> None:
        self.conn = conn
        self.src = src
        self.dst = dst
        self.queue: deque[tuple[float, bytes]] = deque()
        self.queued = 0
        self.timer: asyncio.TimerHandle | None = None
        self.writer_paused = False
        self.reading_paused = False
        self.eof = False  # src is gone: close dst once the queue is flushed
        dst.inbound = self

    def push(self, data: bytes, delay: float) -> None:
        if self.dst.state == _CLOSED:
            return
        if delay <= 0 and not self.queue and self.dst.state == _OPEN:
            self._write(data)
            return
        loop = self.conn.proxy.loop
        release = loop.time() + delay
        if self.queue and self.queue[-1][0] > release:
            release = self.queue[-1][0]
        self.queue.append((release, data))
        self.queued += len(data)
        self._arm()
        self.update_reading()

    def _write(self, data: bytes) -> None:
        transport = self.dst.transport
        if transport is None or transport.is_closing():
            return
        transport.write(data)
        self.conn.proxy.bytes_forwarded += len(data)

    def _arm(self) -> None:
        if self.timer is None and self.queue and self.dst.state == _OPEN and not self.writer_paused:
            self.timer = self.conn.proxy.loop.call_at(self.queue[0][0], self._release)

    def _release(self) -> None:
        self.timer = None
        now = self.conn.proxy.loop.time() + _TIMER_SLACK
        while self.queue and self.queue[0][0] <= now and not self.writer_paused:
            _, data = self.queue.popleft()
            self.queued -= len(data)
            self._write(data)
        self._arm()
        self.finish()
        self.update_reading()

    def resumed(self) -> None:
        """The destination's write buffer drained below the low-water mark."""
        self._arm()
        self.update_reading()

    def dst_opened(self) -> None:
        """The destination connected: start releasing the queue."""
        self._arm()
        self.finish()

    def finish(self) -> None:
        """Close the destination if the source is gone and everything is flushed."""
        if self.eof and not self.queue and self.dst.state == _OPEN:
            self.dst.close()

    def drop(self) -> None:
        """Discard queued bytes and lift any read pause (blackhole or dead destination)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.queue.clear()
        self.queued = 0
        self.writer_paused = False
        self.update_reading()

    def update_reading(self) -> None:
        transport = self.src.transport
        if transport is None or self.src.state != _OPEN:
            return
        pause = (
            not self.conn.blackholed
            and self.dst.state != _CLOSED
            and (self.writer_paused or self.queued > HIGH_WATER)
        )
        if pause and not self.reading_paused:
            transport.pause_reading()
            self.reading_paused = True
        elif not pause and self.reading_paused:
            transport.resume_reading()
            self.reading_paused = False


class _Conn:
    """A proxied connection: client side, upstream side, one pipe per direction."""

    def __init__(self, proxy: ChaosProxy, route: Route) -> None:
        self.proxy = proxy
        self.route = route
        self.dst = route.dst_label
        self.src: str | None = None
        self.sniff = bytearray()
        self.client = _Side(self, _NEW)
        self.upstream = _Side(self, _NEW)
        self.c2u = _Pipe(self, self.client, self.upstream)
        self.u2c = _Pipe(self, self.upstream, self.client)
        self.blackholed = False
        self.aborted = False
        self.delay = 0.0

    @property
    def key(self) -> str:
        return f"{self.src}>{self.dst}"

    # Protocol callbacks.

    def side_made(self, side: _Side) -> None:
        if side is self.client:
            return
        if self.aborted:
            side.abort()
        elif not self.blackholed:
            self.c2u.dst_opened()

    def received(self, side: _Side, data: bytes) -> None:
        if self.blackholed:
            self.proxy.bytes_discarded += len(data)
        elif side is self.upstream:
            self.u2c.push(data, self.delay)
        elif self.src is not None:
            self.c2u.push(data, self.delay)
        else:
            self._sniff(data)

    def side_lost(self, side: _Side) -> None:
        if not self.blackholed and not self.aborted:
            out, into = (self.c2u, self.u2c) if side is self.client else (self.u2c, self.c2u)
            into.drop()
            out.eof = True
            out.finish()
        if self.client.state == _CLOSED and self.upstream.state in (_NEW, _CLOSED):
            self._done()

    # State changes.

    def _sniff(self, data: bytes) -> None:
        self.sniff += data
        complete, client_id = sniff_client_id(self.sniff)
        if not complete:
            return
        self.src = classify(client_id)
        buffered = bytes(self.sniff)
        self.sniff = bytearray()
        self.refresh(self.proxy.table)
        if self.blackholed:
            self.proxy.bytes_discarded += len(buffered)
            return
        self.upstream.state = _CONNECTING
        self.proxy.spawn(self._connect())
        self.c2u.push(buffered, self.delay)

    async def _connect(self) -> None:
        loop = self.proxy.loop
        try:
            await loop.create_connection(
                lambda: self.upstream, self.route.target_host, self.route.target_port
            )
        except OSError as exc:
            log.info("upstream %s:%d for %s failed: %s", *self._target(), self.key, exc)
            self.upstream.state = _CLOSED
            self.c2u.drop()
            if self.blackholed:
                self.side_lost(self.upstream)
            else:
                self.client.close()
                if self.client.state == _CLOSED:
                    self._done()

    def _target(self) -> tuple[str, int]:
        return self.route.target_host, self.route.target_port

    def refresh(self, table: LinkTable) -> None:
        """Re-evaluate the rules for this connection after a change."""
        if self.src is None or self.aborted:
            return
        self.delay = table.delay_of(self.src, self.dst)
        cut = table.is_cut(self.src, self.dst)
        if cut and not self.blackholed:
            self._blackhole()
        elif not cut and self.blackholed:
            self.abort()
            self.proxy.resets += 1

    def _blackhole(self) -> None:
        self.blackholed = True
        self.proxy.blackholed += 1
        self.c2u.drop()
        self.u2c.drop()

    def abort(self) -> None:
        """Reset both sides (the stream cannot resume)."""
        self.aborted = True
        self.c2u.drop()
        self.u2c.drop()
        self.client.abort()
        self.upstream.abort()
        if self.client.state == _CLOSED and self.upstream.state in (_NEW, _CLOSED):
            self._done()

    def _done(self) -> None:
        self.c2u.drop()
        self.u2c.drop()
        self.proxy.conns.discard(self)


class ChaosProxy:
    """Asyncio TCP proxy applying a :class:`LinkTable` to classified connections."""

    def __init__(self, routes: Sequence[Route], table: LinkTable | None = None) -> None:
        if not routes:
            raise ValueError("at least one route is required")
        self.routes = list(routes)
        self.table = table if table is not None else LinkTable()
        self.conns: set[_Conn] = set()
        self.bytes_forwarded = 0
        self.bytes_discarded = 0
        self.blackholed = 0
        self.resets = 0
        self._servers: list[asyncio.Server] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("proxy not started")
        return self._loop

    @property
    def listen_ports(self) -> list[int]:
        """Bound port of each route, in route order (resolves ``listen_port=0``)."""
        return [int(server.sockets[0].getsockname()[1]) for server in self._servers]

    async def start(self) -> None:
        """Listen on every route."""
        self._loop = asyncio.get_running_loop()
        try:
            for route in self.routes:
                server = await self._loop.create_server(
                    functools.partial(self._accept, route),
                    route.listen_host,
                    route.listen_port,
                )
                self._servers.append(server)
        except BaseException:
            await self.close()
            raise

    def _accept(self, route: Route) -> _Side:
        conn = _Conn(self, route)
        self.conns.add(conn)
        return conn.client

    def spawn(self, coro: Any) -> None:
        task: asyncio.Task[None] = self.loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """Stop listening and reset every connection."""
        for server in self._servers:
            server.close()
        for conn in list(self.conns):
            conn.abort()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for server in self._servers:
            await server.wait_closed()
        self._servers.clear()
        await asyncio.sleep(0)  # let connection_lost callbacks run
        self.conns.clear()

    def _changed(self) -> None:
        for conn in list(self.conns):
            conn.refresh(self.table)

    def apply(self, command: dict[str, Any]) -> dict[str, Any]:
        """Run one control command; never raises for bad input."""
        try:
            return self._apply(command)
        except (KeyError, TypeError, ValueError) as exc:
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}

    def _apply(self, command: dict[str, Any]) -> dict[str, Any]:
        op = command.get("op")
        table = self.table
        if op == "stats":
            return {"ok": True, **self.stats()}
        if op == "cut":
            table.cut(_label(command, "src"), _label(command, "dst"))
        elif op == "uncut":
            table.uncut(_label(command, "src"), _label(command, "dst"))
        elif op == "isolate_node":
            peers = command["peers"]
            if not isinstance(peers, list):
                raise TypeError("peers must be a list of labels")
            table.isolate_node(_label(command, "node"), [_str(p, "peers") for p in peers])
        elif op == "isolate_client":
            table.isolate_client(_label(command, "client"))
        elif op == "delay":
            ms = command["ms"]
            if isinstance(ms, bool) or not isinstance(ms, int | float) or ms < 0:
                raise ValueError("ms must be a non-negative number")
            table.delay(_label(command, "src"), _label(command, "dst"), float(ms))
        elif op == "heal":
            table.heal()
        else:
            return {"ok": False, "error": f"unknown op {op!r}"}
        log.info("rule change: %s", command)
        self._changed()
        return {"ok": True}

    def stats(self) -> dict[str, Any]:
        """Open connections per ``src>dst`` and counters since start."""
        open_by_link: dict[str, int] = {}
        pending = 0
        for conn in self.conns:
            if conn.src is None:
                pending += 1
            else:
                open_by_link[conn.key] = open_by_link.get(conn.key, 0) + 1
        return {
            "connections": dict(sorted(open_by_link.items())),
            "pending": pending,
            "bytes_forwarded": self.bytes_forwarded,
            "bytes_discarded": self.bytes_discarded,
            "blackholed": self.blackholed,
            "reset": self.resets,
            **self.table.describe(),
        }


def _str(value: object, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty string")
    return value


def _label(command: dict[str, Any], name: str) -> str:
    return _str(command[name], name)


# Process entry point.


def _stdin_pump(loop: asyncio.AbstractEventLoop, lines: asyncio.Queue[bytes | None]) -> None:
    """Feed stdin lines to the loop; ``None`` on EOF (raw fd reads: no buffer lock)."""
    pending = b""
    try:
        while True:
            chunk = os.read(0, 65536)
            if not chunk:
                break
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for line in complete:
                loop.call_soon_threadsafe(lines.put_nowait, line)
        if pending.strip():
            loop.call_soon_threadsafe(lines.put_nowait, pending)
    except (OSError, RuntimeError):
        pass
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(lines.put_nowait, None)


def _emit(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


async def _serve(routes: Sequence[Route]) -> None:
    proxy = ChaosProxy(routes)
    await proxy.start()
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[bytes | None] = asyncio.Queue()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lines.put_nowait, None)
    threading.Thread(target=_stdin_pump, args=(loop, lines), daemon=True).start()
    try:
        _emit({"ready": True, "ports": proxy.listen_ports})
        while (line := await lines.get()) is not None:
            if not line.strip():
                continue
            try:
                command = json.loads(line)
            except ValueError as exc:
                _emit({"ok": False, "error": f"bad json: {exc}"})
                continue
            if not isinstance(command, dict):
                _emit({"ok": False, "error": "command must be a JSON object"})
                continue
            reply = proxy.apply(command)
            if "id" in command:
                reply["id"] = command["id"]
            _emit(reply)
    except BrokenPipeError:  # the controller went away: exit quietly
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    finally:
        await proxy.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the proxy process until stdin EOF or SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m pydmq.chaos.proxy", description=__doc__)
    parser.add_argument(
        "--route",
        action="append",
        required=True,
        type=parse_route,
        metavar="DST=LHOST:LPORT=THOST:TPORT",
    )
    parser.add_argument("--no-uvloop", action="store_true", help="use the stdlib event loop")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    routes: list[Route] = args.route
    uvloop: Any = None
    if not args.no_uvloop:
        with contextlib.suppress(ImportError):
            import uvloop
    if uvloop is not None:
        uvloop.run(_serve(routes))
    else:
        asyncio.run(_serve(routes))
    return 0


# Harness-side controller.


class ProxyProcess:
    """Synchronous handle on a ``python -m pydmq.chaos.proxy`` subprocess."""

    def __init__(self, routes: Sequence[Route], log_path: Path | None = None) -> None:
        self.routes = list(routes)
        self.log_path = log_path
        self.ports: list[int] = []
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._reader: threading.Thread | None = None
        self._lock = threading.Lock()
        self._next_id = 0
        self._returncode: int | None = None

    @property
    def pid(self) -> int | None:
        """PID of the running proxy, ``None`` when not started or stopped."""
        return self._proc.pid if self._proc is not None else None

    @property
    def returncode(self) -> int | None:
        """Exit status of the last stopped (or crashed) process."""
        if self._proc is not None:
            return self._proc.poll()
        return self._returncode

    def start(self, timeout: float = 10.0) -> None:
        """Spawn the proxy and wait (bounded) until it listens on every route."""
        if self._proc is not None:
            raise RuntimeError("proxy process already started")
        argv = [sys.executable, "-m", "pydmq.chaos.proxy"]
        argv += [f"--route={route.spec}" for route in self.routes]
        env = dict(os.environ)
        src_dir = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src_dir, env.get("PYTHONPATH")) if p)
        stderr: IO[bytes] | int = subprocess.DEVNULL
        if self.log_path is not None:
            self._log = stderr = open(self.log_path, "ab")  # noqa: SIM115
        self._lines = queue.Queue()
        self._proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env
        )
        self._reader = threading.Thread(
            target=self._read_stdout, args=(self._proc, self._lines), daemon=True
        )
        self._reader.start()
        try:
            ready = self._read_message(time.monotonic() + timeout)
            if ready.get("ready") is not True:
                raise RuntimeError(f"unexpected first line from proxy: {ready!r}")
            self.ports = [int(port) for port in ready.get("ports", [])]
        except BaseException:
            self.stop(timeout=1.0)
            raise

    @staticmethod
    def _read_stdout(proc: subprocess.Popen[bytes], lines: queue.Queue[bytes | None]) -> None:
        assert proc.stdout is not None
        with contextlib.suppress(OSError, ValueError):
            for line in proc.stdout:
                lines.put(line)
        lines.put(None)

    def _read_message(self, deadline: float) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise TimeoutError("no answer from proxy process") from None
        if line is None:
            self._lines.put(None)  # keep reporting EOF to later callers
            raise RuntimeError("proxy process exited")
        message = json.loads(line)
        if not isinstance(message, dict):
            raise RuntimeError(f"unexpected line from proxy: {line!r}")
        return message

    def command(self, cmd: dict[str, Any], timeout: float = 5.0) -> dict[str, Any]:
        """Send one command and wait (bounded) for its answer; thread-safe."""
        with self._lock:
            proc = self._proc
            if proc is None or proc.stdin is None:
                raise RuntimeError("proxy process not started")
            self._next_id += 1
            ident = self._next_id
            deadline = time.monotonic() + timeout
            try:
                proc.stdin.write(json.dumps({**cmd, "id": ident}).encode() + b"\n")
                proc.stdin.flush()
            except (BrokenPipeError, ValueError):
                raise RuntimeError("proxy process exited") from None
            while True:
                answer = self._read_message(deadline)
                if answer.pop("id", None) == ident:
                    return answer
                # An answer to an earlier command that timed out: skip it.

    def stop(self, timeout: float = 5.0) -> None:
        """Close stdin, wait (bounded), then SIGKILL this process if still running."""
        proc = self._proc
        if proc is None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if self._reader is not None:
            self._reader.join(timeout=timeout)
            self._reader = None
        if proc.stdout is not None:
            proc.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None
        self._returncode = proc.returncode
        self._proc = None

    def __enter__(self) -> ProxyProcess:
        if self._proc is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


if __name__ == "__main__":
    sys.exit(main())
