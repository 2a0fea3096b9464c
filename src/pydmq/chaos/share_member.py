"""A share-group member of a chaos run (KIP-932), as its own process (so it can be ``kill -9``ed).

    python -m pydmq.chaos.share_member BOOTSTRAP GROUP TOPICS CLIENT_ID OUT_FILE

A confluent-kafka ``ShareConsumer`` with explicit acknowledgement. For every batch it polls it
first appends one line per record to ``OUT_FILE`` (``D time topic partition offset
delivery-count value-hex``), then accepts every record and commits the acknowledgements
synchronously, and appends one line per record with the outcome the broker gave (``A time
topic partition offset``: accepted; ``F time topic partition offset error``: the
acknowledgement failed or its outcome is unknown). Lines are written unbuffered with one
``os.write`` per batch, so a ``kill -9`` keeps what was written (a torn last line is skipped by
:func:`pydmq.chaos.share_checker.read_share_events`). SIGTERM closes the consumer (leaving the
group) and exits 0.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence

from pydmq.chaos.member import stop_requested
from pydmq.chaos.security import workload_config

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer

    bootstrap, group, topics, client_id, out_path = list(sys.argv[1:] if argv is None else argv)
    stopping = stop_requested()
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": client_id,
            "log.connection.close": False,
            "share.acknowledgement.mode": "explicit",
            **workload_config(),
        }
    )
    consumer.subscribe(topics.split(","))
    fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        while not stopping():
            try:
                polled = consumer.poll(0.5)
            except KafkaException as exc:
                print(f"poll failed: {exc}", file=sys.stderr, flush=True)
                continue
            records = []
            lines = []
            now = time.time()
            for m in polled:
                if m.error() is not None:
                    print(f"poll error: {m.error()}", file=sys.stderr, flush=True)
                    continue
                topic, partition, offset = m.topic(), m.partition(), m.offset()
                if topic is None or partition is None or offset is None:
                    continue
                value = m.value()
                records.append((m, topic, partition, offset))
                lines.append(
                    f"D {now:.6f} {topic} {partition} {offset} {m.delivery_count()} "
                    f"{value.hex() if value else '-'}\n"
                )
            if not records:
                continue
            os.write(fd, "".join(lines).encode())
            for m, *_ in records:
                consumer.acknowledge(m, AcknowledgeType.ACCEPT)
            try:
                results = consumer.commit_sync(15)
            except KafkaException as exc:
                results = None
                print(f"commit failed: {exc}", file=sys.stderr, flush=True)
            now = time.time()
            outcome = []
            for _, topic, partition, offset in records:
                error = _error_of(results, topic, partition)
                if error is None:
                    outcome.append(f"A {now:.6f} {topic} {partition} {offset}\n")
                else:
                    outcome.append(f"F {now:.6f} {topic} {partition} {offset} {error}\n")
            os.write(fd, "".join(outcome).encode())
    finally:
        os.close(fd)
        consumer.close()
    return 0


def _error_of(results: object, topic: str, partition: int) -> str | None:
    """The acknowledgement error of ``topic``/``partition`` in ``commit_sync``'s answer (None:
    accepted); "unknown" when the answer has none for it."""
    if not isinstance(results, dict):
        return "unknown"
    for tp, error in results.items():
        if getattr(tp, "topic", None) == topic and getattr(tp, "partition", None) == partition:
            if error is None:
                return None
            name = getattr(error, "name", None)
            return str(name() if callable(name) else error).replace(" ", "_")
    return "unknown"


if __name__ == "__main__":
    sys.exit(main())
