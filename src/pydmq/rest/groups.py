"""Consumer groups under ``/v1/admin/groups``: list (ListGroups from every broker), describe
with members and lag per partition (DescribeGroups and OffsetFetch at the group's
coordinator, ListOffsets at the partitions' leaders), reset offsets (OffsetCommit as
Kafka's ``kafka-consumer-groups --reset-offsets``: only while the group is empty).

The coordinator is found with FindCoordinator on this broker, which also checks the
caller may describe the group; a coordinator elsewhere is asked over the inter-broker
listener (:meth:`~pydmq.rest.calls.BrokerCalls.call_at`).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pydmq.http.messages import HttpRequest, HttpResponse, json_response
from pydmq.protocol.acl import AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.describe_groups import DescribedGroup, DescribeGroupsRequest
from pydmq.protocol.messages.find_coordinator import FindCoordinatorRequest
from pydmq.protocol.messages.list_groups import ListGroupsRequest
from pydmq.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from pydmq.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from pydmq.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from pydmq.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestGroup
from pydmq.rest.body import json_object, optional_int
from pydmq.rest.calls import BrokerCalls
from pydmq.rest.errors import RestError, kafka_error

__all__ = ["GroupsResource"]

LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH = 2, 3, 8, 9
FIND_COORDINATOR, DESCRIBE_GROUPS, LIST_GROUPS = 10, 15, 16
EARLIEST, LATEST = -2, -1  # ListOffsets' timestamps for the log start and the log end
_INACTIVE = ("Empty", "Dead")  # the states Kafka's tool resets offsets in
_TARGETS = ("earliest", "latest", "offset", "timestamp")

TopicPartition = tuple[str, int]


class GroupsResource:
    """The group routes' handlers. Owned by the node's HTTP service, on its event loop."""

    def __init__(self, calls: BrokerCalls) -> None:
        self.calls = calls

    async def list_all(self, request: HttpRequest) -> HttpResponse:
        """Every broker's groups, as Kafka's AdminClient.listConsumerGroups asks each."""
        services = self.calls.services
        brokers = [b.node_id for b in services.metadata.alive_brokers(self.calls.listener)]
        groups: dict[str, dict[str, Any]] = {}
        for broker_id in brokers or [self.calls.node_id]:
            try:
                response = await self.calls.call_at(
                    broker_id, request, LIST_GROUPS, 5, ListGroupsRequest(types_filter=[])
                )
            except (ConnectionError, TimeoutError) as exc:
                raise RestError(
                    "SERVICE_UNAVAILABLE", f"broker {broker_id} did not answer: {exc}"
                ) from None
            if response.error_code != ErrorCode.NONE:
                raise kafka_error(response.error_code, None, broker=broker_id)
            for g in response.groups:
                if not self.calls.authorized(
                    request, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id
                ):
                    continue  # as ListGroups leaves out what the caller may not describe
                groups[g.group_id] = {
                    "group_id": g.group_id,
                    "state": g.group_state,
                    "type": g.group_type,
                    "protocol_type": g.protocol_type,
                }
        return json_response(200, {"groups": [groups[k] for k in sorted(groups)]})

    async def _coordinator(self, request: HttpRequest, group_id: str) -> int:
        response = await self.calls.call(
            request,
            FIND_COORDINATOR,
            4,
            FindCoordinatorRequest(key_type=0, coordinator_keys=[group_id]),
        )
        found = response.coordinators[0]
        if found.error_code != ErrorCode.NONE:
            raise kafka_error(found.error_code, found.error_message, group_id=group_id)
        return int(found.node_id)

    async def _at(
        self, broker_id: int, request: HttpRequest, key: int, version: int, body: Any
    ) -> Any:
        try:
            return await self.calls.call_at(broker_id, request, key, version, body)
        except (ConnectionError, TimeoutError) as exc:
            raise RestError(
                "SERVICE_UNAVAILABLE", f"broker {broker_id} did not answer: {exc}"
            ) from None

    async def _describe_group(
        self, request: HttpRequest, coordinator: int, group_id: str
    ) -> DescribedGroup:
        response = await self._at(
            coordinator,
            request,
            DESCRIBE_GROUPS,
            6,
            DescribeGroupsRequest(groups=[group_id], include_authorized_operations=False),
        )
        group: DescribedGroup = response.groups[0]
        if group.error_code != ErrorCode.NONE:
            raise kafka_error(group.error_code, group.error_message, group_id=group_id)
        return group

    async def _committed(
        self, request: HttpRequest, coordinator: int, group_id: str
    ) -> dict[TopicPartition, int]:
        response = await self._at(
            coordinator,
            request,
            OFFSET_FETCH,
            8,
            OffsetFetchRequest(
                groups=[OffsetFetchRequestGroup(group_id=group_id, topics=None)],
                require_stable=False,
            ),
        )
        group = response.groups[0]
        if group.error_code != ErrorCode.NONE:
            raise kafka_error(group.error_code, None, group_id=group_id)
        return {
            (t.name, p.partition_index): p.committed_offset
            for t in group.topics
            for p in t.partitions
            if p.error_code == ErrorCode.NONE and p.committed_offset >= 0
        }

    async def _leaders(self, request: HttpRequest, topics: list[str]) -> dict[str, dict[int, int]]:
        """Partition -> leader of each existing topic of ``topics``."""
        response = await self.calls.call(
            request,
            METADATA,
            12,
            MetadataRequest(
                topics=[MetadataRequestTopic(name=t) for t in topics],
                allow_auto_topic_creation=False,
            ),
        )
        return {
            t.name: {p.partition_index: p.leader_id for p in t.partitions}
            for t in response.topics
            if t.error_code == ErrorCode.NONE
        }

    async def _list_offsets(
        self,
        request: HttpRequest,
        wanted: dict[TopicPartition, int],
        leaders: dict[str, dict[int, int]],
    ) -> dict[TopicPartition, int]:
        """The offset ListOffsets gives for each partition's timestamp (EARLIEST, LATEST or a
        time), asked of each partition's leader."""
        by_leader: dict[int, dict[str, list[ListOffsetsPartition]]] = defaultdict(
            lambda: defaultdict(list)
        )
        for (topic, partition), timestamp in wanted.items():
            leader = leaders.get(topic, {}).get(partition, -1)
            by_leader[leader][topic].append(
                ListOffsetsPartition(
                    partition_index=partition, current_leader_epoch=-1, timestamp=timestamp
                )
            )
        found: dict[TopicPartition, int] = {}
        for leader, topics in by_leader.items():
            if leader < 0:
                raise RestError(
                    "SERVICE_UNAVAILABLE",
                    "a partition has no leader",
                    {
                        "partitions": sorted(
                            f"{t}-{p.partition_index}" for t, ps in topics.items() for p in ps
                        )
                    },
                )
            response = await self._at(
                leader,
                request,
                LIST_OFFSETS,
                7,
                ListOffsetsRequest(
                    replica_id=-1,
                    isolation_level=0,
                    topics=[ListOffsetsTopic(name=t, partitions=ps) for t, ps in topics.items()],
                ),
            )
            for t in response.topics:
                for p in t.partitions:
                    if p.error_code != ErrorCode.NONE:
                        raise kafka_error(
                            p.error_code, None, topic=t.name, partition=p.partition_index
                        )
                    found[(t.name, p.partition_index)] = p.offset
        return found

    async def describe(self, request: HttpRequest) -> HttpResponse:
        group_id = request.params["group_id"]
        coordinator = await self._coordinator(request, group_id)
        group = await self._describe_group(request, coordinator, group_id)
        committed = await self._committed(request, coordinator, group_id)
        # Imported here: the client package is not needed until a group is described
        # (the HTTP listener's start-up time).
        from pydmq.client.admin import decode_assignment

        members = []
        owner: dict[TopicPartition, str] = {}
        for m in group.members:
            try:
                assigned = decode_assignment(m.member_assignment).partitions
            except ValueError:
                assigned = {}
            for topic, parts in assigned.items():
                owner.update(((topic, p), m.member_id) for p in parts)
            members.append(
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "assignment": [
                        {"topic": t, "partition": p}
                        for t in sorted(assigned)
                        for p in sorted(assigned[t])
                    ],
                }
            )
        partitions = sorted(set(committed) | set(owner))
        leaders = await self._leaders(request, sorted({t for t, _ in partitions}))
        known = [tp for tp in partitions if tp[1] in leaders.get(tp[0], {})]
        ends = await self._list_offsets(request, dict.fromkeys(known, LATEST), leaders)
        offsets = []
        for tp in known:
            end = ends[tp]
            offset = committed.get(tp)
            offsets.append(
                {
                    "topic": tp[0],
                    "partition": tp[1],
                    "committed_offset": offset,
                    "log_end_offset": end,
                    "lag": None if offset is None else max(0, end - offset),
                    "member_id": owner.get(tp),
                }
            )
        return json_response(
            200,
            {
                "group_id": group_id,
                "state": group.group_state,
                "protocol_type": group.protocol_type,
                "protocol": group.protocol_data,
                "coordinator": coordinator,
                "members": members,
                "offsets": offsets,
                "total_lag": sum(o["lag"] or 0 for o in offsets),
            },
        )

    async def reset_offsets(self, request: HttpRequest) -> HttpResponse:
        group_id = request.params["group_id"]
        body = json_object(request)
        topic = body.get("topic")
        if not isinstance(topic, str) or not topic:
            raise RestError("INVALID_INPUT", "topic must be a topic name", {"field": "topic"})
        target = body.get("to")
        if target not in _TARGETS:
            raise RestError(
                "INVALID_INPUT", f"to must be one of {', '.join(_TARGETS)}", {"field": "to"}
            )
        chosen = body.get("partitions")
        if chosen is not None and (
            not isinstance(chosen, list)
            or not all(isinstance(p, int) and not isinstance(p, bool) for p in chosen)
        ):
            raise RestError(
                "INVALID_INPUT",
                "partitions must be a list of partition ids",
                {"field": "partitions"},
            )
        offset = optional_int(body, "offset", -1) if target == "offset" else -1
        timestamp = optional_int(body, "timestamp", -1) if target == "timestamp" else -1
        if target == "offset" and offset < 0:
            raise RestError(
                "INVALID_INPUT", "offset must be given, at least 0", {"field": "offset"}
            )
        if target == "timestamp" and timestamp < 0:
            raise RestError(
                "INVALID_INPUT",
                "timestamp (ms since the epoch) must be given",
                {"field": "timestamp"},
            )
        for resource_type, name in ((ResourceType.GROUP, group_id), (ResourceType.TOPIC, topic)):
            if not self.calls.authorized(request, AclOperation.READ, resource_type, name):
                raise RestError(
                    "FORBIDDEN",
                    f"not authorized to commit offsets of group {group_id!r} for topic {topic!r}",
                    {"kafka_error": f"{resource_type.name}_AUTHORIZATION_FAILED"},
                )
        coordinator = await self._coordinator(request, group_id)
        try:
            group = await self._describe_group(request, coordinator, group_id)
            state = group.group_state
        except RestError as exc:
            if exc.code != "NOT_FOUND":
                raise
            state = "Dead"  # no such group yet: Kafka's tool resets (creates) it
        if state not in _INACTIVE:
            raise RestError(
                "CONFLICT",
                f"offsets can only be reset while group {group_id!r} is inactive; its state "
                f"is {state}",
                {"state": state},
            )
        leaders = await self._leaders(request, [topic])
        if topic not in leaders:
            raise RestError("NOT_FOUND", f"topic {topic!r}: no such topic", {"topic": topic})
        partitions = sorted(leaders[topic]) if chosen is None else sorted(set(chosen))
        unknown = [p for p in partitions if p not in leaders[topic]]
        if unknown:
            raise RestError(
                "NOT_FOUND",
                f"topic {topic!r} has no partition {unknown[0]}",
                {"topic": topic, "partitions": unknown},
            )
        tps = [(topic, p) for p in partitions]
        targets = await self._targets(request, tps, target, offset, timestamp, leaders)
        commit = OffsetCommitRequest(
            group_id=group_id,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=[
                OffsetCommitRequestTopic(
                    name=topic,
                    partitions=[
                        OffsetCommitRequestPartition(
                            partition_index=p,
                            committed_offset=targets[(topic, p)],
                            committed_leader_epoch=-1,
                            committed_metadata="",
                        )
                        for p in partitions
                    ],
                )
            ],
        )
        response = await self._at(coordinator, request, OFFSET_COMMIT, 8, commit)
        for t in response.topics:
            for p in t.partitions:
                if p.error_code != ErrorCode.NONE:
                    raise kafka_error(
                        p.error_code,
                        None,
                        group_id=group_id,
                        topic=t.name,
                        partition=p.partition_index,
                    )
        return json_response(
            200,
            {
                "group_id": group_id,
                "offsets": [
                    {"topic": topic, "partition": p, "offset": targets[(topic, p)]}
                    for p in partitions
                ],
            },
        )

    async def _targets(
        self,
        request: HttpRequest,
        tps: list[TopicPartition],
        target: str,
        offset: int,
        timestamp: int,
        leaders: dict[str, dict[int, int]],
    ) -> dict[TopicPartition, int]:
        """The offset each partition is reset to, as Kafka's tool computes it: an offset is
        kept within the log start and end; a time with no record at or after it means the
        log end."""
        earliest = await self._list_offsets(request, dict.fromkeys(tps, EARLIEST), leaders)
        latest = await self._list_offsets(request, dict.fromkeys(tps, LATEST), leaders)
        if target == "earliest":
            return earliest
        if target == "latest":
            return latest
        if target == "offset":
            return {tp: min(max(offset, earliest[tp]), latest[tp]) for tp in tps}
        found = await self._list_offsets(request, dict.fromkeys(tps, timestamp), leaders)
        return {tp: latest[tp] if found[tp] < 0 else found[tp] for tp in tps}
