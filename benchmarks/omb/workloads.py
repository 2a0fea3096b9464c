"""The workload matrix: what the OpenMessaging-style benchmark sends, and to which topic.

One workload is one topic with a fixed shape -- partition count, record size, keyed or not,
the producer's ``acks`` and the topic's replication factor (RF=3 topics live on 3 nodes and
get ``min.insync.replicas=2``). Record values are random bytes from a fixed seed, generated
once per producer process (a pool the producer cycles through), never per record; keys, when
used, come from a fixed pool too.

Named sets:

* ``full``  -- the whole matrix: {1, 16} partitions x {100 B, 1 KiB} x keyed/unkeyed x
  acks=1/all x RF=1 (1 node)/RF=3 (3 nodes): 32 workloads.
* ``goals`` -- what the performance goals are judged on: 16 partitions unkeyed, 100 B and
  1 KiB, acks=all at RF=1 and RF=3; plus 1 partition, 100 B, acks=1, RF=1.
* ``smoke`` -- one tiny single-node workload, for CI and tests.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import asdict, dataclass

__all__ = [
    "KEY_POOL",
    "PAYLOAD_POOL",
    "SEED",
    "SETS",
    "Workload",
    "full_matrix",
    "keys",
    "payloads",
    "workload_set",
]

SEED = 20_240_601
PAYLOAD_POOL = 1024  # distinct values a producer cycles through
KEY_POOL = 10_000  # distinct keys for keyed workloads (spread over every partition)

PARTITION_COUNTS = (1, 16)
RECORD_SIZES = (100, 1024)
ACKS = ("1", "all")
REPLICATION_FACTORS = (1, 3)


@dataclass(frozen=True)
class Workload:
    """One topic shape plus the producer's durability setting."""

    name: str
    partitions: int
    record_size: int  # bytes of each record value
    keyed: bool
    acks: str  # "1" or "all"
    replication_factor: int
    topics: int = 1

    def __post_init__(self) -> None:
        if self.acks not in ACKS:
            raise ValueError(f"acks must be '1' or 'all', got {self.acks!r}")
        if self.record_size < 8:
            raise ValueError("record_size must hold an 8-byte timestamp (>= 8)")
        if self.partitions < 1 or self.replication_factor < 1:
            raise ValueError("partitions and replication_factor must be >= 1")

    @property
    def nodes(self) -> int:
        """Brokers the workload needs: one per replica."""
        return 1 if self.replication_factor == 1 else max(3, self.replication_factor)

    @property
    def min_insync_replicas(self) -> int:
        return 2 if self.replication_factor >= 3 else 1

    def topic_configs(self) -> dict[str, str]:
        """Topic-level configs given to CreateTopics."""
        if self.replication_factor >= 3:
            return {"min.insync.replicas": str(self.min_insync_replicas)}
        return {}

    def fields(self) -> dict[str, object]:
        """The workload as JSON-ready fields (for result lines)."""
        return {**asdict(self), "nodes": self.nodes}


def workload_name(
    partitions: int, record_size: int, keyed: bool, acks: str, replication_factor: int
) -> str:
    size = f"{record_size}B" if record_size < 1024 else f"{record_size // 1024}KiB"
    kind = "keyed" if keyed else "unkeyed"
    return f"p{partitions}-{size}-{kind}-acks{acks}-rf{replication_factor}"


def make_workload(
    partitions: int, record_size: int, keyed: bool, acks: str, replication_factor: int
) -> Workload:
    return Workload(
        name=workload_name(partitions, record_size, keyed, acks, replication_factor),
        partitions=partitions,
        record_size=record_size,
        keyed=keyed,
        acks=acks,
        replication_factor=replication_factor,
    )


def full_matrix() -> list[Workload]:
    """Every combination; single-node (RF=1) workloads first, so a target starts once per
    node count."""
    combos = itertools.product(
        REPLICATION_FACTORS, PARTITION_COUNTS, RECORD_SIZES, (False, True), ACKS
    )
    return [make_workload(p, size, keyed, acks, rf) for rf, p, size, keyed, acks in combos]


def goals_set() -> list[Workload]:
    return [
        make_workload(16, 100, False, "all", 1),
        make_workload(16, 1024, False, "all", 1),
        make_workload(1, 100, False, "1", 1),
        make_workload(16, 100, False, "all", 3),
        make_workload(16, 1024, False, "all", 3),
    ]


def smoke_set() -> list[Workload]:
    return [make_workload(1, 100, False, "1", 1)]


SETS = {"full": full_matrix, "goals": goals_set, "smoke": smoke_set}


def workload_set(name: str) -> list[Workload]:
    """The named set (``full``, ``goals``, ``smoke``)."""
    try:
        return SETS[name]()
    except KeyError:
        raise ValueError(f"unknown workload set {name!r} ({', '.join(SETS)})") from None


def payloads(record_size: int, count: int = PAYLOAD_POOL, seed: int = SEED) -> list[bytes]:
    """``count`` random values of ``record_size`` bytes, the same for every run."""
    rng = random.Random(seed + record_size)
    return [rng.randbytes(record_size) for _ in range(count)]


def keys(count: int = KEY_POOL) -> list[bytes]:
    """``count`` distinct record keys, the same for every run."""
    return [b"key-%08d" % i for i in range(count)]
