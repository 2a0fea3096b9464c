"""aiokafka group member; see _member.py for options and output."""

from __future__ import annotations

import asyncio
import time

from _member import Events, Run, parse_args, props
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.errors import KafkaError

ASSIGNORS = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}


async def main() -> None:
    args = parse_args()
    extra: dict[str, object] = {k: int(v) if v.isdigit() else v for k, v in props(args).items()}
    c = AIOKafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=args.session_ms,
        heartbeat_interval_ms=args.heartbeat_ms,
        group_instance_id=args.instance_id,
        partition_assignment_strategy=tuple(ASSIGNORS[s.strip()] for s in args.strategy.split(",")),
        **extra,
    )
    out = Events(args.out)

    def generation() -> int:
        coordinator = getattr(c, "_coordinator", None)  # no public accessor in aiokafka
        return int(getattr(coordinator, "generation", -1))

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked):
            out.rebalance("r", generation(), [tp.partition for tp in revoked])

        async def on_partitions_assigned(self, assigned):
            out.rebalance("a", generation(), [tp.partition for tp in assigned])

    await c.start()
    c.subscribe([args.topic], listener=Listener())
    run = Run(args)
    try:
        while run.go_on():
            batch = await c.getmany(timeout_ms=200, max_records=args.batch)
            started = time.monotonic()
            recs = [(m.partition, m.offset, m.value) for msgs in batch.values() for m in msgs]
            if not recs:
                continue
            gen = generation()
            out.records(recs, gen)
            try:
                await c.commit()
                out.commit(gen)
            except KafkaError as exc:
                out.commit(gen, exc)
            await asyncio.sleep(run.pause_for(len(recs), started))
    finally:
        await c.stop()
        out.close()


asyncio.run(main())
