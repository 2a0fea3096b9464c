"""``pydmq groups``: list, describe, delete consumer groups and reset their offsets (list,
describe and delete also share groups, KIP-932; describe shows their state and members).

What ``kafka-consumer-groups.sh`` does, through the Kafka protocol only (FindCoordinator,
ListGroups, DescribeGroups, OffsetFetch, ListOffsets, OffsetCommit, DeleteGroups), so it works
against any Kafka broker as well as pydmq.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydmq.cli.common import add_bootstrap_argument, format_table, run_with_client
from pydmq.client import EARLIEST, LATEST, KafkaClient, KafkaError, error_name
from pydmq.client.admin import (
    CONSUMER_PROTOCOL_TYPE,
    CommittedOffset,
    GroupDescription,
    GroupMember,
    delete_groups,
    describe_groups,
    list_groups,
    offset_commit,
    offset_fetch,
)
from pydmq.client.share_admin import (
    ShareGroupDescription,
    alter_share_group_offsets,
    describe_share_groups,
    share_group_offsets,
)
from pydmq.protocol.errors import ErrorCode

__all__ = ["ResetPlan", "add_parser", "parse_datetime", "parse_topic_partitions", "plan_reset"]

_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")
_TYPES = ("classic", "consumer")
_REBALANCING = ("PreparingRebalance", "CompletingRebalance")

# Readable explanations of the errors group operations answer with.
_EXPLAIN: dict[int, str] = {
    ErrorCode.NON_EMPTY_GROUP: "the group still has active members; stop its consumers first",
    ErrorCode.GROUP_ID_NOT_FOUND: "the group does not exist",
    ErrorCode.UNKNOWN_MEMBER_ID: "the group has active members; offsets can only be reset "
    "while it is inactive (Empty)",
    ErrorCode.ILLEGAL_GENERATION: "the group has active members; offsets can only be reset "
    "while it is inactive (Empty)",
    ErrorCode.REBALANCE_IN_PROGRESS: "the group is rebalancing; offsets can only be reset "
    "while it is inactive (Empty)",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "not authorized to access the group",
    ErrorCode.INVALID_GROUP_ID: "invalid group id",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "the group coordinator is not available",
}


def _explain(code: int) -> str:
    return _EXPLAIN.get(code, "")


# -- parser ---------------------------------------------------------------------------------------


def _comma_list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "groups",
        help="list, describe and delete consumer groups; reset their offsets",
        description="Manage consumer groups through the Kafka protocol "
        "(what kafka-consumer-groups.sh does; works with any Kafka broker).",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    lst = actions.add_parser("list", help="list groups with their state and type")
    add_bootstrap_argument(lst)
    lst.add_argument(
        "--state",
        dest="states",
        action="extend",
        nargs="+",
        type=_comma_list,
        default=[],
        metavar="STATE",
        help=f"only groups in these states ({', '.join(_STATES)}; case-insensitive)",
    )
    lst.add_argument(
        "--type",
        dest="types",
        action="extend",
        nargs="+",
        type=_comma_list,
        default=[],
        metavar="TYPE",
        help="only groups of these types (classic, consumer)",
    )
    lst.set_defaults(run=_run_list)

    describe = actions.add_parser(
        "describe", help="members, assignments, committed offsets and lag of groups"
    )
    add_bootstrap_argument(describe)
    describe.add_argument("groups", nargs="*", metavar="GROUP")
    describe.add_argument("--all-groups", action="store_true", help="describe every group")
    describe.add_argument(
        "--offsets",
        action="store_true",
        help="per partition: committed offset, log end offset and lag (the default)",
    )
    describe.add_argument(
        "--members", action="store_true", help="members and their assigned partitions"
    )
    describe.add_argument(
        "--state", action="store_true", help="coordinator, assignor, state and member count"
    )
    describe.set_defaults(run=_run_describe)

    delete = actions.add_parser("delete", help="delete groups (and their committed offsets)")
    add_bootstrap_argument(delete)
    delete.add_argument("groups", nargs="+", metavar="GROUP")
    delete.set_defaults(run=_run_delete)

    reset = actions.add_parser(
        "reset-offsets",
        help="compute (and with --execute commit) new offsets for an inactive group",
        description="Print the new offsets (a dry run by default) and, with --execute, commit "
        "them. The broker accepts the commit only while the group has no active members.",
    )
    add_bootstrap_argument(reset)
    reset.add_argument("group", metavar="GROUP")
    scope = reset.add_mutually_exclusive_group(required=True)
    scope.add_argument(
        "--topic",
        dest="topics",
        action="append",
        default=[],
        metavar="TOPIC[:P,...]",
        help="a topic, or some of its partitions (repeatable)",
    )
    scope.add_argument(
        "--all-topics", action="store_true", help="every topic the group has offsets for"
    )
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the log start offset")
    to.add_argument("--to-latest", action="store_true", help="the log end offset")
    to.add_argument("--to-current", action="store_true", help="the committed offset")
    to.add_argument("--to-offset", type=int, metavar="N", help="offset N (within the log)")
    to.add_argument(
        "--to-datetime",
        metavar="ISO8601",
        help="the first offset with a timestamp at or after this time "
        "(e.g. 2024-05-01T12:00:00.000, local time unless it has a zone or Z)",
    )
    to.add_argument(
        "--shift-by", type=int, metavar="N", help="move the committed offset by N (may be < 0)"
    )
    reset.add_argument(
        "--share",
        action="store_true",
        help="GROUP is a share group (KIP-932) even if it does not exist yet: reset its start "
        "offsets (an existing share group is found without it)",
    )
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    mode.add_argument("--dry-run", action="store_true", help="only print them (the default)")
    reset.set_defaults(run=_run_reset)


def _flatten(values: Sequence[Sequence[str]]) -> list[str]:
    return [v for chunk in values for v in chunk]


# -- list -----------------------------------------------------------------------------------------


def _run_list(args: argparse.Namespace) -> int:
    def body(client: KafkaClient) -> int:
        states = _flatten(args.states)
        types = [t.lower() for t in _flatten(args.types)]
        known = {s.lower(): s for s in _STATES}
        for state in states:
            if state.lower() not in known:
                raise ValueError(f"unknown group state {state!r} (one of {', '.join(_STATES)})")
        for kind in types:
            if kind not in _TYPES:
                raise ValueError(f"unknown group type {kind!r} (one of {', '.join(_TYPES)})")
        groups = list_groups(client, [known[s.lower()] for s in states], types)
        rows = [
            (g.group_id, g.state or "-", g.group_type or "-", g.protocol_type or "-")
            for g in groups
        ]
        if rows:
            print(format_table(("GROUP", "STATE", "TYPE", "PROTOCOL-TYPE"), rows))
        else:
            print("No consumer groups.", file=sys.stderr)
        return 0

    return run_with_client("groups", args, body)


# -- describe -------------------------------------------------------------------------------------


def _assignment_text(member: GroupMember) -> str:
    if member.assignment is None:
        return "-" if not member.assignment_bytes else "(undecodable)"
    parts = [
        f"{topic}({','.join(str(p) for p in sorted(ps))})"
        for topic, ps in sorted(member.assignment.partitions.items())
    ]
    return ",".join(parts) or "-"


def _log_end_offsets(
    client: KafkaClient, partitions: Sequence[tuple[str, int]]
) -> dict[tuple[str, int], int]:
    """Latest offsets; a topic whose offsets cannot be read is left out (shown as "-")."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    out: dict[tuple[str, int], int] = {}
    for topic, parts in sorted(by_topic.items()):
        try:
            offsets = client.list_offsets(topic, dict.fromkeys(parts, LATEST))
        except KafkaError:
            continue
        out.update({(topic, p): offset for p, (offset, _ts) in offsets.items()})
    return out


