"""Stage 3: read the windowed counts back from ``page-counts`` and print them.

A plain confluent-kafka consumer, assigned to every partition from the offsets the topic
had before the job ran up to its end offsets now (no consumer group needed).
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from datetime import UTC, datetime

from confluent_kafka import Consumer, TopicPartition


def consume_counts(
    bootstrap: str, topic: str, start: dict[int, int], end: dict[int, int], timeout_s: float = 60
) -> list[tuple[int, str, int]]:
    """(window start in epoch ms, page, count) for every record in [start, end)."""
    want = {p: end[p] for p in end if end[p] > start.get(p, 0)}
    out: list[tuple[int, str, int]] = []
    if not want:
        return out
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "pydmq-pipeline-results",
            "enable.auto.commit": False,
        }
    )
    try:
        c.assign([TopicPartition(topic, p, start.get(p, 0)) for p in want])
        done: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while len(done) < len(want):
            if time.monotonic() > deadline:
                raise TimeoutError(f"page-counts not read to its end within {timeout_s} s")
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise RuntimeError(f"consumer error: {msg.error()}")
            p = msg.partition()
            if p not in want or msg.offset() >= want[p]:
                continue
            row = json.loads(msg.value())
            if msg.key().decode() != row["page"]:
                raise AssertionError(f"key {msg.key()!r} is not the page of {row}")
            out.append((_ms(row["window_start"]), row["page"], int(row["count"])))
            if msg.offset() + 1 >= want[p]:
                done.add(p)
    finally:
        c.close()
    return out


def _ms(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def print_table(rows: list[tuple[int, str, int]], pages: tuple[str, ...], out=print) -> None:
    """One line per window: the count of each page and the window's total."""
    grid: dict[int, dict[str, int]] = defaultdict(dict)
    for ms, page, count in rows:
        grid[ms][page] = grid[ms].get(page, 0) + count
    width = max(7, *(len(p) for p in pages))
    out("window start (UTC)  " + " ".join(f"{p:>{width}}" for p in pages) + "    total")
    for ms in sorted(grid):
        cells = " ".join(f"{grid[ms].get(p, 0):>{width}}" for p in pages)
        start = datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
        out(f"{start}  {cells} {sum(grid[ms].values()):>8}")
    totals = " ".join(f"{sum(c for _, pg, c in rows if pg == p):>{width}}" for p in pages)
    out(f"{'all windows':<19} {totals} {sum(c for _, _, c in rows):>8}")
