"""Stage 2: the PySpark structured-streaming job.

Reads ``events`` with Spark's Kafka source, parses the JSON, and counts events per page in
tumbling event-time windows with a watermark (append mode: a window is written once, when
the watermark has passed its end, so late events within the delay are still counted). Each
micro-batch of closed windows goes to two sinks through ``foreachBatch``:

* the ``page-counts`` topic through Spark's Kafka sink: key = page, value = JSON
  ``{"page", "window_start", "window_end", "count"}``;
* Parquet files under ``parquet_dir/batch_id=<n>/`` (overwritten if a batch is replayed
  after a failure, so the Parquet output holds each window once).

The checkpoint keeps the Kafka offsets, the watermark and the open windows. The query runs
with ``Trigger.AvailableNow``: it processes what the topic holds when it starts (in batches
of at most ``max_offsets_per_trigger`` records) and then stops.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

EVENT_SCHEMA = "user STRING, page STRING, type STRING, event_time TIMESTAMP"


def build_counts(
    spark: Any,
    bootstrap: str,
    topic: str,
    starting: dict[int, int],
    *,
    window_s: int,
    watermark_s: int,
    max_offsets_per_trigger: int,
) -> Any:
    from pyspark.sql import functions as F

    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        # Only used when the checkpoint is new: where this run's events start.
        .option("startingOffsets", json.dumps({topic: {str(p): o for p, o in starting.items()}}))
        .option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
        .option("failOnDataLoss", "true")
        .load()
    )
    events = raw.select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e")).select(
        "e.*"
    )
    return (
        events.withWatermark("event_time", f"{watermark_s} seconds")
        .groupBy(F.window("event_time", f"{window_s} seconds"), "page")
        .count()
        .select(
            "page",
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "count",
        )
    )


def run_job(
    spark: Any,
    bootstrap: str,
    *,
    source_topic: str,
    sink_topic: str,
    starting: dict[int, int],
    parquet_dir: Path,
    checkpoint_dir: Path,
    window_s: int,
    watermark_s: int,
    max_offsets_per_trigger: int,
    timeout_s: float,
    log=print,
) -> dict[str, Any]:
    from pyspark.sql import functions as F

    counts = build_counts(
        spark,
        bootstrap,
        source_topic,
        starting,
        window_s=window_s,
        watermark_s=watermark_s,
        max_offsets_per_trigger=max_offsets_per_trigger,
    )
    batches: list[tuple[int, int]] = []

    def write_batch(df: Any, batch_id: int) -> None:
        df = df.persist()
        try:
            rows = df.count()
            batches.append((batch_id, rows))
            log(f"  [spark] batch {batch_id}: {rows} closed windows")
            if rows == 0:
                return
            value = F.to_json(F.struct("page", "window_start", "window_end", "count"))
            (
                df.select(F.col("page").alias("key"), value.alias("value"))
                .write.format("kafka")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("topic", sink_topic)
                .save()
            )
            df.coalesce(1).write.mode("overwrite").parquet(
                str(parquet_dir / f"batch_id={batch_id}")
            )
        finally:
            df.unpersist()

    started = time.monotonic()
    query = (
        counts.writeStream.queryName("page_counts")
        .outputMode("append")
        .foreachBatch(write_batch)
        .option("checkpointLocation", str(checkpoint_dir))
        .trigger(availableNow=True)
        .start()
    )
    try:
        if not query.awaitTermination(timeout_s):
            raise TimeoutError(f"the streaming query did not finish within {timeout_s} s")
    finally:
        query.stop()
    progress = query.recentProgress
    return {
        "seconds": round(time.monotonic() - started, 1),
        "batches": len(batches),
        "input_rows": sum(p["numInputRows"] for p in progress),
        "windows_written": sum(n for _, n in batches),
    }


def read_parquet_counts(spark: Any, parquet_dir: Path) -> list[tuple[int, str, int]]:
    """(window start in epoch ms, page, count) rows of the Parquet output."""
    from pyspark.sql import functions as F

    if not any(parquet_dir.glob("batch_id=*")):
        return []
    rows = (
        spark.read.parquet(str(parquet_dir))
        .select(F.unix_millis("window_start").alias("ms"), "page", "count")
        .collect()
    )
    return [(r["ms"], r["page"], r["count"]) for r in rows]