def _offset_rows(client: KafkaClient, group: GroupDescription) -> list[tuple[object, ...]]:
    committed = offset_fetch(client, group.group_id)
    owner: dict[tuple[str, int], GroupMember] = {}
    for member in group.members:
        if member.assignment is not None:
            for topic, parts in member.assignment.partitions.items():
                for p in parts:
                    owner[(topic, p)] = member
    keys = sorted(set(owner) | {k for k, c in committed.items() if c.offset >= 0})
    ends = _log_end_offsets(client, keys)
    rows: list[tuple[object, ...]] = []
    for key in keys:
        current = committed.get(key, CommittedOffset(-1)).offset
        end = ends.get(key)
        lag: object = "-"
        if current >= 0 and end is not None:
            lag = max(end - current, 0)
        m = owner.get(key)
        rows.append(
            (
                group.group_id,
                key[0],
                key[1],
                current if current >= 0 else "-",
                "-" if end is None else end,
                lag,
                m.member_id if m else "-",
                m.host if m else "-",
                m.client_id if m else "-",
            )
        )
    return rows


def _describe_offsets(client: KafkaClient, group: GroupDescription) -> str:
    rows = _offset_rows(client, group)
    if not rows:
        return f"Consumer group '{group.group_id}' has no committed offsets or assignments."
    return format_table(
        (
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ),
        rows,
    )


