"""Helpers shared by the client subcommands (topics, produce, consume, groups)."""

from __future__ import annotations

import argparse
import io
import os
import ssl
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from pydmq.client import KafkaClient, KafkaError

if TYPE_CHECKING:
    from pydmq.security.sasl.client import SaslClient

__all__ = [
    "DEFAULT_BOOTSTRAP",
    "ClientSecurity",
    "add_bootstrap_argument",
    "client_security",
    "format_table",
    "parse_key_values",
    "run_guarded",
    "run_with_client",
]

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def add_bootstrap_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server",
        "-b",
        default=DEFAULT_BOOTSTRAP,
        metavar="HOST:PORT",
        help=f"broker(s) to connect to, comma-separated (default {DEFAULT_BOOTSTRAP})",
    )
    parser.add_argument(
        "--timeout", type=float, default=30.0, help="request timeout in seconds (default 30)"
    )
    parser.add_argument(
        "--command-config",
        type=Path,
        metavar="FILE",
        help="client properties, as Kafka's tools take them (security.protocol=SASL_PLAINTEXT, "
        "sasl.mechanism, sasl.jaas.config with username and password)",
    )


def parse_key_values(items: Sequence[str], what: str) -> list[tuple[str, str]]:
    """``["k=v", ...]`` to pairs; raises ValueError naming ``what`` on a malformed item."""
    out: list[tuple[str, str]] = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{what} expects KEY=VALUE, got {item!r}")
        out.append((key, value))
    return out


def run_guarded(command: str, body: Callable[[], int], stderr: TextIO | None = None) -> int:
    """Run ``body``; report errors as ``pydmq <command>: <ERROR_NAME>: message``."""
    err = sys.stderr if stderr is None else stderr
    try:
        return body()
    except BrokenPipeError:  # e.g. ``pydmq consume ... | head``: stop quietly
        _silence_stdout()
        return 0
    except KafkaError as exc:
        text = f"pydmq {command}: {exc.name}"
        if exc.message:
            text += f": {exc.message}"
        print(text, file=err)
        return 1
    except (ValueError, OSError) as exc:
        print(f"pydmq {command}: {exc}", file=err)
        return 2


def run_with_client(
    command: str, args: argparse.Namespace, body: Callable[[KafkaClient], int]
) -> int:
    """Run ``body`` with a client of ``--bootstrap-server`` (closed afterwards), its errors
    reported as :func:`run_guarded` does."""

    def run() -> int:
        security = client_security(args.command_config)
        with KafkaClient(
            args.bootstrap_server,
            client_id="pydmq-cli",
            timeout=args.timeout,
            **security.kwargs(),
        ) as c:
            return body(c)

    return run_guarded(command, run)


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """How the CLI's client talks to a listener, from a ``--command-config`` file."""

    sasl: Callable[[], SaslClient] | None = None
    ssl_context: ssl.SSLContext | None = None

    def kwargs(self) -> dict[str, Any]:
        """``sasl`` and ``ssl_context``, as :class:`KafkaClient` takes them."""
        return {"sasl": self.sasl, "ssl_context": self.ssl_context}


def client_security(path: Path | None) -> ClientSecurity:
    """What a ``--command-config`` file (Kafka's client properties: ``security.protocol``,
    ``sasl.mechanism``, ``sasl.jaas.config``, ``ssl.truststore.*``, ``ssl.keystore.*``, ...)
    asks for; ValueError (or ConfigError) on a file Kafka's tools would refuse too."""
    if path is None:
        return ClientSecurity()
    from pydmq.config.broker import load_properties

    props = {k: str(v) for k, v in load_properties(path).items()}
    protocol = props.get("security.protocol", "PLAINTEXT")
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise ValueError(f"{path}: security.protocol={protocol} is not a Kafka protocol")
    return ClientSecurity(
        _client_sasl(path, props) if protocol.startswith("SASL_") else None,
        _client_tls(props) if protocol.endswith("SSL") else None,
    )


def _client_tls(props: dict[str, str]) -> ssl.SSLContext:
    from pydmq.config.ssl_configs import SSL_CONFIGS
    from pydmq.security.tls import client_ssl_context

    settings = {
        d.name: d.parse(props[d.name]) if d.name in props else d.default for d in SSL_CONFIGS
    }
    return client_ssl_context(settings, "the --command-config client")


def _client_sasl(path: Path, props: dict[str, str]) -> Callable[[], SaslClient]:
    from pydmq.security.sasl.client import sasl_client
    from pydmq.security.sasl.jaas import JaasConfigError, single_login_module

    mechanism = props.get("sasl.mechanism", "GSSAPI")
    try:
        options = single_login_module(props.get("sasl.jaas.config", "")).options
    except JaasConfigError as exc:
        raise ValueError(f"{path}: sasl.jaas.config: {exc}") from None
    username, password = options.get("username"), options.get("password")
    if username is None or password is None:
        raise ValueError(f"{path}: sasl.jaas.config needs username and password")
    sasl_client(mechanism, username, password)  # ValueError for a mechanism we cannot speak
    return lambda: sasl_client(mechanism, username, password)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, io.UnsupportedOperation):
        pass


def format_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned columns separated by two spaces (no trailing blanks)."""
    cells = [[str(c) for c in header]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = []
    for row in cells:
        line = "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))
        lines.append(line.rstrip())
    return "\n".join(lines)
