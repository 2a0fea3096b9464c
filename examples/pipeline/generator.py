"""Stage 1: synthetic page-view / click events into the ``events`` topic.

Each event is a JSON object ``{"user", "page", "type", "event_time"}``, keyed by user. Event
times advance at ``rate`` events per simulated second from a fixed start, and about a third
of the events arrive late: their event time lies up to ``max_skew_s`` seconds before that of
the events produced around them (mobile clients buffering, retries, ...). The stream is
deterministic for a given seed, so the expected windowed counts are known in advance.

A bounded run ends with one ``end_of_stream`` marker whose event time lies past the
watermark delay: event time only advances with data, and the marker lets the streaming job
close (emit) the last windows. In a live stream the next real events do the same.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime

from confluent_kafka import Producer

PAGES = (
    "/",
    "/search",
    "/cart",
    "/checkout",
    "/product/42",
    "/product/7",
    "/help",
    "/account",
)
START_MS = int(datetime(2025, 1, 1, tzinfo=UTC).timestamp() * 1000)
END_OF_STREAM = "end_of_stream"


@dataclass
class Generated:
    events: int = 0
    late: int = 0
    # (window start in epoch ms, page) -> count: what the streaming job must find.
    expected: Counter[tuple[int, str]] = field(default_factory=Counter)
    first_ms: int = 0
    last_ms: int = 0


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def generate(
    bootstrap: str,
    topic: str,
    n: int,
    *,
    window_s: int,
    watermark_s: int,
    rate: float = 50.0,
    max_skew_s: float = 5.0,
    users: int = 500,
    seed: int = 7,
) -> Generated:
    if max_skew_s >= watermark_s:
        raise ValueError("the skew must stay below the watermark delay, or events are dropped")
    rnd = random.Random(seed)
    out = Generated(first_ms=START_MS)
    errors: list[str] = []

    def on_delivery(err, _msg) -> None:
        if err is not None:
            errors.append(str(err))

    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "compression.type": "lz4"}
    )
    window_ms = window_s * 1000
    for i in range(n):
        ms = START_MS + int(i * 1000 / rate)
        if rnd.random() < 0.33:
            ms -= rnd.randint(1, int(max_skew_s * 1000))
            out.late += 1
        user = f"user-{rnd.randrange(users):04d}"
        page = rnd.choice(PAGES)
        kind = "click" if rnd.random() < 0.3 else "page_view"
        event = {"user": user, "page": page, "type": kind, "event_time": iso(ms)}
        _produce(producer, topic, user, event, ms, on_delivery)
        out.expected[(ms - ms % window_ms, page)] += 1
        out.last_ms = max(out.last_ms, ms)
    out.events = n
    # Past the watermark delay and one more window: every real window closes.
    marker_ms = out.last_ms + (watermark_s + 2 * window_s) * 1000
    marker = {"user": "", "page": "", "type": END_OF_STREAM, "event_time": iso(marker_ms)}
    _produce(producer, topic, END_OF_STREAM, marker, marker_ms, on_delivery)
    if producer.flush(60) != 0:
        raise RuntimeError("events not delivered within 60 s")
    if errors:
        raise RuntimeError(f"{len(errors)} events failed: {errors[:3]}")
    return out


def _produce(producer: Producer, topic: str, key: str, event: dict, ms: int, cb) -> None:
    while True:
        try:
            producer.produce(
                topic,
                key=key.encode(),
                value=json.dumps(event).encode(),
                timestamp=ms,
                on_delivery=cb,
            )
            return
        except BufferError:
            producer.poll(0.1)  # local queue full: let deliveries drain
