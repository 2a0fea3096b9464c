"""What a chaos run observed: the input of :mod:`pydmq.chaos.checker`.

Everything here is plain data gathered by the runner while clients, faults and the cluster run;
the checker never talks to a broker. Times are ``time.monotonic()`` seconds of the runner
process. A partition is named ``(topic, partition)``.

Values are self-checking: :func:`encode_value` embeds the writer, its sequence number and a
CRC-32 of both, so a reader can tell a corrupted or foreign value from a real one.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "CommittedSample",
    "Delivery",
    "FaultRecord",
    "History",
    "Read",
    "TopicPartitionKey",
    "Write",
    "WriteOutcome",
    "decode_value",
    "encode_value",
]

TopicPartitionKey = tuple[str, int]
WriteOutcome = Literal["acked", "failed", "indeterminate"]


def encode_value(writer: str, seq: int) -> bytes:
    """``<writer>:<seq>:<crc32 hex of "<writer>:<seq>">`` as ASCII bytes."""
    body = f"{writer}:{seq}"
    return f"{body}:{zlib.crc32(body.encode()):08x}".encode()


def decode_value(value: bytes | None) -> tuple[str, int] | None:
    """``(writer, seq)`` of a value made by :func:`encode_value`; None if it is not one
    (wrong shape or CRC mismatch: a corrupted or foreign value)."""
    if value is None:
        return None
    try:
        text = value.decode("ascii")
        writer, seq_text, crc_text = text.rsplit(":", 2)
        seq = int(seq_text)
        crc = int(crc_text, 16)
    except (UnicodeDecodeError, ValueError):
        return None
    if zlib.crc32(f"{writer}:{seq_text}".encode()) != crc or not writer:
        return None
    return writer, seq


@dataclass(slots=True)
class Write:
    """One record a producer handed to its client.

    ``outcome`` is ``acked`` (delivery report without error; ``offset`` set), ``failed``
    (the client reported an error that means the record was never written, e.g. a purge of a
    record that was never sent) or ``indeterminate`` (an error after which the record may or
    may not be in the log, e.g. a timeout, or no report at all by the end of the run).
    Sequence numbers are per writer and strictly increasing in send order.
    """

    writer: str
    seq: int
    topic: str
    partition: int
    sent_at: float
    outcome: WriteOutcome = "indeterminate"
    offset: int | None = None
    acked_at: float | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Read:
    """One record seen by an assigned reader (no group) while the run went on."""

    reader: str
    topic: str
    partition: int
    offset: int
    value: bytes | None
    at: float


@dataclass(frozen=True, slots=True)
class Delivery:
    """One record handed to a consumer-group member (recorded before it commits past it)."""

    member: str
    topic: str
    partition: int
    offset: int
    value: bytes | None


@dataclass(frozen=True, slots=True)
class CommittedSample:
    """The group's committed offset of one partition, read back from the coordinator."""

    at: float
    topic: str
    partition: int
    offset: int


@dataclass(slots=True)
class FaultRecord:
    """One injected fault.

    ``kind`` is one of :data:`pydmq.chaos.faults.FAULT_KINDS`; ``target`` names a node
    (``"node-2"``), a client (``"producer-1"``) or a group member (``"member-0"``).
    ``affected`` lists the partitions whose leader the fault took away (empty when it took no
    leader away). ``new_leader_after`` is the seconds from ``injected_at`` until every affected
    partition had a leader other than the faulted one (or the same one with a higher epoch)
    in the observer's metadata, None when not measured or never reached.
    ``first_ack_after`` is computed by the checker from the writes.
    """

    kind: str
    target: str
    injected_at: float
    healed_at: float | None = None
    affected: list[TopicPartitionKey] = field(default_factory=list)
    new_leader_after: float | None = None
    detail: str = ""


@dataclass(slots=True)
class History:
    """Everything one run observed, handed to the checker after the cluster healed."""

    started_at: float
    ended_at: float
    partitions: list[TopicPartitionKey]
    writes: list[Write]
    reads: list[Read]
    deliveries: list[Delivery]
    committed: list[CommittedSample]
    # After healing: every partition drained from offset 0 to its high watermark.
    final_log: dict[TopicPartitionKey, list[tuple[int, bytes | None]]]
    # The group's committed offsets once its members stopped (missing: never committed).
    final_committed: dict[TopicPartitionKey, int]
    faults: list[FaultRecord]
    # Leader changes seen by the observer: (at, partition, new leader id, leader epoch).
    elections: list[tuple[float, TopicPartitionKey, int, int]]
    # Offline comparison of the replicas after a graceful stop: partition -> problem found
    # (empty dict: every replica held identical batches).
    replica_mismatches: dict[TopicPartitionKey, str] = field(default_factory=dict)
    # Fatal client errors (e.g. a producer that had to be recreated), as text.
    client_errors: list[str] = field(default_factory=list)
    # Who wrote each committed batch, read offline from one replica after the stop:
    # partition -> [(base offset, last offset, producer id, producer epoch)] in offset order.
    batch_producers: dict[TopicPartitionKey, list[tuple[int, int, int, int]]] = field(
        default_factory=dict
    )
