"""``pydmq config list``: the properties pydmq supports, with their defaults.

Broker properties (``pydmq serve --config/--override``), topic configs (``--topic``: what
``pydmq topics create --config`` and AlterConfigs take, with the broker property each one's
default comes from) or the Kafka broker properties accepted without effect, with the reason
(``--kafka-only``). Reads the definitions only; no broker is contacted.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pydmq.cli.common import format_table, run_guarded
from pydmq.config.definitions import ConfigDef

__all__ = ["add_parser", "render_list"]


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "config",
        help="list the supported broker and topic properties with their defaults",
        description="The properties pydmq supports (Kafka's names) and their defaults.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    lst = actions.add_parser(
        "list",
        help="properties with their defaults and descriptions",
        description="Broker properties (the default), topic configs (--topic) or the Kafka "
        "broker properties pydmq accepts without effect (--kafka-only).",
    )
    lst.add_argument("word", nargs="?", help="only properties whose name contains WORD")
    kind = lst.add_mutually_exclusive_group()
    kind.add_argument("--topic", action="store_true", help="topic configs instead")
    kind.add_argument(
        "--kafka-only",
        action="store_true",
        help="the Kafka broker properties accepted without effect, by reason",
    )
    lst.set_defaults(run=_run_list)


def _render(definition: ConfigDef, value: object) -> str:
    text = definition.render(value)
    return "-" if text is None else text or '""'


def render_list(word: str | None, *, topic: bool = False, kafka_only: bool = False) -> str:
    """The text ``pydmq config list`` prints (empty when nothing matches)."""
    wanted = word or ""
    if kafka_only:
        from pydmq.config.kafka_only import KAFKA_ONLY

        blocks = []
        for group in KAFKA_ONLY:
            names = sorted(n for n in group.names if wanted in n)
            names += [f"{p}*" for p in group.prefixes if wanted in p]
            if names:
                blocks.append("\n".join([f"# {group.reason}", *names]))
        return "\n\n".join(blocks)
    if topic:
        from pydmq.config.broker import TOPIC_DEFAULT_SOURCES, BrokerConfig
        from pydmq.config.topic import TopicConfig

        defaults = TopicConfig(BrokerConfig(), {})
        topic_rows = [
            (
                d.name,
                _render(d, defaults.get(d.name)),
                TOPIC_DEFAULT_SOURCES.get(d.name, "-"),
                d.doc,
            )
            for d in sorted(TopicConfig.definitions(), key=lambda d: d.name)
            if wanted in d.name
        ]
        if not topic_rows:
            return ""
        return format_table(("NAME", "DEFAULT", "BROKER-DEFAULT-FROM", "DESCRIPTION"), topic_rows)
    from pydmq.config.broker import BROKER_CONFIGS

    rows = [
        (d.name, _render(d, d.default), d.doc)
        for d in sorted(BROKER_CONFIGS, key=lambda d: d.name)
        if wanted in d.name
    ]
    return format_table(("NAME", "DEFAULT", "DESCRIPTION"), rows) if rows else ""


def _run_list(args: argparse.Namespace) -> int:
    def body() -> int:
        text = render_list(args.word, topic=args.topic, kafka_only=args.kafka_only)
        if not text:
            print(f"pydmq config: no property name contains {args.word!r}", file=sys.stderr)
            return 1
        print(text)
        return 0

    return run_guarded("config", body)
