"""The controller listener's APIs need CLUSTER_ACTION when an authorizer is configured.

The brokers' own requests to the controller (registration, heartbeats, AlterPartition,
producer id blocks, controlled shutdown, the Raft APIs) are answered
CLUSTER_AUTHORIZATION_FAILED for a principal that may not CLUSTER_ACTION, as Kafka's
ControllerApis; a super user (a secured cluster's broker principal) passes the check. On
cdbc1cf the controller authorized nothing.
"""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import Any

import pytest

from pydmq.api.handler import RequestContext
from pydmq.config.broker import BrokerConfig
from pydmq.controller.runtime import ControllerRuntime
from pydmq.plugins.host import PluginHost
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.allocate_producer_ids import AllocateProducerIdsRequest
from pydmq.protocol.messages.broker_heartbeat import BrokerHeartbeatRequest
from pydmq.protocol.messages.broker_registration import BrokerRegistrationRequest
from pydmq.protocol.messages.vote import VoteRequest
from pydmq.security.principal import KafkaPrincipal

pytestmark = pytest.mark.timeout(30)

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


class _Host:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.cluster_id = "test-cluster"
        self.plugins = PluginHost(load_entry_points=False)
        self.node_id = config.node_id


def _runtime(tmp_path: Path, authorizer: str) -> ControllerRuntime:
    config = BrokerConfig(
        {
            "node.id": 1,
            "process.roles": ["controller"],
            "controller.quorum.voters": ["1@127.0.0.1:1"],
            "listeners": ["CONTROLLER://127.0.0.1:1"],
            "log.dirs": [str(tmp_path)],
            "authorizer.class.name": authorizer,
            "super.users": "User:broker",
        }
    )
    return ControllerRuntime(_Host(config))  # type: ignore[arg-type]


def _call(runtime: ControllerRuntime, principal: str, key: int, version: int, body: Any) -> Any:
    spec = runtime.handler_specs()[key]
    ctx: RequestContext[object] = RequestContext(
        object(), key, version, 1, "t", "127.0.0.1", 1, "CONTROLLER", 1,
        principal=KafkaPrincipal.parse(principal),
    )  # fmt: skip

    async def run() -> Any:
        answer = spec.handle(ctx, body)
        return await answer if inspect.isawaitable(answer) else answer

    return asyncio.run(run())


REQUESTS = [
    (62, 0, BrokerRegistrationRequest(broker_id=2, cluster_id="test-cluster")),
    (63, 0, BrokerHeartbeatRequest(broker_id=2, broker_epoch=1)),
    (67, 0, AllocateProducerIdsRequest(broker_id=2, broker_epoch=1)),
    (52, 0, VoteRequest(cluster_id="test-cluster")),
]


@pytest.mark.parametrize(("key", "version", "body"), REQUESTS, ids=lambda v: str(v)[:20])
def test_a_principal_without_cluster_action_is_refused(
    tmp_path: Path, key: int, version: int, body: Any
) -> None:
    runtime = _runtime(tmp_path, STANDARD)
    answer = _call(runtime, "User:mallory", key, version, body)
    assert answer.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    allowed = _call(runtime, "User:broker", key, version, body)
    assert allowed.error_code != ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_without_an_authorizer_nothing_is_refused(tmp_path: Path) -> None:
    runtime = _runtime(tmp_path, "")
    answer = _call(runtime, "User:mallory", 63, 0, BrokerHeartbeatRequest(broker_id=2))
    assert answer.error_code == ErrorCode.NOT_CONTROLLER
