"""The console's pages and routes (group ``console``): ``/`` the cluster, ``/topics`` and
``/topics/{name}``, ``/groups`` and ``/groups/{group_id}``. GET only: the console never
changes anything.

Each page asks the REST admin API's resources (:mod:`pydmq.rest`) with the console request
itself (its HTTP Basic user, so the same ACLs apply) and reads their JSON answers; rates, log
sizes and the lag plot come from the node's metrics registry through the
:class:`~pydmq.console.sampler.MetricsSampler`. An error of a resource (unknown topic or group,
forbidden, unavailable) is shown as a page with the resource's status.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable
from typing import Any

from pydmq.console.html import Markup, facts, link, page, table, text
from pydmq.console.sampler import (
    BYTES_IN,
    BYTES_OUT,
    GROUP_LAG,
    LOG_END_OFFSET,
    LOG_SIZE,
    MESSAGES_IN,
    MetricsSample,
    MetricsSampler,
)
from pydmq.console.svg import line_chart
from pydmq.http.messages import HttpRequest, HttpResponse
from pydmq.http.routing import Handler, Router
from pydmq.rest.calls import BrokerCalls
from pydmq.rest.cluster import ClusterResource
from pydmq.rest.errors import RestError
from pydmq.rest.groups import GroupsResource
from pydmq.rest.topics import TopicsResource

__all__ = ["CONSOLE", "ConsolePages", "add_console_routes"]

CONSOLE = "console"  # the route group of the console (monitoring's limit; Basic auth as admin)
RATE_WINDOW_S = 60.0

Page = Callable[[HttpRequest], Awaitable[HttpResponse]]


async def _answer(handler: Handler, request: HttpRequest, **params: str) -> Any:
    """The JSON a REST resource's handler answers to ``request`` with ``params``."""
    response = await handler(dataclasses.replace(request, params=params, query={}))
    return json.loads(response.body)


def _rendered(render: Page) -> Handler:
    """``render`` with a resource's RestError shown as an error page of its status."""

    async def answered(request: HttpRequest) -> HttpResponse:
        try:
            return await render(request)
        except RestError as error:
            asked = "".join(
                f"<dt>{text(k)}</dt><dd>{text(v)}</dd>" for k, v in request.params.items()
            )
            body = Markup(
                f'<p id="error">{text(error.code)}: {text(error.message)}</p><dl>{asked}</dl>'
            )
            return page(f"Error {error.status}", body, error.status)

    return answered


def _per_second(value: float | None, unit: str) -> str | None:
    return None if value is None else f"{value:,.1f} {unit}/s"


