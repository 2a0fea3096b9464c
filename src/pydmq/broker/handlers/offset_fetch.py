"""OffsetFetch (key 9), v1-v9.

Committed offsets of a group. A requested partition without a committed offset answers offset
-1, leader epoch -1 and metadata "" (Kafka's NO_METADATA). Topics null (v2+) means every
committed partition of the group. Version notes: top-level error from v2 (v1 reports a group
error on every partition); leader epoch from v5; ``require_stable`` (v7+): a partition with
pending transactional offsets of the group (a TxnOffsetCommit whose transaction has not ended)
answers UNSTABLE_OFFSET_COMMIT, offset -1 (retriable: clients retry until the marker is
written); without it, the last committed offset is returned; v8+ fetch several groups at once (each group's
topics null = all). v9 carries the member id and epoch of a KIP-848 consumer group member:
UNKNOWN_MEMBER_ID / STALE_MEMBER_EPOCH as Kafka 4 (none given: no check). v10 (topic ids)
is not advertised. Per group NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when it is not
coordinated here / still loading (cluster mode). Many groups (v8+, up to the decode budget,
110,000 elements) are answered in slices (:mod:`pydmq.broker.handlers._slices`).

Authorization (as Kafka): DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED (the
group's error, top-level before v8); DESCRIBE on each topic: all topics leave the others
out, a named one gets offset -1 and TOPIC_AUTHORIZATION_FAILED on each partition.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterator, Sequence

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_names
from pydmq.broker.handlers._groups import GROUP_DENIED, coordinator, group_denied
from pydmq.broker.handlers._slices import in_slices
from pydmq.protocol.acl import AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)

__all__ = ["HANDLER"]

Entry = tuple[int, int, int, str, int]
"""One partition's answer: partition, committed offset, leader epoch, metadata, error."""


def _fetch(
    ctx: BrokerContext,
    group_id: str,
    topics: Sequence[tuple[str, Sequence[int]]] | None,
    member_id: str | None = None,
    member_epoch: int = -1,
    *,
    require_stable: bool = False,
) -> tuple[int, dict[str, list[Entry]]]:
    if group_denied(ctx, group_id, AclOperation.DESCRIBE):
        return GROUP_DENIED, {}
    error, rows = coordinator(ctx).fetch_offsets(
        group_id, topics, member_id, member_epoch, require_stable=require_stable
    )
    by_topic: dict[str, list[Entry]] = {}
    if topics is not None:
        for name, _ in topics:
            by_topic.setdefault(name, [])
    for topic, partition, committed in rows:
        entry: Entry
        if committed is None:
            entry = (partition, -1, -1, "", 0)
        elif isinstance(committed, int):
            entry = (partition, -1, -1, "", committed)  # UNSTABLE_OFFSET_COMMIT
        else:
            offset, epoch, metadata = committed.offset, committed.leader_epoch, committed.metadata
            entry = (partition, offset, epoch, metadata, 0)
        by_topic.setdefault(topic, []).append(entry)
    described = authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, by_topic)
    if len(described) < len(by_topic):
        _refuse_topics(by_topic, described, listed=topics is None)
    return error, by_topic


def _refuse_topics(by_topic: dict[str, list[Entry]], described: set[str], listed: bool) -> None:
    """The topics the principal may not describe: left out of an all-topics answer, else
    answered TOPIC_AUTHORIZATION_FAILED on each partition."""
    for name in [n for n in by_topic if n not in described]:
        if listed:
            del by_topic[name]
        else:
            by_topic[name] = [
                (entry[0], -1, -1, "", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                for entry in by_topic[name]
            ]


def _fetch_groups(
    ctx: BrokerContext, request: OffsetFetchRequest, response: OffsetFetchResponse
) -> Iterator[int]:
    """v8+: fill ``response`` one group at a time; yields each group's topics and partitions."""
    version = ctx.api_version
    for group in request.groups:
        yield 1 + sum(1 + len(t.partition_indexes) for t in group.topics or ())
        wanted = (
            None if group.topics is None else [(t.name, t.partition_indexes) for t in group.topics]
        )
        stable = request.require_stable
        if version >= 9:
            error, by_topic = _fetch(
                ctx,
                group.group_id,
                wanted,
                group.member_id,
                group.member_epoch,
                require_stable=stable,
            )
        else:
            error, by_topic = _fetch(ctx, group.group_id, wanted, require_stable=stable)
        response.groups.append(
            OffsetFetchResponseGroup(
                group_id=group.group_id,
                error_code=error,
                topics=[
                    OffsetFetchResponseTopics(
                        name=name,
                        partitions=[
                            OffsetFetchResponsePartitions(
                                partition_index=p,
                                committed_offset=o,
                                committed_leader_epoch=e,
                                metadata=m,
                                error_code=pe,
                            )
                            for p, o, e, m, pe in parts
                        ],
                    )
                    for name, parts in by_topic.items()
                ],
            )
        )


def handle(
    ctx: BrokerContext, request: OffsetFetchRequest
) -> OffsetFetchResponse | Awaitable[OffsetFetchResponse]:
    version = ctx.api_version
    if version >= 8:
        response = OffsetFetchResponse()
        return in_slices(_fetch_groups(ctx, request, response), lambda: response)
    wanted_topics = (
        None if request.topics is None else [(t.name, t.partition_indexes) for t in request.topics]
    )
    stable = version >= 7 and request.require_stable
    error, by_topic = _fetch(ctx, request.group_id, wanted_topics, require_stable=stable)
    partition_error = error if version < 2 else 0
    return OffsetFetchResponse(
        error_code=error,
        topics=[
            OffsetFetchResponseTopic(
                name=name,
                partitions=[
                    OffsetFetchResponsePartition(
                        partition_index=p,
                        committed_offset=o,
                        committed_leader_epoch=e,
                        metadata=m,
                        error_code=partition_error or pe,
                    )
                    for p, o, e, m, pe in parts
                ],
            )
            for name, parts in by_topic.items()
        ],
    )


HANDLER = ApiHandlerSpec(9, 1, 9, handle, "OffsetFetch")
