"""The ``pydmq`` command: one module per subcommand group."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main"]

_SUBCOMMANDS = (
    "serve",
    "topics",
    "produce",
    "consume",
    "groups",
    "acls",
    "quotas",
    "users",
    "config",
    "cluster",
    "chaos",
)


class _VersionAction(argparse.Action):
    """``--version``: print ``pydmq <version>`` from the installed package's metadata (the
    module's ``__version__`` when run from a source tree without installing) and exit.

    Looked up only when asked for: the metadata scan would slow every start-up."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            text = version("pydmq")
        except PackageNotFoundError:
            from pydmq import __version__ as text
        print(f"pydmq {text}")
        parser.exit()


def main(argv: Sequence[str] | None = None) -> int:
    import importlib

    parser = argparse.ArgumentParser(
        prog="pydmq", description="A Kafka-protocol broker and storage engine in Python."
    )
    parser.add_argument(
        "--version", action=_VersionAction, nargs=0, help="print pydmq's version and exit"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    words = list(sys.argv[1:] if argv is None else argv)
    chosen = next((w for w in words if not w.startswith("-")), None)
    # Import only the chosen subcommand: start-up time of `pydmq serve` is a feature.
    for name in (chosen,) if chosen in _SUBCOMMANDS else _SUBCOMMANDS:
        try:
            module = importlib.import_module(f"pydmq.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"pydmq.cli.{name}":
                raise
            continue
        module.add_parser(sub)
    args = parser.parse_args(words)
    try:
        result: int = args.run(args)
    except KeyboardInterrupt:
        return 130
    return result


if __name__ == "__main__":
    sys.exit(main())
