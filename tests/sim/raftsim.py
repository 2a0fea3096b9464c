"""A deterministic simulation of a KRaft quorum of :class:`pydmq.raft.core.RaftCore` voters.

Everything runs on one virtual clock from one seed: an in-memory network that drops, delays
(hence reorders), duplicates and partitions messages; voters that crash (losing what they had
not flushed) and restart from their surviving log and quorum state; clients that append to
whoever is leader; state machines that snapshot. After every step the safety invariants are
checked, and a failure raises :class:`InvariantViolation` naming the seed, so that
``run(seed)`` reproduces it.

Invariants:

* election safety: at most one leader per epoch, over the whole run;
* committed entries (below any voter's high watermark) never change: every voter's log agrees
  with them wherever it holds them, no truncation ever cuts below a high watermark a voter
  reached (across restarts: the entries below it were flushed), a new leader holds them all,
  and an installed snapshot holds exactly them;
* a voter's high watermark never goes back while its process lives;
* a leader only appends to its log while it leads.

Liveness: once faults stop (links healed, voters restarted, no more drops), a leader is elected
and an append commits within a bounded virtual time.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from pydmq.raft.core import PARKED, RaftConfig, RaftCore, Role
from pydmq.raft.log import Entry, MemoryRaftLog, SnapshotId, decode_snapshot
from pydmq.raft.state import MemoryQuorumStateStore

__all__ = [
    "DEFAULT",
    "FAST",
    "HARSH",
    "InvariantViolation",
    "SimConfig",
    "SimResult",
    "Simulation",
    "run",
]


class InvariantViolation(AssertionError):
    """A safety or liveness property failed; the message names the seed."""


@dataclass(frozen=True)
class SimConfig:
    """Shape of one simulated run."""

    voters: int = 3
    fault_ms: int = 4000  # virtual time with faults
    liveness_bound_ms: int = 30000  # after healing: a leader and a commit within this
    min_delay_ms: int = 1
    max_delay_ms: int = 40
    drop: float = 0.05
    duplicate: float = 0.03
    append_interval_ms: int = 150  # mean time between client appends
    crash_interval_ms: int = 1500  # mean time between crashes (during faults)
    partition_interval_ms: int = 1500  # mean time between partition changes
    snapshot_interval_ms: int = 1200  # mean time between snapshot attempts
    max_down_ms: int = 2500
    raft: RaftConfig = field(default_factory=RaftConfig)


# Kafka's default timings (controller.quorum.*), moderate faults.
DEFAULT = SimConfig()
# Ten times faster timers than network delays allow for comfortably, small fetches (a few
# entries each), frequent crashes: many more elections and truncations per virtual second.
FAST = SimConfig(
    fault_ms=3000,
    max_delay_ms=80,
    append_interval_ms=30,
    crash_interval_ms=300,
    max_down_ms=300,
    raft=RaftConfig(
        election_timeout_ms=100,
        fetch_timeout_ms=200,
        election_backoff_max_ms=100,
        fetch_max_wait_ms=50,
        request_timeout_ms=200,
        fetch_max_bytes=100,
    ),
)
# Lossy, slow, duplicating network with partitions changing every few hundred ms.
HARSH = SimConfig(
    fault_ms=6000,
    drop=0.3,
    duplicate=0.2,
    max_delay_ms=300,
    crash_interval_ms=500,
    partition_interval_ms=400,
)


@dataclass
class SimResult:
    seed: int
    virtual_ms: int
    steps: int
    max_epoch: int
    committed: int
    leaders: int
    crashes: int
    snapshots_installed: int


class _CheckedLog(MemoryRaftLog):
    """A MemoryRaftLog that reports every mutation to the simulation's invariant checks."""

    def __init__(self, sim: Simulation, node_id: int) -> None:
        super().__init__()
        self._sim = sim
        self._node_id = node_id

    def truncate_to(self, offset: int) -> None:
        if offset < self.log_end_offset:
            self._sim.on_truncate(self._node_id, offset)
        super().truncate_to(offset)

    def install_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        super().install_snapshot(snapshot_id, data)
        self._sim.on_install_snapshot(self._node_id, snapshot_id, data)


@dataclass
class _Message:
    src: int
    dest: int
    payload: Any
    is_request: bool
    correlation_id: int
    requester_incarnation: int  # the incarnation of the voter that sent the request


