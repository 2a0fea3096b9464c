"""``pydmq topics``: create, list, describe, delete and alter topics over the Kafka protocol."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from pydmq.cli.common import (
    add_bootstrap_argument,
    format_table,
    parse_key_values,
    run_with_client,
)
from pydmq.client import (
    EARLIEST,
    LATEST,
    ApiKey,
    KafkaClient,
    KafkaError,
    TopicInfo,
    raise_for_error,
)
from pydmq.client.errors import UnsupportedApiError
from pydmq.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
)
from pydmq.protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from pydmq.protocol.messages.delete_topics import (
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DeleteTopicState,
)
from pydmq.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
)
from pydmq.protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

__all__ = ["add_parser"]

RESOURCE_TOPIC = 2
CONFIG_SOURCE_DYNAMIC_TOPIC = 1
OP_SET = 0
OP_DELETE = 1


# -- parser ---------------------------------------------------------------------------------------


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "topics",
        help="create, list, describe, alter and delete topics",
        description="Manage topics through the Kafka protocol (works with any Kafka broker).",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    create = actions.add_parser("create", help="create a topic")
    add_bootstrap_argument(create)
    create.add_argument("name")
    create.add_argument(
        "--partitions", type=int, default=-1, help="partition count (default: broker's)"
    )
    create.add_argument(
        "--replication-factor", type=int, default=-1, help="replicas (default: broker's)"
    )
    create.add_argument(
        "--config", action="append", default=[], metavar="KEY=VALUE", help="topic config"
    )
    create.add_argument(
        "--if-not-exists", action="store_true", help="succeed if the topic already exists"
    )
    create.set_defaults(run=_run_create)

    lst = actions.add_parser("list", help="list topic names")
    add_bootstrap_argument(lst)
    lst.add_argument("--exclude-internal", action="store_true")
    lst.set_defaults(run=_run_list)

    describe = actions.add_parser("describe", help="partitions, leaders, offsets and configs")
    add_bootstrap_argument(describe)
    describe.add_argument("names", nargs="*", metavar="NAME", help="topics (default: all)")
    describe.set_defaults(run=_run_describe)

    delete = actions.add_parser("delete", help="delete topics")
    add_bootstrap_argument(delete)
    delete.add_argument("names", nargs="+", metavar="NAME")
    delete.set_defaults(run=_run_delete)

    alter = actions.add_parser("alter", help="add partitions or change topic configs")
    add_bootstrap_argument(alter)
    alter.add_argument("name")
    alter.add_argument("--partitions", type=int, help="new total partition count")
    alter.add_argument(
        "--config", action="append", default=[], metavar="KEY=VALUE", help="set a config"
    )
    alter.add_argument(
        "--delete-config", action="append", default=[], metavar="KEY", help="reset a config"
    )
    alter.set_defaults(run=_run_alter)


# -- create ---------------------------------------------------------------------------------------


def _run_create(args: argparse.Namespace) -> int:
    def body(client: KafkaClient) -> int:
        configs = parse_key_values(args.config, "--config")
        version = client.version_for(ApiKey.CREATE_TOPICS)
        if version < 4 and (args.partitions < 0 or args.replication_factor < 0):
            raise ValueError("this broker needs --partitions and --replication-factor")
        request = CreateTopicsRequest(
            topics=[
                CreatableTopic(
                    name=args.name,
                    num_partitions=args.partitions,
                    replication_factor=args.replication_factor,
                    configs=[CreatableTopicConfig(name=k, value=v) for k, v in configs],
                )
            ],
            timeout=int(args.timeout * 1000),
        )
        response = client.call(request, CreateTopicsResponse)
        for result in response.topics:
            if result.error_code == 36 and args.if_not_exists:  # TOPIC_ALREADY_EXISTS
                print(f"Topic {result.name} already exists.")
                return 0
            raise_for_error(result.error_code, result.error_message or f"topic {result.name!r}")
        client.wait_for_topic(args.name, timeout=args.timeout)
        print(f"Created topic {args.name}.")
        return 0

    return run_with_client("topics", args, body)


# -- list -----------------------------------------------------------------------------------------


def _run_list(args: argparse.Namespace) -> int:
    def body(client: KafkaClient) -> int:
        response = client.refresh_metadata(None)
        names = sorted(
            t.name
            for t in response.topics
            if t.name is not None and not (args.exclude_internal and t.is_internal)
        )
        for name in names:
            print(name)
        return 0

    return run_with_client("topics", args, body)


# -- describe -------------------------------------------------------------------------------------


def describe_configs(
    client: KafkaClient, topics: Sequence[str]
) -> dict[str, list[tuple[str, str]]]:
    """Non-default (topic-level) configs per topic via DescribeConfigs."""
    request = DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(
                resource_type=RESOURCE_TOPIC, resource_name=name, configuration_keys=None
            )
            for name in topics
        ],
    )
    response = client.call(request, DescribeConfigsResponse)
    out: dict[str, list[tuple[str, str]]] = {}
    for result in response.results:
        raise_for_error(
            result.error_code, result.error_message or f"topic {result.resource_name!r}"
        )
        out[result.resource_name] = sorted(
            (c.name, "<sensitive>" if c.is_sensitive else (c.value or ""))
            for c in result.configs
            if c.config_source == CONFIG_SOURCE_DYNAMIC_TOPIC
        )
    return out


def _offsets(client: KafkaClient, info: TopicInfo, which: int) -> dict[int, int]:
    wanted = {p: which for p, part in info.partitions.items() if part.leader >= 0}
    if not wanted:
        return {}
    # partial: a partition whose leader is gone and not replaced shows "-", not an error.
    found = client.list_offsets(info.name, wanted, partial=True)
    return {p: offset for p, (offset, _ts) in found.items()}


def _ids(nodes: Sequence[int]) -> str:
    return ",".join(str(n) for n in nodes) or "-"


def _run_describe(args: argparse.Namespace) -> int:
    def body(client: KafkaClient) -> int:
        names: list[str] = list(dict.fromkeys(args.names))
        response = client.refresh_metadata(names or None)
        if names:
            for t in response.topics:
                raise_for_error(t.error_code, f"topic {t.name!r}")
        else:
            names = sorted(t.name for t in response.topics if t.name is not None)
        configs: dict[str, list[tuple[str, str]]] | None = None
        if names and client.supports(ApiKey.DESCRIBE_CONFIGS):
            configs = describe_configs(client, names)
        blocks: list[str] = []
        for name in names:
            info = client.topic(name)
            start = _offsets(client, info, EARLIEST)
            end = _offsets(client, info, LATEST)
            parts = [info.partitions[p] for p in sorted(info.partitions)]
            rf = len(parts[0].replicas) if parts else 0
            if configs is None:
                config_text = "(DescribeConfigs not supported by the broker)"
            else:
                config_text = ",".join(f"{k}={v}" for k, v in configs.get(name, [])) or "-"
            head = (
                f"Topic: {name}  TopicId: {info.topic_id}  PartitionCount: {len(parts)}  "
                f"ReplicationFactor: {rf}  Configs: {config_text}"
            )
            rows = [
                (
                    p.partition,
                    p.leader if p.leader >= 0 else "none",
                    p.leader_epoch,
                    _ids(p.replicas),
                    _ids(p.isr),
                    start.get(p.partition, "-"),
                    end.get(p.partition, "-"),
                )
                for p in parts
            ]
            table = format_table(
                ("PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "LOG-START", "LOG-END"), rows
            )
            blocks.append(f"{head}\n{table}")
        if blocks:
            print("\n\n".join(blocks))
        return 0

    return run_with_client("topics", args, body)


# -- delete ---------------------------------------------------------------------------------------


def _run_delete(args: argparse.Namespace) -> int:
    def body(client: KafkaClient) -> int:
        names: list[str] = list(dict.fromkeys(args.names))
        version = client.version_for(ApiKey.DELETE_TOPICS)
        request = DeleteTopicsRequest(timeout=int(args.timeout * 1000))
        if version >= 6:
            request.topics = [DeleteTopicState(name=n) for n in names]
        else:
            request.topic_names = names
        response = client.call(request, DeleteTopicsResponse)
        first_error: KafkaError | None = None
        for result in response.responses:
            if result.error_code:
                error = KafkaError(
                    result.error_code, result.error_message or f"topic {result.name!r}"
                )
                first_error = first_error or error
                continue
            print(f"Deleted topic {result.name}.")
        if first_error is not None:
            raise first_error
        return 0

    return run_with_client("topics", args, body)


# -- alter ----------------------------------------------------------------------------------------


def _require(client: KafkaClient, api_key: int, what: str) -> None:
    if not client.supports(api_key):
        raise UnsupportedApiError(api_key, f"the broker does not support {what}")


def _run_alter(args: argparse.Namespace) -> int:
    def body(client: KafkaClient) -> int:
        sets = parse_key_values(args.config, "--config")
        deletes: list[str] = list(args.delete_config)
        if args.partitions is None and not sets and not deletes:
            raise ValueError("nothing to alter: give --partitions, --config or --delete-config")
        client.topic(args.name, refresh=True)  # UNKNOWN_TOPIC_OR_PARTITION early
        if args.partitions is not None:
            _require(client, ApiKey.CREATE_PARTITIONS, "CreatePartitions (adding partitions)")
            request = CreatePartitionsRequest(
                topics=[CreatePartitionsTopic(name=args.name, count=args.partitions)],
                timeout=int(args.timeout * 1000),
            )
            cp = client.call(request, CreatePartitionsResponse)
            for result in cp.results:
                raise_for_error(result.error_code, result.error_message or f"topic {args.name!r}")
            print(f"Topic {args.name} now has {args.partitions} partitions.")
        if sets or deletes:
            _require(
                client, ApiKey.INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigs (topic configs)"
            )
            changes = [AlterableConfig(name=k, config_operation=OP_SET, value=v) for k, v in sets]
            changes += [AlterableConfig(name=k, config_operation=OP_DELETE) for k in deletes]
            ia = client.call(
                IncrementalAlterConfigsRequest(
                    resources=[
                        AlterConfigsResource(
                            resource_type=RESOURCE_TOPIC, resource_name=args.name, configs=changes
                        )
                    ]
                ),
                IncrementalAlterConfigsResponse,
            )
            for r in ia.responses:
                raise_for_error(r.error_code, r.error_message or f"topic {args.name!r}")
            print(f"Updated configs of topic {args.name}.")
        return 0

    return run_with_client("topics", args, body)
