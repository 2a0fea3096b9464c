"""The verdict on a chaos run: :func:`check` turns a :class:`~pydmq.chaos.history.History`
into a :class:`Report`.

The checker is pure and deterministic: it never talks to a broker, and the same history always
gives the same report (examples included). Every pass is linear in the size of the history
(dicts and sets, no pairwise comparisons), apart from sorting the acknowledgement times and the
commit samples.

Vocabulary: a *position* is ``(partition, offset)``; a *value's identity* is the
``(writer, seq)`` that :func:`~pydmq.chaos.history.decode_value` finds in it (two byte strings
with the same identity are the same write). Times in the report are seconds; instants are
relative to ``started_at``. Every anomaly carries a count and at most :data:`MAX_EXAMPLES`
examples (strings), in a deterministic order (partitions sorted, offsets ascending, writes and
reads in history order).

Safety anomalies (any of them makes :attr:`Report.ok` false)
------------------------------------------------------------

``lost``
    Acked writes whose identity appears nowhere in the final log. Counted per write.
``moved``
    Acked writes whose identity is in the final log but not at the acknowledged position
    ``((topic, partition), offset)`` (at another offset, or in another partition). An acked
    write without an offset only has to be present somewhere. Counted per write.
``duplicated``
    Identities found at more than one position of the final log, counted per value, except
    the copies described under ``resent_after_epoch_bump``.
``reordered``
    For each writer and partition, the final-log entries of that writer (first occurrence of
    each identity) sorted by ``seq``: each consecutive pair whose offsets decrease is one
    violation. Gaps in ``seq`` (writes that never landed) are fine.
``failed_but_present``
    Writes reported ``failed`` (definitely not written) whose identity is in the final log.
``unknown_values``
    Decodable final-log identities that no :class:`~pydmq.chaos.history.Write` produced.
    Counted per identity.
``corrupted``
    Final-log entries whose value does not decode (None, wrong shape or CRC mismatch).
    Counted per entry; these take no further part in the value checks.
``inconsistent_offsets``
    Positions at which two different values (byte-wise) were seen across the final log (a
    repeated offset within one partition's drain), the readers' ``reads`` and the members'
    ``deliveries``. Counted per position.
``truncated_reads``
    Positions seen by a reader or a member that the final log does not hold (beyond its high
    watermark, below its start, in a hole, or a partition missing from the final log).
    Counted per position, however many observers saw it.
``consumer_skips``
    For each partition with a final committed offset ``C``: final-log offsets ``o < C`` that
    no member was ever handed (absent from ``deliveries``). Counted per position.
``committed_regressions``
    Per partition, the ``committed`` samples sorted by time (stable): a sample lower than the
    highest earlier one is a regression. The final committed offset is checked last, as a
    sample taken at ``ended_at``. Counted per regressing sample.
``replica_mismatches``
    ``History.replica_mismatches``, copied (every entry is an example, not only ten).

Informational figures (never affect ``ok``)
-------------------------------------------

``writes``
    Counts of ``acked`` / ``failed`` / ``indeterminate`` writes and their ``total``.
``indeterminate_landed``
    Indeterminate writes whose identity is in the final log.
``redelivered``
    Positions handed to members more than once (by the same member or another one):
    at-least-once delivery at work.
``resent_after_epoch_bump``
    Identities found at more than one position where ``History.batch_producers`` shows every
    copy written by the same producer id under a different producer epoch. A broker
    deduplicates retries within one epoch only (KIP-98: a new epoch restarts the sequence at
    0), so these are copies the client itself sent again as new records after bumping its
    epoch. librdkafka (up to 2.16 at least) does that to batches it had possibly persisted
    when a later in-flight request of the same producer gets OUT_OF_ORDER_SEQUENCE_NUMBER
    after an earlier one failed, against Apache Kafka as well (librdkafka issue #4953).
    Counted per value; duplicates within one epoch stay ``duplicated``.
``faults``
    Count by kind and total. ``elections``: ``len(History.elections)``, also per partition.
``fault_log``
    Per fault: kind, target, detail, ``injected_at`` (relative), ``duration``
    (``healed_at - injected_at``, None if never healed), number of affected partitions,
    ``new_leader_after`` (from the record), ``first_ack_after`` and ``first_ack_any_after``.
``first_ack_after``
    Only for faults with affected partitions: for each affected partition, the earliest
    ``acked_at >= injected_at`` among its acked writes, minus ``injected_at``; the fault's
    figure is the maximum over its partitions, None ("not recovered") if some partition never
    got such an acknowledgement.
``first_ack_any_after``
    For every fault: the earliest ``acked_at >= injected_at`` over all partitions, minus
    ``injected_at`` (None if no acknowledgement followed).
``recovery``
    ``new_leader_after`` (None skipped), ``first_ack_after`` (None skipped; ``not_recovered``
    counts faults with affected partitions whose figure is None) and ``first_ack_any_after``,
    each as ``count``, ``p50``, ``p95``, ``max``, overall and per fault kind. Percentiles are
    nearest-rank: the value at 1-based rank ``ceil(p * n / 100)`` of the sorted values; None
    when there are no values.
``longest_write_outage``
    Per partition, the acked writes' ``acked_at`` sorted; the largest gap between two
    consecutive acknowledgements. The time before a partition's first acknowledgement and
    after its last one is not counted (the run starts and stops producing). Reported: the
    largest gap over all partitions (the first partition in sorted order on a tie), its
    partition and the relative instant the gap began; all None if no partition had two
    acknowledgements. Partitions of ``History.partitions`` with no acknowledgement at all are
    listed as ``partitions_without_acks``.
``throughput``
    Acked writes and reader ``reads`` per second of ``ended_at - started_at`` (0 if the run
    has no duration).
``client_errors``
    Their count and the first :data:`MAX_CLIENT_ERRORS`.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from operator import attrgetter, itemgetter
from typing import Any, Final

from pydmq.chaos.history import (
    CommittedSample,
    FaultRecord,
    History,
    TopicPartitionKey,
    decode_value,
)

__all__ = [
    "ANOMALY_NAMES",
    "MAX_CLIENT_ERRORS",
    "MAX_EXAMPLES",
    "Anomaly",
    "FaultOutcome",
    "Outage",
    "Percentiles",
    "RecoveryStats",
    "Report",
    "WriteCounts",
    "check",
    "percentile",
]

MAX_EXAMPLES: Final = 10
MAX_CLIENT_ERRORS: Final = 20

#: Every safety anomaly, in report order.
ANOMALY_NAMES: Final = (
    "lost",
    "moved",
    "duplicated",
    "reordered",
    "failed_but_present",
    "unknown_values",
    "corrupted",
    "inconsistent_offsets",
    "truncated_reads",
    "consumer_skips",
    "committed_regressions",
    "replica_mismatches",
)

_Ident = tuple[str, int]
_Position = tuple[TopicPartitionKey, int]
_VALUE_SHOWN: Final = 48


def percentile(sorted_values: Sequence[float], p: int) -> float | None:
    """Nearest-rank percentile ``p`` (0 < p <= 100) of already sorted values; None if empty."""
    if not sorted_values:
        return None
    rank = max(1, (p * len(sorted_values) + 99) // 100)
    return sorted_values[rank - 1]


def _tp(tp: TopicPartitionKey) -> str:
    return f"{tp[0]}-{tp[1]}"


def _pos(tp: TopicPartitionKey, offset: int) -> str:
    return f"{tp[0]}-{tp[1]}@{offset}"


def _show(value: bytes | None) -> str:
    text = repr(value)
    return text if len(text) <= _VALUE_SHOWN else text[: _VALUE_SHOWN - 3] + "..."


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f}"


def _round(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 6)


@dataclass(frozen=True, slots=True)
class Anomaly:
    """How often one kind of anomaly occurred, with a few examples."""

    count: int = 0
    examples: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "examples": list(self.examples)}


class _Tally:
    """Mutable builder of an :class:`Anomaly`: ``if t.hit(): t.examples.append(...)``."""

    __slots__ = ("count", "examples", "limit")

    def __init__(self, limit: int = MAX_EXAMPLES) -> None:
        self.count = 0
        self.examples: list[str] = []
        self.limit = limit

    def hit(self) -> bool:
        """Count one occurrence; True if an example of it is still wanted."""
        self.count += 1
        return len(self.examples) < self.limit

    def freeze(self) -> Anomaly:
        return Anomaly(self.count, tuple(self.examples))


@dataclass(frozen=True, slots=True)
class WriteCounts:
    acked: int = 0
    failed: int = 0
    indeterminate: int = 0
    total: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "acked": self.acked,
            "failed": self.failed,
            "indeterminate": self.indeterminate,
            "total": self.total,
        }


@dataclass(frozen=True, slots=True)
class Percentiles:
    """Nearest-rank summary of some durations (seconds)."""

    count: int = 0
    p50: float | None = None
    p95: float | None = None
    max: float | None = None

    @classmethod
    def of(cls, values: Iterable[float]) -> Percentiles:
        ordered = sorted(values)
        return cls(
            count=len(ordered),
            p50=percentile(ordered, 50),
            p95=percentile(ordered, 95),
            max=ordered[-1] if ordered else None,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "p50": _round(self.p50),
            "p95": _round(self.p95),
            "max": _round(self.max),
            "count": self.count,
        }


@dataclass(frozen=True, slots=True)
class RecoveryStats:
    """Recovery figures of a set of faults."""

    faults: int = 0
    new_leader_after: Percentiles = field(default_factory=Percentiles)
    first_ack_after: Percentiles = field(default_factory=Percentiles)
    not_recovered: int = 0
    first_ack_any_after: Percentiles = field(default_factory=Percentiles)

    @classmethod
    def of(cls, outcomes: Sequence[FaultOutcome]) -> RecoveryStats:
        return cls(
            faults=len(outcomes),
            new_leader_after=Percentiles.of(
                o.new_leader_after for o in outcomes if o.new_leader_after is not None
            ),
            first_ack_after=Percentiles.of(
                o.first_ack_after for o in outcomes if o.first_ack_after is not None
            ),
            not_recovered=sum(1 for o in outcomes if o.affected and o.first_ack_after is None),
            first_ack_any_after=Percentiles.of(
                o.first_ack_any_after for o in outcomes if o.first_ack_any_after is not None
            ),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "faults": self.faults,
            "new_leader_after": self.new_leader_after.to_json(),
            "first_ack_after": {
                **self.first_ack_after.to_json(),
                "not_recovered": self.not_recovered,
            },
            "first_ack_any_after": self.first_ack_any_after.to_json(),
        }


@dataclass(frozen=True, slots=True)
class FaultOutcome:
    """One injected fault and what followed it."""

    kind: str
    target: str
    detail: str
    injected_at: float  # relative to started_at
    duration: float | None  # healed_at - injected_at
    affected: int
    new_leader_after: float | None
    first_ack_after: float | None
    first_ack_any_after: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "target": self.target,
            "detail": self.detail,
            "injected_at": _round(self.injected_at),
            "duration": _round(self.duration),
            "affected": self.affected,
            "new_leader_after": _round(self.new_leader_after),
            "first_ack_after": _round(self.first_ack_after),
            "first_ack_any_after": _round(self.first_ack_any_after),
        }


@dataclass(frozen=True, slots=True)
class Outage:
    """The longest gap between two consecutive acknowledgements on one partition."""

    seconds: float | None = None
    partition: TopicPartitionKey | None = None
    at: float | None = None  # relative to started_at

    def to_json(self) -> dict[str, Any]:
        return {
            "seconds": _round(self.seconds),
            "partition": None if self.partition is None else _tp(self.partition),
            "at": _round(self.at),
        }


@dataclass(frozen=True, slots=True)
class Report:
    """What :func:`check` found. See the module docstring for every definition."""

    writes: WriteCounts
    lost: Anomaly
    moved: Anomaly
    duplicated: Anomaly
    reordered: Anomaly
    failed_but_present: Anomaly
    unknown_values: Anomaly
    corrupted: Anomaly
    inconsistent_offsets: Anomaly
    truncated_reads: Anomaly
    consumer_skips: Anomaly
    committed_regressions: Anomaly
    replica_mismatches: dict[TopicPartitionKey, str]
    indeterminate_landed: int
    redelivered: int
    resent_after_epoch_bump: Anomaly
    faults_by_kind: dict[str, int]
    elections: int
    elections_by_partition: dict[TopicPartitionKey, int]
    recovery: RecoveryStats
    recovery_by_kind: dict[str, RecoveryStats]
    fault_log: list[FaultOutcome]
    longest_write_outage: Outage
    partitions_without_acks: list[TopicPartitionKey]
    duration_s: float
    writes_per_s: float
    reads_per_s: float
    reads: int
    deliveries: int
    client_errors: list[str]

    @property
    def faults_total(self) -> int:
        return sum(self.faults_by_kind.values())

    def anomaly(self, name: str) -> Anomaly:
        """The anomaly called ``name`` (one of :data:`ANOMALY_NAMES`)."""
        if name == "replica_mismatches":
            return Anomaly(
                len(self.replica_mismatches),
                tuple(
                    f"{_tp(tp)}: {problem}"
                    for tp, problem in sorted(self.replica_mismatches.items())
                ),
            )
        if name not in ANOMALY_NAMES:
            raise KeyError(name)
        found: Anomaly = getattr(self, name)
        return found

    @property
    def anomalies(self) -> tuple[str, ...]:
        """Names of the anomalies that occurred, in :data:`ANOMALY_NAMES` order."""
        return tuple(name for name in ANOMALY_NAMES if self.anomaly(name).count)

    @property
    def ok(self) -> bool:
        """True when no safety anomaly occurred (availability figures do not count)."""
        return not self.anomalies

    def to_json(self) -> dict[str, Any]:
        """JSON-serialisable form (stable snake_case keys; partitions as ``topic-partition``)."""
        out: dict[str, Any] = {
            "ok": self.ok,
            "anomalies": list(self.anomalies),
            "writes": self.writes.to_json(),
        }
        for name in ANOMALY_NAMES:
            out[name] = self.anomaly(name).to_json()
        out["indeterminate_landed"] = self.indeterminate_landed
        out["redelivered"] = self.redelivered
        out["resent_after_epoch_bump"] = self.resent_after_epoch_bump.to_json()
        out["faults"] = {"total": self.faults_total, "by_kind": dict(self.faults_by_kind)}
        out["elections"] = {
            "total": self.elections,
            "by_partition": {_tp(tp): n for tp, n in self.elections_by_partition.items()},
        }
        out["recovery"] = {
            **self.recovery.to_json(),
            "by_kind": {kind: stats.to_json() for kind, stats in self.recovery_by_kind.items()},
        }
        out["longest_write_outage"] = self.longest_write_outage.to_json()
        out["partitions_without_acks"] = [_tp(tp) for tp in self.partitions_without_acks]
        out["throughput"] = {
            "writes_per_s": round(self.writes_per_s, 3),
            "reads_per_s": round(self.reads_per_s, 3),
        }
        out["reads"] = self.reads
        out["deliveries"] = self.deliveries
        out["duration_s"] = round(self.duration_s, 6)
        out["client_errors"] = {
            "count": len(self.client_errors),
            "examples": self.client_errors[:MAX_CLIENT_ERRORS],
        }
        out["fault_log"] = [outcome.to_json() for outcome in self.fault_log]
        return out

    def text(self, examples: int = 3) -> str:
        """A human-readable summary (``examples`` per anomaly that occurred)."""
        found = self.anomalies
        lines = ["verdict: OK" if not found else "verdict: FAILED (" + ", ".join(found) + ")"]
        w = self.writes
        lines.append(
            f"writes:  {w.total} total, {w.acked} acked, {w.failed} failed, "
            f"{w.indeterminate} indeterminate ({self.indeterminate_landed} of them landed)"
        )
        lines.append(
            f"run:     {self.duration_s:.1f}s, {self.writes_per_s:.1f} acked writes/s, "
            f"{self.reads_per_s:.1f} reads/s, {self.deliveries} deliveries "
            f"({self.redelivered} offsets redelivered)"
        )
        resent = self.resent_after_epoch_bump
        if resent.count:
            lines.append(
                f"client:  {resent.count} values resent under a bumped producer epoch "
                "(not deduplicable by a broker; see resent_after_epoch_bump)"
            )
            lines.extend(f"      {example}" for example in resent.examples[:examples])
        lines.append("anomalies:")
        width = max(len(name) for name in ANOMALY_NAMES)
        for name in ANOMALY_NAMES:
            anomaly = self.anomaly(name)
            lines.append(f"  {name:<{width}}  {anomaly.count:>8}")
            lines.extend(f"      {example}" for example in anomaly.examples[:examples])
        by_kind = ", ".join(f"{kind} {n}" for kind, n in self.faults_by_kind.items())
        lines.append(f"faults:  {self.faults_total}" + (f" ({by_kind})" if by_kind else ""))
        lines.append(f"elections: {self.elections}")
        if self.fault_log:
            lines.append("recovery (ms; leader: new_leader_after, ack: first_ack_after):")
            rows: list[tuple[str, ...]] = [
                ("kind", "n", "leader p50", "p95", "max", "ack p50", "p95", "max", "not recovered")
            ]
            for kind, stats in [*self.recovery_by_kind.items(), ("all", self.recovery)]:
                leader, ack = stats.new_leader_after, stats.first_ack_after
                rows.append(
                    (
                        kind,
                        str(stats.faults),
                        _ms(leader.p50),
                        _ms(leader.p95),
                        _ms(leader.max),
                        _ms(ack.p50),
                        _ms(ack.p95),
                        _ms(ack.max),
                        str(stats.not_recovered),
                    )
                )
            widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
            for row in rows:
                cells = [row[0].ljust(widths[0])]
                cells.extend(cell.rjust(widths[i]) for i, cell in enumerate(row) if i)
                lines.append("  " + "  ".join(cells))
        outage = self.longest_write_outage
        if outage.seconds is None or outage.partition is None or outage.at is None:
            lines.append("longest write outage: -")
        else:
            lines.append(
                f"longest write outage: {outage.seconds:.3f}s on {_tp(outage.partition)} "
                f"from +{outage.at:.3f}s"
            )
        if self.partitions_without_acks:
            lines.append(
                "partitions without acks: "
                + ", ".join(_tp(tp) for tp in self.partitions_without_acks)
            )
        lines.append(f"client errors: {len(self.client_errors)}")
        lines.extend(f"      {error}" for error in self.client_errors[:examples])
        return "\n".join(lines)


def _first_at_or_after(ordered: Sequence[float], at: float) -> float | None:
    i = bisect_left(ordered, at)
    return ordered[i] if i < len(ordered) else None


class _Observations:
    """Cross-checks what readers and members saw against the final log."""

    def __init__(
        self,
        logs: dict[TopicPartitionKey, dict[int, bytes | None]],
        bounds: dict[TopicPartitionKey, tuple[int, int]],
        inconsistent: _Tally,
        inconsistent_at: set[_Position],
    ) -> None:
        self.logs = logs
        self.bounds = bounds
        self.inconsistent = inconsistent
        self.inconsistent_at = inconsistent_at
        self.truncated = _Tally()
        # Positions absent from the final log: the first value seen there, and by whom.
        self.off_log: dict[_Position, tuple[bytes | None, str]] = {}

    def _held(self, tp: TopicPartitionKey) -> str:
        if tp not in self.logs:
            return "the partition is missing from the final log"
        if tp not in self.bounds:
            return "the final log is empty"
        first, last = self.bounds[tp]
        return f"the final log holds offsets {first}..{last}"

    def _conflict(self, pos: _Position, first: str, second: str) -> None:
        if pos in self.inconsistent_at:
            return
        self.inconsistent_at.add(pos)
        if self.inconsistent.hit():
            self.inconsistent.examples.append(f"{_pos(*pos)}: {first} vs {second}")

    def see(
        self, tp: TopicPartitionKey, offset: int, value: bytes | None, role: str, name: str
    ) -> None:
        """``role`` (``reader`` or ``member``) ``name`` saw ``value`` at ``offset`` of ``tp``."""
        log = self.logs.get(tp)
        if log is not None and offset in log:
            held = log[offset]
            if held != value:
                self._conflict(
                    (tp, offset), f"final log {_show(held)}", f"{role} {name} {_show(value)}"
                )
            return
        who = f"{role} {name}"
        pos = (tp, offset)
        seen = self.off_log.get(pos)
        if seen is None:
            self.off_log[pos] = (value, who)
            if self.truncated.hit():
                self.truncated.examples.append(
                    f"{_pos(tp, offset)} seen by {who}, but {self._held(tp)}"
                )
        elif seen[0] != value:
            self._conflict(pos, f"{seen[1]} {_show(seen[0])}", f"{who} {_show(value)}")


def check(history: History) -> Report:
    """Check a run's history; see the module docstring for what is computed."""
    started = history.started_at

    # --- writes -----------------------------------------------------------------------------
    acked = failed = indeterminate = 0
    known: dict[str, set[int]] = {}  # writer -> its seqs
    ack_times: dict[TopicPartitionKey, list[float]] = {}
    for w in history.writes:
        seqs = known.get(w.writer)
        if seqs is None:
            known[w.writer] = {w.seq}
        else:
            seqs.add(w.seq)
        if w.outcome == "acked":
            acked += 1
            if w.acked_at is not None:
                tp = (w.topic, w.partition)
                times = ack_times.get(tp)
                if times is None:
                    ack_times[tp] = [w.acked_at]
                else:
                    times.append(w.acked_at)
        elif w.outcome == "failed":
            failed += 1
        else:
            indeterminate += 1
    write_counts = WriteCounts(acked, failed, indeterminate, len(history.writes))

    # --- the final log ----------------------------------------------------------------------
    logs: dict[TopicPartitionKey, dict[int, bytes | None]] = {}
    bounds: dict[TopicPartitionKey, tuple[int, int]] = {}
    first_at: dict[_Ident, _Position] = {}
    extra_at: dict[_Ident, list[_Position]] = {}
    corrupted = _Tally()
    reordered = _Tally()
    inconsistent = _Tally()
    inconsistent_at: set[_Position] = set()
    for tp in sorted(history.final_log):
        entries = history.final_log[tp]
        if any(a[0] > b[0] for a, b in pairwise(entries)):
            entries = sorted(entries, key=itemgetter(0))
        log: dict[int, bytes | None] = {}
        logs[tp] = log
        if entries:
            bounds[tp] = (entries[0][0], entries[-1][0])
        last_seq: dict[str, int] = {}  # writer -> seq of its latest first occurrence here
        unordered: set[str] = set()  # writers whose seqs do not ascend with the offsets here
        for offset, value in entries:
            if offset in log:
                held = log[offset]
                if held != value and (tp, offset) not in inconsistent_at:
                    inconsistent_at.add((tp, offset))
                    if inconsistent.hit():
                        inconsistent.examples.append(
                            f"{_pos(tp, offset)}: final log {_show(held)}"
                            f" vs final log {_show(value)}"
                        )
                continue
            log[offset] = value
            ident = decode_value(value)
            if ident is None:
                if corrupted.hit():
                    corrupted.examples.append(f"{_pos(tp, offset)}: {_show(value)}")
                continue
            here = (tp, offset)
            first = first_at.setdefault(ident, here)
            if first is not here:
                extra_at.setdefault(ident, []).append(here)
                continue
            writer, seq = ident
            previous = last_seq.get(writer)
            if previous is not None and previous > seq:
                unordered.add(writer)
            last_seq[writer] = seq
        if unordered:
            _count_reorders(tp, log, first_at, unordered, reordered)

    duplicated = _Tally()
    resent = _Tally()
    writers = _BatchProducers(history.batch_producers)
    for ident, extras in extra_at.items():
        positions = [first_at[ident], *extras]
        epochs = writers.epochs_of_one_producer(positions)
        tally = resent if epochs is not None and len(set(epochs)) == len(positions) else duplicated
        if tally.hit():
            where = ", ".join(_pos(*p) for p in positions)
            if tally is resent:
                where += " (producer epochs " + ", ".join(map(str, epochs or ())) + ")"
            tally.examples.append(f"{ident[0]}#{ident[1]} at {where}")

    unknown = _Tally()
    for ident, (tp, offset) in first_at.items():
        if ident[1] not in known.get(ident[0], ()) and unknown.hit():
            unknown.examples.append(f"{ident[0]}#{ident[1]} at {_pos(tp, offset)}")

    # --- writes against the final log -------------------------------------------------------
    lost = _Tally()
    moved = _Tally()
    failed_present = _Tally()
    indeterminate_landed = 0
    for w in history.writes:
        ident = (w.writer, w.seq)
        found = first_at.get(ident)
        if w.outcome == "acked":
            if found is None:
                if lost.hit():
                    where = (
                        "" if w.offset is None else f" at {_pos((w.topic, w.partition), w.offset)}"
                    )
                    lost.examples.append(f"{w.writer}#{w.seq} acked{where}: not in the final log")
                continue
            if w.offset is None:
                continue
            acked_pos = ((w.topic, w.partition), w.offset)
            if found == acked_pos or acked_pos in extra_at.get(ident, ()):
                continue
            if moved.hit():
                moved.examples.append(
                    f"{w.writer}#{w.seq} acked at {_pos(*acked_pos)}, found at {_pos(*found)}"
                )
        elif found is None:
            continue
        elif w.outcome == "failed":
            if failed_present.hit():
                why = f" ({w.error})" if w.error else ""
                failed_present.examples.append(
                    f"{w.writer}#{w.seq} failed{why}, found at {_pos(*found)}"
                )
        else:
            indeterminate_landed += 1

    # --- what readers and members saw -------------------------------------------------------
    seen = _Observations(logs, bounds, inconsistent, inconsistent_at)
    for r in history.reads:
        seen.see((r.topic, r.partition), r.offset, r.value, "reader", r.reader)
    delivered: dict[TopicPartitionKey, dict[int, int]] = {}
    for d in history.deliveries:
        tp = (d.topic, d.partition)
        seen.see(tp, d.offset, d.value, "member", d.member)
        counts = delivered.get(tp)
        if counts is None:
            delivered[tp] = {d.offset: 1}
        else:
            counts[d.offset] = counts.get(d.offset, 0) + 1
    redelivered = sum(1 for counts in delivered.values() for n in counts.values() if n > 1)

    skips = _Tally()
    for tp in sorted(history.final_committed):
        committed_at = history.final_committed[tp]
        given = delivered.get(tp, {})
        for offset in logs.get(tp, {}):  # ascending
            if offset >= committed_at:
                break
            if offset not in given and skips.hit():
                skips.examples.append(
                    f"{_pos(tp, offset)}: below the final committed offset {committed_at}, "
                    "never delivered"
                )

    regressions = _check_commits(history, started)

    # --- faults -----------------------------------------------------------------------------
    for times in ack_times.values():
        times.sort()
    all_acks = sorted(t for times in ack_times.values() for t in times)
    fault_log = [_fault_outcome(f, started, ack_times, all_acks) for f in history.faults]
    faults_by_kind: dict[str, int] = {}
    grouped: dict[str, list[FaultOutcome]] = {}
    for outcome in fault_log:
        faults_by_kind[outcome.kind] = faults_by_kind.get(outcome.kind, 0) + 1
        grouped.setdefault(outcome.kind, []).append(outcome)
    elections_by_partition: dict[TopicPartitionKey, int] = {}
    for _at, tp, _leader, _epoch in history.elections:
        elections_by_partition[tp] = elections_by_partition.get(tp, 0) + 1

    # --- availability -----------------------------------------------------------------------
    outage = Outage()
    for tp in sorted(ack_times):
        times = ack_times[tp]
        for before, after in pairwise(times):
            if outage.seconds is None or after - before > outage.seconds:
                outage = Outage(after - before, tp, before - started)
    without_acks = [tp for tp in history.partitions if tp not in ack_times]
    duration = history.ended_at - started

    return Report(
        writes=write_counts,
        lost=lost.freeze(),
        moved=moved.freeze(),
        duplicated=duplicated.freeze(),
        reordered=reordered.freeze(),
        failed_but_present=failed_present.freeze(),
        unknown_values=unknown.freeze(),
        corrupted=corrupted.freeze(),
        inconsistent_offsets=inconsistent.freeze(),
        truncated_reads=seen.truncated.freeze(),
        consumer_skips=skips.freeze(),
        committed_regressions=regressions.freeze(),
        replica_mismatches=dict(sorted(history.replica_mismatches.items())),
        indeterminate_landed=indeterminate_landed,
        redelivered=redelivered,
        resent_after_epoch_bump=resent.freeze(),
        faults_by_kind=dict(sorted(faults_by_kind.items())),
        elections=len(history.elections),
        elections_by_partition=dict(sorted(elections_by_partition.items())),
        recovery=RecoveryStats.of(fault_log),
        recovery_by_kind={kind: RecoveryStats.of(grouped[kind]) for kind in sorted(grouped)},
        fault_log=fault_log,
        longest_write_outage=outage,
        partitions_without_acks=without_acks,
        duration_s=duration,
        writes_per_s=acked / duration if duration > 0 else 0.0,
        reads_per_s=len(history.reads) / duration if duration > 0 else 0.0,
        reads=len(history.reads),
        deliveries=len(history.deliveries),
        client_errors=list(history.client_errors),
    )


