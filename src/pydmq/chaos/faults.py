"""The nemesis: injects one fault at a time, heals it, waits for the cluster to recover.

Kinds (:data:`FAULT_KINDS`), taken in a shuffled round so every kind comes up equally often:

``kill_leader``      ``kill -9`` the leader of a random partition; restarted after 1-2.5 s.
``kill_follower``    ``kill -9`` a follower of a random partition (it leads others); restarted.
``kill_controller``  ``kill -9`` the active controller; restarted.
``pause_leader``     SIGSTOP the leader of a random partition for 2-3 s (past the 1 s session),
                     then SIGCONT.
``isolate_leader``   cut every link between a partition leader and its peers (Raft, heartbeats,
                     replica fetches, controller pushes, both directions) for 2-4 s; clients can
                     still reach it.
``isolate_client``   cut a producer, a group member or a reader off every node for 2-4 s.
``crash_member``     ``kill -9`` a consumer-group member; restarted after 0.5-2 s.
``slow_node``        delay every link to and from a node by 150 ms for 2-4 s.

Storage faults (:data:`STORAGE_FAULT_KINDS`; each node's data dir is a tmpfs of its own and
each node has a failpoint file, see :mod:`pydmq.chaos.storage`):

``disk_full``        fill a partition leader's filesystem to the last byte for 2-4 s, then
                     free it (ENOSPC: appends are undone and answered KAFKA_STORAGE_ERROR,
                     followers there fall behind; writes resume once space returns).
``eio_write``        arm EIO on a partition leader's segment writes (SIGUSR2 re-reads its
                     failpoint file): its log dir goes offline, it asks to be fenced and
                     leadership moves; after 2-3 s the fault is disarmed and the node restarted.
``eio_fsync``        the same with EIO on segment fsyncs (the chaos topics flush every
                     second, ``flush.ms=1000``, so fsyncs happen): a failed fsync is never
                     treated as durable, the log dir goes offline until the restart.
``corrupt_replica``  ``kill -9`` a follower of a random partition, zero 100 bytes in the
                     middle of one of that partition's segment files there, restart it: it
                     truncates before the damage and fetches the rest from the leader again.

For node faults the partitions the target led at injection are the fault's ``affected`` set;
the observer measures how long until each has another leader (or a newer epoch).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence

from pydmq.chaos.clients import GroupMember
from pydmq.chaos.history import FaultRecord
from pydmq.chaos.observer import LeaderWatch, Observer
from pydmq.chaos.storage import damage_segment
from pydmq.chaos.topology import ChaosCluster, node_label

__all__ = [
    "EIO_FAILPOINTS",
    "FAULT_KINDS",
    "PROCESS_FAULT_KINDS",
    "STORAGE_FAULT_KINDS",
    "Nemesis",
]

PROCESS_FAULT_KINDS: tuple[str, ...] = (
    "kill_leader",
    "kill_follower",
    "kill_controller",
    "pause_leader",
    "isolate_leader",
    "isolate_client",
    "crash_member",
    "slow_node",
)
STORAGE_FAULT_KINDS: tuple[str, ...] = ("disk_full", "eio_write", "eio_fsync", "corrupt_replica")
FAULT_KINDS: tuple[str, ...] = PROCESS_FAULT_KINDS + STORAGE_FAULT_KINDS
# What the nemesis arms in a node's failpoint file for each EIO kind.
EIO_FAILPOINTS: dict[str, str] = {
    "eio_write": "segment.append.write=eio",
    "eio_fsync": "segment.fsync=eio",
}

REPLICATION_FACTOR = 3


class Nemesis:
    def __init__(
        self,
        cluster: ChaosCluster,
        observer: Observer,
        members: Sequence[GroupMember],
        client_names: Sequence[str],
        rng: random.Random,
        kinds: Sequence[str] = FAULT_KINDS,
        recovery_timeout: float = 30.0,
        log: Callable[[str], None] = print,
    ) -> None:
        unknown = set(kinds) - set(FAULT_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds: {sorted(unknown)}")
        self.cluster = cluster
        self.observer = observer
        self.members = list(members)
        self.client_names = list(client_names)
        self.rng = rng
        self.kinds = list(kinds)
        self.recovery_timeout = recovery_timeout
        self.log = log
        self.faults: list[FaultRecord] = []
        self.unhealthy: list[str] = []
        self._down: set[int] = set()
        self._lock = threading.Lock()
        self._round: list[str] = []

    # -- what the observer must not ask --------------------------------------------------------

    def avoid(self) -> set[int]:
        with self._lock:
            return set(self._down)

    def _mark(self, node_id: int, down: bool) -> None:
        with self._lock:
            if down:
                self._down.add(node_id)
            else:
                self._down.discard(node_id)

    # -- the loop ------------------------------------------------------------------------------

    def run_until(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            if not self._round:
                self._round = list(self.kinds)
                self.rng.shuffle(self._round)
            kind = self._round.pop()
            record = self.inject(kind)
            if record is not None:
                self.faults.append(record)
                self.log(
                    f"fault {len(self.faults):4d} {record.kind:<16} {record.target:<11} "
                    f"held {(record.healed_at or record.injected_at) - record.injected_at:4.1f}s"
                    f" new leader after {_ms(record.new_leader_after)} {record.detail}"
                )
            self.wait_healthy()
            time.sleep(self.rng.uniform(0.3, 1.0))

    def wait_healthy(self) -> bool:
        """Until the observer sees every partition led with a full ISR (bounded)."""
        since = time.monotonic()
        deadline = since + self.recovery_timeout
        while time.monotonic() < deadline:
            if self.observer.healthy(REPLICATION_FACTOR, after=since):
                return True
            time.sleep(0.1)
        note = f"not healthy {self.recovery_timeout:.0f} s after fault {len(self.faults)}"
        self.unhealthy.append(note)
        self.log(note)
        return False

    def heal_everything(self) -> None:
        """End of run: reconnect every link, resume and restart every node and member."""
        self.cluster.proxy.command({"op": "heal"})
        for node_id in self.cluster.node_ids:
            node = self.cluster.cluster.node(node_id)
            if node.paused:
                node.resume()
            if not node.running:
                node.start()
            self._mark(node_id, False)
        for member in self.members:
            if not member.running:
                member.start()

    # -- faults --------------------------------------------------------------------------------

    def inject(self, kind: str) -> FaultRecord | None:
        state = self.observer.state()
        leaders = sorted({s.leader for s in state.values() if s.leader >= 0})
        if kind in ("kill_leader", "pause_leader", "isolate_leader"):
            if not leaders:
                return None
            leader = self.rng.choice(leaders)
            if kind == "kill_leader":
                return self._kill_node(kind, leader, "partition leader")
            if kind == "pause_leader":
                return self._pause_leader(leader)
            return self._isolate_leader(leader)
        if kind == "kill_follower":
            tp = self.rng.choice(sorted(state))
            followers = [r for r in state[tp].replicas if r != state[tp].leader]
            if not followers:
                return None
            return self._kill_node(kind, self.rng.choice(followers), f"follower of {tp[0]}/{tp[1]}")
        if kind == "kill_controller":
            controller = self.observer.controller()
            if controller not in self.cluster.node_ids:
                return None
            return self._kill_node(kind, controller, "active controller")
        if kind == "isolate_client":
            return self._isolate_client(self.rng.choice(self.client_names))
        if kind == "crash_member":
            return self._crash_member(self.rng.choice(self.members))
        if kind == "slow_node":
            return self._slow_node(self.rng.choice(self.cluster.node_ids))
        if kind == "disk_full":
            return self._disk_full(self.rng.choice(leaders)) if leaders else None
        if kind in EIO_FAILPOINTS:
            return self._disk_error(kind, self.rng.choice(leaders)) if leaders else None
        if kind == "corrupt_replica":
            tp = self.rng.choice(sorted(state))
            followers = [r for r in state[tp].replicas if r != state[tp].leader]
            if not followers:
                return None
            return self._corrupt_replica(self.rng.choice(followers), tp)
        raise ValueError(kind)

    def _start_node_fault(self, node_id: int) -> tuple[LeaderWatch, float]:
        self._mark(node_id, True)
        now = time.monotonic()
        return self.observer.watch(node_id, now), now

    def _finish(
        self, kind: str, node_id: int, watch: LeaderWatch, injected: float, detail: str
    ) -> FaultRecord:
        healed = time.monotonic()
        self._mark(node_id, False)
        # Give the measurement a moment to land if the heal came first.
        deadline = time.monotonic() + 5.0
        while watch.done_after is None and time.monotonic() < deadline:
            time.sleep(0.05)
        return FaultRecord(
            kind,
            node_label(node_id),
            injected,
            healed,
            sorted(watch.epochs),
            watch.done_after if watch.epochs else None,
            detail,
        )

    def _kill_node(self, kind: str, node_id: int, detail: str) -> FaultRecord:
        watch, injected = self._start_node_fault(node_id)
        self.cluster.cluster.kill(node_id)
        time.sleep(self.rng.uniform(1.0, 2.5))
        self.cluster.cluster.start_node(node_id)
        return self._finish(kind, node_id, watch, injected, detail)

    def _pause_leader(self, node_id: int) -> FaultRecord:
        watch, injected = self._start_node_fault(node_id)
        self.cluster.cluster.pause(node_id)
        time.sleep(self.rng.uniform(2.0, 3.0))
        self.cluster.cluster.resume(node_id)
        return self._finish("pause_leader", node_id, watch, injected, "SIGSTOP/SIGCONT")

    def _isolate_leader(self, node_id: int) -> FaultRecord:
        watch, injected = self._start_node_fault(node_id)
        label = node_label(node_id)
        peers = [node_label(i) for i in self.cluster.node_ids if i != node_id]
        self.cluster.proxy.command({"op": "isolate_node", "node": label, "peers": peers})
        time.sleep(self.rng.uniform(2.0, 4.0))
        self.cluster.proxy.command({"op": "heal"})
        return self._finish("isolate_leader", node_id, watch, injected, "cut from its peers")

    def _isolate_client(self, client: str) -> FaultRecord:
        injected = time.monotonic()
        self.cluster.proxy.command({"op": "isolate_client", "client": client})
        time.sleep(self.rng.uniform(2.0, 4.0))
        self.cluster.proxy.command({"op": "heal"})
        return FaultRecord("isolate_client", client, injected, time.monotonic())

    def _crash_member(self, member: GroupMember) -> FaultRecord:
        injected = time.monotonic()
        member.kill()
        time.sleep(self.rng.uniform(0.5, 2.0))
        member.start()
        return FaultRecord("crash_member", member.name, injected, time.monotonic())

    def _slow_node(self, node_id: int) -> FaultRecord:
        injected = time.monotonic()
        label = node_label(node_id)
        self.cluster.proxy.command({"op": "delay", "src": "*", "dst": label, "ms": 150})
        self.cluster.proxy.command({"op": "delay", "src": label, "dst": "*", "ms": 150})
        time.sleep(self.rng.uniform(2.0, 4.0))
        self.cluster.proxy.command({"op": "heal"})
        return FaultRecord(
            "slow_node", label, injected, time.monotonic(), detail="150 ms on every link"
        )

    def _disk_full(self, node_id: int) -> FaultRecord:
        disk = self.cluster.disks[node_id]
        watch, injected = self._start_node_fault(node_id)
        filled = disk.fill()
        time.sleep(self.rng.uniform(2.0, 4.0))
        disk.free()
        return self._finish(
            "disk_full", node_id, watch, injected, f"filled {filled / 2**20:.0f} MiB"
        )

    def _disk_error(self, kind: str, node_id: int) -> FaultRecord:
        """Arm EIO on the live node, let it fail for 2-3 s, disarm, restart it (a log dir
        that went offline stays offline until the broker restarts, as in Kafka)."""
        points = self.cluster.failpoints[node_id]
        node = self.cluster.cluster.node(node_id)
        watch, injected = self._start_node_fault(node_id)
        assert node.process is not None
        points.arm(EIO_FAILPOINTS[kind], node.process.pid)
        time.sleep(self.rng.uniform(2.0, 3.0))
        points.clear()
        self.cluster.cluster.kill(node_id)
        self.cluster.cluster.start_node(node_id)
        return self._finish(kind, node_id, watch, injected, EIO_FAILPOINTS[kind])

    def _corrupt_replica(self, node_id: int, tp: tuple[str, int]) -> FaultRecord:
        node = self.cluster.cluster.node(node_id)
        watch, injected = self._start_node_fault(node_id)
        self.cluster.cluster.kill(node_id)
        damage = damage_segment(node.data_dir, tp[0], tp[1], self.rng)
        self.cluster.cluster.start_node(node_id)
        detail = f"{tp[0]}/{tp[1]}: " + ("no segment to damage" if damage is None else str(damage))
        return self._finish("corrupt_replica", node_id, watch, injected, detail)


def _ms(seconds: float | None) -> str:
    return "    -   " if seconds is None else f"{seconds * 1000:6.0f} ms"
