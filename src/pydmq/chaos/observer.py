"""The observer: polls partition leadership straight from the nodes (bypassing the proxy).

Every ``interval`` it asks one healthy node (the nemesis says which ones to avoid) for the
Metadata of the run's topics, records every leader change as an election, and answers the
nemesis's questions: who leads what, who is the active controller, is every ISR full, and how
long after a fault did every partition it took away get a new leader.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pydmq.chaos.history import TopicPartitionKey
from pydmq.chaos.security import harness_client_kwargs
from pydmq.client import KafkaClient

__all__ = ["LeaderWatch", "Observer", "PartitionState"]


@dataclass(frozen=True, slots=True)
class PartitionState:
    leader: int
    epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(slots=True)
class LeaderWatch:
    """Waits until every partition in ``epochs`` left ``node_id`` or got a newer epoch."""

    node_id: int
    since: float
    epochs: dict[TopicPartitionKey, int]
    done_after: float | None = None


class Observer(threading.Thread):
    def __init__(
        self,
        addresses: dict[int, str],
        topics: Sequence[str],
        avoid: Callable[[], set[int]],
        interval: float = 0.1,
    ) -> None:
        super().__init__(name="chaos-observer", daemon=True)
        self.addresses = addresses
        self.topics = list(topics)
        self.avoid = avoid
        self.interval = interval
        self.stop_event = threading.Event()
        self._lock = threading.Lock()
        self._clients: dict[int, KafkaClient] = {}
        self._state: dict[TopicPartitionKey, PartitionState] = {}
        self._controller = -1
        self._updated = 0.0
        self._watches: list[LeaderWatch] = []
        self.elections: list[tuple[float, TopicPartitionKey, int, int]] = []
        self.errors = 0

    # -- queries (any thread) -----------------------------------------------------------------

    def state(self) -> dict[TopicPartitionKey, PartitionState]:
        with self._lock:
            return dict(self._state)

    def controller(self) -> int:
        with self._lock:
            return self._controller

    def led_by(self, node_id: int) -> dict[TopicPartitionKey, int]:
        """Partitions ``node_id`` leads now, with their leader epochs."""
        with self._lock:
            return {tp: s.epoch for tp, s in self._state.items() if s.leader == node_id}

    def healthy(self, replication_factor: int, after: float = 0.0) -> bool:
        """Every partition led and with a full ISR, in metadata fetched after ``after``."""
        with self._lock:
            if self._updated <= after or not self._state:
                return False
            return all(
                s.leader >= 0 and len(s.isr) >= replication_factor for s in self._state.values()
            )

    def watch(self, node_id: int, since: float) -> LeaderWatch:
        watch = LeaderWatch(node_id, since, self.led_by(node_id))
        if not watch.epochs:
            watch.done_after = 0.0
        with self._lock:
            self._watches.append(watch)
        return watch

    # -- polling -------------------------------------------------------------------------------

    def run(self) -> None:
        while not self.stop_event.wait(self.interval):
            self.poll_once()
        for client in self._clients.values():
            client.close()

    def poll_once(self) -> bool:
        avoid = self.avoid()
        for node_id in sorted(self.addresses, key=lambda i: (i in avoid, i)):
            if node_id in avoid:
                break
            try:
                self._apply(self._fetch(node_id))
                return True
            except Exception:
                self.errors += 1
                client = self._clients.pop(node_id, None)
                if client is not None:
                    client.close()
        return False

    def _fetch(self, node_id: int) -> tuple[int, dict[TopicPartitionKey, PartitionState]]:
        client = self._clients.get(node_id)
        if client is None:
            client = KafkaClient(
                self.addresses[node_id],
                client_id="chaos-observer",
                timeout=1.0,
                **harness_client_kwargs(),
            )
            self._clients[node_id] = client
        response = client.refresh_metadata(self.topics)
        state: dict[TopicPartitionKey, PartitionState] = {}
        for topic in response.topics:
            if topic.name is None or topic.error_code:
                continue
            for p in topic.partitions:
                state[(topic.name, p.partition_index)] = PartitionState(
                    p.leader_id, p.leader_epoch, tuple(p.replica_nodes), tuple(p.isr_nodes)
                )
        return response.controller_id, state

    def _apply(self, fetched: tuple[int, dict[TopicPartitionKey, PartitionState]]) -> None:
        controller, state = fetched
        now = time.monotonic()
        with self._lock:
            for tp, new in state.items():
                old = self._state.get(tp)
                if old is not None and new.epoch < old.epoch:
                    continue  # a stale answer from a node behind on metadata
                moved = old is not None and (new.leader, new.epoch) != (old.leader, old.epoch)
                if moved and new.leader >= 0:
                    self.elections.append((now, tp, new.leader, new.epoch))
                self._state[tp] = new
            self._controller = controller
            self._updated = now
            for watch in self._watches:
                if watch.done_after is None and all(
                    (s := self._state.get(tp)) is not None
                    and s.leader >= 0
                    and (s.leader != watch.node_id or s.epoch > epoch)
                    for tp, epoch in watch.epochs.items()
                ):
                    watch.done_after = now - watch.since
            self._watches = [w for w in self._watches if w.done_after is None]
