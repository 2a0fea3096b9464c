"""The REST admin API's routes: each path, method and handler with the OpenAPI description
:mod:`pydmq.http.openapi` builds ``/v1/openapi.json`` from.

Every handler's :class:`~pydmq.rest.errors.RestError` is answered in the error envelope;
the write routes (POST, PUT, DELETE) go through :class:`~pydmq.rest.idempotency.Idempotency`.
"""

from __future__ import annotations

from typing import Any

import pydmq
from pydmq.http.messages import HttpRequest, HttpResponse, json_response
from pydmq.http.openapi import openapi_document
from pydmq.http.routing import Handler, RouteDoc, Router
from pydmq.rest.calls import BrokerCalls
from pydmq.rest.cluster import ClusterResource
from pydmq.rest.errors import RestError
from pydmq.rest.groups import GroupsResource
from pydmq.rest.idempotency import Idempotency
from pydmq.rest.topics import TopicsResource

__all__ = ["ADMIN", "add_admin_routes", "add_openapi_route", "serve"]

ADMIN = "admin"  # the route group of the REST admin API (its own rate limit)

_S = {"type": "string"}
_I = {"type": "integer"}
_NULLABLE_I = {"type": ["integer", "null"]}
_PARTITION = {
    "type": "object",
    "properties": {
        "id": _I,
        "leader": _I,
        "leader_epoch": _I,
        "replicas": {"type": "array", "items": _I},
        "isr": {"type": "array", "items": _I},
        "offline_replicas": {"type": "array", "items": _I},
    },
}
_CONFIGS_IN = {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}}
_TOPIC_CREATE = {
    "type": "object",
    "required": ["name"],
    "properties": {"name": _S, "partitions": _I, "replication_factor": _I, "configs": _CONFIGS_IN},
}
_TOPIC_CREATED = {
    "type": "object",
    "properties": {
        "name": _S,
        "topic_id": _S,
        "partitions": _I,
        "replication_factor": _I,
        "configs": {"type": "object"},
        "created_at": {"type": "string", "format": "date-time"},
    },
}
_TOPIC_LIST = {
    "type": "object",
    "properties": {
        "topics": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": _S,
                    "topic_id": _S,
                    "internal": {"type": "boolean"},
                    "partitions": _I,
                    "replication_factor": _I,
                },
            },
        }
    },
}
_TOPIC = {
    "type": "object",
    "properties": {
        "name": _S,
        "topic_id": _S,
        "internal": {"type": "boolean"},
        "partitions": {"type": "array", "items": _PARTITION},
        "configs": {"type": "object"},
    },
}
_CONFIGS_PUT = {
    "type": "object",
    "required": ["configs"],
    "properties": {
        "configs": {
            "type": "object",
            "additionalProperties": {"type": ["string", "number", "boolean", "null"]},
        }
    },
}
_GROUP_LIST = {
    "type": "object",
    "properties": {
        "groups": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"group_id": _S, "state": _S, "type": _S, "protocol_type": _S},
            },
        }
    },
}
_GROUP = {
    "type": "object",
    "properties": {
        "group_id": _S,
        "state": _S,
        "protocol_type": _S,
        "protocol": _S,
        "coordinator": _I,
        "members": {"type": "array", "items": {"type": "object"}},
        "offsets": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "topic": _S,
                    "partition": _I,
                    "committed_offset": _NULLABLE_I,
                    "log_end_offset": _I,
                    "lag": _NULLABLE_I,
                },
            },
        },
        "total_lag": _I,
    },
}
_RESET = {
    "type": "object",
    "required": ["topic", "to"],
    "properties": {
        "topic": _S,
        "partitions": {"type": "array", "items": _I},
        "to": {"enum": ["earliest", "latest", "offset", "timestamp"]},
        "offset": _I,
        "timestamp": _I,
    },
}
_RESET_DONE = {
    "type": "object",
    "properties": {
        "group_id": _S,
        "offsets": {
            "type": "array",
            "items": {"type": "object", "properties": {"topic": _S, "partition": _I, "offset": _I}},
        },
    },
}
_BROKERS = {
    "type": "object",
    "properties": {"cluster_id": _S, "brokers": {"type": "array", "items": {"type": "object"}}},
}
_CONTROLLER = {
    "type": "object",
    "properties": {"id": _I, "epoch": _I, "endpoints": {"type": "array"}},
}
_QUORUM = {
    "type": "object",
    "properties": {
        "leader_id": _I,
        "leader_epoch": _I,
        "high_watermark": _NULLABLE_I,
        "voters": {"type": "array"},
        "observers": {"type": "array"},
        "controllers": {"type": "array"},
    },
}

