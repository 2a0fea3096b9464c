"""A group member in its own process (for SIGKILL tests): consumes slowly, commits each record
after writing "v <value>" to the output file, so everything committed was also reported."""

from __future__ import annotations

import sys
import time

from confluent_kafka import Consumer, KafkaError

bootstrap, topic, group, out_path = sys.argv[1:5]
c = Consumer(
    {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 3000,
        "heartbeat.interval.ms": 300,
    }
)
c.subscribe([topic])
deadline = time.monotonic() + 120
with open(out_path, "a", buffering=1) as out:
    while time.monotonic() < deadline:
        msg = c.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() != KafkaError._PARTITION_EOF:
                print("error", msg.error(), file=sys.stderr)
            continue
        out.write(f"v {int(msg.value())}\n")
        out.flush()
        try:
            c.commit(message=msg, asynchronous=False)
        except Exception as exc:  # a rebalance in progress: the next record commits again
            print("commit failed", exc, file=sys.stderr)
        time.sleep(0.01)
