"""``pydmq cluster up|status``: run a local cluster of nodes, and show a cluster's health.

``up N`` starts N combined broker+controller nodes (``pydmq serve``) as child processes on
loopback, node ids 1..N, every node a voter; it prints the bootstrap string once every node
is ready (a cluster node opens its client port only then: registered, unfenced, caught up),
and waits. A node that exits or is not ready within ``--start-timeout`` is reported (the last
whole lines of its log) and every node is stopped. Each node's control-plane listener (the
controller's pushes) is opened by the node itself on an ephemeral port unless the plan gives
it one (:mod:`pydmq.testing.cluster` does). Ctrl-C or SIGTERM stops the nodes (SIGTERM each,
all at once, then SIGKILL what is left after ``--stop-timeout``).

``status`` asks a broker for Metadata (brokers, partitions; any reachable one of ``-b`` or
of the brokers it names) and the active controller for DescribeQuorum (voters, observers,
lag), and tries each broker's client listener itself: a broker that refuses connections or
does not answer is shown down even before the controller fenced it, and the partitions it
hosts as under-replicated (offline when it leads them). Controllers are reached on their
controller listener: give ``--controller``, or let the command read
``controller.quorum.voters`` from a broker with DescribeConfigs.

Planning the nodes, building their commands, starting and stopping them is
:mod:`pydmq.cluster_process`, which :mod:`pydmq.testing.cluster` uses too.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from pydmq.cli.common import add_bootstrap_argument, client_security, format_table, run_guarded
from pydmq.client import BrokerConnection, KafkaClient, KafkaError, error_name
from pydmq.client.connection import parse_address
from pydmq.cluster_process import (
    DEFAULT_LAUNCHER,
    NodeSpec,
    format_address,
    is_listening,
    log_tail,
    node_command,
    plan_nodes,
    spawn,
    stop_processes,
    voters_of,
)
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
)
from pydmq.protocol.messages.describe_quorum import (
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    PartitionData,
    ReplicaState,
    TopicData,
)
from pydmq.protocol.messages.metadata import MetadataResponse, MetadataResponseBroker

__all__ = [
    "add_parser",
    "describe_quorum",
    "discover_controllers",
    "probe_brokers",
    "render_status",
    "run_up",
]

METADATA_TOPIC = "__cluster_metadata"
_RESOURCE_BROKER = 4
_POLL_S = 0.2
_PROBE_TIMEOUT_S = 2.0  # a broker that does not answer ApiVersions within this is down


# -- pydmq cluster up --------------------------------------------------------------------------------


class _Stop(Exception):
    """Raised from the SIGTERM handler to leave the wait loop."""


def run_up(
    specs: Sequence[NodeSpec],
    commands: Mapping[int, Sequence[str]],
    *,
    start_timeout: float,
    stop_timeout: float,
    out: TextIO,
    stop_event: threading.Event | None = None,
    notes: Sequence[str] = (),
) -> int:
    """Start the nodes, wait until told to stop (SIGTERM/SIGINT or ``stop_event``), stop them.

    Returns 0 after a requested stop, 1 when a node died or was not ready within
    ``start_timeout`` (then every node is stopped), or when every node died later.
    """

    def say(text: str) -> None:
        print(text, file=out, flush=True)

    for spec in specs:
        busy = [p for p in (spec.port, spec.controller_port) if is_listening(spec.host, p)]
        if busy:
            say(
                f"node {spec.node_id}: port {busy[0]} on {spec.host} is in use; choose other "
                "ports with --base-port and --controller-base-port"
            )
            return 1
    processes: dict[int, subprocess.Popen[bytes]] = {}
    reported: set[int] = set()
    by_id = {s.node_id: s for s in specs}

    def report_exits() -> None:
        for node_id, proc in processes.items():
            code = proc.poll()
            if code is not None and node_id not in reported:
                reported.add(node_id)
                spec = by_id[node_id]
                say(f"node {node_id} (pid {proc.pid}) exited with code {code}; log {spec.log_path}")
                say("  " + log_tail(spec.log_path, 600).strip().replace("\n", "\n  "))

    previous: Any = None
    in_main = threading.current_thread() is threading.main_thread()

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise _Stop

    previous_int: Any = None
    if in_main:
        previous = signal.signal(signal.SIGTERM, on_term)
        # Installed rather than relied on: a shell starting this in the background leaves
        # SIGINT ignored, and then Python raises no KeyboardInterrupt, while the nodes (which
        # install their own handler) stop on the Ctrl-C of the process group.
        previous_int = signal.signal(signal.SIGINT, on_term)
    try:
        for spec in specs:
            spec.data_dir.mkdir(parents=True, exist_ok=True)
            processes[spec.node_id] = spawn(commands[spec.node_id], spec.log_path)
            say(
                f"node {spec.node_id}: pid {processes[spec.node_id].pid}, client {spec.bootstrap},"
                f" controller {spec.controller_address}, data {spec.data_dir}"
            )
        started = time.monotonic()
        deadline = started + start_timeout
        waiting = {s.node_id for s in specs}
        while waiting and not reported and time.monotonic() < deadline:
            if stop_event is not None and stop_event.is_set():
                return 0
            report_exits()
            # A cluster node's client port opens only once the node is ready.
            waiting = {i for i in waiting if not is_listening(by_id[i].host, by_id[i].port)}
            if waiting:
                time.sleep(_POLL_S)
        report_exits()
        if reported or waiting:
            after = "yet" if reported else f"after {start_timeout:g} s"
            for node_id in sorted(waiting - reported):
                spec = by_id[node_id]
                say(f"node {node_id} is not ready {after}; log {spec.log_path}")
                tail = log_tail(spec.log_path, 600).strip()
                if tail:
                    say("  " + tail.replace("\n", "\n  "))
            say("the cluster did not come up")
            return 1
        say(
            f"ready in {time.monotonic() - started:.1f} s (every node registered, unfenced and "
            "serving clients)"
        )
        say(f"bootstrap: {','.join(s.bootstrap for s in specs)}")
        say(f"controllers: {voters_of(specs)}")
        if all(s.http_port for s in specs):
            say(f"metrics: {' '.join(s.http_listener + '/metrics' for s in specs)}")
        for note in notes:
            say(note)
        say(f"status: pydmq cluster status -b {specs[0].bootstrap}")
        say("press Ctrl-C to stop")
        while not (stop_event is not None and stop_event.is_set()):
            report_exits()
            if len(reported) == len(processes):
                say("every node has exited")
                return 1
            time.sleep(_POLL_S)
        return 0
    except (_Stop, KeyboardInterrupt):
        return 0
    finally:
        # A second Ctrl-C or SIGTERM while stopping must not orphan the nodes.
        if in_main:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            if processes:
                say(f"stopping {len(processes)} node(s)")
                stopping = time.monotonic()
                for node_id in stop_processes(processes, stop_timeout):
                    say(f"node {node_id} did not stop within {stop_timeout:g} s: killed")
                say(f"stopped in {time.monotonic() - stopping:.2f} s")
        finally:
            if in_main:
                signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
                signal.signal(
                    signal.SIGINT, signal.SIG_DFL if previous_int is None else previous_int
                )


def _run_up(args: argparse.Namespace) -> int:
    def body() -> int:
        overrides = dict(_key_values(args.override))
        data_dir = Path(args.data_dir)
        specs = plan_nodes(
            args.nodes,
            data_dir,
            host=args.host,
            base_port=args.base_port,
            controller_base_port=args.controller_base_port,
            http_ports=[args.http_base_port + i for i in range(args.nodes)]
            if args.http_base_port
            else None,
        )
        voters = voters_of(specs)
        launcher = shlex.split(args.node_launcher) if args.node_launcher else DEFAULT_LAUNCHER
        extra: list[str] = []
        notes: list[str] = []
        if args.secure:
            from pydmq.cli.secure_cluster import secure_setup

            secure = secure_setup(data_dir, args.host)
            overrides = {**secure.overrides, **overrides}  # -o still has the last word
            extra = secure.serve_args
            notes = [
                "secure: clients on SASL_SSL (SCRAM-SHA-512 user admin), nodes on mTLS, ACLs on",
                f"client config (Kafka tools, Java, pydmq --command-config): "
                f"{secure.client_properties}",
                f"client config (kcat -F, confluent-kafka): {secure.librdkafka_properties}",
            ]
        commands = {
            s.node_id: [*node_command(s, voters, overrides, launcher), *extra] for s in specs
        }
        return run_up(
            specs,
            commands,
            start_timeout=args.start_timeout,
            stop_timeout=args.stop_timeout,
            out=sys.stdout,
            notes=notes,
        )

    return run_guarded("cluster up", body)


def _key_values(items: Sequence[str]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--override expects KEY=VALUE, got {item!r}")
        out.append((key.strip(), value.strip()))
    return out


# -- pydmq cluster status --------------------------------------------------------------------------


_WALL_CLOCK_MIN_MS = 10**12  # 2001-09-09: smaller values are not wall-clock milliseconds


def _ago(now_ms: int | None, timestamp: int) -> str:
    """Age of a DescribeQuorum timestamp (epoch ms, -1 = never); raw if it is no wall time."""
    if timestamp < 0:
        return "-"
    if now_ms is None or timestamp < _WALL_CLOCK_MIN_MS:
        return str(timestamp)
    return f"{max(0, now_ms - timestamp)} ms ago"


def _replica_rows(
    replicas: Sequence[ReplicaState], role: str, leader_id: int, leader_leo: int, now_ms: int | None
) -> list[list[object]]:
    rows: list[list[object]] = []
    for r in sorted(replicas, key=lambda r: r.replica_id):
        status = "Leader" if r.replica_id == leader_id else role
        lag: object = max(0, leader_leo - r.log_end_offset) if leader_leo >= 0 else "-"
        rows.append(
            [
                r.replica_id,
                status,
                r.log_end_offset,
                lag,
                _ago(now_ms, r.last_fetch_timestamp),
                _ago(now_ms, r.last_caught_up_timestamp),
            ]
        )
    return rows


def _render_quorum(
    quorum: DescribeQuorumResponse | None, note: str | None, now_ms: int | None
) -> list[str]:
    if quorum is None:
        return [f"Quorum: {note or 'unknown'}"]
    partition = next(
        (p for t in quorum.topics if t.topic_name == METADATA_TOPIC for p in t.partitions), None
    )
    if quorum.error_code or partition is None or partition.error_code:
        code = quorum.error_code or (
            partition.error_code if partition else ErrorCode.UNKNOWN_SERVER_ERROR
        )
        message = quorum.error_message or (partition.error_message if partition else None)
        return [f"Quorum: error {error_name(code)}" + (f": {message}" if message else "")]
    leader_leo = next(
        (v.log_end_offset for v in partition.current_voters if v.replica_id == partition.leader_id),
        -1,
    )
    lines = [
        f"Quorum ({METADATA_TOPIC}): leader {partition.leader_id}, epoch {partition.leader_epoch},"
        f" high watermark {partition.high_watermark}"
    ]
    rows = _replica_rows(
        partition.current_voters, "Follower", partition.leader_id, leader_leo, now_ms
    )
    rows += _replica_rows(partition.observers, "Observer", partition.leader_id, leader_leo, now_ms)
    header = ["NODE", "STATUS", "LOG END OFFSET", "LAG", "LAST FETCH", "LAST CAUGHT UP"]
    lines += ["  " + line for line in format_table(header, rows).splitlines()]
    endpoints = {
        n.node_id: ", ".join(
            f"{lst.name} {format_address(lst.host, lst.port)}" for lst in n.listeners
        )
        for n in quorum.nodes
    }
    if endpoints:
        lines.append("  endpoints: " + "; ".join(f"{k}: {v}" for k, v in sorted(endpoints.items())))
    return lines


def _ids(values: Sequence[int]) -> str:
    return ",".join(map(str, values)) or "-"


def render_status(
    metadata: MetadataResponse,
    quorum: DescribeQuorumResponse | None,
    *,
    quorum_note: str | None = None,
    now_ms: int | None = None,
    down: Mapping[int, str] | None = None,
) -> str:
    """The report ``pydmq cluster status`` prints (pure: responses in, text out).

    ``quorum_note`` explains a missing quorum answer; ``now_ms`` turns fetch timestamps into
    ages; ``down`` maps the brokers found down (listed in the metadata but not answering) to
    why. A replica on a down broker, or on a node the metadata does not list alive, counts
    as missing: its partition is under-replicated (offline when it is the leader) even while
    the ISR still names it.
    """
    down = dict(down or {})
    lines = [f"Cluster: {metadata.cluster_id or '-'}  controller: {metadata.controller_id}"]
    lines += _render_quorum(quorum, quorum_note, now_ms)
    brokers = sorted(metadata.brokers, key=lambda b: b.node_id)
    listed = {b.node_id for b in brokers}
    replicas = {r for t in metadata.topics for p in t.partitions for r in p.replica_nodes}
    unlisted = sorted(replicas - listed)
    rows: list[list[object]] = [
        [
            b.node_id,
            format_address(b.host, b.port),
            b.rack or "-",
            f"down ({down[b.node_id]})" if b.node_id in down else "up",
        ]
        for b in brokers
    ]
    rows += [[node, "-", "-", "not alive (fenced or not registered)"] for node in unlisted]
    missing = set(down) | set(unlisted)
    count = f"{len(rows)}"
    if missing:
        count += f": {len(rows) - len(missing)} up, {len(missing)} down"
    lines.append(f"Brokers ({count}):")
    table = format_table(["ID", "ADDRESS", "RACK", "STATUS"], rows)
    lines += ["  " + line for line in table.splitlines()]
    under: list[list[object]] = []
    offline: list[list[object]] = []
    partitions = 0
    for topic in sorted(metadata.topics, key=lambda t: t.name or ""):
        for p in sorted(topic.partitions, key=lambda p: p.partition_index):
            partitions += 1
            gone = sorted(set(p.offline_replicas) | {r for r in p.replica_nodes if r in missing})
            row: list[object] = [
                topic.name,
                p.partition_index,
                p.leader_id,
                _ids(p.replica_nodes),
                _ids(p.isr_nodes),
                _ids(gone),
            ]
            if p.leader_id < 0 or p.leader_id in missing:
                offline.append(row)
            elif len(p.isr_nodes) < len(p.replica_nodes) or gone:
                under.append(row)
    header = ["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "OFFLINE"]
    for title, table_rows in (
        ("Under-replicated partitions", under),
        ("Offline partitions", offline),
    ):
        if not table_rows:
            lines.append(f"{title}: none (of {partitions})")
            continue
        lines.append(f"{title} ({len(table_rows)} of {partitions}):")
        lines += ["  " + line for line in format_table(header, table_rows).splitlines()]
    return "\n".join(lines)


def probe_brokers(brokers: Sequence[MetadataResponseBroker], timeout: float) -> dict[int, str]:
    """Connect to each broker's listener (ApiVersions) at once; the ones that refuse, time
    out or break the connection, with the reason. Threads: one per broker, joined here."""
    down: dict[int, str] = {}

    def probe(broker: MetadataResponseBroker) -> None:
        connection = BrokerConnection(broker.host, broker.port, timeout=timeout)
        try:
            connection.connect()
        except KafkaError as exc:
            down[broker.node_id] = _why_down(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=probe, args=(b,), daemon=True) for b in brokers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout + 1.0)
    return down


def _why_down(exc: KafkaError) -> str:
    cause = exc.__cause__
    if isinstance(cause, ConnectionRefusedError):
        return "connection refused"
    if isinstance(cause, TimeoutError) or "timed out" in exc.message:
        return "no answer"
    return exc.message or exc.name


def describe_quorum(
    addresses: Sequence[str], timeout: float
) -> tuple[DescribeQuorumResponse | None, str | None]:
    """Ask each controller address in turn; the first clean answer wins (the leader's)."""
    request = DescribeQuorumRequest(
        topics=[TopicData(topic_name=METADATA_TOPIC, partitions=[PartitionData(partition_index=0)])]
    )
    problems: list[str] = []
    for address in addresses:
        try:
            with KafkaClient(address, timeout=timeout) as client:
                response = client.call(request, DescribeQuorumResponse)
        except KafkaError as exc:
            problems.append(f"{address}: {exc}")
            continue
        codes = [response.error_code] + [
            p.error_code for t in response.topics for p in t.partitions
        ]
        bad = next((c for c in codes if c), 0)
        if bad:
            problems.append(f"{address}: {error_name(bad)}")
            continue
        return response, None
    return None, "no controller answered DescribeQuorum (" + "; ".join(problems) + ")"


def discover_controllers(client: KafkaClient, metadata: MetadataResponse) -> list[str]:
    """Controller listener addresses from a broker's ``controller.quorum.voters`` config."""
    from pydmq.config.broker import parse_quorum_voters

    for broker in metadata.brokers:
        resource = DescribeConfigsResource(
            resource_type=_RESOURCE_BROKER,
            resource_name=str(broker.node_id),
            configuration_keys=["controller.quorum.voters"],
        )
        try:
            response = client.call(
                DescribeConfigsRequest(resources=[resource]),
                DescribeConfigsResponse,
                node_id=broker.node_id,
            )
        except KafkaError:
            continue
        for result in response.results:
            for config in result.configs if not result.error_code else []:
                if config.name == "controller.quorum.voters":
                    voters = parse_quorum_voters((config.value or "").split(","))
                    return [format_address(h, p) for _, (h, p) in sorted(voters.items())]
    return []


def _run_status(args: argparse.Namespace) -> int:
    def body() -> int:
        with KafkaClient(
            args.bootstrap_server,
            timeout=args.timeout,
            **client_security(args.command_config).kwargs(),
        ) as client:
            metadata = client.refresh_metadata(None)
            controllers = [a for item in args.controller for a in item.split(",") if a.strip()]
            for address in controllers:
                parse_address(address)  # raises ValueError early on a malformed address
            if not controllers:
                controllers = discover_controllers(client, metadata)
        down = probe_brokers(metadata.brokers, min(args.timeout, _PROBE_TIMEOUT_S))
        if controllers:
            quorum, note = describe_quorum(controllers, args.timeout)
        else:
            quorum, note = None, "single-node mode or unknown (pass --controller HOST:PORT)"
        now_ms = int(time.time() * 1000)
        print(render_status(metadata, quorum, quorum_note=note, now_ms=now_ms, down=down))
        return 0

    return run_guarded("cluster status", body)


# -- parser ----------------------------------------------------------------------------------------


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "cluster",
        help="run a local cluster (up) or show a cluster's health (status)",
        description="Local multi-node clusters and cluster health.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    up = actions.add_parser(
        "up",
        help="start N local broker+controller nodes until Ctrl-C",
        description="Start N combined broker+controller nodes on loopback as child processes; "
        "Ctrl-C or SIGTERM stops them all.",
    )
    up.add_argument("nodes", nargs="?", type=_positive, default=3, help="node count (default 3)")
    up.add_argument(
        "--data-dir",
        default="./pydmq-cluster",
        help="parent of the node-<id> data directories and logs (default ./pydmq-cluster)",
    )
    up.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    up.add_argument(
        "--base-port", type=int, default=9092, help="client port of node 1 (default 9092)"
    )
    up.add_argument(
        "--controller-base-port",
        type=int,
        default=19092,
        help="controller port of node 1 (default 19092)",
    )
    up.add_argument(
        "--http-base-port",
        type=int,
        default=8082,
        help="HTTP port (metrics, health) of node 1, the next nodes' follow (default 8082; "
        "0: each node picks a free port)",
    )
    up.add_argument(
        "--override",
        "-o",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a property for every node (repeatable)",
    )
    up.add_argument(
        "--start-timeout",
        type=float,
        default=30.0,
        help="seconds to wait for every node to be ready",
    )
    up.add_argument(
        "--stop-timeout",
        type=float,
        default=30.0,
        help="seconds to wait after SIGTERM before killing a node",
    )
    # The command that runs `serve` (tests substitute a fake node); default: python -m pydmq
    up.add_argument(
        "--secure",
        action="store_true",
        help="TLS everywhere, SASL (SCRAM) for clients, mTLS between nodes, ACLs on: a "
        "throwaway CA and credentials under DATA_DIR/secure, and the client configs to use",
    )
    up.add_argument("--node-launcher", help=argparse.SUPPRESS)
    up.set_defaults(run=_run_up)

    status = actions.add_parser(
        "status",
        help="quorum, brokers and under-replicated partitions",
        description="Show the controller quorum (DescribeQuorum), the brokers and the "
        "under-replicated and offline partitions (Metadata).",
    )
    add_bootstrap_argument(status)
    status.add_argument(
        "--controller",
        action="append",
        default=[],
        metavar="HOST:PORT",
        help="a controller listener (repeatable or comma-separated); default: read "
        "controller.quorum.voters from the broker",
    )
    status.set_defaults(run=_run_status)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value
