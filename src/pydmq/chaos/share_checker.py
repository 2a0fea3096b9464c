"""The verdict on a chaos run's share group (KIP-932): what the share members saw, checked
against the final log.

Each share member (:mod:`pydmq.chaos.share_member`) records every delivery (``D``) and the
outcome of its acceptance (``A``: the broker confirmed it; ``F``: failed or unknown). Positions
are ``(topic, partition, offset)``. Pure and deterministic, as :mod:`pydmq.chaos.checker`.

Safety anomalies (any makes :attr:`ShareReport.ok` false)
--------------------------------------------------------

``share_accepted_twice``
    Positions whose acceptance the broker confirmed more than once: a record accepted by
    exactly one consumer must never be handed out again, so never accepted again.
``share_redelivered_after_accept``
    Deliveries of a position that come after a confirmed acceptance of it (by the member
    clock of one machine).
``share_never_delivered``
    Final-log positions (data records) no member was ever handed, once the group finished
    (its start offset passed every record): the group skipped them.
``share_unknown_positions``
    Positions delivered that the final log does not hold (or holds another value at).

Figures: deliveries, redeliveries (delivery count above 1), confirmed acceptances, failed or
unknown acknowledgements, positions in the final log.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pydmq.chaos.history import TopicPartitionKey

__all__ = [
    "SHARE_ANOMALY_NAMES",
    "ShareEvent",
    "ShareReport",
    "check_shares",
    "read_share_events",
]

SHARE_ANOMALY_NAMES: Final = (
    "share_accepted_twice",
    "share_redelivered_after_accept",
    "share_never_delivered",
    "share_unknown_positions",
)
_MAX_EXAMPLES = 10

Position = tuple[str, int, int]


@dataclass(frozen=True, slots=True)
class ShareEvent:
    """One line of a share member's file."""

    kind: str  # "D" delivered, "A" accepted, "F" failed or unknown
    at: float
    member: str
    position: Position
    delivery_count: int = 0
    value: bytes | None = None
    error: str = ""


def read_share_events(member: str, paths: Sequence[Path]) -> list[ShareEvent]:
    """Parse a share member's files; torn or malformed lines (``kill -9`` mid-write) are
    skipped."""
    out: list[ShareEvent] = []
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            event = _parse(member, line)
            if event is not None:
                out.append(event)
    return out


def _parse(member: str, line: str) -> ShareEvent | None:
    parts = line.split(" ")
    try:
        kind, at, topic, partition, offset = parts[0], float(parts[1]), parts[2], parts[3], parts[4]
        position = (topic, int(partition), int(offset))
        if kind == "D" and len(parts) == 7:
            value = None if parts[6] == "-" else bytes.fromhex(parts[6])
            return ShareEvent("D", at, member, position, int(parts[5]), value)
        if kind == "A" and len(parts) == 5:
            return ShareEvent("A", at, member, position)
        if kind == "F" and len(parts) == 6:
            return ShareEvent("F", at, member, position, error=parts[5])
    except (IndexError, ValueError):
        return None
    return None


@dataclass(slots=True)
class _Anomaly:
    count: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, example: str) -> None:
        self.count += 1
        if len(self.examples) < _MAX_EXAMPLES:
            self.examples.append(example)


@dataclass(slots=True)
class ShareReport:
    """What :func:`check_shares` found."""

    anomalies: dict[str, _Anomaly]
    deliveries: int
    redeliveries: int
    accepted: int
    failed_acks: int
    positions: int
    finished: bool

    @property
    def ok(self) -> bool:
        return all(not a.count for a in self.anomalies.values())

    def to_json(self) -> dict[str, Any]:
        return {
            **{n: {"count": a.count, "examples": a.examples} for n, a in self.anomalies.items()},
            "deliveries": self.deliveries,
            "redeliveries": self.redeliveries,
            "accepted": self.accepted,
            "failed_acks": self.failed_acks,
            "positions": self.positions,
            "finished": self.finished,
        }

    def text(self) -> str:
        lines = [
            f"share group: {self.deliveries} deliveries ({self.redeliveries} redeliveries), "
            f"{self.accepted} acceptances confirmed, {self.failed_acks} failed or unknown, "
            f"{self.positions} records in the final log"
            + ("" if self.finished else " (the group did not finish)"),
        ]
        for name, anomaly in self.anomalies.items():
            lines.append(f"  {name}: {anomaly.count}")
            lines += [f"    {e}" for e in anomaly.examples]
        return "\n".join(lines)


def _show(position: Position) -> str:
    return f"{position[0]}-{position[1]}@{position[2]}"


def check_shares(
    events: Iterable[ShareEvent],
    final_log: Mapping[TopicPartitionKey, Sequence[tuple[int, bytes | None]]],
    finished: bool,
) -> ShareReport:
    """Check the share members' ``events`` against ``final_log``; ``finished``: the group's
    start offsets passed every record (else records not yet delivered are not counted as
    skipped)."""
    ordered = sorted(events, key=lambda e: (e.at, e.kind, e.member, e.position))
    anomalies = {name: _Anomaly() for name in SHARE_ANOMALY_NAMES}
    logged = {
        (topic, partition, offset): value
        for (topic, partition), entries in sorted(final_log.items())
        for offset, value in entries
    }
    accepted_at: dict[Position, float] = {}
    delivered: set[Position] = set()
    deliveries = redeliveries = accepted = failed = 0
    for event in ordered:
        position = event.position
        if event.kind == "D":
            deliveries += 1
            redeliveries += event.delivery_count > 1
            delivered.add(position)
            if position not in logged or logged[position] != event.value:
                anomalies["share_unknown_positions"].add(f"{_show(position)} by {event.member}")
            if position in accepted_at and event.at > accepted_at[position]:
                anomalies["share_redelivered_after_accept"].add(
                    f"{_show(position)} to {event.member} (delivery {event.delivery_count}) "
                    f"{event.at - accepted_at[position]:.3f} s after its acceptance"
                )
        elif event.kind == "A":
            accepted += 1
            if position in accepted_at:
                anomalies["share_accepted_twice"].add(f"{_show(position)} again by {event.member}")
            else:
                accepted_at[position] = event.at
        else:
            failed += 1
    if finished:
        for position in sorted(logged):
            if position not in delivered:
                anomalies["share_never_delivered"].add(_show(position))
    return ShareReport(anomalies, deliveries, redeliveries, accepted, failed, len(logged), finished)