class _Node:
    def __init__(self, sim: Simulation, node_id: int) -> None:
        self.node_id = node_id
        self.log = _CheckedLog(sim, node_id)
        self.store = MemoryQuorumStateStore()
        self.core: RaftCore | None = None
        self.incarnation = 0
        self.parked: dict[int, deque[tuple[int, int]]] = {}
        self.deadline = 0
        self.run_hw = 0  # high watermark seen in this process run
        self.durable_hw = 0  # highest high watermark ever: entries below it are flushed
        self.checked_to = 0  # entries below this were compared with the committed ones
        self.was_leader_epoch = -1
        self.down_until = -1


class Simulation:
    """One seeded run; :meth:`run` returns figures or raises :class:`InvariantViolation`."""

    def __init__(self, seed: int, config: SimConfig) -> None:
        self.seed = seed
        self.config = config
        self.rng = random.Random(seed)
        self.now = 0
        self.steps = 0
        self.queue: list[tuple[int, int, _Message]] = []
        self.seq = 0
        self.cut: set[tuple[int, int]] = set()
        self.faulty = True
        self.ids = list(range(1, config.voters + 1))
        self.nodes = {i: _Node(self, i) for i in self.ids}
        self.committed: dict[int, tuple[int, bytes]] = {}
        self.committed_end = 0  # every offset below this is in ``committed``
        self.leaders: dict[int, int] = {}  # epoch -> leader id
        self.next_payload = 0
        self.crashes = 0
        self.snapshots_installed = 0
        for node in self.nodes.values():
            self._boot(node)

    # -- failure reporting --------------------------------------------------------------

    def fail(self, what: str) -> InvariantViolation:
        return InvariantViolation(
            f"seed={self.seed} voters={self.config.voters} t={self.now}ms step={self.steps}: {what}"
        )

    # -- voters -------------------------------------------------------------------------

    def _boot(self, node: _Node) -> None:
        node.incarnation += 1
        node.core = RaftCore(
            node.node_id,
            self.ids,
            node.log,
            node.store,
            random.Random(self.rng.getrandbits(64)),
            self.config.raft,
            cluster_id="sim",
            leader_change_payload=b"leader-change",
        )
        node.parked = {}
        node.run_hw = node.core.high_watermark
        node.checked_to = node.log.log_start_offset
        node.deadline = self.now
        node.was_leader_epoch = -1

    def _crash(self, node: _Node) -> None:
        node.core = None
        node.parked = {}
        node.log.crash(keep_unflushed=self.rng.randint(0, 3))
        if node.log.log_end_offset < node.durable_hw:
            raise self.fail(
                f"node {node.node_id} lost flushed entries below its high watermark "
                f"{node.durable_hw} in a crash"
            )
        node.down_until = self.now + self.rng.randint(1, self.config.max_down_ms)
        node.deadline = node.down_until
        self.crashes += 1

    def _drive(self, node: _Node) -> None:
        """Let a voter act until it has nothing due now."""
        core = node.core
        if core is None:
            return
        for _ in range(100):
            for src, response in core.complete_parked(self.now):
                waiting = node.parked.get(src)
                if not waiting:
                    raise self.fail(f"node {node.node_id} completed a fetch {src} never parked")
                correlation_id, incarnation = waiting.popleft()
                self._send(node.node_id, src, response, False, correlation_id, incarnation)
            if core.next_deadline_ms() > self.now:
                break
            for out in core.poll(self.now):
                self._send(
                    node.node_id, out.dest, out.message, True, out.correlation_id, node.incarnation
                )
        else:
            raise self.fail(f"node {node.node_id} does not settle at t={self.now}")
        node.deadline = core.next_deadline_ms()
        self._check_node(node)

    # -- network ------------------------------------------------------------------------

    def _send(
        self,
        src: int,
        dest: int,
        payload: Any,
        is_request: bool,
        correlation_id: int,
        requester_incarnation: int,
    ) -> None:
        rng = self.rng
        copies = 1
        if self.faulty:
            if (src, dest) in self.cut or rng.random() < self.config.drop:
                return
            if rng.random() < self.config.duplicate:
                copies = 2
        message = _Message(src, dest, payload, is_request, correlation_id, requester_incarnation)
        for _ in range(copies):
            delay = rng.randint(self.config.min_delay_ms, self.config.max_delay_ms)
            self.seq += 1
            heapq.heappush(self.queue, (self.now + delay, self.seq, message))

    def _deliver(self, message: _Message) -> None:
        node = self.nodes[message.dest]
        core = node.core
        if core is None:
            sender = self.nodes[message.src]
            if message.is_request and sender.core is not None:
                # A crashed node refuses connections: the driver reports it as unreachable.
                sender.core.handle_unreachable(self.now, message.dest)
                self._drive(sender)
            return
        if message.is_request:
            response = core.handle_request(self.now, message.src, message.payload)
            if response is PARKED:
                node.parked.setdefault(message.src, deque()).append(
                    (message.correlation_id, message.requester_incarnation)
                )
            else:
                self._send(
                    node.node_id,
                    message.src,
                    response,
                    False,
                    message.correlation_id,
                    message.requester_incarnation,
                )
        else:
            if message.requester_incarnation != node.incarnation:
                return  # an answer to a request of a previous process: its socket is gone
            core.handle_response(self.now, message.src, message.payload, message.correlation_id)
        self._drive(node)

    # -- invariants ---------------------------------------------------------------------

    def _check_node(self, node: _Node) -> None:
        core = node.core
        assert core is not None
        hw = core.high_watermark
        if hw < node.run_hw:
            raise self.fail(f"node {node.node_id} high watermark went back {node.run_hw}->{hw}")
        node.run_hw = hw
        node.durable_hw = max(node.durable_hw, hw)
        if core.is_leader and node.was_leader_epoch != core.epoch:
            holder = self.leaders.setdefault(core.epoch, node.node_id)
            if holder != node.node_id:
                raise self.fail(f"two leaders in epoch {core.epoch}: {holder} and {node.node_id}")
            node.was_leader_epoch = core.epoch
            self._check_leader_completeness(node)
        if hw > node.checked_to:
            self._record_committed(node, hw)

    def _record_committed(self, node: _Node, hw: int) -> None:
        log = node.log
        start = max(node.checked_to, log.log_start_offset)
        for entry in log.read(start, 1 << 40) if start < hw else ():
            if entry.offset >= hw:
                break
            self._commit(node, entry)
        node.checked_to = hw
        while self.committed_end in self.committed:
            self.committed_end += 1

    def _commit(self, node: _Node, entry: Entry) -> None:
        known = self.committed.get(entry.offset)
        if known is None:
            self.committed[entry.offset] = (entry.epoch, entry.payload)
        elif known != (entry.epoch, entry.payload):
            raise self.fail(
                f"node {node.node_id} committed offset {entry.offset} as {entry.epoch}/"
                f"{entry.payload!r}, elsewhere committed as {known[0]}/{known[1]!r}"
            )

    def _check_leader_completeness(self, node: _Node) -> None:
        log = node.log
        if log.log_end_offset < self.committed_end:
            raise self.fail(
                f"leader {node.node_id} (epoch {log.last_epoch}) log ends at "
                f"{log.log_end_offset} below committed {self.committed_end}"
            )
        start = log.log_start_offset
        if start < self.committed_end:
            for entry in log.read(start, 1 << 40):
                if entry.offset >= self.committed_end:
                    break
                if (entry.epoch, entry.payload) != self.committed[entry.offset]:
                    raise self.fail(
                        f"leader {node.node_id} lacks committed entry {entry.offset}: "
                        f"has {entry.epoch}/{entry.payload!r}, committed "
                        f"{self.committed[entry.offset]}"
                    )

    def on_truncate(self, node_id: int, offset: int) -> None:
        node = self.nodes[node_id]
        if offset < node.durable_hw:
            raise self.fail(
                f"node {node_id} truncates to {offset} below its high watermark {node.durable_hw}"
            )
        if offset < self.committed_end:
            # Only a committed entry itself must never go; a different entry at a committed
            # offset is a stale one the voter has to drop.
            first = node.log.read(offset, 0)[0]
            if self.committed[offset] == (first.epoch, first.payload):
                raise self.fail(f"node {node_id} truncates committed entry {offset}")
        if node.core is not None and node.core.is_leader:
            raise self.fail(f"leader {node_id} truncates its log to {offset}")

    def on_install_snapshot(self, node_id: int, snapshot_id: SnapshotId, data: bytes) -> None:
        self.snapshots_installed += 1
        _, payloads = decode_snapshot(data)
        expected = [self.committed.get(o, (-1, b"?"))[1] for o in range(snapshot_id.end_offset)]
        if payloads != expected:
            raise self.fail(f"node {node_id} installed snapshot {snapshot_id} with other content")

    def check_all_logs(self) -> None:
        """Every voter's log agrees with the committed entries it holds below its HW."""
        for node in self.nodes.values():
            log = node.log
            limit = min(node.durable_hw, log.log_end_offset)
            if log.log_end_offset < node.durable_hw:
                raise self.fail(f"node {node.node_id} log shorter than its high watermark")
            start = log.log_start_offset
            for entry in log.read(start, 1 << 40) if start < limit else ():
                if entry.offset >= limit:
                    break
                if self.committed.get(entry.offset) != (entry.epoch, entry.payload):
                    raise self.fail(f"node {node.node_id} entry {entry.offset} differs")

    # -- actions ------------------------------------------------------------------------

    def _leaders(self) -> list[_Node]:
        return [n for n in self.nodes.values() if n.core is not None and n.core.is_leader]

    def _client_append(self, node: _Node | None = None) -> int | None:
        """Append 1-3 fresh payloads at a (random) leader; the offset of the last one."""
        if node is None:
            leaders = self._leaders()
            if not leaders:
                return None
            node = self.rng.choice(leaders)
        assert node.core is not None
        payloads = []
        for _ in range(self.rng.randint(1, 3)):
            self.next_payload += 1
            payloads.append(f"{self.seed}:{self.next_payload}".encode())
        last = node.core.append(payloads)
        self._drive(node)
        return last

    def _maybe_snapshot(self) -> None:
        alive = [n for n in self.nodes.values() if n.core is not None]
        if not alive:
            return
        node = self.rng.choice(alive)
        core = node.core
        assert core is not None
        hw = core.high_watermark
        if hw <= node.log.log_start_offset or hw > self.committed_end:
            return
        offset = self.rng.randint(node.log.log_start_offset + 1, hw)
        core.create_snapshot(offset, [self.committed[o][1] for o in range(offset)])
        self._drive(node)

    def _repartition(self) -> None:
        self.cut.clear()
        roll = self.rng.random()
        if roll < 0.3 or len(self.ids) < 2:
            return
        ids = self.ids[:]
        self.rng.shuffle(ids)
        if roll < 0.8:
            side = set(ids[: self.rng.randint(1, len(ids) // 2)])
            for a in self.ids:
                for b in self.ids:
                    if (a in side) != (b in side):
                        self.cut.add((a, b))
        else:
            for _ in range(self.rng.randint(1, len(ids))):  # one-way link failures
                a, b = self.rng.sample(self.ids, 2)
                self.cut.add((a, b))

    # -- main loop ----------------------------------------------------------------------

    def _next_node_time(self) -> tuple[int, _Node | None]:
        best: tuple[int, _Node | None] = (1 << 62, None)
        for node in self.nodes.values():
            if node.deadline < best[0]:
                best = (node.deadline, node)
        return best

    def _exp(self, mean: int) -> int:
        return self.now + max(1, int(self.rng.expovariate(1.0 / mean)))

    def _step_until(self, stop_ms: int, timers: dict[str, int]) -> None:
        while True:
            node_time, node = self._next_node_time()
            msg_time = self.queue[0][0] if self.queue else 1 << 62
            timer_name = min(timers, key=lambda k: timers[k]) if timers else None
            timer_time = timers[timer_name] if timer_name is not None else 1 << 62
            t = min(node_time, msg_time, timer_time)
            if t > stop_ms:
                self.now = stop_ms
                return
            self.now = max(self.now, t)
            self.steps += 1
            if timer_time == t and timer_name is not None:
                self._fire(timer_name, timers)
            elif msg_time == t:
                _, _, message = heapq.heappop(self.queue)
                self._deliver(message)
            elif node is not None:
                if node.core is None:
                    self._boot(node)
                self._drive(node)

    def _fire(self, name: str, timers: dict[str, int]) -> None:
        cfg = self.config
        if name == "append":
            self._client_append()
            timers[name] = self._exp(cfg.append_interval_ms)
        elif name == "crash":
            alive = [n for n in self.nodes.values() if n.core is not None]
            if alive:
                self._crash(self.rng.choice(alive))
            timers[name] = self._exp(cfg.crash_interval_ms)
        elif name == "partition":
            self._repartition()
            timers[name] = self._exp(cfg.partition_interval_ms)
        elif name == "snapshot":
            self._maybe_snapshot()
            timers[name] = self._exp(cfg.snapshot_interval_ms)

    def run(self) -> SimResult:
        cfg = self.config
        timers = {
            "append": self._exp(cfg.append_interval_ms),
            "crash": self._exp(cfg.crash_interval_ms),
            "partition": self._exp(cfg.partition_interval_ms),
            "snapshot": self._exp(cfg.snapshot_interval_ms),
        }
        self._step_until(cfg.fault_ms, timers)
        self._heal()
        healed_at = self.now
        deadline = healed_at + cfg.liveness_bound_ms
        target: tuple[int, int, bytes] | None = None  # offset, epoch, payload of a probe
        timers = {"snapshot": self._exp(cfg.snapshot_interval_ms)}
        while target is None or not self._committed_everywhere(target):
            if self.now >= deadline:
                raise self.fail(
                    f"no progress {cfg.liveness_bound_ms}ms after healing at {healed_at}ms: "
                    f"{self.describe()}"
                )
            leaders = sorted(self._leaders(), key=lambda n: n.core.epoch if n.core else -1)
            leader = leaders[-1] if leaders else None
            if (
                leader is not None
                and leader.core is not None
                and (target is None or leader.core.epoch != target[1])
            ):
                # A probe appended by a leader that lost its epoch may be gone: probe again.
                offset = self._client_append(leader)
                assert offset is not None
                entry = leader.log.read(offset, 0)[0]
                target = (offset, entry.epoch, entry.payload)
            self._step_until(min(deadline, self.now + 50), timers)
        self.check_all_logs()
        return SimResult(
            seed=self.seed,
            virtual_ms=self.now,
            steps=self.steps,
            max_epoch=max(self.leaders, default=0),
            committed=self.committed_end,
            leaders=len(self.leaders),
            crashes=self.crashes,
            snapshots_installed=self.snapshots_installed,
        )

    # -- scripted scenarios -------------------------------------------------------------

    def advance(self, ms: int, *, append_interval_ms: int | None = None) -> None:
        """Run ``ms`` of virtual time with clients appending but no random faults."""
        timers = {}
        if append_interval_ms:
            timers["append"] = self._exp(append_interval_ms)
        self._step_until(self.now + ms, timers)

    def isolate(self, node_id: int) -> None:
        """Cut every link to and from ``node_id`` (messages already sent still arrive)."""
        self.faulty = True
        for other in self.ids:
            if other != node_id:
                self.cut.add((node_id, other))
                self.cut.add((other, node_id))

    def heal_links(self) -> None:
        self.cut.clear()

    def leader(self) -> RaftCore | None:
        """The leader of the highest epoch, if any voter leads."""
        cores = [n.core for n in self._leaders() if n.core is not None]
        return max(cores, key=lambda c: c.epoch) if cores else None

    def core(self, node_id: int) -> RaftCore:
        core = self.nodes[node_id].core
        assert core is not None
        return core

    def _heal(self) -> None:
        self.faulty = False
        self.cut.clear()
        for node in self.nodes.values():
            if node.core is None:
                self._boot(node)
                self._drive(node)

    def _committed_everywhere(self, target: tuple[int, int, bytes]) -> bool:
        """The probe entry committed and every voter learned it."""
        offset, epoch, payload = target
        return self.committed.get(offset) == (epoch, payload) and all(
            n.core is not None and n.core.high_watermark > offset for n in self.nodes.values()
        )

    def describe(self) -> str:
        parts = []
        for node in self.nodes.values():
            core = node.core
            if core is None:
                parts.append(f"{node.node_id}:down")
                continue
            role: Role = core.role
            parts.append(
                f"{node.node_id}:{role.value}/e{core.epoch}/l{core.leader_id}/"
                f"hw{core.high_watermark}/leo{node.log.log_end_offset}"
            )
        return " ".join(parts)


def run(seed: int, config: SimConfig | None = None) -> SimResult:
    """Run one seed; raises :class:`InvariantViolation` (with the seed) on a failure."""
    return Simulation(seed, config or SimConfig()).run()
