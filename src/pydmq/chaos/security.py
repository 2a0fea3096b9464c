"""A secured cluster for chaos runs (``pydmq chaos --sasl``).

Every listener of every node (client, controller, control plane) is SASL_PLAINTEXT, so the
proxy still reads each connection's client id, and Kafka's StandardAuthorizer is on with
``allow.everyone.if.no.acl.found=false``. The nodes log in to each other, and the harness's
own clients (admin, observer, commit sampler, drain) log in, as the PLAIN super user
``admin``; the workload's producers, readers and group members as ``chaos``, a user with
only the ACLs the workload needs (ALL on every topic, group and transactional id, and
IDEMPOTENT_WRITE on the cluster), created once the cluster is up and waited for on every
node. So acknowledgements, reads and commits go through authentication and authorization on
every node while nodes are killed, paused, cut off and restarted; a node that served clients
before it had the ACLs would show up as failed writes and reads.

The passwords are made per run. :func:`secured` sets them in the environment
(:data:`ENV`) for the run, so the group members (processes of their own) log in too; the
clients' configs merge :func:`workload_config` or :func:`harness_config`.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import time
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = [
    "ENV",
    "create_workload_acls",
    "harness_client_kwargs",
    "harness_config",
    "node_config",
    "secured",
    "workload_config",
]

ENV = "PYDMQ_CHAOS_SASL"  # JSON: {"admin": password, "chaos": password}
ADMIN, WORKLOAD = "admin", "chaos"
_PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def _passwords() -> dict[str, str] | None:
    raw = os.environ.get(ENV)
    if not raw:
        return None
    passwords: dict[str, str] = json.loads(raw)
    return passwords


@contextlib.contextmanager
def secured(enabled: bool) -> Iterator[None]:
    """Within: the run's passwords in :data:`ENV` (when ``enabled``); restored after."""
    if not enabled:
        yield
        return
    before = os.environ.get(ENV)
    os.environ[ENV] = json.dumps(
        {ADMIN: secrets.token_urlsafe(12), WORKLOAD: secrets.token_urlsafe(12)}
    )
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = before


def node_config() -> dict[str, object]:
    """Every node's properties for the run ({} when the run is not secured)."""
    passwords = _passwords()
    if passwords is None:
        return {}
    users = " ".join(f'user_{name}="{password}"' for name, password in passwords.items())
    return {
        "listener.security.protocol.map": (
            "PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT,CONTROL_PLANE:SASL_PLAINTEXT"
        ),
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "sasl.jaas.config": (
            f'{_PLAIN} required username="{ADMIN}" password="{passwords[ADMIN]}" {users};'
        ),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:{ADMIN}",
        "allow.everyone.if.no.acl.found": "false",
    }


def _librdkafka(user: str) -> dict[str, str]:
    passwords = _passwords()
    if passwords is None:
        return {}
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": user,
        "sasl.password": passwords[user],
    }


def workload_config() -> dict[str, str]:
    """librdkafka settings of the workload's clients ({} when not secured)."""
    return _librdkafka(WORKLOAD)


def harness_config() -> dict[str, str]:
    """librdkafka settings of the harness's own clients ({} when not secured)."""
    return _librdkafka(ADMIN)


def harness_client_kwargs() -> dict[str, Any]:
    """:class:`~pydmq.client.KafkaClient` keyword arguments of the harness's own clients."""
    passwords = _passwords()
    if passwords is None:
        return {}
    from pydmq.security.sasl.client import sasl_client

    password = passwords[ADMIN]
    return {"sasl": lambda: sasl_client("PLAIN", ADMIN, password)}


def create_workload_acls(addresses: Sequence[str], timeout: float = 60.0) -> int:
    """Create the workload user's ACLs through the first node and wait until every node's
    authorizer lists them; how many ACLs (0 when not secured)."""
    if _passwords() is None:
        return 0
    from pydmq.client import KafkaClient
    from pydmq.protocol.acl import AclOperation, AclPermissionType, PatternType, ResourceType
    from pydmq.protocol.messages.create_acls import AclCreation, CreateAclsRequest
    from pydmq.protocol.messages.describe_acls import DescribeAclsRequest

    principal = f"User:{WORKLOAD}"
    wanted = [
        (ResourceType.TOPIC, "*", AclOperation.ALL),
        (ResourceType.GROUP, "*", AclOperation.ALL),
        (ResourceType.TRANSACTIONAL_ID, "*", AclOperation.ALL),
        (ResourceType.CLUSTER, "kafka-cluster", AclOperation.IDEMPOTENT_WRITE),
    ]
    creations = [
        AclCreation(
            resource_type=resource,
            resource_name=name,
            resource_pattern_type=PatternType.LITERAL,
            principal=principal,
            host="*",
            operation=operation,
            permission_type=AclPermissionType.ALLOW,
        )
        for resource, name, operation in wanted
    ]
    kwargs = harness_client_kwargs()
    with KafkaClient(addresses[0], client_id="chaos-admin", timeout=10.0, **kwargs) as client:
        results = client.send(30, CreateAclsRequest(creations=creations)).results
        failed = [r.error_message or r.error_code for r in results if r.error_code]
        if failed:
            raise RuntimeError(f"creating the workload's ACLs failed: {failed}")
    query = DescribeAclsRequest(
        resource_type_filter=ResourceType.ANY,
        pattern_type_filter=PatternType.ANY,
        principal_filter=principal,
        operation=AclOperation.ANY,
        permission_type=AclPermissionType.ANY,
    )
    deadline = time.monotonic() + timeout
    for address in addresses:
        while True:
            with KafkaClient(address, client_id="chaos-admin", timeout=5.0, **kwargs) as client:
                answer = client.send(29, query)
            found = sum(len(r.acls) for r in answer.resources) if not answer.error_code else 0
            if found >= len(wanted):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{address} lists {found} of the workload's ACLs")
            time.sleep(0.2)
    return len(wanted)