# Statuses every admin route may answer besides its own.
_COMMON: dict[int, Any] = {401: None, 403: None, 429: None, 500: None, 503: None}
_WRITE: dict[int, Any] = {**_COMMON, 409: None, 422: None}


def serve(handler: Handler) -> Handler:
    """``handler`` with its RestErrors answered in the envelope."""

    async def answered(request: HttpRequest) -> HttpResponse:
        try:
            return await handler(request)
        except RestError as error:
            return error.response(request.request_id)

    return answered


def add_admin_routes(router: Router, calls: BrokerCalls, idempotency: Idempotency) -> None:
    """The ``/v1/admin`` routes, each answering through ``calls``."""
    topics = TopicsResource(calls)
    groups = GroupsResource(calls)
    cluster = ClusterResource(calls)

    def read(template: str, handler: Handler, doc: RouteDoc) -> None:
        router.add("GET", template, serve(handler), ADMIN, doc)

    def write(method: str, template: str, handler: Handler, doc: RouteDoc) -> None:
        router.add(method, template, serve(idempotency.wrap(serve(handler))), ADMIN, doc)

    write(
        "POST",
        "/v1/admin/topics",
        topics.create,
        RouteDoc(
            "Create a topic (CreateTopics)",
            {201: _TOPIC_CREATED, 400: None, **_WRITE},
            _TOPIC_CREATE,
            tag="topics",
        ),
    )
    read(
        "/v1/admin/topics",
        topics.list_all,
        RouteDoc(
            "List the topics (Metadata)",
            {200: _TOPIC_LIST, 400: None, **_COMMON},
            query={"include_internal": "true to list the internal topics too"},
            tag="topics",
        ),
    )
    read(
        "/v1/admin/topics/{name}",
        topics.describe,
        RouteDoc(
            "Describe a topic: partitions with leader, replicas and ISR; configs "
            "(Metadata, DescribeConfigs)",
            {200: _TOPIC, 404: None, **_COMMON},
            tag="topics",
        ),
    )
    write(
        "PUT",
        "/v1/admin/topics/{name}/configs",
        topics.alter_configs,
        RouteDoc(
            "Set topic configs; null removes one (IncrementalAlterConfigs)",
            {200: {"type": "object"}, 400: None, 404: None, **_WRITE},
            _CONFIGS_PUT,
            tag="topics",
        ),
    )
    write(
        "DELETE",
        "/v1/admin/topics/{name}",
        topics.delete,
        RouteDoc("Delete a topic (DeleteTopics)", {204: None, 404: None, **_WRITE}, tag="topics"),
    )
    read(
        "/v1/admin/groups",
        groups.list_all,
        RouteDoc(
            "List the consumer groups of every broker (ListGroups)",
            {200: _GROUP_LIST, **_COMMON},
            tag="groups",
        ),
    )
    read(
        "/v1/admin/groups/{group_id}",
        groups.describe,
        RouteDoc(
            "Describe a group: members, assignments, committed offsets and lag per partition "
            "(DescribeGroups, OffsetFetch, ListOffsets)",
            {200: _GROUP, 404: None, **_COMMON},
            tag="groups",
        ),
    )
    write(
        "POST",
        "/v1/admin/groups/{group_id}/offsets/reset",
        groups.reset_offsets,
        RouteDoc(
            "Reset a group's committed offsets of a topic while the group is empty "
            "(OffsetCommit, as kafka-consumer-groups --reset-offsets)",
            {200: _RESET_DONE, 400: None, 404: None, **_WRITE},
            _RESET,
            tag="groups",
        ),
    )
    read(
        "/v1/admin/cluster/brokers",
        cluster.brokers,
        RouteDoc("The brokers (DescribeCluster)", {200: _BROKERS, **_COMMON}, tag="cluster"),
    )
    read(
        "/v1/admin/cluster/controller",
        cluster.controller,
        RouteDoc(
            "The active controller (DescribeQuorum)", {200: _CONTROLLER, **_COMMON}, tag="cluster"
        ),
    )
    read(
        "/v1/admin/cluster/quorum",
        cluster.quorum,
        RouteDoc(
            "The controller quorum: leader, epoch, voters and observers (DescribeQuorum)",
            {200: _QUORUM, **_COMMON},
            tag="cluster",
        ),
    )


def add_openapi_route(router: Router, group: str) -> None:
    """``GET /v1/openapi.json``: the document of every route ``router`` has when it is
    asked (so it lists what the node serves, and cannot drift from it)."""

    async def document(request: HttpRequest) -> HttpResponse:
        return json_response(200, openapi_document(router, "pydmq", pydmq.__version__))

    router.add(
        "GET",
        "/v1/openapi.json",
        document,
        group,
        RouteDoc("This document (OpenAPI 3.1)", {200: {"type": "object"}}),
    )
