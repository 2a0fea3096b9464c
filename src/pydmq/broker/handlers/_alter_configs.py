"""The one body of AlterConfigs (33) and IncrementalAlterConfigs (44) on the broker.

Per resource, what the broker answers itself (Kafka's request checks): a resource named twice
or a config named twice in one resource -> INVALID_REQUEST (:mod:`._config_resources`); a null
value where the API needs one -> INVALID_REQUEST; a resource type other than TOPIC (2), BROKER
(4), GROUP (32) and, for IncrementalAlterConfigs, BROKER_LOGGER (8) -> INVALID_REQUEST
"Unsupported resource type: N"; a BROKER or BROKER_LOGGER resource naming another broker -> INVALID_REQUEST
"Unexpected broker id, expected N, but received M" (Kafka's broker checks it before
forwarding); BROKER_LOGGER of this node is this node's own business: its logger levels change
here (:mod:`pydmq.config.log_levels`), never through the controller. The rest (TOPIC, BROKER and
GROUP resources) goes to the controller as one request at the
client's version (:func:`~pydmq.broker.handlers._forward.forward_to_controller`: the active
controller in cluster mode, a single node's own in process), and the answers are merged back
in request order. The controller commits BROKER changes as ConfigRecords; every node installs
them (:mod:`pydmq.broker.dynamic_configs`).

Authorization (as Kafka): ALTER_CONFIGS on the topic, the group, or on the cluster for a BROKER or
BROKER_LOGGER resource, else TOPIC_AUTHORIZATION_FAILED / CLUSTER_AUTHORIZATION_FAILED for
that resource.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import config_resource_refusal
from pydmq.broker.handlers._config_resources import check_resource, resource_counts
from pydmq.broker.handlers._forward import forward_to_controller
from pydmq.protocol.acl import AclOperation
from pydmq.protocol.errors import ErrorCode, TopicError

__all__ = ["ConfigChange", "alter_configs"]

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8
GROUP = 32

ConfigChange = tuple[str, int, str | None]
"""(config name, AlterConfigOp, value): one edit of a resource's configs."""


class _Config(Protocol):
    name: str


class _Resource(Protocol):
    resource_type: int
    resource_name: str

    @property
    def configs(self) -> Sequence[_Config]: ...


class _Result(Protocol):
    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str


ResultT = TypeVar("ResultT", bound=_Result)
ResultT_co = TypeVar("ResultT_co", bound=_Result, covariant=True)


class _Response(Protocol[ResultT_co]):
    @property
    def responses(self) -> Sequence[ResultT_co]: ...


ResourceT = TypeVar("ResourceT", bound=_Resource)
ResponseT = TypeVar("ResponseT", bound=_Response[Any])


async def alter_configs(
    ctx: BrokerContext,
    resources: Sequence[ResourceT],
    *,
    null_problem: Callable[[ResourceT], str | None],
    types: frozenset[int],
    request_of: Callable[[list[ResourceT]], Any],
    result: Callable[[int, str | None, int, str], ResultT],
    response_of: Callable[[list[ResultT]], ResponseT],
    alter_loggers: Callable[[ResourceT], None] | None = None,
) -> ResponseT:
    """The API's response: every resource's answer, in request order (module docstring).

    ``request_of(resources)`` builds the request sent to the controller, ``result(code,
    message, type, name)`` one answer, ``response_of(answers)`` the response;
    ``alter_loggers(resource)`` applies a BROKER_LOGGER resource (raising :class:`TopicError`),
    for the API whose ``types`` include it."""
    broker = ctx.broker
    counts = resource_counts(resources)
    answers: list[ResultT | None] = []
    forward: list[ResourceT] = []
    for resource in resources:
        rtype, name = resource.resource_type, resource.resource_name
        try:
            check_resource(resource, counts)
            refusal = config_resource_refusal(ctx, rtype, name, AclOperation.ALTER_CONFIGS)
            if refusal:
                raise TopicError(refusal, "")
            if rtype not in types:
                raise TopicError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {rtype}")
            problem = null_problem(resource)
            if problem is not None:
                raise TopicError(ErrorCode.INVALID_REQUEST, problem)
            if rtype in (BROKER, BROKER_LOGGER):
                _check_broker_name(broker.node_id, name, default_allowed=rtype == BROKER)
            if rtype == BROKER_LOGGER:
                assert alter_loggers is not None, "BROKER_LOGGER in types needs alter_loggers"
                alter_loggers(resource)
                answers.append(result(ErrorCode.NONE, None, rtype, name))
                continue
            forward.append(resource)
            answers.append(None)
        except TopicError as exc:
            answers.append(result(exc.error_code, exc.message, rtype, name))
    if forward:

        def unavailable(code: int, message: str) -> ResponseT:
            return response_of(
                [result(code, message, r.resource_type, r.resource_name) for r in forward]
            )

        response = await forward_to_controller(ctx, request_of(forward), unavailable)
        replies: Iterator[ResultT] = iter(response.responses)
        answers = [next(replies) if a is None else a for a in answers]
    return response_of([a for a in answers if a is not None])


def _check_broker_name(node_id: int, name: str, *, default_allowed: bool) -> None:
    """A BROKER or BROKER_LOGGER resource names this node (or, ``default_allowed``, "": the
    cluster-wide default of BROKER)."""
    if name != str(node_id) and not (default_allowed and name == ""):
        raise TopicError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {node_id}, but received {name}",
        )
