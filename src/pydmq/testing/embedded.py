"""EmbeddedBroker: a real pydmq broker on its own event-loop thread, for tests and embedding.

It listens on a real loopback port (0 = pick a free one) and stores data in a real directory,
so any Kafka client in the same process or another one can use ``bootstrap``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from pydmq.config.broker import BrokerConfig

__all__ = ["EmbeddedBroker"]

T = TypeVar("T")


class EmbeddedBroker:
    """Starts on ``start()`` (or ``with``), stops on ``stop()``; owns one thread and one loop."""

    def __init__(
        self,
        data_dir: str | Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        overrides: Mapping[str, object] | None = None,
        plugins: Iterable[object] = (),
    ) -> None:
        values: dict[str, object] = {
            "listeners": f"PLAINTEXT://[{host}]:{port}"
            if ":" in host
            else f"PLAINTEXT://{host}:{port}",
            "log.dirs": str(data_dir),
            # a free port: embedded brokers of one process (and tests) never collide on 8082
            "pydmq.http.listeners": f"http://[{host}]:0" if ":" in host else f"http://{host}:0",
        }
        values.update(overrides or {})
        self.config = BrokerConfig(values)
        # plugins registered besides the built-ins and entry points (a test's own handlers)
        self.plugins = tuple(plugins)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._node: object | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self.bootstrap = ""
        self.http_port = 0  # the HTTP listener's bound port (0: off or not started)

    def start(self, timeout: float = 30.0) -> EmbeddedBroker:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._serve(ready))
            except BaseException as exc:  # reported to the starting thread
                self._error = exc
                ready.set()
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name="pydmq-embedded", daemon=True)
        self._thread.start()
        if not ready.wait(timeout):
            raise TimeoutError("embedded broker did not start in time")
        if self._error is not None:
            raise RuntimeError("embedded broker failed to start") from self._error
        return self

    async def _serve(self, ready: threading.Event) -> None:
        from pydmq.node import Node

        node = Node(self.config, self.plugins)
        self._node = node
        self._stop = asyncio.Event()
        await node.start()
        self.bootstrap = node.bootstrap()
        self.http_port = next(iter(node.http_ports), 0)
        ready.set()
        try:
            await self._stop.wait()
        finally:
            await node.stop()

    @property
    def node(self) -> object:
        """The :class:`~pydmq.node.Node` (touch it only from its loop)."""
        return self._node

    @property
    def broker(self) -> object:
        """The node's :class:`~pydmq.broker.server.Broker`, its broker role (touch it only
        from its loop)."""
        return getattr(self._node, "broker", None)

    def run_on_loop(self, call: Callable[[], Awaitable[T]], timeout: float = 30.0) -> T:
        """Run ``call()`` on the broker's loop (where its objects may be touched) and return
        its result, waiting at most ``timeout`` seconds."""
        if self._loop is None:
            raise RuntimeError("the embedded broker is not running")

        async def run() -> T:
            return await call()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout)

    def stop(self, timeout: float = 30.0) -> None:
        if self._loop is not None and self._stop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(timeout)
        self._thread = None

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