class _BatchProducers:
    """Producer id and epoch of the batch holding a position, from ``batch_producers``."""

    __slots__ = ("_batches", "_starts")

    def __init__(self, batches: dict[TopicPartitionKey, list[tuple[int, int, int, int]]]) -> None:
        self._batches = batches
        self._starts = {tp: [b[0] for b in found] for tp, found in batches.items()}

    def producer_at(self, tp: TopicPartitionKey, offset: int) -> tuple[int, int] | None:
        starts = self._starts.get(tp)
        if not starts:
            return None
        index = bisect_left(starts, offset + 1) - 1
        if index < 0:
            return None
        base, last, producer_id, epoch = self._batches[tp][index]
        return (producer_id, epoch) if base <= offset <= last and producer_id >= 0 else None

    def epochs_of_one_producer(self, positions: Sequence[_Position]) -> list[int] | None:
        """The epochs of ``positions`` if one producer id wrote them all, else None."""
        found = [self.producer_at(tp, offset) for tp, offset in positions]
        if any(f is None for f in found) or len({f[0] for f in found if f}) != 1:
            return None
        return [f[1] for f in found if f]


def _count_reorders(
    tp: TopicPartitionKey,
    log: dict[int, bytes | None],
    first_at: dict[_Ident, _Position],
    writers: set[str],
    reordered: _Tally,
) -> None:
    """Count, for each of ``writers``, the consecutive-by-seq pairs of its first occurrences
    in ``tp`` whose offsets decrease (a second pass, only for writers found out of order)."""
    placed: dict[str, list[tuple[int, int]]] = {writer: [] for writer in sorted(writers)}
    for offset, value in log.items():
        ident = decode_value(value)
        if ident is not None and ident[0] in placed and first_at[ident] == (tp, offset):
            placed[ident[0]].append((ident[1], offset))
    for writer, pairs in placed.items():
        pairs.sort()
        for (seq_a, off_a), (seq_b, off_b) in pairwise(pairs):
            if off_b < off_a and reordered.hit():
                reordered.examples.append(
                    f"{writer} on {_tp(tp)}: #{seq_a} at offset {off_a}, #{seq_b} at offset {off_b}"
                )


