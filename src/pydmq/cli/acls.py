"""``pydmq acls create|list|delete``: the ACLs of a cluster, as Kafka's ``kafka-acls.sh``.

``create`` sends CreateAcls with one ACL per principal, host and operation given
(``--allow-principal``/``--deny-principal``, ``--allow-host``/``--deny-host`` (default ``*``),
``--operation`` (default All)) on one resource (``--topic``, ``--group``,
``--transactional-id`` or ``--cluster``; ``--resource-pattern-type literal|prefixed``).
``list`` prints the ACLs DescribeAcls returns and ``delete`` removes those DeleteAcls
matches, both filtered by the resource options (none: every resource; pattern type ``any``
by default, ``match`` for the ACLs that apply to a resource name), ``--principal``,
``--host`` and ``--operation``. The broker must run an authorizer (``authorizer.class.name``;
SECURITY_DISABLED otherwise) and the principal be allowed ALTER (create, delete) or DESCRIBE
(list) on the cluster.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pydmq.cli.common import add_bootstrap_argument, format_table, run_with_client
from pydmq.client import KafkaClient, KafkaError
from pydmq.protocol.acl import (
    CLUSTER_NAME,
    WILDCARD,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from pydmq.protocol.messages.create_acls import AclCreation, CreateAclsRequest
from pydmq.protocol.messages.delete_acls import DeleteAclsFilter, DeleteAclsRequest
from pydmq.protocol.messages.describe_acls import DescribeAclsRequest

__all__ = ["add_parser"]

_OPERATIONS = {op.name.replace("_", "").lower(): op for op in AclOperation if op >= 2}
_PATTERNS = {"literal": PatternType.LITERAL, "prefixed": PatternType.PREFIXED}
_FILTER_PATTERNS = {**_PATTERNS, "any": PatternType.ANY, "match": PatternType.MATCH}


def _operation(text: str) -> AclOperation:
    op = _OPERATIONS.get(text.replace("_", "").replace("-", "").lower())
    if op is None:
        raise argparse.ArgumentTypeError(
            f"unknown operation {text!r} (one of {', '.join(sorted(_OPERATIONS))})"
        )
    return op


def _add_resource_options(parser: argparse.ArgumentParser, patterns: dict[str, Any]) -> None:
    resource = parser.add_mutually_exclusive_group()
    resource.add_argument("--topic", metavar="NAME", help="a topic (* for every topic)")
    resource.add_argument("--group", metavar="NAME", help="a consumer group (* for every group)")
    resource.add_argument("--transactional-id", metavar="ID", help="a transactional id")
    resource.add_argument("--cluster", action="store_true", help="the cluster")
    parser.add_argument(
        "--resource-pattern-type",
        choices=sorted(patterns),
        default=None,
        help="how the resource name matches: " + ", ".join(sorted(patterns)),
    )


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "acls",
        help="create, list and delete ACLs (like kafka-acls.sh)",
        description="The ACLs the broker's authorizer applies (authorizer.class.name).",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser("create", help="add ACLs on one resource")
    add_bootstrap_argument(create)
    _add_resource_options(create, _PATTERNS)
    create.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL")
    create.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL")
    create.add_argument("--allow-host", action="append", default=[], metavar="HOST")
    create.add_argument("--deny-host", action="append", default=[], metavar="HOST")
    create.add_argument(
        "--operation", action="append", type=_operation, default=[], metavar="OPERATION",
        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
        "AlterConfigs, IdempotentWrite, All (default All); repeatable",
    )  # fmt: skip
    create.set_defaults(run=_run_create)
    for name, run, what in (("list", _run_list, "print"), ("delete", _run_delete, "remove")):
        action = actions.add_parser(name, help=f"{what} the ACLs matching a filter")
        add_bootstrap_argument(action)
        _add_resource_options(action, _FILTER_PATTERNS)
        action.add_argument("--principal", metavar="PRINCIPAL", help="only this principal")
        action.add_argument("--host", metavar="HOST", help="only this host")
        action.add_argument("--operation", type=_operation, metavar="OPERATION")
        action.set_defaults(run=run)


def _resource(args: argparse.Namespace) -> tuple[ResourceType, str | None]:
    if args.topic is not None:
        return ResourceType.TOPIC, args.topic
    if args.group is not None:
        return ResourceType.GROUP, args.group
    if args.transactional_id is not None:
        return ResourceType.TRANSACTIONAL_ID, args.transactional_id
    if args.cluster:
        return ResourceType.CLUSTER, CLUSTER_NAME
    return ResourceType.ANY, None


def creations(args: argparse.Namespace) -> list[AclCreation]:
    """The ACLs ``pydmq acls create`` asks for (raises ValueError on a bad combination)."""
    resource_type, name = _resource(args)
    if name is None:
        raise ValueError("name a resource: --topic, --group, --transactional-id or --cluster")
    if not args.allow_principal and not args.deny_principal:
        raise ValueError("give --allow-principal or --deny-principal")
    pattern = _PATTERNS[args.resource_pattern_type or "literal"]
    operations = args.operation or [AclOperation.ALL]
    out: list[AclCreation] = []
    for permission, principals, hosts in (
        (AclPermissionType.ALLOW, args.allow_principal, args.allow_host or [WILDCARD]),
        (AclPermissionType.DENY, args.deny_principal, args.deny_host or [WILDCARD]),
    ):
        out.extend(
            AclCreation(
                resource_type=resource_type,
                resource_name=name,
                resource_pattern_type=pattern,
                principal=principal,
                host=host,
                operation=op,
                permission_type=permission,
            )
            for principal in principals
            for host in hosts
            for op in operations
        )
    return out


def _filter_fields(args: argparse.Namespace) -> dict[str, Any]:
    resource_type, name = _resource(args)
    pattern = _FILTER_PATTERNS[args.resource_pattern_type or "any"]
    return {
        "resource_type_filter": resource_type,
        "resource_name_filter": name,
        "pattern_type_filter": pattern,
        "principal_filter": args.principal,
        "host_filter": args.host,
        "operation": args.operation or AclOperation.ANY,
        "permission_type": AclPermissionType.ANY,
    }


def _row(
    rtype: int, name: str, pattern: int, principal: str, host: str, op: int, perm: int
) -> tuple[str, ...]:
    return (
        ResourceType(rtype).name,
        name,
        PatternType(pattern).name,
        principal,
        host,
        AclOperation(op).name,
        AclPermissionType(perm).name,
    )


_HEADER = ("RESOURCE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION")


def _run_create(args: argparse.Namespace) -> int:
    def body(client: KafkaClient) -> int:
        wanted = creations(args)
        response = client.send(30, CreateAclsRequest(creations=wanted))
        failed = 0
        for creation, result in zip(wanted, response.results, strict=True):
            if result.error_code:
                failed += 1
                error = KafkaError(result.error_code, result.error_message)
                print(f"pydmq acls: {creation.principal} {AclOperation(creation.operation).name}: {error}",
                      file=sys.stderr)  # fmt: skip
        print(f"created {len(wanted) - failed} ACL(s)")
        return 1 if failed else 0

    return run_with_client("acls", args, body)


def _run_list(args: argparse.Namespace) -> int:
    def body(client: KafkaClient) -> int:
        response = client.send(29, DescribeAclsRequest(**_filter_fields(args)))
        if response.error_code:
            raise KafkaError(response.error_code, response.error_message)
        rows = [
            _row(
                r.resource_type,
                r.resource_name,
                r.pattern_type,
                a.principal,
                a.host,
                a.operation,
                a.permission_type,
            )
            for r in response.resources
            for a in r.acls
        ]
        if rows:
            print(format_table(_HEADER, sorted(rows)))
        return 0

    return run_with_client("acls", args, body)


def _run_delete(args: argparse.Namespace) -> int:
    def body(client: KafkaClient) -> int:
        request = DeleteAclsRequest(filters=[DeleteAclsFilter(**_filter_fields(args))])
        (result,) = client.send(31, request).filter_results
        if result.error_code:
            raise KafkaError(result.error_code, result.error_message)
        rows = [
            _row(
                a.resource_type,
                a.resource_name,
                a.pattern_type,
                a.principal,
                a.host,
                a.operation,
                a.permission_type,
            )
            for a in result.matching_acls
        ]
        if rows:
            print(format_table(_HEADER, sorted(rows)))
        print(f"deleted {len(rows)} ACL(s)")
        return 0

    return run_with_client("acls", args, body)
