"""What the share-state handlers (keys 83-87) share: each request names a group and its
share-partitions by topic id; each partition is served by this node's share coordinator
(:class:`~pydmq.shares.coordinator.ShareCoordinator`: NOT_COORDINATOR when it does not lead
the partition's ``__share_group_state`` partition) and answered in the same layout.

Authorization (as Kafka): CLUSTER_ACTION on the cluster (these are the partition leaders'
requests), else every partition answers CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_cluster
from pydmq.protocol.acl import AclOperation
from pydmq.protocol.errors import ErrorCode
from pydmq.shares.coordinator import ShareCoordinator, StateAnswer

__all__ = ["error_only", "serve_request"]

P = TypeVar("P")
R = TypeVar("R")


def share_coordinator(ctx: BrokerContext) -> ShareCoordinator:
    coordinator: ShareCoordinator = ctx.broker.share_coordinator
    return coordinator


def error_only(result_type: Callable[..., R]) -> Callable[[Any, StateAnswer], R]:
    """The answer of a partition that carries only its error code."""
    return lambda p, answer: result_type(partition=p.partition, error_code=answer[0])


async def serve_request(
    ctx: BrokerContext,
    request: Any,
    serve: Callable[[ShareCoordinator, tuple[str, uuid.UUID, int], Any], Awaitable[StateAnswer]],
    answer: Callable[[Any, StateAnswer], Any],
    response_type: Callable[..., R],
    result_type: Callable[..., Any],
) -> R:
    """The response to ``request``: each of its partitions served (``serve``) and answered
    (``answer``), by topic (``result_type``)."""
    results = await _serve_partitions(ctx, request.group_id, request.topics, serve, answer)
    return response_type(
        results=[result_type(topic_id=topic_id, partitions=ps) for topic_id, ps in results]
    )


async def _serve_partitions(
    ctx: BrokerContext,
    group_id: str,
    topics: Sequence[Any],
    serve: Callable[[ShareCoordinator, tuple[str, uuid.UUID, int], Any], Awaitable[StateAnswer]],
    answer: Callable[[Any, StateAnswer], Any],
) -> list[tuple[uuid.UUID, list[Any]]]:
    """Each partition of ``topics`` served (``serve``) and answered (``answer``), by topic."""
    allowed = authorized_cluster(ctx, AclOperation.CLUSTER_ACTION)
    coordinator = share_coordinator(ctx)
    out = []
    for topic in topics:
        calls: list[Awaitable[StateAnswer]] = []
        for p in topic.partitions:
            if not allowed:
                calls.append(_error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
            elif not group_id:
                calls.append(_error(ErrorCode.INVALID_REQUEST))
            else:
                calls.append(serve(coordinator, (group_id, topic.topic_id, p.partition), p))
        answers = await asyncio.gather(*calls)
        out.append(
            (topic.topic_id, [answer(p, a) for p, a in zip(topic.partitions, answers, strict=True)])
        )
    return out


async def _error(code: int) -> StateAnswer:
    return code, None
