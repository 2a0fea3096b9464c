"""The transactional checker on synthetic histories: clean ones pass, each planted anomaly
is flagged (and only it)."""

from __future__ import annotations

import json

import pytest

from pydmq.chaos.history import TopicPartitionKey, encode_value
from pydmq.chaos.txn_checker import TXN_ANOMALY_NAMES, TxnReport, check_transactions
from pydmq.chaos.txn_history import (
    Transaction,
    TxnHistory,
    TxnOutcome,
    TxnRead,
    TxnWrite,
    txn_of,
    txn_value,
)

pytestmark = pytest.mark.timeout(30)

TP0: TopicPartitionKey = ("out", 0)
TP1: TopicPartitionKey = ("out", 1)
T0 = 100.0

Log = dict[TopicPartitionKey, list[tuple[int, bytes | None]]]


def txn(
    incarnation: int,
    seq: int,
    outcome: TxnOutcome,
    sources: list[tuple[TopicPartitionKey, str]],
    commit_at: float | None,
) -> Transaction:
    writes = [
        TxnWrite(tp, txn_value("p", incarnation, seq, i), source)
        for i, (tp, source) in enumerate(sources)
    ]
    return Transaction("p", incarnation, seq, writes, T0 + seq, outcome, commit_at)


def build() -> TxnHistory:
    """Incarnation 0 commits in-0/in-1 over two partitions, aborts in-2 (abort markers take
    an offset in each log), is fenced with in-3 open (indeterminate, aborted by the broker);
    incarnation 1 processes in-2 and in-3 again and commits. A read_committed reader r0 saw
    every committed record after its commit was requested, a read_uncommitted reader r1
    saw everything."""
    t_commit = txn(0, 0, "committed", [(TP0, "in-0"), (TP1, "in-1")], T0 + 1)
    t_abort = txn(0, 1, "aborted", [(TP0, "in-2")], None)
    t_zombie = txn(0, 2, "indeterminate", [(TP1, "in-3")], None)
    t_redo = txn(1, 0, "committed", [(TP0, "in-2"), (TP1, "in-3")], T0 + 5)
    v = {t.key: [w.value for w in t.writes] for t in (t_commit, t_abort, t_zombie, t_redo)}
    # offsets: a record, then its transaction's marker
    final_uncommitted: Log = {
        TP0: [(0, v[t_commit.key][0]), (2, v[t_abort.key][0]), (4, v[t_redo.key][0])],
        TP1: [(0, v[t_commit.key][1]), (2, v[t_zombie.key][0]), (4, v[t_redo.key][1])],
    }
    final_committed: Log = {
        TP0: [(0, v[t_commit.key][0]), (4, v[t_redo.key][0])],
        TP1: [(0, v[t_commit.key][1]), (4, v[t_redo.key][1])],
    }
    reads = [
        TxnRead("r0", "read_committed", tp, offset, value, T0 + 10)
        for tp, entries in final_committed.items()
        for offset, value in entries
    ] + [
        TxnRead("r1", "read_uncommitted", tp, offset, value, T0 + 0.5)
        for tp, entries in final_uncommitted.items()
        for offset, value in entries
    ]
    return TxnHistory(
        started_at=T0,
        ended_at=T0 + 20,
        partitions=[TP0, TP1],
        transactions=[t_commit, t_abort, t_zombie, t_redo],
        reads=reads,
        reader_ends={"r0": {TP0: 6, TP1: 6}, "r1": {TP0: 6, TP1: 6}},
        final_committed=final_committed,
        final_uncommitted=final_uncommitted,
    )


def flagged(report: TxnReport) -> dict[str, int]:
    return {name: a.count for name, a in report.anomalies.items() if a.count}


def value_of(incarnation: int, seq: int, index: int = 0) -> bytes:
    return txn_value("p", incarnation, seq, index)


def test_values_name_their_transaction() -> None:
    assert txn_of(txn_value("tid-1", 3, 7, 2)) == (("tid-1", 3, 7), 2)
    assert txn_of(encode_value("plain-writer", 1)) is None
    assert txn_of(b"garbage") is None
    assert txn_of(None) is None


def test_clean_history_passes() -> None:
    report = check_transactions(build())
    assert report.ok, report.to_json()
    assert report.transactions == {"committed": 2, "aborted": 1, "indeterminate": 1}
    assert report.records_written == 6
    assert report.indeterminate_visible == 0
    assert set(report.anomalies) == set(TXN_ANOMALY_NAMES)
    json.dumps(report.to_json())


def test_reader_stopping_inside_a_transaction_is_not_torn() -> None:
    """r0 stopped on partition 1 before the second record of the redo transaction: it saw
    only half of it, legitimately."""
    h = build()
    h.reader_ends["r0"] = {TP0: 6, TP1: 3}
    h.reads = [
        r for r in h.reads if not (r.reader == "r0" and r.partition == TP1 and r.offset == 4)
    ]
    assert check_transactions(h).ok


