"""A seeded, deterministic simulation of one 3-replica partition on real Partition/UnifiedLog.

Everything runs in one thread on a simulated clock: a controller that elects leaders through the
replication strategy and commits AlterPartition proposals, brokers that follow with
OffsetForLeaderEpoch truncation and Fetch, producers writing acks=all and acks=1 batches, and a
network that delays, reorders, drops and partitions messages. Brokers crash and restart; a crash
may lose the unflushed tail of the log (the controller then removes the broker from the ISR,
which is what a broker restarting after an unclean shutdown gets in KRaft, KIP-966), when the
strategy lets the ISR shrink without it.

:func:`run_seed` raises :class:`InvariantViolation` (naming the seed) when a safety property
breaks: two leaders in one leader epoch, an acknowledged acks=all write lost or changed, a high
watermark moving back within one incarnation, replicas differing below their high watermarks.
"""

from __future__ import annotations

import heapq
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pydmq.engines.memory import MemoryLog
from pydmq.producers.state import ProducerStateManager
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.records import SimpleRecord, build_batch
from pydmq.replication.partition import NotEnoughReplicasError, Partition
from pydmq.replication.strategy import ReplicationStrategy
from pydmq.storage.api import LogConfig, TopicPartition
from pydmq.storage.log import AppendPolicy, LogAppendError, UnifiedLog

__all__ = ["InvariantViolation", "SimStats", "run_seed"]

TP = TopicPartition("sim", 0)
TOPIC_ID = uuid.UUID(int=7)
REPLICAS = (0, 1, 2)
CONTROLLER = -100
POLICY = AppendPolicy(
    max_message_bytes=1 << 20,
    log_append_time=False,
    timestamp_before_max_ms=2**62,
    timestamp_after_max_ms=2**62,
    flush_messages=2**63 - 1,
)
LAG_MS = 250
SESSION_TIMEOUT_MS = 200
REQUEST_TIMEOUT_MS = 120
RESEND_STATE_MS = 80


class InvariantViolation(AssertionError):
    """A safety property of replication does not hold."""


