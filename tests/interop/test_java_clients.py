"""Apache Kafka Java clients (kafka-clients 4.x from Maven Central) against pydmq.

Driven through compat/java/src/InteropClient.java, built by ./scripts/test. The producer
runs with the client's default configuration, i.e. idempotence ON (KIP-679), so records
must land in producer order.
"""

from __future__ import annotations

import base64
import json

import pytest

from .support import (
    BIG_COUNT,
    CODEC_COUNT,
    CODECS,
    PARTITIONS,
    Rec,
    check_partition_log,
    check_topic,
    count_in_partition,
    index_at,
    java_ready,
    new_base_ts,
    run_java,
    timestamp,
    timestamp_queries,
    unique_topic,
)

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module", autouse=True)
def _java_built() -> None:
    reason = java_ready()
    if reason:
        # Not a skip: a missing toolchain must not turn into a silently green run.
        pytest.fail(f"Java interop client unavailable: {reason}")


def _b(s: str | None) -> bytes | None:
    return None if s is None else base64.b64decode(s)


def parse_records(stdout: str) -> list[Rec]:
    out = []
    for line in stdout.splitlines():
        if not line.startswith("{"):
            continue
        d = json.loads(line)
        assert d["tt"] == "CreateTime", d
        out.append(
            Rec(
                partition=d["p"],
                offset=d["o"],
                timestamp=d["ts"],
                key=_b(d["k"]),
                value=_b(d["v"]),
                headers=[(h, _b(v)) for h, v in d["h"]],
            )
        )
    return out


def create_topic(bootstrap: str, topic: str) -> None:
    run_java(
        [
            "create-topic",
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--partitions",
            str(PARTITIONS),
        ],
        timeout=90,
    )


def produce(bootstrap: str, topic: str, count: int, base_ts: int, codec: str, *extra: str):
    proc = run_java(
        [
            "produce",
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--count",
            str(count),
            "--partitions",
            str(PARTITIONS),
            "--compression",
            codec,
            "--base-ts",
            str(base_ts),
            *extra,
        ],
        timeout=180,
    )
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["acked"] == count
    for p in range(PARTITIONS):
        assert summary["partitions"][str(p)] == [0, count_in_partition(p, count) - 1]


def consume(bootstrap: str, topic: str, count: int, *extra: str) -> list[Rec]:
    proc = run_java(
        ["consume", "--bootstrap", bootstrap, "--topic", topic, "--count", str(count), *extra],
        timeout=180,
    )
    recs = parse_records(proc.stdout)
    assert len(recs) == count
    return recs


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip_per_codec(broker, codec: str) -> None:
    topic = unique_topic(f"java-{codec}")
    create_topic(broker.bootstrap, topic)
    base_ts = new_base_ts()
    produce(broker.bootstrap, topic, CODEC_COUNT, base_ts, codec)
    check_topic(consume(broker.bootstrap, topic, CODEC_COUNT), CODEC_COUNT, base_ts)


def test_roundtrip_100k_acks_all(broker) -> None:
    topic = unique_topic("java-big")
    create_topic(broker.bootstrap, topic)
    base_ts = new_base_ts()
    produce(broker.bootstrap, topic, BIG_COUNT, base_ts, "zstd", "--acks", "all")
    check_topic(consume(broker.bootstrap, topic, BIG_COUNT), BIG_COUNT, base_ts)


@pytest.fixture(scope="module")
def filled(broker):
    """A topic auto-created by the producer's Metadata request (num.partitions=3 on the
    broker), filled with multi-record batches."""
    topic = unique_topic("java-filled")
    base_ts = new_base_ts()
    produce(broker.bootstrap, topic, CODEC_COUNT, base_ts, "lz4", "--linger-ms", "20")
    return topic, base_ts, CODEC_COUNT


def test_offsets_for_times(broker, filled) -> None:
    topic, base_ts, count = filled
    qs = timestamp_queries(count, base_ts)
    proc = run_java(
        [
            "offsets-for-times",
            "--bootstrap",
            broker.bootstrap,
            "--topic",
            topic,
            "--query",
            ",".join(f"{p}:{ts}" for p, ts, _ in qs),
        ],
        timeout=120,
    )
    answers = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(answers) == len(qs)
    for (p, target, expected), a in zip(qs, answers, strict=True):
        assert (a["p"], a["ts"]) == (p, target)
        assert a["offset"] == expected, f"partition {p} target {target}: {a} != {expected}"
        if expected is not None:
            assert a["rts"] == timestamp(base_ts, index_at(p, expected))


def test_admin_list_offsets(broker, filled) -> None:
    topic, base_ts, count = filled

    def lo(spec: str) -> dict[int, tuple[int, int]]:
        proc = run_java(
            ["list-offsets", "--bootstrap", broker.bootstrap, "--topic", topic, "--spec", spec],
            timeout=120,
        )
        rows = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
        return {r["p"]: (r["offset"], r["rts"]) for r in rows}

    assert {p: o for p, (o, _) in lo("earliest").items()} == {p: 0 for p in range(PARTITIONS)}
    assert {p: o for p, (o, _) in lo("latest").items()} == {
        p: count_in_partition(p, count) for p in range(PARTITIONS)
    }
    # KIP-734: offset and timestamp of the record with the largest timestamp.
    mx = lo("max-timestamp")
    for p in range(PARTITIONS):
        last = count_in_partition(p, count) - 1
        assert mx[p] == (last, timestamp(base_ts, index_at(p, last))), (p, mx[p])
    # By timestamp, between two records in the middle of partition 1.
    mid = count_in_partition(1, count) // 2
    by_ts = lo(str(timestamp(base_ts, index_at(1, mid)) - 1))
    assert by_ts[1][0] == mid


def test_seek_into_batch(broker, filled) -> None:
    topic, base_ts, count = filled
    for p in range(PARTITIONS):
        n = count_in_partition(p, count)
        pos = n // 2 + 1  # inside a multi-record batch; read from there to the end
        recs = consume(
            broker.bootstrap, topic, n - pos, "--partition", str(p), "--offset", str(pos)
        )
        assert recs[0].offset == pos
        check_partition_log(recs, p, count, base_ts, first_position=pos)


def test_group_subscribe_and_commit(broker, filled) -> None:
    topic, base_ts, count = filled
    group = unique_topic("java-group")
    check_topic(consume(broker.bootstrap, topic, count, "--group", group), count, base_ts)


def test_admin_log_dirs(broker, filled) -> None:
    """Admin describeLogDirs / alterReplicaLogDirs (keys 35 and 34; the connection was closed
    on 3209cc2): one dir per node with each replica's size; a move elsewhere fails with
    LogDirNotFoundException, as on Kafka 4.4."""
    topic, _, _ = filled
    proc = run_java(
        ["log-dirs", "--bootstrap", broker.bootstrap, "--topic", topic, "--move-to", "/nowhere"],
        timeout=120,
    )
    rows = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    described = {r["p"]: r for r in rows if "dir" in r}
    assert sorted(described) == list(range(PARTITIONS))
    assert all(r["size"] > 0 and r["lag"] == 0 and r["usable"] > 0 for r in described.values())
    assert len({r["dir"] for r in described.values()}) == 1
    moved = {r["p"]: r["moved"] for r in rows if "moved" in r}
    assert moved == {p: "LogDirNotFoundException" for p in range(PARTITIONS)}
