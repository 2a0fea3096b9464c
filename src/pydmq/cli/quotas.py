"""``pydmq quotas``: alter and describe client quotas.

What ``kafka-configs.sh --entity-type users|clients|ips`` does for quotas, through the Kafka
protocol only (AlterClientQuotas, DescribeClientQuotas), so it works against any Kafka broker
as well as pydmq, and prints what kafka-configs prints::

    pydmq quotas alter --client slow --add-config producer_byte_rate=100000
    pydmq quotas describe --client slow
    Quota configs for client-id 'slow' are producer_byte_rate=100000.0

An entity is ``--user NAME`` / ``--user-default`` with or without ``--client NAME`` /
``--client-default``, or ``--ip ADDRESS`` / ``--ip-default``. ``describe`` without an entity
lists every quota; with ``--user`` (or ``--client``) alone it lists that user's entities too,
as kafka-configs does.
"""

from __future__ import annotations

import argparse
import sys
from decimal import Decimal
from typing import Any

from pydmq.cli.common import add_bootstrap_argument, run_with_client
from pydmq.client import KafkaClient, KafkaError
from pydmq.protocol.messages import alter_client_quotas as aq
from pydmq.protocol.messages import describe_client_quotas as dq

__all__ = ["add_parser", "entity_description", "java_double"]

_ALTER, _DESCRIBE = 49, 48
_EXACT, _DEFAULT, _SPECIFIED = 0, 1, 2
_TYPE_WORDS = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}


def java_double(value: float) -> str:
    """``value`` as Java's ``Double.toString`` writes it (what kafka-configs prints): plain
    within [0.001, 10^7), else the shortest digits as ``d.dddE<n>``."""
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(float(value))
    number = Decimal(repr(value)).normalize()
    sign, digits, _ = number.as_tuple()
    text = "".join(map(str, digits))
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{number.adjusted()}"


def entity_description(entity: list[tuple[str, str | None]]) -> str:
    """``user-principal 'alice', client-id 'x'`` / ``the default client-id``, as
    kafka-configs names an entity (user first)."""
    order = {"user": 0, "client-id": 1, "ip": 2}
    parts = []
    for kind, name in sorted(entity, key=lambda pair: order.get(pair[0], 3)):
        word = _TYPE_WORDS.get(kind, kind)
        parts.append(f"the default {word}" if name is None else f"{word} '{name}'")
    return ", ".join(parts)


def _entity_arguments(parser: argparse.ArgumentParser) -> None:
    for kind, word in (("user", "user"), ("client", "client id"), ("ip", "IP address")):
        group = parser.add_mutually_exclusive_group()
        group.add_argument(f"--{kind}", metavar="NAME", help=f"the {word}")
        group.add_argument(
            f"--{kind}-default", action="store_true", help=f"the default {word} entity"
        )


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "quotas",
        help="alter and describe client quotas",
        description="Client quotas of users, client ids and IPs through the Kafka protocol "
        "(what kafka-configs.sh does for quotas; works with any Kafka broker).",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    alter = actions.add_parser("alter", help="add or delete quota configs of one entity")
    add_bootstrap_argument(alter)
    _entity_arguments(alter)
    alter.add_argument(
        "--add-config", default="", metavar="K=V,...", help="quotas to set, comma-separated"
    )
    alter.add_argument(
        "--delete-config", default="", metavar="K,...", help="quotas to remove, comma-separated"
    )
    alter.add_argument("--validate-only", action="store_true", help="check, change nothing")
    alter.set_defaults(run=_alter)
    describe = actions.add_parser("describe", help="the quotas of matching entities")
    add_bootstrap_argument(describe)
    _entity_arguments(describe)
    describe.set_defaults(run=_describe)


def _chosen(args: argparse.Namespace) -> list[tuple[str, str | None, bool]]:
    """(entity type, name, default?) of each entity part given."""
    out: list[tuple[str, str | None, bool]] = []
    for kind, attr in (("user", "user"), ("client-id", "client"), ("ip", "ip")):
        name = getattr(args, attr)
        if name is not None or getattr(args, f"{attr}_default"):
            out.append((kind, name, name is None))
    return out


def _alter(args: argparse.Namespace) -> int:
    chosen = _chosen(args)
    if not chosen:
        print("pydmq quotas: name an entity (--user, --client, --ip or a default)", file=sys.stderr)
        return 2
    ops: list[aq.OpData] = []
    for item in filter(None, (i.strip() for i in args.add_config.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            print(f"pydmq quotas: --add-config expects K=V, got {item!r}", file=sys.stderr)
            return 2
        try:
            number = float(value)
        except ValueError:
            print(f"pydmq quotas: {key}: {value!r} is not a number", file=sys.stderr)
            return 2
        ops.append(aq.OpData(key=key.strip(), value=number, remove=False))
    for key in filter(None, (k.strip() for k in args.delete_config.split(","))):
        ops.append(aq.OpData(key=key, value=0.0, remove=True))
    entity = [aq.EntityData(entity_type=kind, entity_name=name) for kind, name, _ in chosen]
    request = aq.AlterClientQuotasRequest(
        entries=[aq.EntryData(entity=entity, ops=ops)], validate_only=args.validate_only
    )
    described = entity_description([(kind, name) for kind, name, _ in chosen])

    def run(client: KafkaClient) -> int:
        response = client.send(_ALTER, request)
        for entry in response.entries:
            if entry.error_code:
                raise KafkaError(entry.error_code, entry.error_message)
        print(f"Completed updating config for {described}.")
        return 0

    return run_with_client("quotas", args, run)


def _describe(args: argparse.Namespace) -> int:
    components = [
        dq.ComponentData(entity_type=kind, match_type=_DEFAULT if default else _EXACT, match=name)
        for kind, name, default in _chosen(args)
    ]
    request = dq.DescribeClientQuotasRequest(components=components, strict=False)

    def run(client: KafkaClient) -> int:
        response = client.send(_DESCRIBE, request)
        if response.error_code:
            raise KafkaError(response.error_code, response.error_message)
        lines = []
        for entry in response.entries or []:
            entity = [(e.entity_type, e.entity_name) for e in entry.entity]
            values = ", ".join(
                f"{v.key}={java_double(v.value)}" for v in sorted(entry.values, key=lambda v: v.key)
            )
            lines.append(f"Quota configs for {entity_description(entity)} are {values}")
        for line in sorted(lines):
            print(line)
        return 0

    return run_with_client("quotas", args, run)
