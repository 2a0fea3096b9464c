#!/usr/bin/env python3
"""Write COMPAT.md from the interop results of a real test run.

    ./scripts/test tests/interop            # records build/compat-results.jsonl
    .venv/bin/python scripts/compat_matrix.py [build/compat-results.jsonl] > COMPAT.md

Each cell is the outcome of the tests of that client and feature in that run: "yes" when all
passed, "FAIL" when any failed, "skipped" when all were skipped, blank when no test exists.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CLIENTS = {
    "test_confluent_kafka.py": "confluent-kafka",
    "test_kafka_python.py": "kafka-python",
    "test_aiokafka.py": "aiokafka",
    "test_kcat.py": "kcat",
    "test_java_clients.py": "java",
}
NOTES = [
    "Java producers run with their defaults, which enable idempotence: every Java produce row "
    "is an idempotent producer (acks=all in the 100,000-record test).",
    "kcat 1.7.1 (Debian's, with librdkafka 2.0.2) derives codec support from Produce's "
    "advertised minimum version; pydmq advertises Produce from v0 as Kafka 4 does (v0-v2 close "
    "the connection), so kcat compresses with all four codecs; test_differential.py checks the "
    "stored codec against Apache Kafka 4.4.",
    "Transactions: Kafka 4.x Java clients use transactions v2 (KIP-890), librdkafka and the "
    "Python clients the v1 flow. Cluster-mode rows "
    "run a 3-node cluster of real processes (RF=3, min.insync.replicas=2) with kill -9 and "
    "SIGSTOP faults; the Java and kafka-python row follows a leader change.",
    "franz-go's row runs all 38 pkg/kgo broker tests Apache Kafka 4.4 passes, the share-group "
    "and SASL ones included (compat/franz-go/FINDINGS.md).",
    "kafka-go's row runs 67 broker tests: all 65 Apache Kafka 4.4 passes (ACLs, SCRAM and "
    "quotas included, over its SASL listener), and two Kafka fails "
    "(compat/kafka-go/FINDINGS.md).",
]

# Multi-client scenarios: one row per test.
SCENARIOS = {
    "test_groups.py": "consumer groups (classic)",
    "test_group_mixed.py": "mixed-client group",
    "test_group_cooperative.py": "cooperative-sticky rebalancing",
    "test_kip848.py": "KIP-848 consumer protocol",
    "test_spark.py": "Spark (spark-sql-kafka-0-10)",
    "test_crash_recovery.py": "broker kill -9 recovery",
    "test_example_pipeline.py": "example pipeline",
    "test_librdkafka_suite.py": "librdkafka's own test suite (allow-list)",
    "test_cluster_faults.py": "3-node cluster: failover, min.insync.replicas, groups",
    "test_chaos.py": "3-node chaos pass (kill -9, SIGSTOP, link cuts; checker)",
    "test_differential.py": "differential vs Apache Kafka 4.4 (same scenarios, same answers)",
    "test_spark_cluster.py": "Spark against a 3-node cluster",
    "test_foreign_python_suite.py": "kafka-python's own test suite (allow-list)",
    "test_franz_go_suite.py": "franz-go (Go): its own pkg/kgo tests (allow-list)",
    "test_kafka_go_suite.py": "kafka-go (Go): its own tests (allow-list)",
    "test_kafka_connect.py": "Kafka Connect 4.4 distributed mode (source connector, restart)",
    "test_transactions.py": "transactions on one node (confluent-kafka, kafka-python, aiokafka, wire)",
    "test_cluster_transactions.py": "transactions: coordinator kill -9 on a 3-node cluster",
    "test_transactions_partition.py": "transactions: markers, LSO, read_committed (raw + confluent-kafka)",
    "test_txn_offsets.py": "transactions: offsets sent to a transaction (kafka-python, confluent-kafka)",
    "test_client_transactions.py": "transactions: client scenarios, differential vs Apache Kafka 4.4",
    "test_streams_eos.py": "Kafka Streams exactly_once_v2 across SIGKILL",
    "test_txn_chaos.py": "transactional workload with checker (aborted reads, torn transactions...)",
    "test_java_transactions.py": "transactions: Java producer and read_committed consumer",
    "test_spark_transactions.py": "transactions: Spark's Kafka source at read_committed",
    "test_txn_verification.py": "transactions: partition verification (KIP-890 part 1)",
    "test_java_tv2.py": "transactions v2 (KIP-890 part 2): Java producer vs Apache Kafka 4.4",
    "test_tls.py": "TLS and mTLS (kafka-python, confluent-kafka, aiokafka, kcat, Java)",
    "test_tls_cluster.py": "TLS: a 3-node cluster with every listener on mTLS",
    "test_sasl.py": "SASL PLAIN, SCRAM, OAUTHBEARER (confluent-kafka, kafka-python, aiokafka, kcat)",
    "test_sasl_java.py": "SASL: Java clients, KIP-368 re-authentication",
    "test_sasl_cluster.py": "SASL: a 3-node cluster authenticating between nodes",
    "test_sasl_differential.py": "SASL: answers vs Apache Kafka 4.4",
    "test_secured.py": "SASL_SSL with ACLs: the SASL user's ACLs decide, over TLS",
    "test_acls_clients.py": "ACLs: admin clients, denied produce/group, hidden topics",
    "test_acl_differential.py": "ACLs: 82 requests vs Apache Kafka 4.4",
    "test_cluster_acls.py": "ACLs: a 3-node cluster, restarts",
    "test_quotas.py": "client quotas: kafka-configs, throttled producer and consumer",
    "test_quotas_differential.py": "client quotas: answers and throttles vs Apache Kafka 4.4",
    "test_cluster_quotas.py": "client quotas: a 3-node cluster, restarts",
    "test_cluster_health.py": "HTTP health and metrics on a 3-node cluster",
    "test_share_groups.py": "share groups (KIP-932): confluent-kafka ShareConsumer, Java KafkaShareConsumer",
    "test_share_groups_cluster.py": "share groups on 3 nodes: state kept through leader and share-coordinator kills",
    "test_connection_quotas.py": "connection limits: a connection flood cannot starve storage",
    "test_connection_rates.py": "connection creation rates (KIP-612): per address, per listener",
    "test_hostile_peers_secured.py": "SASL cluster with ACLs: an authenticated forger refused",
}
# A test's variant against the reference Apache Kafka (the transaction proofs run each scenario
# on Kafka too): not a row of what pydmq does.
REFERENCE_RUN = re.compile(r"\[kafka[-\]]")
# Suites whose version is pinned in the repository rather than installed in the venv:
# (test file, client name, file holding the version).
PINNED_SUITES = [
    ("test_franz_go_suite.py", "franz-go", ROOT / "compat" / "franz-go" / "VERSION"),
    ("test_kafka_go_suite.py", "kafka-go", ROOT / "compat" / "kafka-go" / "VERSION"),
]
# (test name pattern, feature row); first match wins.
FEATURES: list[tuple[str, str]] = [
    (r"roundtrip_per_codec\[none\]", "produce + consume, uncompressed"),
    (r"roundtrip_per_codec\[gzip\]", "produce + consume, gzip"),
    (r"roundtrip_per_codec\[snappy\]", "produce + consume, snappy"),
    (r"roundtrip_per_codec\[lz4\]", "produce + consume, lz4"),
    (r"roundtrip_per_codec\[zstd\]", "produce + consume, zstd"),
    (r"roundtrip_100k", "100,000 records, 3 partitions, keys/headers/timestamps"),
    (r"idempotent", "idempotent producer"),
    (r"offsets?_for_times|offset_by_timestamp", "ListOffsets by timestamp"),
    (r"admin_list_offsets", "Admin listOffsets (earliest/latest/max-timestamp/time)"),
    (r"seek", "seek into the middle of a batch"),
    (r"group", "consumer group (subscribe, commit)"),
    (r"auto_creat", "topic auto-creation"),
]


def main() -> int:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "build/compat-results.jsonl")
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    versions = dict(lines[0].get("versions", {})) if lines else {}
    ran = {e["nodeid"].split("::")[0].rsplit("/", 1)[-1] for e in lines[1:]}
    for file, client, version_file in PINNED_SUITES:
        if file in ran and version_file.exists():
            versions[client] = version_file.read_text().strip()
    cells: dict[tuple[str, str], list[str]] = defaultdict(list)
    for entry in lines[1:]:
        nodeid: str = entry["nodeid"]
        file = nodeid.split("::")[0].rsplit("/", 1)[-1]
        client = CLIENTS.get(file)
        if client is None:
            continue
        name = nodeid.split("::")[-1]
        for pattern, feature in FEATURES:
            if re.search(pattern, name):
                cells[(feature, client)].append(entry["outcome"])
                break
    clients = list(CLIENTS.values())
    features = [f for _, f in FEATURES if any((f, c) in cells for c in clients)]
    out = [
        "# Compatibility matrix",
        "",
        "Generated by `scripts/compat_matrix.py` from the interop tests of one real run "
        f"({datetime.now(UTC):%Y-%m-%d}); every cell is the outcome of tests that ran against a "
        "pydmq broker process on loopback. Regenerate after changing the broker.",
        "",
        "| feature | " + " | ".join(clients) + " |",
        "|---|" + "---|" * len(clients),
    ]
    for feature in features:
        row = []
        for client in clients:
            outcomes = cells.get((feature, client), [])
            if not outcomes:
                row.append("")
            elif all(o == "passed" for o in outcomes):
                row.append("yes")
            elif any(o == "failed" for o in outcomes):
                row.append("FAIL")
            else:
                row.append("skipped")
        out.append(f"| {feature} | " + " | ".join(row) + " |")
    scenarios = [
        e
        for e in lines[1:]
        if e["nodeid"].split("::")[0].rsplit("/", 1)[-1] in SCENARIOS
        and not REFERENCE_RUN.search(e["nodeid"])
    ]
    if scenarios:
        out += ["", "## Scenario tests", "", "| scenario | test | outcome |", "|---|---|---|"]
        for entry in scenarios:
            file, _, name = entry["nodeid"].partition("::")
            label = SCENARIOS[file.rsplit("/", 1)[-1]]
            outcome = "yes" if entry["outcome"] == "passed" else entry["outcome"].upper()
            out.append(f"| {label} | `{name}` | {outcome} |")
    out += ["", "## Notes", ""]
    out += [f"- {note}" for note in NOTES]
    out += ["", "Client versions in that run:", ""]
    out += [f"- {client}: {version}" for client, version in sorted(versions.items())]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
