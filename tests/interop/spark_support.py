"""Spark for the interop tests: the Kafka connector jars and one local SparkSession.

The connector (``spark-sql-kafka-0-10`` of the same version as the installed pyspark, with
kafka-clients, commons-pool2 and spark-token-provider-kafka) is resolved from Maven Central
by ``compat/spark/pom.xml`` into ``compat/spark/jars/`` (scripts/test does it; so does
:func:`connector_jars` when the folder is missing or stale), and handed to Spark as local
files through ``spark.jars`` -- no Ivy, no network access from Spark itself.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .support import (
    PARTITIONS,
    REPO_ROOT,
    Rec,
    headers,
    key,
    partition_of,
    timestamp,
    value,
)

SPARK_DIR = REPO_ROOT / "compat" / "spark"
JARS_DIR = SPARK_DIR / "jars"
STAMP = JARS_DIR / ".pom-sha256"


def pom_spark_version() -> str:
    text = (SPARK_DIR / "pom.xml").read_text()
    start = text.index("<spark.version>") + len("<spark.version>")
    return text[start : text.index("</spark.version>", start)].strip()


def _pom_hash() -> str:
    return hashlib.sha256((SPARK_DIR / "pom.xml").read_bytes()).hexdigest()


def connector_jars() -> list[str]:
    """The connector jars, resolving them with Maven first if needed (idempotent)."""
    want = _pom_hash()
    have = STAMP.read_text().strip() if STAMP.exists() else ""
    jars = sorted(JARS_DIR.glob("*.jar"))
    if have != want or not any(j.name.startswith("spark-sql-kafka") for j in jars):
        mvn = shutil.which("mvn")
        if mvn is None:
            raise RuntimeError("Maven (mvn) is needed to resolve compat/spark/pom.xml")
        shutil.rmtree(JARS_DIR, ignore_errors=True)
        subprocess.run(
            [
                mvn,
                "-B",
                "-q",
                "-Dstyle.color=never",
                "dependency:copy-dependencies",
                "-DoutputDirectory=jars",
                "-DincludeScope=runtime",
            ],
            cwd=SPARK_DIR,
            check=True,
            timeout=600,
        )
        STAMP.write_text(want + "\n")
        jars = sorted(JARS_DIR.glob("*.jar"))
    return [str(j) for j in jars]


def check_versions() -> None:
    """The pinned pyspark and the connector of compat/spark/pom.xml must match."""
    import pyspark

    pom = pom_spark_version()
    if pyspark.__version__ != pom:
        raise RuntimeError(
            f"pyspark {pyspark.__version__} is installed but compat/spark/pom.xml resolves "
            f"the connector {pom}: keep them equal"
        )


def spark_session(work_dir: Path) -> Any:
    """A small local SparkSession (2 cores, 1 GiB driver, no UI) with the connector."""
    check_versions()
    from pyspark.sql import SparkSession

    jars = connector_jars()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    warehouse = work_dir / "warehouse"
    local = work_dir / "local"
    local.mkdir(parents=True, exist_ok=True)
    java_opts = f"-Djava.io.tmpdir={local} -Dderby.system.home={work_dir / 'derby'}"
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("pydmq-interop")
        .config("spark.jars", ",".join(jars))
        .config("spark.driver.memory", "1g")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        # Adaptive execution only adds planning work for these tiny queries.
        .config("spark.sql.adaptive.enabled", "false")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def stop_spark(session: Any) -> None:
    """Stop the session and its JVM (pyspark otherwise keeps the JVM, with Spark's cached
    Kafka producers still reconnecting to a stopped broker, until the interpreter exits)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    session.stop()
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    gateway.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None
    if proc is not None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def kafka_jar_versions() -> dict[str, str]:
    """Client versions for the compatibility matrix (from the resolved jar names)."""
    out: dict[str, str] = {}
    for jar in sorted(JARS_DIR.glob("*.jar")):
        name = jar.stem
        for prefix in ("kafka-clients-", "spark-sql-kafka-0-10_2.13-"):
            if name.startswith(prefix):
                out[prefix.rstrip("-")] = name.removeprefix(prefix)
    return out


# -- confluent-kafka helpers: the independent side that writes and checks ----------------


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futs = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    futs[topic].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        t = admin.list_topics(topic=topic, timeout=10).topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions:
            return
        time.sleep(0.1)
    raise AssertionError(f"topic {topic} not visible in metadata")


def produce(bootstrap: str, topic: str, indices: range, base_ts: int) -> None:
    """Records ``indices`` of support.py's deterministic stream (partition = i % 3)."""
    from confluent_kafka import Producer

    errors: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in indices:
        p.produce(
            topic,
            value=value(i),
            key=key(i),
            partition=partition_of(i),
            timestamp=timestamp(base_ts, i),
            headers=headers(i),
            on_delivery=on_delivery,
        )
    assert p.flush(60) == 0, "records not delivered"
    assert not errors, errors[:5]


def consume_all(bootstrap: str, topic: str, count: int, timeout: float = 60.0) -> list[Rec]:
    """Every record of ``topic`` (``count`` expected) read with confluent-kafka, no group."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"spark-check-{topic}",
            "enable.auto.commit": False,
        }
    )
    try:
        md = c.list_topics(topic, timeout=10).topics[topic]
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in md.partitions])
        out: list[Rec] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append(
                Rec(
                    msg.partition(),
                    msg.offset(),
                    msg.timestamp()[1],
                    msg.key(),
                    msg.value(),
                    list(msg.headers() or []),
                )
            )
        # Nothing more than expected should arrive.
        extra = c.poll(1.0)
        assert extra is None or extra.error() is not None, f"unexpected record {extra}"
        return out
    finally:
        c.close()


def delete_records(bootstrap: str, topic: str, before: dict[int, int]) -> dict[int, int]:
    """DeleteRecords up to ``before[partition]``; returns the new low watermarks."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futs = admin.delete_records([TopicPartition(topic, p, o) for p, o in before.items()])
    return {tp.partition: fut.result(30).low_watermark for tp, fut in futs.items()}


# -- Spark rows -> records -------------------------------------------------------------

# Kafka source columns, with the timestamp as epoch milliseconds (exact) for the checks.
REC_COLUMNS = (
    "partition",
    "offset",
    "unix_millis(timestamp) AS ts",
    "key",
    "value",
    "headers",
    "topic",
)


def kafka_df(spark: Any, bootstrap: str, *, stream: bool = False, **options: str) -> Any:
    """A Kafka source with headers, batch or (``stream``) streaming; the subscription is
    among ``options``."""
    r = (
        (spark.readStream if stream else spark.read)
        .format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("includeHeaders", "true")
    )
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def row_to_rec(row: Any) -> Rec:
    hdrs = [
        (h["key"], None if h["value"] is None else bytes(h["value"])) for h in row["headers"] or []
    ]
    return Rec(
        row["partition"],
        row["offset"],
        row["ts"],
        None if row["key"] is None else bytes(row["key"]),
        None if row["value"] is None else bytes(row["value"]),
        hdrs,
    )


def kafka_df_recs(df: Any) -> list[Rec]:
    """Collect a Kafka source DataFrame (includeHeaders=true) as sorted records."""
    rows = df.selectExpr(*REC_COLUMNS).collect()
    return sorted((row_to_rec(r) for r in rows), key=lambda r: (r.partition, r.offset))