def test_indeterminate_transaction_wholly_visible_is_its_fate() -> None:
    """A commit whose answer was lost: the broker committed it, the final drain shows it."""
    h = build()
    h.transactions[2].commit_requested_at = T0 + 3
    h.transactions[3].writes = h.transactions[3].writes[:1]  # the redo only did in-2
    h.final_committed[TP1] = [(0, h.final_committed[TP1][0][1]), (2, value_of(0, 2))]
    h.final_uncommitted[TP1] = h.final_uncommitted[TP1][:2]
    h.reads = [r for r in h.reads if r.reader == "r1"]
    report = check_transactions(h)
    assert report.ok, report.to_json()
    assert report.indeterminate_visible == 1


def test_aborted_read_is_flagged() -> None:
    h = build()
    h.reads.append(TxnRead("r0", "read_committed", TP0, 2, value_of(0, 1), T0 + 10))
    report = check_transactions(h)
    assert flagged(report) == {"aborted_reads": 1}
    assert "r0 read out-0@2 of aborted p/0/1" in report.anomalies["aborted_reads"].examples[0]


def test_aborted_record_in_the_final_drain_is_flagged() -> None:
    h = build()
    h.final_committed[TP0].insert(1, (2, value_of(0, 1)))
    assert flagged(check_transactions(h)) == {"aborted_reads": 1}


def test_torn_transaction_seen_by_a_reader_is_flagged() -> None:
    """r0 read past both records of the first transaction but was given only one."""
    h = build()
    h.reads = [
        r for r in h.reads if not (r.reader == "r0" and r.partition == TP1 and r.offset == 0)
    ]
    report = check_transactions(h)
    assert flagged(report) == {"torn_transactions": 1}
    assert report.anomalies["torn_transactions"].examples[0].startswith("r0 saw records [0]")


def test_torn_transaction_in_the_final_drain_is_flagged_and_lost() -> None:
    h = build()
    del h.final_committed[TP1][0]
    assert flagged(check_transactions(h)) == {"torn_transactions": 1, "lost_committed_writes": 1}


def test_lost_committed_transaction_is_flagged() -> None:
    """Both records of a committed transaction missing from every log."""
    h = build()
    for log in (h.final_committed, h.final_uncommitted):
        log[TP0] = [e for e in log[TP0] if e[0] != 4]
        log[TP1] = [e for e in log[TP1] if e[0] != 4]
    h.reads = [r for r in h.reads if r.offset != 4]
    report = check_transactions(h)
    assert flagged(report) == {"lost_committed_writes": 2}
    assert "in no log" in report.anomalies["lost_committed_writes"].examples[0]


def test_zombie_commit_across_fenced_epochs_is_a_duplicate() -> None:
    """The fenced incarnation's transaction committed after all: in-3 is output twice."""
    h = build()
    h.final_committed[TP1].insert(1, (2, value_of(0, 2)))
    report = check_transactions(h)
    assert flagged(report) == {"duplicates": 1}
    (example,) = report.anomalies["duplicates"].examples
    assert "input in-3 output 2 times" in example and "p/0/2" in example and "p/1/0" in example
    assert report.indeterminate_visible == 1


def test_read_before_the_commit_was_requested_is_past_the_lso() -> None:
    h = build()
    h.reads.append(TxnRead("r2", "read_committed", TP0, 4, value_of(1, 0), T0 + 4))
    h.reader_ends["r2"] = {TP0: 5}
    report = check_transactions(h)
    assert flagged(report) == {"reads_past_lso": 1}
    assert "before its commit was requested" in report.anomalies["reads_past_lso"].examples[0]


def test_read_of_a_never_committed_open_transaction_is_past_the_lso() -> None:
    h = build()
    h.reads.append(TxnRead("r2", "read_committed", TP1, 2, value_of(0, 2), T0 + 30))
    h.reader_ends["r2"] = {TP1: 3}
    assert flagged(check_transactions(h)) == {"reads_past_lso": 1}


def test_unknown_values_are_flagged() -> None:
    h = build()
    h.final_uncommitted[TP0].append((6, encode_value("stranger", 0)))
    h.final_committed[TP0].append((6, txn_value("p", 9, 9, 0)))
    assert flagged(check_transactions(h)) == {"unknown_values": 2}


def test_examples_are_capped_and_counts_are_not() -> None:
    h = build()
    for i in range(25):
        h.reads.append(TxnRead(f"r{i + 2}", "read_committed", TP0, 2, value_of(0, 1), T0))
    report = check_transactions(h)
    assert report.anomalies["aborted_reads"].count == 25
    assert len(report.anomalies["aborted_reads"].examples) == 10