class ConsolePages:
    """The pages' handlers. Owned by the node's HTTP service, on its event loop."""

    def __init__(self, calls: BrokerCalls, sampler: MetricsSampler) -> None:
        self.topics = TopicsResource(calls)
        self.groups = GroupsResource(calls)
        self.cluster = ClusterResource(calls)
        self.sampler = sampler

    async def cluster_page(self, request: HttpRequest) -> HttpResponse:
        brokers = await _answer(self.cluster.brokers, request)
        quorum = await _answer(self.cluster.quorum, request)
        controller = await _answer(self.cluster.controller, request)
        voters = {v["id"] for v in quorum["voters"]}
        body = facts(
            [
                ("Cluster id", brokers["cluster_id"]),
                ("Active controller", controller["id"]),
                ("Controller epoch", controller["epoch"]),
                ("High watermark", quorum["high_watermark"]),
            ],
            "cluster",
        )
        body += Markup("<h2>Brokers</h2>") + table(
            ["Id", "Host", "Port", "Rack"],
            [[b["id"], b["host"], b["port"], b["rack"]] for b in brokers["brokers"]],
            "brokers",
        )
        replicas = [
            [
                r["id"],
                "voter" if r["id"] in voters else "observer",
                "leader" if r["id"] == quorum["leader_id"] else "",
                r["log_end_offset"],
            ]
            for r in [*quorum["voters"], *quorum["observers"]]
        ]
        body += Markup("<h2>Controller quorum</h2>") + table(
            ["Node", "Role", "Raft", "Log end offset"], replicas, "quorum"
        )
        return page("Cluster", body)

    def _topic_rates(self, topic: str, now: MetricsSample) -> list[str | None]:
        labels = (("topic", topic),)
        return [
            _per_second(self.sampler.rate(MESSAGES_IN, labels, now, RATE_WINDOW_S), "records"),
            _per_second(self.sampler.rate(BYTES_IN, labels, now, RATE_WINDOW_S), "B"),
            _per_second(self.sampler.rate(BYTES_OUT, labels, now, RATE_WINDOW_S), "B"),
        ]

    async def topics_page(self, request: HttpRequest) -> HttpResponse:
        listed = await _answer(self.topics.list_all, request)
        now = self.sampler.now()
        rows = [
            [
                link("/topics", t["name"]),
                t["partitions"],
                t["replication_factor"],
                *self._topic_rates(t["name"], now),
            ]
            for t in listed["topics"]
        ]
        body = table(
            ["Topic", "Partitions", "Replication", "Produce", "Bytes in", "Bytes out"],
            rows,
            "topics",
        )
        body += Markup(
            f'<p class="note">Rates over the last {RATE_WINDOW_S:g} s, as led by this node '
            "(records and bytes appended; bytes fetched by consumers).</p>"
        )
        return page("Topics", body)

    async def topic_page(self, request: HttpRequest) -> HttpResponse:
        name = request.params["name"]
        topic = await _answer(self.topics.describe, request, name=name)
        now = self.sampler.now()
        produce, bytes_in, bytes_out = self._topic_rates(name, now)
        size, end = now.family(LOG_SIZE), now.family(LOG_END_OFFSET)
        rows = []
        for p in topic["partitions"]:
            labels = (("partition", str(p["id"])), ("topic", name))
            log_size, log_end = size.get(labels), end.get(labels)
            rows.append(
                [
                    p["id"],
                    p["leader"],
                    ", ".join(map(str, p["replicas"])),
                    ", ".join(map(str, p["isr"])),
                    None if log_end is None else int(log_end),
                    None if log_size is None else int(log_size),
                ]
            )
        body = facts(
            [
                ("Topic id", topic["topic_id"]),
                ("Internal", "yes" if topic["internal"] else "no"),
                ("Produce", produce),
                ("Bytes in", bytes_in),
                ("Bytes out", bytes_out),
            ],
            "topic",
        )
        body += Markup("<h2>Partitions</h2>") + table(
            ["Partition", "Leader", "Replicas", "ISR", "Log end offset", "Log size (bytes)"],
            rows,
            "partitions",
        )
        body += Markup(
            '<p class="note">Log end offset and size of the replicas on this node; rates over '
            f"the last {RATE_WINDOW_S:g} s, of the partitions this node leads.</p>"
            "<h2>Configs</h2>"
        ) + table(
            ["Name", "Value", "Source"],
            [[k, c["value"], c["source"]] for k, c in topic["configs"].items()],
            "configs",
        )
        return page(f"Topic {name}", body)

    async def groups_page(self, request: HttpRequest) -> HttpResponse:
        listed = await _answer(self.groups.list_all, request)
        rows = [
            [link("/groups", g["group_id"]), g["state"], g["type"], g["protocol_type"]]
            for g in listed["groups"]
        ]
        return page(
            "Consumer groups", table(["Group", "State", "Type", "Protocol"], rows, "groups")
        )

    async def group_page(self, request: HttpRequest) -> HttpResponse:
        group_id = request.params["group_id"]
        group = await _answer(self.groups.describe, request, group_id=group_id)
        body = facts(
            [
                ("State", group["state"]),
                ("Protocol", f"{group['protocol_type']} {group['protocol']}".strip()),
                ("Coordinator", group["coordinator"]),
                ("Total lag", group["total_lag"]),
            ],
            "group",
        )
        members = [
            [
                m["member_id"],
                m["client_id"],
                m["client_host"],
                ", ".join(f"{a['topic']}-{a['partition']}" for a in m["assignment"]),
            ]
            for m in group["members"]
        ]
        body += Markup("<h2>Members</h2>") + table(
            ["Member", "Client id", "Host", "Assignment"], members, "members"
        )
        offsets = [
            [
                link("/topics", o["topic"]),
                o["partition"],
                o["committed_offset"],
                o["log_end_offset"],
                o["lag"],
                o["member_id"],
            ]
            for o in group["offsets"]
        ]
        body += Markup("<h2>Offsets and lag</h2>") + table(
            ["Topic", "Partition", "Committed", "Log end", "Lag", "Member"], offsets, "offsets"
        )
        sampler = self.sampler
        series = sampler.series(GROUP_LAG, (("group", group_id),))
        named = {
            f"{dict(labels)['topic']}-{dict(labels)['partition']}": points
            for labels, points in series.items()
        }
        now = sampler.now().at
        body += Markup("<h2>Lag over time</h2>") + line_chart(
            named, now, sampler.span(now), "lag-plot"
        )
        body += Markup(
            f'<p class="note">Sampled every {sampler.interval_s:g} s, for the partitions this '
            "node leads.</p>"
        )
        return page(f"Group {group_id}", body)


def add_console_routes(router: Router, calls: BrokerCalls, sampler: MetricsSampler) -> None:
    """The console's GET routes, each answering an HTML page. They are pages for a browser,
    not an API: the OpenAPI document leaves them out (no RouteDoc)."""
    pages = ConsolePages(calls, sampler)
    for template, render in (
        ("/", pages.cluster_page),
        ("/topics", pages.topics_page),
        ("/topics/{name}", pages.topic_page),
        ("/groups", pages.groups_page),
        ("/groups/{group_id}", pages.group_page),
    ):
        router.add("GET", template, _rendered(render), CONSOLE)
