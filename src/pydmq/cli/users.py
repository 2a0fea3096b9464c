"""``pydmq users``: add, list and delete SCRAM users over the Kafka protocol, as
``kafka-configs.sh --entity-type users --alter --add-config 'SCRAM-SHA-256=[password=...]'``
does (AlterUserScramCredentials, DescribeUserScramCredentials). The salted password is
computed here; the password never leaves this process."""

from __future__ import annotations

import argparse
import getpass
import os
from typing import Any

from pydmq.cli.common import add_bootstrap_argument, format_table, run_with_client
from pydmq.client import KafkaClient, KafkaError
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from pydmq.protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    UserName,
)
from pydmq.security.sasl.scram import ScramMechanism, salted_password

__all__ = ["add_parser"]

_MECHANISMS = [m.mechanism_name for m in ScramMechanism]
_ALTER, _DESCRIBE = 51, 50


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "users",
        help="add, list and delete SCRAM users",
        description="Manage SCRAM-SHA-256/512 users (AlterUserScramCredentials).",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="add a user, or change a user's password")
    add_bootstrap_argument(add)
    add.add_argument("name")
    add.add_argument("--mechanism", choices=_MECHANISMS, default="SCRAM-SHA-256")
    add.add_argument("--password", help="the password (default: asked on the terminal)")
    add.add_argument("--iterations", type=int, default=4096, help="4096 to 16384")
    add.set_defaults(run=_run_add)
    lst = actions.add_parser("list", help="list users and their mechanisms")
    add_bootstrap_argument(lst)
    lst.add_argument("names", nargs="*", help="only these users")
    lst.set_defaults(run=_run_list)
    delete = actions.add_parser("delete", help="delete a user's credential")
    add_bootstrap_argument(delete)
    delete.add_argument("name")
    delete.add_argument("--mechanism", choices=_MECHANISMS, default="SCRAM-SHA-256")
    delete.set_defaults(run=_run_delete)


def _alter(client: KafkaClient, request: AlterUserScramCredentialsRequest) -> int:
    response: AlterUserScramCredentialsResponse = client.send(_ALTER, request)
    for result in response.results:
        if result.error_code != ErrorCode.NONE:
            raise KafkaError(result.error_code, f"{result.user}: {result.error_message or ''}")
        print(f"{result.user}: done")
    return 0


def _run_add(args: argparse.Namespace) -> int:
    mechanism = ScramMechanism.by_name(args.mechanism)
    assert mechanism is not None
    password = args.password if args.password is not None else getpass.getpass()
    salt = os.urandom(32)
    upsertion = ScramCredentialUpsertion(
        name=args.name,
        mechanism=mechanism.type_id,
        iterations=args.iterations,
        salt=salt,
        salted_password=salted_password(mechanism, password.encode(), salt, args.iterations),
    )
    request = AlterUserScramCredentialsRequest(deletions=[], upsertions=[upsertion])
    return run_with_client("users add", args, lambda c: _alter(c, request))


def _run_delete(args: argparse.Namespace) -> int:
    mechanism = ScramMechanism.by_name(args.mechanism)
    assert mechanism is not None
    deletion = ScramCredentialDeletion(name=args.name, mechanism=mechanism.type_id)
    request = AlterUserScramCredentialsRequest(deletions=[deletion], upsertions=[])
    return run_with_client("users delete", args, lambda c: _alter(c, request))


def _run_list(args: argparse.Namespace) -> int:
    def body(client: KafkaClient) -> int:
        users = [UserName(name=n) for n in args.names] if args.names else None
        response: DescribeUserScramCredentialsResponse = client.send(
            _DESCRIBE, DescribeUserScramCredentialsRequest(users=users)
        )
        if response.error_code:
            raise KafkaError(response.error_code, response.error_message or "")
        rows: list[list[object]] = []
        for result in response.results:
            if result.error_code:
                raise KafkaError(result.error_code, f"{result.user}: {result.error_message}")
            for info in result.credential_infos:
                mechanism = ScramMechanism.by_type(info.mechanism)
                name = mechanism.mechanism_name if mechanism else str(info.mechanism)
                rows.append([result.user, name, info.iterations])
        print(format_table(["USER", "MECHANISM", "ITERATIONS"], rows))
        return 0

    return run_with_client("users list", args, body)
