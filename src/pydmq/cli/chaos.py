"""``pydmq chaos``: the fault-injection harness (see :mod:`pydmq.chaos`)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

__all__ = ["add_parser"]


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text}")
    return value


def _terminate(signum: int, frame: FrameType | None) -> None:
    """SIGTERM ends a run the way Ctrl-C does: through its cleanup (node processes stopped,
    tmpfs filesystems unmounted), which a default SIGTERM would skip."""
    raise SystemExit(128 + signum)


def _run(args: argparse.Namespace) -> int:
    from pydmq.chaos import missing_dependency

    signal.signal(signal.SIGTERM, _terminate)

    missing = missing_dependency()
    if missing is not None:
        print(
            f"pydmq chaos needs {missing}: pip install 'pydmq[chaos]' "
            "(from a source checkout: pip install -e '.[chaos]')",
            file=sys.stderr,
        )
        return 2
    from pydmq.chaos.faults import FAULT_KINDS, PROCESS_FAULT_KINDS, STORAGE_FAULT_KINDS
    from pydmq.chaos.runner import ChaosConfig, run
    from pydmq.chaos.storage import storage_faults_unavailable

    groups = {"all": FAULT_KINDS, "process": PROCESS_FAULT_KINDS, "storage": STORAGE_FAULT_KINDS}
    kinds: list[str] = []
    for word in args.faults.split(",") if args.faults else ["all"]:
        kinds.extend(groups.get(word.strip(), (word.strip(),)))
    unknown = sorted(set(kinds) - set(FAULT_KINDS))
    if unknown:
        print(f"unknown fault kinds {unknown}; known: {', '.join(FAULT_KINDS)}", file=sys.stderr)
        return 2
    if args.workload == "transactions":
        from pydmq.chaos.txn_runner import CLIENT_FAULT_KINDS

        named = {w.strip() for w in args.faults.split(",")} if args.faults else set()
        if named & set(CLIENT_FAULT_KINDS):
            print(
                "the transactional workload takes no client faults "
                f"({', '.join(CLIENT_FAULT_KINDS)})",
                file=sys.stderr,
            )
            return 2
        kinds = [k for k in kinds if k not in CLIENT_FAULT_KINDS]  # from the groups
    missing = storage_faults_unavailable()
    if missing is not None and set(kinds) & set(STORAGE_FAULT_KINDS):
        if args.faults:
            print(f"storage faults need their own filesystems: {missing}", file=sys.stderr)
            return 2
        kinds = [k for k in kinds if k not in STORAGE_FAULT_KINDS]
        print(f"chaos: storage faults left out ({missing})", flush=True)
    if args.workload == "transactions":
        if args.sasl:
            print("--sasl is for the records workload", file=sys.stderr)
            return 2
        return _run_transactions(args, kinds)
    config = ChaosConfig(
        duration=args.duration,
        seed=args.seed,
        base_dir=Path(args.data_dir) if args.data_dir else None,
        keep=args.keep,
        producers=args.producers,
        share_members=args.share_members,
        rate=args.rate,
        acks=args.acks,
        kinds=kinds,
        node_disk_mb=args.node_disk_mb,
        sasl=args.sasl,
    )
    result = run(config, log=lambda line: print(line, flush=True))
    print(result.report.text())
    if result.share is not None:
        print(result.share.text())
    refused = result.summary.get("broker_sequence_errors") or {}
    if refused:
        listed = ", ".join(f"{code} {n}" for code, n in refused.items())
        print(f"brokers refused idempotent batches: {listed}")
    for note in result.summary.get("harness_errors", []):
        print(f"HARNESS ERROR: {note}")
    document: dict[str, Any] = {**result.report.to_json(), "run": result.summary}
    if result.share is not None:
        document["share"] = result.share.to_json()
    document["ok"] = result.ok
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(document, indent=2) + "\n")
    print(json.dumps(document, separators=(",", ":")), flush=True)
    return 0 if result.ok else 1


def _run_transactions(args: argparse.Namespace, kinds: list[str]) -> int:
    from pydmq.chaos.txn_runner import TxnChaosConfig, run_transactions

    config = TxnChaosConfig(
        duration=args.duration,
        seed=args.seed,
        kinds=kinds,
        inputs=args.round_inputs,
        round_timeout=args.round_timeout,
        base_dir=Path(args.data_dir) if args.data_dir else None,
        keep=args.keep,
        node_disk_mb=args.node_disk_mb,
    )
    result = run_transactions(config, log=lambda line: print(line, flush=True))
    document = result.to_json()
    print(
        f"{len(result.rounds)} rounds ({result.checked} checked), transactions "
        f"{result.transactions}, anomalies {result.anomalies}, faults {result.faults}"
    )
    for note in result.harness_errors:
        print(f"HARNESS ERROR: {note}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(document, indent=2) + "\n")
    print(json.dumps(document, separators=(",", ":")), flush=True)
    return 0 if result.ok else 1


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "chaos",
        help="run a 3-node cluster under injected faults and check every acknowledged write",
        description="Start a 3-node cluster on loopback behind a link-controlling proxy, run "
        "idempotent acks=all producers, readers and a consumer group, inject faults (kill -9, "
        "SIGSTOP, link cuts, delays; as root also full disks, EIO on write and fsync and "
        "damaged replica segments, each node on a tmpfs of its own) until --duration runs out, heal, read everything back and "
        "check it. The last line of output is one JSON object; exit status 0 means no anomaly.",
    )
    parser.add_argument(
        "--duration", type=_positive_float, default=60.0, help="seconds of faults (default 60)"
    )
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument(
        "--faults",
        default="",
        help="comma-separated fault kinds, or the groups all, process, storage (default: all; "
        "a kind named twice comes up twice per round, e.g. all,storage)",
    )
    parser.add_argument(
        "--node-disk-mb",
        type=int,
        default=512,
        help="size of each node's own tmpfs for the storage faults (default 512; needs root)",
    )
    parser.add_argument(
        "--workload",
        choices=("records", "transactions"),
        default="records",
        help="records: idempotent producers, readers and a group (default); transactions: "
        "consume-transform-produce transactions in rounds, checked for aborted reads, torn "
        "transactions, lost commits, duplicates across fenced epochs and reads past the LSO",
    )
    parser.add_argument(
        "--round-inputs",
        type=int,
        default=120,
        help="transactions workload: input records per round (default 120; 4 per "
        "transaction, every 5th aborted, every 7th fenced)",
    )
    parser.add_argument(
        "--round-timeout",
        type=_positive_float,
        default=90.0,
        help="transactions workload: seconds every wait of a round may take, a librdkafka call "
        "included (default 90; a call that outlives it by 15 s is given up for stuck)",
    )
    parser.add_argument("--producers", type=int, default=3, help="producers (default 3)")
    parser.add_argument(
        "--share-members",
        type=int,
        default=2,
        help="members of a share group (KIP-932) reading every topic, each record accepted "
        "once (default 2; 0: none)",
    )
    parser.add_argument(
        "--rate", type=_positive_float, default=150.0, help="records/s per producer (default 150)"
    )
    parser.add_argument(
        "--acks",
        choices=("all", "1"),
        default="all",
        help="producer acks (default all, idempotent); 1 shows the loss acks=1 allows",
    )
    parser.add_argument(
        "--sasl",
        action="store_true",
        help="records workload: every listener SASL_PLAINTEXT with ACLs on; the nodes and the "
        "harness log in as a super user, the workload as a user with only its ACLs",
    )
    parser.add_argument("--data-dir", help="keep node data and logs here (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir even on success")
    parser.add_argument("--json-out", help="also write the JSON report to this file")
    parser.set_defaults(run=_run)
