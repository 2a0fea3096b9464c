"""A consumer-group member of a chaos run, as its own process (so it can be ``kill -9``ed).

    python -m pydmq.chaos.member BOOTSTRAP GROUP TOPICS CLIENT_ID OUT_FILE

It subscribes (eager range assignment) and, for every batch it consumes, first appends one line
per record to ``OUT_FILE`` (``topic partition offset value-hex``, unbuffered ``os.write``, so a
``kill -9`` keeps what was written) and only then commits the next offsets synchronously:
at-least-once, the checker verifies nothing below a committed offset was skipped. Offsets are
committed only for partitions still assigned, and never for a batch during which a rebalance
ran, so a member cannot commit over the partition's new owner. A commit that failed is retried
on the next round even when no new record arrives, so the group ends committed up to the end.
SIGTERM closes the consumer (leaving the group) and exits 0.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Sequence
from types import FrameType

from pydmq.chaos.security import workload_config

__all__ = ["main", "stop_requested"]


def stop_requested() -> Callable[[], bool]:
    """A member process's stop flag: SIGTERM sets it, the member's loop polls it and then
    closes its consumer."""
    requested = False

    def on_term(signum: int, frame: FrameType | None) -> None:
        nonlocal requested
        requested = True

    signal.signal(signal.SIGTERM, on_term)
    return lambda: requested


def main(argv: Sequence[str] | None = None) -> int:
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    bootstrap, group, topics, client_id, out_path = list(sys.argv[1:] if argv is None else argv)
    stopping = stop_requested()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": client_id,
            "log.connection.close": False,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "partition.assignment.strategy": "range",
            **workload_config(),
        }
    )
    fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    rebalances = 0
    assigned: set[tuple[str, int]] = set()
    # Per partition owned now: the offset after the last recorded record, and the offset
    # last committed. Both are forgotten on revocation: after a rebalance the position
    # restarts from the group's committed offset, which another member may have moved.
    done: dict[tuple[str, int], int] = {}
    committed: dict[tuple[str, int], int] = {}

    def on_assign(_c: object, partitions: list[TopicPartition]) -> None:
        nonlocal rebalances
        rebalances += 1
        assigned.update((p.topic, p.partition) for p in partitions)

    def on_revoke(_c: object, partitions: list[TopicPartition]) -> None:
        nonlocal rebalances
        rebalances += 1
        for p in partitions:
            tp = (p.topic, p.partition)
            assigned.discard(tp)
            done.pop(tp, None)
            committed.pop(tp, None)

    consumer.subscribe(
        topics.split(","), on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke
    )
    try:
        while not stopping():
            before = rebalances
            messages = consumer.consume(500, 0.2)
            lines: list[str] = []
            nexts: dict[tuple[str, int], int] = {}
            for m in messages:
                err = m.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        print(f"consume error: {err}", file=sys.stderr, flush=True)
                    continue
                topic, partition, offset = m.topic(), m.partition(), m.offset()
                if topic is None or partition is None or offset is None:
                    continue
                value = m.value()
                lines.append(f"{topic} {partition} {offset} {value.hex() if value else '-'}\n")
                nexts[(topic, partition)] = offset + 1
            if lines:
                os.write(fd, "".join(lines).encode())
            if rebalances != before:
                # The batch straddled a rebalance: its records are recorded (delivered) but
                # not counted as progress of the current ownership; they are redelivered.
                continue
            for tp, o in nexts.items():
                if tp in assigned:
                    done[tp] = max(done.get(tp, 0), o)
            # Commit whatever progress is not committed yet, also after a failed commit when
            # no new records arrive (otherwise the tail would never be committed).
            due = {tp: o for tp, o in done.items() if o > committed.get(tp, -1)}
            if not due:
                continue
            try:
                consumer.commit(
                    offsets=[TopicPartition(t, p, o) for (t, p), o in due.items()],
                    asynchronous=False,
                )
            except KafkaException as exc:  # a rebalance or a coordinator change: retried
                print(f"commit failed: {exc}", file=sys.stderr, flush=True)
                continue
            if rebalances == before:
                committed.update(due)
    finally:
        os.close(fd)
        consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
