"""confluent-kafka (librdkafka) group member; see _member.py for options and output."""

from __future__ import annotations

import struct
import time

from _member import Events, Run, parse_args, props
from confluent_kafka import Consumer, KafkaError, KafkaException

args = parse_args()
conf: dict[str, object] = {
    "bootstrap.servers": args.bootstrap,
    "group.id": args.group,
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "session.timeout.ms": args.session_ms,
    "heartbeat.interval.ms": args.heartbeat_ms,
    "partition.assignment.strategy": args.strategy,
}
if args.instance_id:
    conf["group.instance.id"] = args.instance_id
conf.update(props(args))
c = Consumer(conf)
out = Events(args.out)


def generation() -> int:
    # librdkafka's serialized group metadata: b"CGMDv2:" + int32 generation (host order) + ...
    md = bytes(c.consumer_group_metadata())
    return struct.unpack("=i", md[7:11])[0] if md.startswith(b"CGMDv2:") else -1


# Under cooperative-sticky these get only the delta; the binding then does the
# incremental_assign/unassign itself because the callbacks do not.
c.subscribe(
    [args.topic],
    on_assign=lambda _c, ps: out.rebalance("a", generation(), [p.partition for p in ps]),
    on_revoke=lambda _c, ps: out.rebalance("r", generation(), [p.partition for p in ps]),
    on_lost=lambda _c, ps: out.rebalance("l", generation(), [p.partition for p in ps]),
)
run = Run(args)
while run.go_on():
    msgs = c.consume(num_messages=args.batch, timeout=0.2)
    started = time.monotonic()
    recs = []
    for m in msgs:
        if m.error():
            if m.error().code() != KafkaError._PARTITION_EOF:
                print("error", m.error(), flush=True)
            continue
        recs.append((m.partition(), m.offset(), m.value()))
    if not recs:
        continue
    gen = generation()
    out.records(recs, gen)
    try:
        c.commit(asynchronous=False)
        out.commit(gen)
    except KafkaException as exc:
        out.commit(gen, exc)
    time.sleep(run.pause_for(len(recs), started))
c.close()
out.close()