def _no_members(group: GroupDescription) -> str:
    """Kafka's sentence for a group without members, with its state (Empty: its offsets
    were committed by consumers that left, or by ones outside it, e.g. consume --group)."""
    return f"Consumer group '{group.group_id}' has no active members (state {group.state})."


def _describe_members(group: GroupDescription) -> str:
    if not group.members:
        return _no_members(group)
    rows = [
        (
            group.group_id,
            m.member_id,
            m.group_instance_id or "-",
            m.host,
            m.client_id,
            m.assignment.partition_count if m.assignment is not None else "-",
            _assignment_text(m),
        )
        for m in sorted(group.members, key=lambda m: m.member_id)
    ]
    return format_table(
        (
            "GROUP",
            "CONSUMER-ID",
            "GROUP-INSTANCE-ID",
            "HOST",
            "CLIENT-ID",
            "#PARTITIONS",
            "ASSIGNMENT",
        ),
        rows,
    )


def _describe_state(group: GroupDescription) -> str:
    c = group.coordinator
    row = (
        group.group_id,
        f"{c.host}:{c.port} ({c.node_id})",
        group.protocol or "-",
        group.protocol_type or "-",
        group.state,
        len(group.members),
    )
    return format_table(
        ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "PROTOCOL-TYPE", "STATE", "#MEMBERS"),
        [row],
    )


def _run_describe(args: argparse.Namespace) -> int:
    def body(client: KafkaClient) -> int:
        names: list[str] = list(dict.fromkeys(args.groups))
        if args.all_groups:
            names = list(dict.fromkeys([*names, *(g.group_id for g in list_groups(client))]))
        elif not names:
            raise ValueError("give one or more GROUPs, or --all-groups")
        show_offsets = args.offsets or not (args.members or args.state)
        status = 0
        blocks: list[str] = []
        unknown: list[str] = []
        for group in describe_groups(client, names):
            if not group.exists:  # Dead, or GROUP_ID_NOT_FOUND from DescribeGroups v6
                unknown.append(group.group_id)
                continue
            if group.error_code:
                status = 1
                why = group.error_message or _explain(group.error_code)
                text = f"Error: group '{group.group_id}': {error_name(group.error_code)}"
                print(f"{text}: {why}" if why else text, file=sys.stderr)
                continue
            if group.protocol_type not in ("", CONSUMER_PROTOCOL_TYPE):
                print(
                    f"Note: group '{group.group_id}' uses protocol type "
                    f"{group.protocol_type!r}; assignments are not decoded.",
                    file=sys.stderr,
                )
            if group.state in _REBALANCING:
                print(
                    f"Warning: Consumer group '{group.group_id}' is rebalancing.", file=sys.stderr
                )
            parts: list[str] = []
            if args.state:
                parts.append(_describe_state(group))
            if args.members:
                parts.append(_describe_members(group))
            if show_offsets:
                if not group.members and not args.members:
                    parts.append(_no_members(group))
                parts.append(_describe_offsets(client, group))
            blocks.append("\n\n".join(parts))
        for share in describe_share_groups(client, unknown) if unknown else []:
            if share.error_code:  # no share group either
                status = 1
                print(f"Error: Consumer group '{share.group_id}' does not exist.", file=sys.stderr)
                continue
            blocks.append(_describe_share_group(share, share_group_offsets(client, share.group_id)))
        if blocks:
            print("\n\n".join(blocks))
        return status

    return run_with_client("groups", args, body)


def _describe_share_group(
    group: ShareGroupDescription, offsets: dict[tuple[str, int], tuple[int, int]]
) -> str:
    """A share group (KIP-932): its state, its start offset and lag per partition (it has no
    committed offsets), and its members."""
    state = format_table(
        ("GROUP", "TYPE", "ASSIGNOR", "STATE", "GROUP-EPOCH", "#MEMBERS"),
        [
            (
                group.group_id,
                "share",
                group.assignor,
                group.state,
                group.group_epoch,
                len(group.members),
            )
        ],
    )
    if offsets:
        table = format_table(
            ("GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"),
            [
                (
                    group.group_id,
                    topic,
                    partition,
                    start if start >= 0 else "-",
                    lag if lag >= 0 else "-",
                )
                for (topic, partition), (start, lag) in sorted(offsets.items())
            ],
        )
        state = f"{state}\n\n{table}"
    if not group.members:
        return state
    rows = [
        (
            group.group_id,
            m.member_id,
            m.client_host,
            m.client_id,
            m.member_epoch,
            ",".join(f"{t}:{p}" for t, ps in sorted(m.assignment.items()) for p in ps) or "-",
        )
        for m in sorted(group.members, key=lambda m: m.member_id)
    ]
    members = format_table(
        ("GROUP", "MEMBER-ID", "HOST", "CLIENT-ID", "MEMBER-EPOCH", "ASSIGNMENT"), rows
    )
    return f"{state}\n\n{members}"