class FlakyMemoryLog(MemoryLog):
    """A memory log that remembers its last flush, so that a crash can lose the unflushed tail.

    Checkpoints (epochs, producer state, high watermark) are kept: the real engine writes them
    atomically with fsync.
    """

    def __init__(self) -> None:
        super().__init__(LogConfig())
        self.flushed_offset = 0

    def flush(self) -> None:
        self.flushed_offset = self.log_end_offset

    def truncate_to(self, offset: int) -> None:
        super().truncate_to(offset)
        self.flushed_offset = min(self.flushed_offset, self.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        super().truncate_fully_and_start_at(offset)
        self.flushed_offset = offset

    def lose_unflushed_tail(self) -> None:
        super().truncate_to(self.flushed_offset)

    def batches_from(self, offset: int) -> Iterator[tuple[int, int, bytes]]:
        """(base offset, next offset, bytes) of the batches from the one holding ``offset``."""
        for i in range(self._index_of(offset), len(self._bases)):
            yield self._bases[i], self._headers[i].next_offset, self._data[i]

    def batch_at(self, offset: int) -> tuple[int, int, bytes] | None:
        return next(self.batches_from(offset), None)


@dataclass(order=True)
class Message:
    deliver_at: int
    seq: int
    src: int = field(compare=False)
    dst: int = field(compare=False)
    kind: str = field(compare=False)
    body: dict[str, Any] = field(compare=False)
    incarnation: int = field(compare=False, default=0)  # of the receiving broker


@dataclass
class PendingProduce:
    leader_epoch: int
    required_offset: int
    first_offset: int
    deadline_ms: int


@dataclass
class Broker:
    broker_id: int
    log: FlakyMemoryLog
    strategy: ReplicationStrategy
    up: bool = True
    incarnation: int = 0
    partition: Partition | None = None
    fetch_state: str = "idle"  # idle | truncating | fetching
    inflight: int = 0  # request id awaited (0: none)
    inflight_sent_ms: int = 0
    backoff_until_ms: int = 0
    alter_inflight: int = 0
    alter_sent_ms: int = 0
    pending: list[PendingProduce] = field(default_factory=list)
    last_hw: int = 0
    checked: int = 0  # offset up to which the log was compared with the committed log
    down_since_ms: int = 0

    def start(self) -> None:
        unified = UnifiedLog(self.log)
        self.partition = Partition(
            tp=TP,
            topic_id=TOPIC_ID,
            log=unified,
            leader_id=-1,
            leader_epoch=-1,
            replicas=list(REPLICAS),
            isr=[],
            policy=POLICY,
            min_insync_replicas=2,
            strategy=self.strategy,
            replica_lag_time_max_ms=LAG_MS,
            partition_epoch=-1,
            local_broker_id=self.broker_id,
        )
        self.fetch_state = "idle"
        self.inflight = 0
        self.alter_inflight = 0
        self.pending = []
        self.last_hw = unified.high_watermark
        self.checked = min(self.checked, unified.log_end_offset)


@dataclass
class SimStats:
    steps: int = 0
    elections: int = 0
    acked: int = 0
    produced: int = 0
    truncations: int = 0
    crashes: int = 0
    tail_losses: int = 0
    isr_changes: int = 0


class Simulation:
    """One seeded run. Every random choice comes from ``self.rng``."""

    def __init__(self, seed: int, strategy: ReplicationStrategy) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.strategy = strategy
        self.now = 0
        self.seq = 0
        self.queue: list[Message] = []
        self.cut: set[frozenset[int]] = set()
        self.stats = SimStats()
        self.brokers = {b: Broker(b, FlakyMemoryLog(), strategy) for b in REPLICAS}
        # controller state
        self.isr = list(REPLICAS)
        self.leader = REPLICAS[0]
        self.leader_epoch = 0
        self.partition_epoch = 0
        self.live = set(REPLICAS)
        self.registered_epoch = {b: 0 for b in REPLICAS}  # broker epoch of the registration
        self.last_heartbeat = {b: 0 for b in REPLICAS}
        self.last_broadcast = 0
        # invariant state
        self.epoch_leaders: dict[int, int] = {}
        self.committed: list[tuple[int, int, bytes]] = []  # the oracle: (base, next, bytes)
        self.committed_index: dict[int, int] = {}
        self.committed_end = 0
        self.acked: list[tuple[int, bytes]] = []
        self.producer_epoch = 0
        self.producer_seq = 0
        for broker in self.brokers.values():
            broker.start()
        self.broadcast()

    # -- helpers -------------------------------------------------------------------------
    def fail(self, message: str) -> None:
        raise InvariantViolation(
            f"seed {self.seed} ({self.strategy.name}) at t={self.now}ms step "
            f"{self.stats.steps}: {message}"
        )

    def send(self, src: int, dst: int, kind: str, **body: Any) -> None:
        """Queue a message with a random delay (so messages reorder), or lose it.

        A message travels on a connection to one incarnation of the receiver: one that arrives
        after the receiver restarted is dropped, as its TCP connection was.
        """
        if frozenset((src, dst)) in self.cut or self.rng.random() < 0.03:
            return
        incarnation = 0
        if dst != CONTROLLER:
            receiver = self.brokers[dst]
            if not receiver.up:
                return
            incarnation = receiver.incarnation
        self.seq += 1
        delay = self.rng.randint(1, 25)
        heapq.heappush(
            self.queue, Message(self.now + delay, self.seq, src, dst, kind, body, incarnation)
        )

    def next_id(self) -> int:
        self.seq += 1
        return self.seq

    # -- controller ----------------------------------------------------------------------
    def broadcast(self) -> None:
        self.last_broadcast = self.now
        state = {
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "partition_epoch": self.partition_epoch,
            "isr": list(self.isr),
        }
        for b in self.live:
            self.send(CONTROLLER, b, "leader_and_isr", **state)

    def elect(self) -> None:
        leader = self.strategy.elect_leader(list(REPLICAS), self.isr, self.live, False)
        if leader != self.leader:
            self.leader = leader
            self.leader_epoch += 1
            self.stats.elections += 1
        self.partition_epoch += 1

    def fence(self, b: int) -> None:
        if b not in self.live:
            return
        self.live.discard(b)
        shrunk = [r for r in self.isr if r != b]
        if shrunk != self.isr and shrunk and self.strategy.may_shrink_isr_to(shrunk, REPLICAS):
            self.isr = shrunk
        if self.leader in (b, -1):
            self.leader = -2  # force a leader epoch bump even when nobody is electable
        self.elect()
        self.broadcast()

    def unfence(self, b: int) -> None:
        self.live.add(b)
        if self.leader == -1:
            self.elect()
        self.broadcast()

    def move_leadership(self) -> None:
        """A preferred-leader election or controlled move to another live ISR member."""
        candidates = [r for r in self.isr if r in self.live and r != self.leader]
        if not candidates:
            return
        self.leader = self.rng.choice(candidates)
        self.leader_epoch += 1
        self.partition_epoch += 1
        self.stats.elections += 1
        self.broadcast()

    def handle_alter_partition(self, msg: Message) -> None:
        body = msg.body
        error = ErrorCode.NONE
        new_isr: list[int] = body["isr"]
        if body["leader_epoch"] != self.leader_epoch or msg.src != self.leader:
            error = ErrorCode.FENCED_LEADER_EPOCH
        elif body["partition_epoch"] != self.partition_epoch:
            error = ErrorCode.INVALID_UPDATE_VERSION
        elif any(
            r not in self.isr
            and (r not in self.live or body["broker_epochs"].get(r) != self.registered_epoch[r])
            for r in new_isr
        ):
            error = ErrorCode.INELIGIBLE_REPLICA
        elif len(new_isr) < len(self.isr) and not self.strategy.may_shrink_isr_to(
            new_isr, REPLICAS
        ):
            error = ErrorCode.INVALID_REQUEST
        if error == ErrorCode.NONE:
            self.isr = list(new_isr)
            self.partition_epoch += 1
            self.stats.isr_changes += 1
            self.broadcast()
        self.send(
            CONTROLLER,
            msg.src,
            "alter_partition_response",
            request_id=body["request_id"],
            error=error,
            isr=list(self.isr),
            leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch,
        )

    def controller_tick(self) -> None:
        for b, broker in self.brokers.items():
            if broker.up and frozenset((CONTROLLER, b)) not in self.cut:
                self.last_heartbeat[b] = self.now
                if b not in self.live:
                    self.unfence(b)
            elif b in self.live and self.now - self.last_heartbeat[b] > SESSION_TIMEOUT_MS:
                self.fence(b)
        if self.now - self.last_broadcast > RESEND_STATE_MS:
            self.broadcast()

    # -- brokers: message handling --------------------------------------------------------
    def deliver(self, msg: Message) -> None:
        if msg.dst == CONTROLLER:
            self.handle_alter_partition(msg)
            return
        broker = self.brokers[msg.dst]
        if not broker.up or broker.partition is None or broker.incarnation != msg.incarnation:
            return
        handler = getattr(self, f"on_{msg.kind}")
        handler(broker, broker.partition, msg)

    def on_leader_and_isr(self, broker: Broker, p: Partition, msg: Message) -> None:
        body = msg.body
        if body["leader"] == broker.broker_id:
            if p.make_leader(
                body["leader_epoch"], body["partition_epoch"], list(REPLICAS), body["isr"], self.now
            ):
                broker.fetch_state = "idle"
                broker.inflight = 0
                broker.alter_inflight = 0
                self.check_new_leader(broker)
        elif p.make_follower(
            body["leader"],
            body["leader_epoch"],
            body["partition_epoch"],
            list(REPLICAS),
            body["isr"],
        ):
            self.fail_pending(broker)
            broker.alter_inflight = 0
            broker.inflight = 0
            broker.fetch_state = "truncating" if body["leader"] >= 0 else "idle"

    def fail_pending(self, broker: Broker) -> None:
        broker.pending = []

    def on_offset_for_leader_epoch(self, broker: Broker, p: Partition, msg: Message) -> None:
        body = msg.body
        error, epoch, end = self.check_leader(p, body["current_leader_epoch"]), -1, -1
        if error == ErrorCode.NONE:
            epoch, end = p.last_offset_for_epoch(body["epoch"])
        self.send(
            broker.broker_id,
            msg.src,
            "offset_for_leader_epoch_response",
            request_id=body["request_id"],
            error=error,
            epoch=epoch,
            end_offset=end,
        )

    @staticmethod
    def check_leader(p: Partition, current_leader_epoch: int) -> int:
        if not p.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if current_leader_epoch < p.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if current_leader_epoch > p.leader_epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        return ErrorCode.NONE

    def on_offset_for_leader_epoch_response(
        self, broker: Broker, p: Partition, msg: Message
    ) -> None:
        body = msg.body
        if body["request_id"] != broker.inflight or broker.fetch_state != "truncating":
            return
        broker.inflight = 0
        if body["error"] != ErrorCode.NONE:
            broker.backoff_until_ms = self.now + 10
            return
        log = p.log
        leo = log.log_end_offset
        reply_epoch, reply_end = body["epoch"], body["end_offset"]
        done = True
        if reply_end < 0:
            target = p.high_watermark  # the leader knows no epoch <= ours: keep the committed
        else:
            own_epoch, own_end = p.last_offset_for_epoch(reply_epoch)
            if own_end < 0:
                target = min(reply_end, leo)
            elif own_epoch != reply_epoch:
                target = min(own_end, leo)  # then ask again about our older epoch
                done = False
            else:
                target = min(own_end, reply_end, leo)
        if target < p.high_watermark:
            self.fail(
                f"broker {broker.broker_id} told to truncate to {target} below its high "
                f"watermark {p.high_watermark}"
            )
        if p.truncate_to(target):
            self.stats.truncations += 1
        if done:
            broker.fetch_state = "fetching"

    def on_fetch(self, broker: Broker, p: Partition, msg: Message) -> None:
        body = msg.body
        error = self.check_leader(p, body["current_leader_epoch"])
        records = b""
        hw = -1
        offset = body["fetch_offset"]
        if error == ErrorCode.NONE and not (
            p.log.log_start_offset <= offset <= p.log.log_end_offset
        ):
            error = ErrorCode.OFFSET_OUT_OF_RANGE
        if error == ErrorCode.NONE:
            p.update_follower_fetch_state(msg.src, offset, self.now, body["broker_epoch"])
            data = p.read(offset, body["max_bytes"], True, to_high_watermark=False)
            records = b"".join(bytes(b) for b in data.buffers)
            hw = p.high_watermark
        self.send(
            broker.broker_id,
            msg.src,
            "fetch_response",
            request_id=body["request_id"],
            error=error,
            records=records,
            high_watermark=hw,
            fetch_offset=offset,
        )

    def on_fetch_response(self, broker: Broker, p: Partition, msg: Message) -> None:
        body = msg.body
        if body["request_id"] != broker.inflight or broker.fetch_state != "fetching":
            return
        broker.inflight = 0
        if body["error"] != ErrorCode.NONE:
            if body["error"] == ErrorCode.OFFSET_OUT_OF_RANGE:
                broker.fetch_state = "truncating"
            broker.backoff_until_ms = self.now + 10
            return
        if body["fetch_offset"] != p.log.log_end_offset:
            self.fail("a fetch response arrived for an offset that is no longer the log end")
        if body["records"]:
            p.append_records_as_follower(memoryview(body["records"]))
        p.update_follower_high_watermark(body["high_watermark"])

    def on_alter_partition_response(self, broker: Broker, p: Partition, msg: Message) -> None:
        body = msg.body
        if body["request_id"] != broker.alter_inflight:
            return
        broker.alter_inflight = 0
        if not p.is_leader or p.leader_epoch != body["leader_epoch"]:
            return
        if body["error"] == ErrorCode.NONE:
            p.isr_change_committed(body["isr"], body["partition_epoch"])
        else:
            p.isr_change_failed(
                maybe_applied=body["error"]
                not in (ErrorCode.INELIGIBLE_REPLICA, ErrorCode.OPERATION_NOT_ATTEMPTED)
            )

    # -- brokers: periodic work ------------------------------------------------------------
    def follower_tick(self, broker: Broker) -> None:
        p = broker.partition
        if p is None or p.is_leader or p.leader_id < 0 or self.now < broker.backoff_until_ms:
            return
        if broker.inflight and self.now - broker.inflight_sent_ms < REQUEST_TIMEOUT_MS:
            return
        leader = p.leader_id
        request_id = self.next_id()
        broker.inflight = request_id
        broker.inflight_sent_ms = self.now
        if broker.fetch_state == "truncating":
            latest = p.log.latest_epoch
            if latest < 0:
                p.truncate_to(p.high_watermark)
                broker.fetch_state = "fetching"
                broker.inflight = 0
                return
            self.send(
                broker.broker_id,
                leader,
                "offset_for_leader_epoch",
                request_id=request_id,
                current_leader_epoch=p.leader_epoch,
                epoch=latest,
            )
        elif broker.fetch_state == "fetching":
            self.send(
                broker.broker_id,
                leader,
                "fetch",
                request_id=request_id,
                current_leader_epoch=p.leader_epoch,
                fetch_offset=p.log.log_end_offset,
                max_bytes=self.rng.choice((1, 200, 600, 1 << 20)),
                broker_epoch=self.registered_epoch[broker.broker_id],
            )

    def leader_tick(self, broker: Broker) -> None:
        p = broker.partition
        if p is None or not p.is_leader:
            return
        if broker.alter_inflight and self.now - broker.alter_sent_ms > REQUEST_TIMEOUT_MS:
            broker.alter_inflight = 0
            p.isr_change_failed()  # outcome unknown: resend the same proposal
        if not broker.alter_inflight:
            proposal = p.isr_change_proposal(self.now)
            if proposal is not None:
                p.isr_change_sent(proposal)
                broker.alter_inflight = self.next_id()
                broker.alter_sent_ms = self.now
                epochs = {r: s.broker_epoch for r, s in p.remote_replicas.items()}
                self.send(
                    broker.broker_id,
                    CONTROLLER,
                    "alter_partition",
                    request_id=broker.alter_inflight,
                    leader_epoch=p.leader_epoch,
                    partition_epoch=p.partition_epoch,
                    isr=list(proposal),
                    broker_epochs=epochs,
                )
        self.complete_produces(broker, p)

    def complete_produces(self, broker: Broker, p: Partition) -> None:
        still: list[PendingProduce] = []
        for pending in broker.pending:
            done, error = p.acks_all_satisfied(pending.required_offset)
            if not done:
                if self.now < pending.deadline_ms:
                    still.append(pending)
                continue
            if error == ErrorCode.NONE:
                self.verify_committed(broker)
                self.acknowledge(broker, pending)
        broker.pending = still

    def acknowledge(self, broker: Broker, pending: PendingProduce) -> None:
        index = self.committed_index.get(pending.first_offset)
        if index is None or self.committed[index][1] != pending.required_offset:
            self.fail(
                f"acks=all write at {pending.first_offset} acknowledged by broker "
                f"{broker.broker_id} but not in the committed log"
            )
        self.acked.append((pending.first_offset, self.committed[index][2]))
        self.stats.acked += 1

    def produce(self) -> None:
        leaders = [
            b for b in self.brokers.values() if b.up and b.partition and b.partition.is_leader
        ]
        if not leaders:
            return
        broker = self.rng.choice(leaders)
        p = broker.partition
        assert p is not None
        acks = self.rng.choice((-1, -1, 1))
        count = self.rng.randint(1, 4)
        idempotent = self.rng.random() < 0.5
        records = [
            SimpleRecord(None, f"{self.seed}-{self.stats.produced}-{i}".encode(), (), self.now)
            for i in range(count)
        ]
        batch = build_batch(
            records,
            producer_id=1000 if idempotent else -1,
            producer_epoch=self.producer_epoch if idempotent else -1,
            base_sequence=self.producer_seq if idempotent else -1,
        )
        try:
            info = p.append_records_to_leader(memoryview(bytearray(batch)), acks)
        except NotEnoughReplicasError:
            return
        except LogAppendError as exc:
            if idempotent and exc.error_code in (
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                ErrorCode.INVALID_PRODUCER_EPOCH,
            ):
                self.producer_epoch += 1  # what a producer does: bump the epoch, restart at 0
                self.producer_seq = 0
                return
            raise
        self.stats.produced += 1
        if idempotent and not info.duplicate:
            self.producer_seq += count
        if acks == -1 and not info.duplicate:
            broker.pending.append(
                PendingProduce(
                    p.leader_epoch, info.last_offset + 1, info.first_offset, self.now + 400
                )
            )

    # -- faults ----------------------------------------------------------------------------
    def crash(self, broker: Broker) -> None:
        broker.up = False
        broker.partition = None
        broker.pending = []
        broker.down_since_ms = self.now
        self.stats.crashes += 1
        b = broker.broker_id
        others = [r for r in self.isr if r != b]
        if (
            self.rng.random() < 0.5
            and broker.log.flushed_offset < broker.log.log_end_offset
            and others
            and self.strategy.may_shrink_isr_to(others, REPLICAS)
        ):
            # Unclean shutdown. In KRaft the broker learns it at restart and registers anew,
            # which fences the old registration and takes it out of the ISR before it can lead
            # or rejoin (KIP-966); the model does all of that at the crash.
            self.registered_epoch[b] += 1
            self.isr = others
            if b in self.live:
                self.fence(b)
            else:
                self.partition_epoch += 1
                self.broadcast()
            broker.log.lose_unflushed_tail()
            self.stats.tail_losses += 1

    def restart(self, broker: Broker) -> None:
        broker.up = True
        broker.incarnation += 1
        b = broker.broker_id
        self.fence(b)  # registration of a new incarnation fences the old one
        self.registered_epoch[b] += 1
        broker.start()

    def fault(self) -> None:
        rng = self.rng
        roll = rng.random()
        up = [b for b in self.brokers.values() if b.up]
        down = [b for b in self.brokers.values() if not b.up]
        if roll < 0.25 and up and len(down) < 2:
            self.crash(rng.choice(up))
        elif roll < 0.55 and down:
            broker = rng.choice(down)
            if self.now - broker.down_since_ms > 50:
                self.restart(broker)
        elif roll < 0.75:
            nodes = [*REPLICAS, CONTROLLER]
            a, b = rng.sample(nodes, 2)
            self.cut.add(frozenset((a, b)))
        elif roll < 0.9:
            if self.cut:
                self.cut.discard(rng.choice(sorted(self.cut, key=sorted)))
        else:
            self.move_leadership()

    # -- invariants ------------------------------------------------------------------------
    def check_new_leader(self, broker: Broker) -> None:
        """A new leader holds the whole committed log, and its producer state is the log's."""
        log = broker.log
        if log.log_end_offset < self.committed_end:
            self.fail(
                f"broker {broker.broker_id} leads epoch {self.leader_epoch} with log end "
                f"{log.log_end_offset} below the committed offset {self.committed_end}"
            )
        for base, nxt, data in self.committed:
            got = log.batch_at(base)
            if got != (base, nxt, data):
                self.fail(f"new leader {broker.broker_id} differs from the committed log at {base}")
        p = broker.partition
        assert p is not None
        rebuilt = ProducerStateManager()
        rebuilt.rebuild_from(log.batch_headers(0))
        live_state = p.log.producer_state
        for producer_id in set(rebuilt.producers) | set(live_state.producers):
            mine = live_state.last_entry(producer_id)
            theirs = rebuilt.last_entry(producer_id)
            got = None if mine is None else (mine.producer_epoch, mine.last_seq)
            want = None if theirs is None else (theirs.producer_epoch, theirs.last_seq)
            if got != want:
                self.fail(
                    f"new leader {broker.broker_id}: producer {producer_id} state {got} "
                    f"!= {want} rebuilt from its log"
                )

    def verify_committed(self, broker: Broker) -> None:
        """Compare the log below the high watermark with the committed log, extending it."""
        p = broker.partition
        if p is None:
            return
        hw = p.high_watermark
        if hw <= broker.checked:
            return
        for base, nxt, data in broker.log.batches_from(broker.checked):
            if base >= hw:
                break
            index = self.committed_index.get(base)
            if index is None:
                if base != self.committed_end:
                    self.fail(
                        f"broker {broker.broker_id} commits a batch at {base} but the committed "
                        f"log ends at {self.committed_end}"
                    )
                self.committed_index[base] = len(self.committed)
                self.committed.append((base, nxt, data))
                self.committed_end = nxt
            else:
                known = self.committed[index]
                if known[1] != nxt or known[2] != data:
                    self.fail(f"broker {broker.broker_id} diverges below its HW at offset {base}")
            broker.checked = nxt

    def check(self) -> None:
        for broker in self.brokers.values():
            p = broker.partition
            if p is None:
                continue
            if p.is_leader:
                known = self.epoch_leaders.setdefault(p.leader_epoch, broker.broker_id)
                if known != broker.broker_id:
                    self.fail(f"brokers {known} and {broker.broker_id} lead epoch {p.leader_epoch}")
            hw = p.high_watermark
            if hw < broker.last_hw:
                self.fail(f"broker {broker.broker_id} HW went back {broker.last_hw} -> {hw}")
            broker.last_hw = hw
            if broker.log.log_end_offset < broker.checked:
                self.fail(
                    f"broker {broker.broker_id} truncated committed data: log end "
                    f"{broker.log.log_end_offset} < {broker.checked}"
                )
            self.verify_committed(broker)

    def check_acked_survive(self) -> None:
        """After healing, the elected leader serves every acknowledged acks=all write."""
        broker = self.brokers.get(self.leader)
        p = None if broker is None else broker.partition
        if broker is None or p is None or not p.is_leader or p.leader_epoch != self.leader_epoch:
            self.fail(f"no serving leader after healing (controller: {self.leader})")
            return
        for base, data in self.acked:
            got = broker.log.batch_at(base)
            if got is None or got[0] != base or got[2] != data:
                self.fail(f"acknowledged write at {base} missing on leader {broker.broker_id}")

    # -- driver ----------------------------------------------------------------------------
    def step(self, faults: bool) -> None:
        self.stats.steps += 1
        self.now += self.rng.randint(1, 12)
        while self.queue and self.queue[0].deliver_at <= self.now:
            self.deliver(heapq.heappop(self.queue))
            self.check()
        self.controller_tick()
        for broker in self.brokers.values():
            if broker.up:
                self.follower_tick(broker)
                self.leader_tick(broker)
        roll = self.rng.random()
        if roll < 0.35:
            self.produce()
        elif roll < 0.45:
            broker = self.brokers[self.rng.choice(REPLICAS)]
            if broker.up:
                broker.log.flush()
                if broker.partition is not None:
                    broker.partition.log.maybe_checkpoint()
        elif faults and roll < 0.5:
            self.fault()
        self.check()

    def quiesce(self, steps: int) -> None:
        """Heal everything and let replication converge."""
        self.cut.clear()
        for broker in self.brokers.values():
            if not broker.up:
                self.restart(broker)
        for _ in range(steps):
            self.step(faults=False)
        self.check_acked_survive()


def run_seed(seed: int, strategy: ReplicationStrategy, steps: int = 200) -> SimStats:
    sim = Simulation(seed, strategy)
    for _ in range(steps):
        sim.step(faults=True)
    sim.quiesce(60)
    return sim.stats
