"""Topics under ``/v1/admin/topics``: create (CreateTopics), list and describe (Metadata,
DescribeConfigs), change configs (IncrementalAlterConfigs), delete (DeleteTopics); each the
request a Kafka AdminClient sends, run by :class:`~pydmq.rest.calls.BrokerCalls`."""

from __future__ import annotations

import datetime
from typing import Any
from urllib.parse import quote

from pydmq.config.sources import CONFIG_SOURCES
from pydmq.http.messages import HttpRequest, HttpResponse, json_response
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from pydmq.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicState
from pydmq.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from pydmq.protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from pydmq.protocol.messages.metadata import (
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponseTopic,
)
from pydmq.rest.body import json_object, optional_int, query_flag, string_map
from pydmq.rest.calls import BrokerCalls
from pydmq.rest.errors import RestError, kafka_error

__all__ = ["TopicsResource"]

CREATE_TOPICS, DELETE_TOPICS, METADATA, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = (
    19,
    20,
    3,
    32,
    44,
)
TOPIC_RESOURCE = 2  # Kafka's ConfigResource.Type.TOPIC
_SET, _DELETE = 0, 1  # IncrementalAlterConfigs operations
_TIMEOUT_MS = 30_000
_SOURCE_NAMES = {code: name for name, code in CONFIG_SOURCES.items()}


def _now() -> str:
    return (
        datetime.datetime.now(datetime.UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def _partitions(topic: MetadataResponseTopic) -> list[dict[str, Any]]:
    return [
        {
            "id": p.partition_index,
            "leader": p.leader_id,
            "leader_epoch": p.leader_epoch,
            "replicas": list(p.replica_nodes),
            "isr": list(p.isr_nodes),
            "offline_replicas": list(p.offline_replicas),
        }
        for p in sorted(topic.partitions, key=lambda p: p.partition_index)
    ]


class TopicsResource:
    """The topic routes' handlers. Owned by the node's HTTP service, on its event loop."""

    def __init__(self, calls: BrokerCalls) -> None:
        self.calls = calls

    async def create(self, request: HttpRequest) -> HttpResponse:
        body = json_object(request)
        name = body.get("name")
        if not isinstance(name, str) or not name:
            raise RestError(
                "INVALID_TOPIC_NAME", "name must be a non-empty string", {"field": "name"}
            )
        partitions = optional_int(body, "partitions", -1, "INVALID_PARTITION_COUNT")
        replication = optional_int(body, "replication_factor", -1)
        configs = string_map(body, "configs")
        kafka_request = CreateTopicsRequest(
            topics=[
                CreatableTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=replication,
                    assignments=[],
                    configs=[CreatableTopicConfig(name=k, value=v) for k, v in configs.items()],
                )
            ],
            timeout=_TIMEOUT_MS,
            validate_only=False,
        )
        response = await self.calls.call(request, CREATE_TOPICS, 7, kafka_request)
        result = response.topics[0]
        if result.error_code != ErrorCode.NONE:
            raise kafka_error(result.error_code, result.error_message, topic=name)
        created = {
            "name": name,
            "topic_id": str(result.topic_id),
            "partitions": result.num_partitions,
            "replication_factor": result.replication_factor,
            "configs": {c.name: c.value for c in (result.configs or []) if not c.is_sensitive},
            "created_at": _now(),
        }
        location = f"/v1/admin/topics/{quote(name, safe='')}"
        return json_response(201, created, [("location", location)])

    async def _metadata(
        self, request: HttpRequest, names: list[str] | None
    ) -> list[MetadataResponseTopic]:
        kafka_request = MetadataRequest(
            topics=None if names is None else [MetadataRequestTopic(name=n) for n in names],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        response = await self.calls.call(request, METADATA, 12, kafka_request)
        return list(response.topics)

    async def list_all(self, request: HttpRequest) -> HttpResponse:
        include_internal = query_flag(request, "include_internal")
        topics = [
            {
                "name": t.name,
                "topic_id": str(t.topic_id),
                "internal": t.is_internal,
                "partitions": len(t.partitions),
                "replication_factor": max((len(p.replica_nodes) for p in t.partitions), default=0),
            }
            for t in await self._metadata(request, None)
            if t.error_code == ErrorCode.NONE and (include_internal or not t.is_internal)
        ]
        topics.sort(key=lambda t: str(t["name"]))
        return json_response(200, {"topics": topics})

    async def describe(self, request: HttpRequest) -> HttpResponse:
        name = request.params["name"]
        (topic,) = await self._metadata(request, [name])
        if topic.error_code != ErrorCode.NONE:
            raise kafka_error(
                topic.error_code,
                f"topic {name!r}: no such topic"
                if topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else None,
                topic=name,
            )
        return json_response(
            200,
            {
                "name": name,
                "topic_id": str(topic.topic_id),
                "internal": topic.is_internal,
                "partitions": _partitions(topic),
                "configs": await self._configs(request, name),
            },
        )

    async def _configs(self, request: HttpRequest, name: str) -> dict[str, Any]:
        kafka_request = DescribeConfigsRequest(
            resources=[
                DescribeConfigsResource(
                    resource_type=TOPIC_RESOURCE, resource_name=name, configuration_keys=None
                )
            ],
            include_synonyms=False,
            include_documentation=False,
        )
        response = await self.calls.call(request, DESCRIBE_CONFIGS, 4, kafka_request)
        result = response.results[0]
        if result.error_code != ErrorCode.NONE:
            raise kafka_error(result.error_code, result.error_message, topic=name)
        return {
            c.name: {
                "value": None if c.is_sensitive else c.value,
                "source": _SOURCE_NAMES.get(c.config_source, "UNKNOWN"),
                "read_only": c.read_only,
            }
            for c in sorted(result.configs, key=lambda c: c.name)
        }

    async def alter_configs(self, request: HttpRequest) -> HttpResponse:
        name = request.params["name"]
        configs = string_map(json_object(request), "configs", nullable_values=True)
        if not configs:
            raise RestError(
                "INVALID_INPUT", "configs must name at least one config", {"field": "configs"}
            )
        kafka_request = IncrementalAlterConfigsRequest(
            resources=[
                AlterConfigsResource(
                    resource_type=TOPIC_RESOURCE,
                    resource_name=name,
                    configs=[
                        AlterableConfig(
                            name=k, config_operation=_DELETE if v is None else _SET, value=v
                        )
                        for k, v in configs.items()
                    ],
                )
            ],
            validate_only=False,
        )
        response = await self.calls.call(request, INCREMENTAL_ALTER_CONFIGS, 1, kafka_request)
        result = response.responses[0]
        if result.error_code != ErrorCode.NONE:
            raise kafka_error(result.error_code, result.error_message, topic=name)
        return json_response(200, {"name": name, "configs": configs})

    async def delete(self, request: HttpRequest) -> HttpResponse:
        name = request.params["name"]
        kafka_request = DeleteTopicsRequest(
            topics=[DeleteTopicState(name=name)], timeout=_TIMEOUT_MS
        )
        response = await self.calls.call(request, DELETE_TOPICS, 6, kafka_request)
        result = response.responses[0]
        if result.error_code != ErrorCode.NONE:
            raise kafka_error(result.error_code, result.error_message, topic=name)
        return HttpResponse(204)