def _check_commits(history: History, started: float) -> _Tally:
    samples: dict[TopicPartitionKey, list[CommittedSample]] = {}
    for sample in history.committed:
        samples.setdefault((sample.topic, sample.partition), []).append(sample)
    regressions = _Tally()
    for tp in sorted(samples.keys() | history.final_committed.keys()):
        ordered = sorted(samples.get(tp, ()), key=attrgetter("at"))
        best: tuple[int, float] | None = None  # highest offset so far, and when it was seen
        checks = [(s.offset, s.at - started, "") for s in ordered]
        if tp in history.final_committed:
            checks.append((history.final_committed[tp], history.ended_at - started, "final "))
        for offset, at, label in checks:
            if best is not None and offset < best[0]:
                if regressions.hit():
                    regressions.examples.append(
                        f"{_tp(tp)}: {label}committed {offset} at +{at:.3f}s "
                        f"after {best[0]} at +{best[1]:.3f}s"
                    )
            elif best is None or offset > best[0]:
                best = (offset, at)
    return regressions


def _fault_outcome(
    fault: FaultRecord,
    started: float,
    ack_times: dict[TopicPartitionKey, list[float]],
    all_acks: list[float],
) -> FaultOutcome:
    injected = fault.injected_at
    any_ack = _first_at_or_after(all_acks, injected)
    first_ack: float | None = None
    for tp in fault.affected:
        ack = _first_at_or_after(ack_times.get(tp, ()), injected)
        if ack is None:
            first_ack = None  # some affected partition never got an acknowledgement again
            break
        if first_ack is None or ack - injected > first_ack:
            first_ack = ack - injected
    return FaultOutcome(
        kind=fault.kind,
        target=fault.target,
        detail=fault.detail,
        injected_at=injected - started,
        duration=None if fault.healed_at is None else fault.healed_at - injected,
        affected=len(fault.affected),
        new_leader_after=fault.new_leader_after,
        first_ack_after=first_ack,
        first_ack_any_after=None if any_ack is None else any_ack - injected,
    )
