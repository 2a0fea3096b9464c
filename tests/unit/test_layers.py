"""The layer rules of ARCHITECTURE.md ("Layers"), checked on the code's own imports.

Every module under ``src/pydmq`` is parsed with :mod:`ast` and every ``import`` and
``from ... import`` statement is taken, wherever it is: at the top, under ``TYPE_CHECKING``,
inside a function (relative imports resolved). A module may import modules of its own layer
and of the layers below it, never of a layer above. Imports by computed name
(``importlib.import_module(f"...")``: the built-in plugin list, the CLI's subcommands) are not
statements and are not seen.

Two lists can only shrink: :data:`KNOWN_VIOLATIONS` (imports against the layers that are not
removed yet, each with its reason) and :data:`SIZE_CEILINGS` (hand-written modules over
:data:`MAX_MODULE_LINES` lines, each at its current size). Both are asserted exactly: a new
violation or a bigger module fails, and so does a listed violation that is gone or a listed
module that got under the limit (remove it from the list).
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "pydmq"

# Lowest first. A unit is a package or module and everything under it; the longest unit that
# contains a module gives its layer ("pydmq" itself is only the package's __init__).
LAYERS: tuple[tuple[str, ...], ...] = (
    # the wire and process-wide utilities: import nothing of pydmq
    ("pydmq", "pydmq.protocol", "pydmq.failpoints", "pydmq.plugins.markers"),
    # the storage port and log, producer state, cluster metadata, the Raft core (sans-IO or
    # files only)
    ("pydmq.storage", "pydmq.producers", "pydmq.metadata", "pydmq.raft"),
    # configuration, security (principals, TLS, SASL, ACLs), sockets, the CLI's client,
    # engines, assignors and placers, the log cleaner
    (
        "pydmq.config",
        "pydmq.security",
        # client quotas: their checks, filters and rates need only the metadata records
        "pydmq.quotas",
        "pydmq.net",
        "pydmq.client",
        "pydmq.engines",
        "pydmq.assignment",
        "pydmq.cleaner",
        # the HTTP/1.1 listener (server, routing, JSON envelope): knows nothing of Kafka
        "pydmq.http",
    ),
    # partitions and replication; the request layer both roles sit on; the coordinator
    # runtime the coordinators over internal topics sit on
    ("pydmq.replication", "pydmq.api", "pydmq.coordinator"),
    # the plugin host and hook specs; the group, share group and transaction coordinators
    ("pydmq.plugins", "pydmq.groups", "pydmq.shares", "pydmq.transactions"),
    # the controller role
    ("pydmq.controller",),
    # the broker role
    ("pydmq.broker",),
    # a node's observability: Prometheus collectors over the roles' state, health, the HTTP
    # routes the node starts (reads the broker and controller; never the node)
    # and the REST admin API (Kafka requests run by the broker's handlers); the web console
    # (HTML pages over the REST resources and the metrics registry)
    ("pydmq.metrics", "pydmq.rest", "pydmq.console"),
    # the composition root: builds the roles a node has, owns its listeners, start and stop
    ("pydmq.node",),
    # launching nodes as processes (pydmq cluster up, the test harness, the chaos harness)
    ("pydmq.cluster_process",),
    # the test harness: embedded brokers, broker and cluster processes, the pytest plugin
    ("pydmq.testing",),
    # the fault-injection harness behind pydmq chaos
    ("pydmq.chaos",),
    # the command line
    ("pydmq.cli", "pydmq.__main__"),
)

# "importer -> imported": why it is still there.
KNOWN_VIOLATIONS: dict[str, str] = {}

MAX_MODULE_LINES = 1_000
# Not hand-written, or one cohesive algorithm kept whole on purpose.
SIZE_EXEMPT = ("pydmq/protocol/messages/", "pydmq/raft/core.py")
# Hand-written modules over the limit, at their current size (a ceiling).
SIZE_CEILINGS: dict[str, int] = {}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imported_modules(name: str, source: str, is_package: bool, known: set[str]) -> set[str]:
    """The pydmq modules ``source`` (module ``name``) imports, wherever the statement is.

    ``from a import b`` imports ``a.b`` when that is a module, else ``a`` (``b`` is a name in
    it)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                found.add(submodule if submodule in known else target)
    return {m for m in found if m == "pydmq" or m.startswith("pydmq.")}


def layer_of(module: str) -> int:
    best: tuple[int, int] | None = None  # (unit length, layer)
    for index, units in enumerate(LAYERS):
        for unit in units:
            contains = module == unit or (unit != "pydmq" and module.startswith(unit + "."))
            if contains and (best is None or len(unit) > best[0]):
                best = (len(unit), index)
    if best is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS (and ARCHITECTURE.md)")
    return best[1]


@cache
def edges() -> frozenset[tuple[str, str]]:
    known = set(modules())
    found: set[tuple[str, str]] = set()
    for name, path in modules().items():
        source = path.read_text(encoding="utf-8")
        for target in imported_modules(name, source, path.name == "__init__.py", known):
            found.add((name, target))
    return frozenset(found)


