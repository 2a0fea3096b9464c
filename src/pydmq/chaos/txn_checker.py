"""The verdict on a transactional run: :func:`check_transactions` turns a
:class:`~pydmq.chaos.txn_history.TxnHistory` into a :class:`TxnReport`.

Pure and deterministic, like :mod:`pydmq.chaos.checker` (whose :class:`Anomaly` it reports):
the same history always gives the same report, examples in history order. A record's
transaction is the one its value names (:func:`~pydmq.chaos.txn_history.txn_of`); an
*observer* is a read_committed reader of the run (its reads, up to its end positions) or the
final read_committed drain (``final``, which read everything).

Safety anomalies (any of them makes :attr:`TxnReport.ok` false)
------------------------------------------------------------------

``aborted_reads``
    Records of an aborted transaction returned read_committed (to a reader, or in the final
    drain). Counted per record returned.
``torn_transactions``
    An observer saw some records of a transaction but not another one it should have seen:
    a record whose offset (in the final read_uncommitted drain) is below the reader's end
    position on its partition; for ``final``, any record of the transaction. Counted per
    (observer, transaction).
``lost_committed_writes``
    Records of a committed transaction missing from the final read_committed drain.
    Counted per record.
``duplicates``
    Inputs (``TxnWrite.source``) whose output shows more than once in the final
    read_committed drain (records of aborted transactions aside: those are aborted reads),
    e.g. processed and committed by two incarnations of one transactional id (a zombie that
    was not fenced). Counted per input.
``reads_past_lso``
    Records returned read_committed to a reader before their transaction was asked to
    commit (``commit_requested_at`` missing or later than the read): the broker served
    them past the last stable offset. Aborted transactions' records count as
    ``aborted_reads`` instead. Counted per record returned.
``unknown_values``
    Records of the final drains that name no transaction of the history (or no record of
    it). Counted per position.

Figures (never affect ``ok``): transactions by outcome, records written, reads, and how
many records of indeterminate transactions the final drain shows (their fate, decided by
the broker).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from pydmq.chaos.checker import MAX_EXAMPLES, Anomaly
from pydmq.chaos.history import TopicPartitionKey
from pydmq.chaos.txn_history import Transaction, TxnHistory, TxnKey, TxnRead, txn_of

__all__ = ["TXN_ANOMALY_NAMES", "TxnReport", "check_transactions"]

#: Every safety anomaly, in report order.
TXN_ANOMALY_NAMES: Final = (
    "aborted_reads",
    "torn_transactions",
    "lost_committed_writes",
    "duplicates",
    "reads_past_lso",
    "unknown_values",
)

FINAL: Final = "final"

_Position = tuple[TopicPartitionKey, int]


def _pos(tp: TopicPartitionKey, offset: int) -> str:
    return f"{tp[0]}-{tp[1]}@{offset}"


def _name(key: TxnKey) -> str:
    return f"{key[0]}/{key[1]}/{key[2]}"


class _Found:
    """Builder of one :class:`Anomaly` (count, first examples)."""

    __slots__ = ("count", "examples")

    def __init__(self) -> None:
        self.count = 0
        self.examples: list[str] = []

    def add(self, example: str) -> None:
        self.count += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(example)

    def freeze(self) -> Anomaly:
        return Anomaly(self.count, tuple(self.examples))


@dataclass(frozen=True, slots=True)
class TxnReport:
    """What :func:`check_transactions` found (see the module docstring)."""

    anomalies: dict[str, Anomaly]
    transactions: dict[str, int]
    records_written: int
    reads: int
    indeterminate_visible: int
    client_errors: list[str]

    @property
    def ok(self) -> bool:
        return all(a.count == 0 for a in self.anomalies.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "anomalies": {name: a.to_json() for name, a in self.anomalies.items()},
            "transactions": dict(self.transactions),
            "records_written": self.records_written,
            "reads": self.reads,
            "indeterminate_visible": self.indeterminate_visible,
            "client_errors": list(self.client_errors),
        }


class _Observer:
    """What one read_committed observer was returned, and how far it read."""

    __slots__ = ("ends", "name", "seen")

    def __init__(self, name: str, ends: dict[TopicPartitionKey, int] | None) -> None:
        self.name = name
        self.ends = ends  # None: read everything
        self.seen: dict[TxnKey, set[int]] = defaultdict(set)

    def passed(self, position: _Position | None) -> bool:
        if self.ends is None:
            return True
        if position is None:
            return False
        tp, offset = position
        return offset < self.ends.get(tp, 0)


def _entries(
    log: dict[TopicPartitionKey, list[tuple[int, bytes | None]]],
) -> Iterator[tuple[TopicPartitionKey, int, bytes | None]]:
    for tp in sorted(log):
        for offset, value in log[tp]:
            yield tp, offset, value


def check_transactions(history: TxnHistory) -> TxnReport:
    """Check ``history``; see the module docstring for every definition."""
    txns: dict[TxnKey, Transaction] = {t.key: t for t in history.transactions}
    found = {name: _Found() for name in TXN_ANOMALY_NAMES}

    # where each record landed (first copy), from the final read_uncommitted drain
    landed: dict[tuple[TxnKey, int], _Position] = {}
    for tp, offset, value in _entries(history.final_uncommitted):
        named = _known(txns, value)
        if named is None:
            found["unknown_values"].add(f"{_pos(tp, offset)} (read_uncommitted): {value!r}")
        else:
            landed.setdefault(named, (tp, offset))

    observers = _reader_observers(history, txns, found)
    final = _Observer(FINAL, None)
    final_sources: dict[str, list[str]] = defaultdict(list)
    for tp, offset, value in _entries(history.final_committed):
        named = _known(txns, value)
        if named is None:
            found["unknown_values"].add(f"{_pos(tp, offset)} (read_committed): {value!r}")
            continue
        key, index = named
        txn = txns[key]
        final.seen[key].add(index)
        if txn.outcome == "aborted":
            found["aborted_reads"].add(f"{FINAL} read {_pos(tp, offset)} of aborted {_name(key)}")
            continue  # not a second copy of its input: an aborted read already
        source = txn.writes[index].source
        if source is not None:
            final_sources[source].append(f"{_name(key)} at {_pos(tp, offset)}")
    observers.append(final)

    for observer in observers:
        for key in sorted(observer.seen):
            seen = observer.seen[key]
            missing = [
                i
                for i in range(len(txns[key].writes))
                if i not in seen and observer.passed(landed.get((key, i)))
            ]
            if missing:
                found["torn_transactions"].add(
                    f"{observer.name} saw records {sorted(seen)} of {_name(key)} "
                    f"({txns[key].outcome}) but not {missing}"
                )

    indeterminate_visible = 0
    for txn in history.transactions:
        seen = final.seen.get(txn.key, set())
        if txn.outcome == "indeterminate":
            indeterminate_visible += len(seen)
        if txn.outcome != "committed":
            continue
        for index, write in enumerate(txn.writes):
            if index not in seen:
                where = landed.get((txn.key, index))
                shown = f"at {_pos(*where)} read_uncommitted" if where else "in no log"
                topic, partition = write.partition
                found["lost_committed_writes"].add(
                    f"record {index} of committed {_name(txn.key)} "
                    f"(sent to {topic}-{partition}; {shown})"
                )

    for source, copies in final_sources.items():
        if len(copies) > 1:
            found["duplicates"].add(f"input {source} output {len(copies)} times: {copies}")

    outcomes = {"committed": 0, "aborted": 0, "indeterminate": 0}
    for txn in history.transactions:
        outcomes[txn.outcome] += 1
    return TxnReport(
        anomalies={name: f.freeze() for name, f in found.items()},
        transactions=outcomes,
        records_written=sum(len(t.writes) for t in history.transactions),
        reads=len(history.reads),
        indeterminate_visible=indeterminate_visible,
        client_errors=list(history.client_errors),
    )


def _known(txns: dict[TxnKey, Transaction], value: bytes | None) -> tuple[TxnKey, int] | None:
    """The (transaction, index) ``value`` names, if the history has that record."""
    named = txn_of(value)
    if named is None:
        return None
    key, index = named
    txn = txns.get(key)
    if txn is None or not 0 <= index < len(txn.writes) or txn.writes[index].value != value:
        return None
    return named


def _reader_observers(
    history: TxnHistory, txns: dict[TxnKey, Transaction], found: dict[str, _Found]
) -> list[_Observer]:
    """One observer per read_committed reader; flags aborted reads and reads past the LSO
    on the way."""
    observers: dict[str, _Observer] = {}
    for read in _committed_reads(history.reads):
        observer = observers.get(read.reader)
        if observer is None:
            observer = _Observer(read.reader, history.reader_ends.get(read.reader, {}))
            observers[read.reader] = observer
        named = _known(txns, read.value)
        if named is None:
            continue  # not a transaction's record: the final drains judge the logs
        key, index = named
        txn = txns[key]
        where = _pos(read.partition, read.offset)
        if txn.outcome == "aborted":
            found["aborted_reads"].add(f"{read.reader} read {where} of aborted {_name(key)}")
        elif txn.commit_requested_at is None or read.at < txn.commit_requested_at:
            found["reads_past_lso"].add(
                f"{read.reader} read {where} of {_name(key)} "
                f"before its commit was requested ({txn.outcome})"
            )
        observer.seen[key].add(index)
    return list(observers.values())


def _committed_reads(reads: Iterable[TxnRead]) -> Iterator[TxnRead]:
    return (r for r in reads if r.isolation == "read_committed")
