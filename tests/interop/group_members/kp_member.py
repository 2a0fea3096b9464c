"""kafka-python group member; see _member.py for options and output."""

from __future__ import annotations

import time

from _member import Events, Run, parse_args, props
from kafka import ConsumerRebalanceListener, KafkaConsumer
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.errors import KafkaError

ASSIGNORS = {
    "range": RangePartitionAssignor,
    "roundrobin": RoundRobinPartitionAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
}

args = parse_args()
extra: dict[str, object] = {k: int(v) if v.isdigit() else v for k, v in props(args).items()}
c = KafkaConsumer(
    bootstrap_servers=args.bootstrap,
    group_id=args.group,
    enable_auto_commit=False,
    auto_offset_reset="earliest",
    session_timeout_ms=args.session_ms,
    heartbeat_interval_ms=args.heartbeat_ms,
    group_instance_id=args.instance_id,
    max_poll_records=args.batch,
    partition_assignment_strategy=[ASSIGNORS[s.strip()] for s in args.strategy.split(",")],
    **extra,
)
out = Events(args.out)


def generation() -> int:
    return c.group_metadata().generation_id


class Listener(ConsumerRebalanceListener):
    def on_partitions_revoked(self, revoked):
        out.rebalance("r", generation(), [tp.partition for tp in revoked])

    def on_partitions_assigned(self, assigned):
        out.rebalance("a", generation(), [tp.partition for tp in assigned])

    def on_partitions_lost(self, lost):
        out.rebalance("l", generation(), [tp.partition for tp in lost])


c.subscribe([args.topic], listener=Listener())
run = Run(args)
while run.go_on():
    batch = c.poll(timeout_ms=200, max_records=args.batch)
    started = time.monotonic()
    recs = [(m.partition, m.offset, m.value) for msgs in batch.values() for m in msgs]
    if not recs:
        continue
    gen = generation()
    out.records(recs, gen)
    try:
        c.commit()
        out.commit(gen)
    except KafkaError as exc:
        out.commit(gen, exc)
    time.sleep(run.pause_for(len(recs), started))
c.close()
out.close()