def test_every_module_is_in_a_layer() -> None:
    for name in modules():
        layer_of(name)


def test_no_module_imports_a_layer_above_its_own() -> None:
    violations = {
        f"{importer} -> {imported}"
        for importer, imported in edges()
        if layer_of(imported) > layer_of(importer)
    }
    new = sorted(violations - KNOWN_VIOLATIONS.keys())
    gone = sorted(KNOWN_VIOLATIONS.keys() - violations)
    assert not new, f"imports against the layers (ARCHITECTURE.md, Layers): {new}"
    assert not gone, f"no longer violations: remove them from KNOWN_VIOLATIONS: {gone}"


def test_the_rules_of_issue_16_follow_from_the_layer_order() -> None:
    """The layer order must keep these: reordering LAYERS to allow one of them fails here."""
    below = [
        ("pydmq.controller", "pydmq.broker"),  # the controller never imports the broker
        ("pydmq.groups", "pydmq.broker"),
        ("pydmq.api", "pydmq.broker"),
        ("pydmq.api", "pydmq.controller"),
        ("pydmq.testing", "pydmq.cli"),
        ("pydmq.broker", "pydmq.node"),  # the broker role never imports its composition root
        ("pydmq.controller", "pydmq.node"),
    ]
    lower = ("pydmq.protocol", "pydmq.metadata", "pydmq.storage", "pydmq.raft")
    upper = (
        "pydmq.api",
        "pydmq.broker",
        "pydmq.controller",
        "pydmq.groups",
        "pydmq.replication",
        "pydmq.plugins",
        "pydmq.engines",
        "pydmq.cleaner",
        "pydmq.net",
        "pydmq.client",
        "pydmq.config",
        "pydmq.cluster_process",
        "pydmq.testing",
        "pydmq.chaos",
        "pydmq.cli",
    )
    below += [(low, high) for low in lower for high in upper]
    wrong = [(a, b) for a, b in below if not layer_of(a) < layer_of(b)]
    assert not wrong, f"the layer order lets the first import the second: {wrong}"


def test_imports_are_found_wherever_they_are() -> None:
    source = (
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "import pydmq.protocol.errors\n"
        "from . import sibling\n"
        "from ..net import connection\n"
        "from .. import failpoints\n"
        "if TYPE_CHECKING:\n"
        "    from pydmq.broker.server import Broker\n"
        "def f() -> None:\n"
        "    from pydmq.controller.runtime import ControllerRuntime\n"
    )
    known = {
        "pydmq.api.sibling",
        "pydmq.net.connection",
        "pydmq.failpoints",
        "pydmq.broker.server",
        "pydmq.controller.runtime",
        "pydmq.protocol.errors",
    }
    assert imported_modules("pydmq.api.dispatcher", source, False, known) == known
    assert imported_modules("pydmq.api", "from . import sibling\n", True, known) == {
        "pydmq.api.sibling"
    }


def hand_written_sizes() -> dict[str, int]:
    sizes: dict[str, int] = {}
    for path in modules().values():
        relative = path.relative_to(SRC).as_posix()
        if relative.startswith(SIZE_EXEMPT):
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        if lines and "Generated by" in lines[0]:
            continue
        sizes[relative] = len(lines)
    return sizes


def test_no_hand_written_module_grows_past_its_ceiling() -> None:
    sizes = hand_written_sizes()
    over = {
        path: lines
        for path, lines in sizes.items()
        if lines > SIZE_CEILINGS.get(path, MAX_MODULE_LINES)
    }
    assert not over, f"modules over {MAX_MODULE_LINES} lines (or their ceiling): {over}"
    under = sorted(path for path in SIZE_CEILINGS if sizes.get(path, 0) <= MAX_MODULE_LINES)
    assert not under, f"at most {MAX_MODULE_LINES} lines now: remove from SIZE_CEILINGS: {under}"


# What the broker's handlers must never import: they take their ports
# (``pydmq.broker.services.BrokerServices``), not the Broker that builds them.
HANDLERS = "pydmq.broker.handlers"
HANDLERS_NEVER_IMPORT = ("pydmq.broker.server", "pydmq.node")


def test_the_broker_handlers_take_ports_not_the_broker() -> None:
    found = sorted(
        f"{importer} -> {imported}"
        for importer, imported in edges()
        if (importer == HANDLERS or importer.startswith(HANDLERS + "."))
        and imported in HANDLERS_NEVER_IMPORT
    )
    assert not found, f"handlers importing the broker instead of their ports: {found}"


# The composition root is imported only by the entry points that start nodes.
NODE_IMPORTERS = frozenset({"pydmq.cli.serve", "pydmq.testing.embedded"})


def test_only_the_entry_points_import_the_node() -> None:
    found = sorted(
        f"{importer} -> pydmq.node"
        for importer, imported in edges()
        if imported == "pydmq.node" and importer not in NODE_IMPORTERS
    )
    assert not found, f"only {sorted(NODE_IMPORTERS)} may import the Node: {found}"