# -- delete ---------------------------------------------------------------------------------------


def _run_delete(args: argparse.Namespace) -> int:
    def body(client: KafkaClient) -> int:
        results = delete_groups(client, args.groups)
        status = 0
        for group_id, code in results.items():
            if code == 0:
                print(f"Deleted consumer group '{group_id}'.")
                continue
            status = 1
            why = _explain(code)
            text = f"Group '{group_id}' could not be deleted: {error_name(code)}"
            print(f"{text}: {why}" if why else text, file=sys.stderr)
        return status

    return run_with_client("groups", args, body)


# -- reset-offsets --------------------------------------------------------------------------------


def parse_topic_partitions(spec: str) -> tuple[str, list[int] | None]:
    """``"topic"`` -> (topic, None); ``"topic:0,2"`` -> (topic, [0, 2])."""
    topic, sep, rest = spec.partition(":")  # ":" is not legal in topic names
    if not topic:
        raise ValueError(f"--topic expects TOPIC or TOPIC:P,..., got {spec!r}")
    if not sep:
        return topic, None
    try:
        partitions = sorted({int(p) for p in rest.split(",") if p.strip()})
    except ValueError:
        raise ValueError(f"--topic {spec!r}: partitions must be integers") from None
    if not partitions or any(p < 0 for p in partitions):
        raise ValueError(f"--topic {spec!r}: expected a comma-separated list of partitions")
    return topic, partitions


def parse_datetime(text: str) -> int:
    """An ISO-8601 date/time to epoch milliseconds (no zone: local time, as Kafka's tool)."""
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            f"--to-datetime expects ISO-8601 like 2024-05-01T12:00:00.000, got {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # interpret as local time
    return int(moment.timestamp() * 1000)


@dataclass(slots=True, frozen=True)
class ResetPlan:
    topic: str
    partition: int
    current: int  # -1: nothing committed
    new: int


def _target_partitions(
    client: KafkaClient, args: argparse.Namespace, committed: dict[tuple[str, int], CommittedOffset]
) -> list[tuple[str, int]]:
    if args.all_topics:
        keys = sorted(k for k, c in committed.items() if c.offset >= 0)
        if not keys:
            raise ValueError(f"group {args.group!r} has no committed offsets (use --topic)")
        for topic in sorted({t for t, _ in keys}):
            client.topic(topic, refresh=True)
        return keys
    out: list[tuple[str, int]] = []
    for spec in args.topics:
        topic, partitions = parse_topic_partitions(spec)
        info = client.topic(topic, refresh=True)
        if partitions is None:
            partitions = sorted(info.partitions)
        for p in partitions:
            if p not in info.partitions:
                raise ValueError(f"topic {topic!r} has no partition {p}")
            out.append((topic, p))
    return sorted(dict.fromkeys(out))


def _list(
    client: KafkaClient, keys: Sequence[tuple[str, int]], ts: int
) -> dict[tuple[str, int], int]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in keys:
        by_topic.setdefault(topic, []).append(partition)
    out: dict[tuple[str, int], int] = {}
    for topic, parts in by_topic.items():
        found = client.list_offsets(topic, dict.fromkeys(parts, ts))
        out.update({(topic, p): offset for p, (offset, _ts) in found.items()})
    return out


