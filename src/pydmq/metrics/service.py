"""NodeHttpService: a node's HTTP listener and its routes.

Routes (group ``monitoring``): ``GET /metrics`` (Prometheus text format, rendered by
prometheus_client from the node's own registry), ``GET /v1/health/live`` and
``GET /v1/health/ready`` (JSON, 200 or 503; see :mod:`pydmq.metrics.health`),
``GET /v1/openapi.json``; on a node with the broker role, the REST admin API (group
``admin``, :mod:`pydmq.rest`) and the web console at ``/`` (group ``console``, with the
monitoring rate limit; :mod:`pydmq.console`, whose sampler reads the metrics registry every
few seconds). Every route passes the per-client rate limits (``pydmq.rest.*``,
:class:`~pydmq.http.ratelimit.RateLimitGate`); the admin and console routes are behind HTTP
Basic when the client listener is a SASL listener.

prometheus_client costs ~0.1 s to import: it is imported at the first scrape, never at
start-up. The node starts this service once its Kafka listeners serve (in cluster mode once
its controller and control-plane listeners serve, so readiness can answer "not ready" while
the broker registers).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import TYPE_CHECKING

from pydmq.config.console import ConsoleSettings
from pydmq.config.http import HttpListener, HttpSettings
from pydmq.config.rest import RestSettings
from pydmq.http.messages import HttpRequest, HttpResponse, json_response
from pydmq.http.ratelimit import RateLimitGate
from pydmq.http.routing import RequestGate, RouteDoc, Router
from pydmq.http.server import HttpServer
from pydmq.metrics.health import readiness
from pydmq.metrics.loop_lag import EventLoopLagProbe
from pydmq.metrics.source import NodeView
from pydmq.rest.api import ADMIN

if TYPE_CHECKING:
    from collections.abc import Iterable

    from prometheus_client.core import Metric
    from prometheus_client.registry import CollectorRegistry

    from pydmq.console.sampler import MetricsSampler
    from pydmq.rest.calls import BrokerCalls

__all__ = ["MONITORING", "NodeHttpService"]

MONITORING = "monitoring"  # the route group of metrics, health and the OpenAPI document


class NodeHttpService:
    """Owned by the node, on its event loop: the HTTP server, the routes above, the event
    loop's lag probe and (from the first scrape) the node's metrics registry."""

    def __init__(self, node: NodeView, settings: HttpSettings) -> None:
        self.node = node
        self.lag_probe = EventLoopLagProbe()
        self._registry: CollectorRegistry | None = None
        self._renderer: concurrent.futures.ThreadPoolExecutor | None = None
        self._calls: BrokerCalls | None = None
        self._sampler: MetricsSampler | None = None
        router = Router()
        router.add(
            "GET",
            "/metrics",
            self._metrics,
            MONITORING,
            RouteDoc("Prometheus metrics (text format)", {200: None}),
        )
        router.add(
            "GET",
            "/v1/health/live",
            self._live,
            MONITORING,
            RouteDoc("Liveness", {200: {"type": "object"}}),
        )
        router.add(
            "GET",
            "/v1/health/ready",
            self._ready,
            MONITORING,
            RouteDoc(
                "Readiness: 200 when ready, 503 when not",
                {200: {"type": "object"}, 503: {"type": "object"}},
            ),
        )
        rest = RestSettings.from_config(node.config)
        from pydmq.console.pages import CONSOLE

        limits: RequestGate = RateLimitGate(
            {
                MONITORING: rest.monitoring_per_minute,
                CONSOLE: rest.monitoring_per_minute,
                ADMIN: rest.admin_per_minute,
            }
        )
        if node.broker is not None:
            limits = self._add_admin_api(router, rest, limits)
        from pydmq.rest.api import add_openapi_route

        add_openapi_route(router, MONITORING)
        self.router = router
        self.server = HttpServer(settings, router, [limits])

    def _add_admin_api(
        self, router: Router, rest: RestSettings, limits: RequestGate
    ) -> RequestGate:
        """The REST admin API's and the console's routes (a node with the broker role); the
        gate in front of them: ``limits``, behind HTTP Basic when the client listener the API
        acts on is a SASL listener (the same users, and the ACLs for their principal)."""
        from pydmq.console.pages import CONSOLE, add_console_routes
        from pydmq.console.sampler import MetricsSampler
        from pydmq.http.basic_auth import BasicAuthGate
        from pydmq.rest.api import add_admin_routes
        from pydmq.rest.auth import SaslPasswordCheck
        from pydmq.rest.calls import BrokerCalls
        from pydmq.rest.idempotency import ControllerAnswerStore, Idempotency

        broker = self.node.broker
        assert broker is not None
        self._calls = calls = BrokerCalls(broker)
        store = ControllerAnswerStore(broker)
        add_admin_routes(router, calls, Idempotency(store, rest.idempotency_retention_ms))
        console = ConsoleSettings.from_config(self.node.config)
        self._sampler = MetricsSampler(
            self._collect, console.sample_interval_s, console.samples_kept
        )
        add_console_routes(router, calls, self._sampler)
        sasl = self.node.sasl_listeners.get(calls.listener)
        if sasl is None:
            return limits
        return BasicAuthGate(SaslPasswordCheck(sasl), (ADMIN, CONSOLE), limits)

    @property
    def bound(self) -> list[HttpListener]:
        """Each listener as bound (port 0 resolved)."""
        return self.server.bound

    async def start(self) -> None:
        """Bind and serve (HttpListenerError, naming the property, when a listener cannot be
        bound), then start the lag probe."""
        await self.server.start()
        self.lag_probe.start()
        if self._sampler is not None:
            self._sampler.start()

    async def stop(self) -> None:
        if self._sampler is not None:
            await self._sampler.stop()
        await self.lag_probe.stop()
        await self.server.stop()
        if self._calls is not None:
            await self._calls.close()
        if self._renderer is not None:
            self._renderer.shutdown(wait=False)

    def _collect(self) -> Iterable[Metric]:
        """The node's metric families, read now (on the node's event loop) from its registry,
        made at the first read."""
        if self._registry is None:
            from pydmq.metrics.collector import node_registry

            self._registry = node_registry(self.node, self.lag_probe)
        return self._registry.collect()

    async def _metrics(self, request: HttpRequest) -> HttpResponse:
        from prometheus_client.exposition import CONTENT_TYPE_LATEST

        from pydmq.metrics.collector import render

        if self._renderer is None:
            self._renderer = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="pydmq-metrics"
            )
        # The figures are read here, on the loop that owns them; the text (most of a scrape's
        # cost) is formatted on the renderer's thread, so the loop keeps serving meanwhile.
        families = list(self._collect())
        loop = asyncio.get_running_loop()
        body = await loop.run_in_executor(self._renderer, render, families)
        return HttpResponse(200, body, CONTENT_TYPE_LATEST)

    async def _live(self, request: HttpRequest) -> HttpResponse:
        return json_response(200, {"status": "live", "node_id": self.node.node_id})

    async def _ready(self, request: HttpRequest) -> HttpResponse:
        verdict = readiness(self.node)
        return json_response(200 if verdict.ready else 503, verdict.to_json(self.node.node_id))