def plan_reset(
    client: KafkaClient, args: argparse.Namespace, committed: dict[tuple[str, int], CommittedOffset]
) -> list[ResetPlan]:
    keys = _target_partitions(client, args, committed)
    earliest = _list(client, keys, EARLIEST)
    latest = _list(client, keys, LATEST)
    by_time: dict[tuple[str, int], int] = {}
    if args.to_datetime is not None:
        by_time = _list(client, keys, parse_datetime(args.to_datetime))
    plans: list[ResetPlan] = []
    for key in keys:
        current = committed.get(key, CommittedOffset(-1)).offset
        low, high = earliest[key], latest[key]
        if args.to_earliest:
            new = low
        elif args.to_latest:
            new = high
        elif args.to_datetime is not None:
            found = by_time[key]
            new = high if found < 0 else found  # no record that late: the log end
        elif args.to_offset is not None:
            new = args.to_offset
        else:  # --to-current, --shift-by: relative to the committed offset
            if current < 0:
                what = "shift" if args.shift_by is not None else "keep"
                raise ValueError(
                    f"cannot {what} the offset of {key[0]}-{key[1]}: "
                    f"group {args.group!r} has no committed offset for it"
                )
            new = current + (args.shift_by or 0)
        plans.append(ResetPlan(key[0], key[1], current, min(max(new, low), high)))
    return plans


def _run_share_reset(client: KafkaClient, args: argparse.Namespace) -> int:
    """reset-offsets of a share group: its start offsets (DescribeShareGroupOffsets), set
    with AlterShareGroupOffsets, which the coordinator accepts only while it has no member."""
    (share,) = describe_share_groups(client, [args.group])
    members = 0 if share.error_code else len(share.members)
    try:
        starts = share_group_offsets(client, args.group)
    except KafkaError as exc:
        if exc.code != ErrorCode.GROUP_ID_NOT_FOUND:
            raise
        starts = {}
    committed = {k: CommittedOffset(start) for k, (start, _lag) in starts.items()}
    plans = plan_reset(client, args, committed)
    print(
        format_table(
            ("GROUP", "TOPIC", "PARTITION", "START-OFFSET", "NEW-START-OFFSET"),
            [
                (args.group, p.topic, p.partition, p.current if p.current >= 0 else "-", p.new)
                for p in plans
            ],
        )
    )
    if not args.execute:
        if members:
            print(
                f"Warning: share group '{args.group}' has {members} member(s); --execute will "
                "be refused until it has none.",
                file=sys.stderr,
            )
        print("Dry run: pass --execute to set these start offsets.", file=sys.stderr)
        return 0
    try:
        results = alter_share_group_offsets(
            client, args.group, {(p.topic, p.partition): p.new for p in plans}
        )
    except KafkaError as exc:
        if exc.code == ErrorCode.NON_EMPTY_GROUP:
            raise KafkaError(
                exc.code,
                f"cannot reset offsets of share group '{args.group}': it has {members} "
                "member(s); start offsets can only be reset while it has none",
            ) from None
        raise
    failed = {k: c for k, c in results.items() if c}
    if failed:
        (topic, partition), code = sorted(failed.items())[0]
        raise KafkaError(code, f"cannot reset share group '{args.group}' at {topic}-{partition}")
    print(f"Set new start offsets for share group '{args.group}'.")
    return 0


def _run_reset(args: argparse.Namespace) -> int:
    def body(client: KafkaClient) -> int:
        (group,) = describe_groups(client, [args.group])
        if group.error_code and group.error_code != ErrorCode.GROUP_ID_NOT_FOUND:
            raise KafkaError(group.error_code, f"group {args.group!r}")
        if args.share or (
            not group.exists and not describe_share_groups(client, [args.group])[0].error_code
        ):
            return _run_share_reset(client, args)
        active = group.exists and group.state not in ("Empty", "Dead")
        committed = offset_fetch(client, args.group)
        plans = plan_reset(client, args, committed)
        table = format_table(
            ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"),
            [
                (args.group, p.topic, p.partition, p.current if p.current >= 0 else "-", p.new)
                for p in plans
            ],
        )
        print(table)
        if not args.execute:
            if active:
                print(
                    f"Warning: group '{args.group}' is {group.state} with "
                    f"{len(group.members)} member(s); --execute will be refused until it is "
                    "inactive.",
                    file=sys.stderr,
                )
            print("Dry run: pass --execute to commit these offsets.", file=sys.stderr)
            return 0
        results = offset_commit(client, args.group, {(p.topic, p.partition): p.new for p in plans})
        failed = {k: c for k, c in results.items() if c}
        if failed:
            (topic, partition), code = sorted(failed.items())[0]
            state = f" (state {group.state}, {len(group.members)} member(s))" if active else ""
            why = _explain(code)
            raise KafkaError(
                code,
                f"cannot reset offsets of group '{args.group}'{state}"
                + (f": {why}" if why else f" at {topic}-{partition}"),
            )
        print(f"Committed new offsets for group '{args.group}'.")
        return 0

    return run_with_client("groups", args, body)
