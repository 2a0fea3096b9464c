"""The chaos checker on synthetic histories: clean, then one planted anomaly at a time."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pydmq.chaos.checker import ANOMALY_NAMES, Report, check, percentile
from pydmq.chaos.history import (
    CommittedSample,
    Delivery,
    FaultRecord,
    History,
    Read,
    TopicPartitionKey,
    Write,
    encode_value,
)

T0 = 1000.0
TP0: TopicPartitionKey = ("t", 0)
TP1: TopicPartitionKey = ("t", 1)

Layout = dict[TopicPartitionKey, list[tuple[str, int]]]


def clean_layout() -> Layout:
    """Writer a on t-0, writer b on t-1, writer c alternating between both."""
    return {
        TP0: [("a", 0), ("c", 0), ("a", 1), ("a", 2), ("c", 2), ("a", 3)],
        TP1: [("b", 0), ("c", 1), ("b", 1), ("c", 3), ("b", 2)],
    }


def build(layout: Layout | None = None, *, duration: float = 10.0) -> History:
    """A consistent history: every write acked at its final-log position, a reader and a
    member saw every record, and the group committed everything."""
    layout = clean_layout() if layout is None else layout
    writes: list[Write] = []
    reads: list[Read] = []
    deliveries: list[Delivery] = []
    final_log: dict[TopicPartitionKey, list[tuple[int, bytes | None]]] = {}
    committed: list[CommittedSample] = []
    final_committed: dict[TopicPartitionKey, int] = {}
    step = 0
    for tp, entries in layout.items():
        final_log[tp] = []
        for offset, (writer, seq) in enumerate(entries):
            step += 1
            at = T0 + step * 0.01
            value = encode_value(writer, seq)
            writes.append(Write(writer, seq, tp[0], tp[1], at, "acked", offset, at + 0.005))
            final_log[tp].append((offset, value))
            reads.append(Read("r0", tp[0], tp[1], offset, value, at + 0.006))
            deliveries.append(Delivery("m0", tp[0], tp[1], offset, value))
        committed.append(CommittedSample(T0 + 5.0, tp[0], tp[1], len(entries) // 2))
        committed.append(CommittedSample(T0 + 9.0, tp[0], tp[1], len(entries)))
        final_committed[tp] = len(entries)
    writes.sort(key=lambda w: (w.writer, w.seq))
    return History(
        started_at=T0,
        ended_at=T0 + duration,
        partitions=list(layout),
        writes=writes,
        reads=reads,
        deliveries=deliveries,
        committed=committed,
        final_log=final_log,
        final_committed=final_committed,
        faults=[],
        elections=[],
    )


def write_of(history: History, writer: str, seq: int) -> Write:
    return next(w for w in history.writes if w.writer == writer and w.seq == seq)


def only(report: Report, name: str, count: int = 1) -> None:
    """``name`` is the one anomaly found, ``count`` times, with examples."""
    assert report.anomalies == (name,), report.text()
    assert not report.ok
    found = report.to_json()[name]
    assert found["count"] == count
    assert 1 <= len(found["examples"]) <= min(count, 10)
    assert f"verdict: FAILED ({name})" in report.text()


def test_clean_history_is_ok() -> None:
    report = check(build())
    assert report.ok
    assert report.anomalies == ()
    out = report.to_json()
    assert out["ok"] is True
    for name in ANOMALY_NAMES:
        assert out[name] == {"count": 0, "examples": []}
    assert out["writes"] == {"acked": 11, "failed": 0, "indeterminate": 0, "total": 11}
    assert out["indeterminate_landed"] == 0
    assert out["redelivered"] == 0
    assert out["faults"] == {"total": 0, "by_kind": {}}
    assert out["elections"] == {"total": 0, "by_partition": {}}
    assert out["recovery"]["first_ack_after"] == {
        "p50": None,
        "p95": None,
        "max": None,
        "count": 0,
        "not_recovered": 0,
    }
    assert out["duration_s"] == 10.0
    assert out["throughput"] == {"writes_per_s": 1.1, "reads_per_s": 1.1}
    assert out["partitions_without_acks"] == []
    assert report.text().startswith("verdict: OK")


def test_lost_write() -> None:
    history = build()
    history.writes.append(Write("a", 4, "t", 0, T0 + 1, "acked", 6, T0 + 1.1))
    report = check(history)
    only(report, "lost")
    assert report.lost.examples == ("a#4 acked at t-0@6: not in the final log",)


def test_acked_write_found_elsewhere_is_moved_not_lost() -> None:
    history = build()
    write_of(history, "a", 1).offset = 5
    write_of(history, "b", 0).partition = 0
    report = check(history)
    only(report, "moved", 2)
    assert report.moved.examples == (
        "a#1 acked at t-0@5, found at t-0@2",
        "b#0 acked at t-0@0, found at t-1@0",
    )
    assert report.lost.count == 0


def test_duplicated_value() -> None:
    history = build()
    history.final_log[TP0].append((6, encode_value("a", 0)))
    report = check(history)
    only(report, "duplicated")
    assert report.duplicated.examples == ("a#0 at t-0@0, t-0@6",)
    assert report.reordered.count == 0  # only the first occurrence is ordered


def test_duplicate_across_partitions() -> None:
    history = build()
    history.final_log[TP1].append((5, encode_value("a", 3)))
    only(check(history), "duplicated")


def _resend_history(first: tuple[int, int], second: tuple[int, int]) -> History:
    """a#0 at t-0@0 (batch of ``first`` = (producer id, epoch)) and again at t-0@6
    (``second``); the other offsets of t-0 are batches of producer 9."""
    history = build()
    history.final_log[TP0].append((6, encode_value("a", 0)))
    history.batch_producers = {
        TP0: [(0, 0, *first), (1, 5, 9, 0), (6, 6, *second)],
        TP1: [(0, 4, 9, 0)],
    }
    return history


def test_a_copy_resent_under_a_bumped_epoch_is_the_clients_not_a_duplicate() -> None:
    report = check(_resend_history((3, 0), (3, 1)))
    assert report.ok, report.text()
    assert report.duplicated.count == 0
    assert report.resent_after_epoch_bump.count == 1
    assert report.resent_after_epoch_bump.examples == (
        "a#0 at t-0@0, t-0@6 (producer epochs 0, 1)",
    )
    assert report.to_json()["resent_after_epoch_bump"]["count"] == 1
    assert "1 values resent under a bumped producer epoch" in report.text()


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ((3, 0), (3, 0)),  # the same epoch: the broker should have deduplicated it
        ((3, 0), (4, 0)),  # two producer ids
        ((-1, -1), (3, 1)),  # a non-idempotent copy
    ],
)
def test_copies_not_explained_by_an_epoch_bump_stay_duplicates(
    first: tuple[int, int], second: tuple[int, int]
) -> None:
    report = check(_resend_history(first, second))
    only(report, "duplicated")
    assert report.resent_after_epoch_bump.count == 0


def test_a_duplicate_without_batch_information_stays_a_duplicate() -> None:
    history = _resend_history((3, 0), (3, 1))
    history.batch_producers[TP0] = history.batch_producers[TP0][1:]  # offset 0 unknown
    only(check(history), "duplicated")


def test_reordered_writes() -> None:
    layout = {TP0: [("a", 0), ("a", 2), ("a", 1), ("a", 3)], TP1: [("a", 5), ("a", 4)]}
    report = check(build(layout))
    only(report, "reordered", 2)
    assert report.reordered.examples == (
        "a on t-0: #1 at offset 2, #2 at offset 1",
        "a on t-1: #4 at offset 1, #5 at offset 0",
    )


def test_gaps_in_sequence_numbers_are_fine() -> None:
    layout = {TP0: [("a", 0), ("a", 3), ("a", 10)], TP1: [("a", 1), ("a", 7)]}
    assert check(build(layout)).ok


def test_failed_write_that_landed() -> None:
    history = build()
    w = write_of(history, "c", 2)
    w.outcome, w.offset, w.acked_at, w.error = "failed", None, None, "purged"
    report = check(history)
    only(report, "failed_but_present")
    assert report.failed_but_present.examples == ("c#2 failed (purged), found at t-0@4",)
    assert report.writes.failed == 1


def test_failed_write_absent_is_fine() -> None:
    history = build()
    history.writes.append(Write("a", 9, "t", 0, T0 + 1, "failed", error="purged"))
    report = check(history)
    assert report.ok
    assert report.writes.failed == 1
    assert report.writes.total == 12


def test_indeterminate_write_present_is_counted_not_an_anomaly() -> None:
    history = build()
    w = write_of(history, "b", 1)
    w.outcome, w.offset, w.acked_at = "indeterminate", None, None
    history.writes.append(Write("b", 7, "t", 1, T0 + 2, "indeterminate", error="timed out"))
    report = check(history)
    assert report.ok
    assert report.indeterminate_landed == 1
    assert report.writes.indeterminate == 2
    assert report.to_json()["indeterminate_landed"] == 1


def test_unknown_value() -> None:
    history = build()
    history.final_log[TP1].append((5, encode_value("ghost", 1)))
    report = check(history)
    only(report, "unknown_values")
    assert report.unknown_values.examples == ("ghost#1 at t-1@5",)


@pytest.mark.parametrize(
    "value",
    [b"garbage", None, encode_value("a", 1)[:-1] + b"0", encode_value("a", 1).replace(b"a", b"b")],
)
def test_corrupted_value(value: bytes | None) -> None:
    history = build()
    history.final_log[TP0].append((6, value))
    report = check(history)
    only(report, "corrupted")
    assert report.corrupted.examples[0].startswith("t-0@6: ")


def test_corrupted_value_in_place_of_an_acked_write() -> None:
    history = build()
    history.final_log[TP0][2] = (2, b"a:1:deadbeef")
    history.reads = [r for r in history.reads if (r.partition, r.offset) != (0, 2)]
    history.deliveries = [d for d in history.deliveries if (d.partition, d.offset) != (0, 2)]
    history.final_committed[TP0] = 2
    history.committed = [c for c in history.committed if c.partition == 1]
    report = check(history)
    assert report.anomalies == ("lost", "corrupted")


def test_reader_disagrees_with_final_log() -> None:
    history = build()
    i = next(i for i, r in enumerate(history.reads) if (r.partition, r.offset) == (0, 2))
    r = history.reads[i]
    history.reads[i] = Read(r.reader, r.topic, r.partition, r.offset, encode_value("a", 9), r.at)
    history.reads.append(Read("r1", r.topic, r.partition, r.offset, b"other", r.at))
    report = check(history)
    only(report, "inconsistent_offsets")  # one offset, however many readers disagree
    assert report.inconsistent_offsets.examples == (
        "t-0@2: final log b'a:1:" + encode_value("a", 1).decode()[4:] + "' vs reader r0 "
        "b'a:9:" + encode_value("a", 9).decode()[4:] + "'",
    )


def test_member_disagrees_with_final_log() -> None:
    history = build()
    d = history.deliveries[0]
    history.deliveries[0] = Delivery(d.member, d.topic, d.partition, d.offset, b"x")
    only(check(history), "inconsistent_offsets")


def test_final_log_repeating_an_offset_with_another_value() -> None:
    history = build()
    history.final_log[TP1].insert(1, (0, encode_value("b", 0) + b"!"))
    only(check(history), "inconsistent_offsets")


def test_read_beyond_final_high_watermark_is_truncated() -> None:
    history = build()
    value = encode_value("a", 4)
    history.reads.append(Read("r0", "t", 0, 6, value, T0 + 3))
    history.reads.append(Read("r1", "t", 0, 6, value, T0 + 3))
    report = check(history)
    only(report, "truncated_reads")  # one position, however many observers
    assert report.truncated_reads.examples == (
        "t-0@6 seen by reader r0, but the final log holds offsets 0..5",
    )


def test_delivery_of_a_partition_missing_from_the_final_log() -> None:
    history = build()
    history.deliveries.append(Delivery("m1", "u", 0, 0, encode_value("a", 4)))
    report = check(history)
    only(report, "truncated_reads")
    assert "missing from the final log" in report.truncated_reads.examples[0]


def test_observers_disagreeing_beyond_the_final_log() -> None:
    history = build()
    history.reads.append(Read("r0", "t", 1, 9, encode_value("b", 3), T0 + 3))
    history.deliveries.append(Delivery("m0", "t", 1, 9, encode_value("b", 4)))
    report = check(history)
    assert report.anomalies == ("inconsistent_offsets", "truncated_reads")
    assert report.inconsistent_offsets.count == 1
    assert report.truncated_reads.count == 1


def test_consumer_skip() -> None:
    history = build()
    history.deliveries = [d for d in history.deliveries if (d.partition, d.offset) != (1, 3)]
    report = check(history)
    only(report, "consumer_skips")
    assert report.consumer_skips.examples == (
        "t-1@3: below the final committed offset 5, never delivered",
    )


def test_undelivered_offsets_at_or_above_the_committed_offset_are_fine() -> None:
    history = build()
    history.deliveries = [d for d in history.deliveries if (d.partition, d.offset) != (1, 4)]
    history.final_committed[TP1] = 4
    history.committed = [c for c in history.committed if c.partition == 0]
    assert check(history).ok


def test_redelivery_is_informational() -> None:
    history = build()
    history.deliveries.extend(
        [Delivery("m1", d.topic, d.partition, d.offset, d.value) for d in history.deliveries[:3]]
    )
    history.deliveries.append(history.deliveries[0])
    report = check(history)
    assert report.ok
    assert report.redelivered == 3


def test_committed_offset_regression() -> None:
    history = build()
    history.committed.append(CommittedSample(T0 + 7.0, "t", 0, 2))  # 3 at +5, 6 at +9
    report = check(history)
    only(report, "committed_regressions")
    assert report.committed_regressions.examples == (
        "t-0: committed 2 at +7.000s after 3 at +5.000s",
    )


def test_each_regressing_sample_counts() -> None:
    history = build()
    history.committed.append(CommittedSample(T0 + 7.0, "t", 0, 2))
    history.committed.append(CommittedSample(T0 + 8.0, "t", 0, 1))
    history.committed.append(CommittedSample(T0 + 8.5, "t", 0, 3))  # back to the highest
    only(check(history), "committed_regressions", 2)


def test_final_committed_offset_below_a_sample_is_a_regression() -> None:
    history = build()
    history.final_committed[TP1] = 4
    report = check(history)
    only(report, "committed_regressions")
    assert report.committed_regressions.examples == (
        "t-1: final committed 4 at +10.000s after 5 at +9.000s",
    )


def test_committed_samples_are_ordered_by_time() -> None:
    history = build()
    history.committed.reverse()
    assert check(history).ok


def test_replica_mismatch() -> None:
    history = build()
    history.replica_mismatches = {TP1: "node-2 lacks batch at offset 3"}
    report = check(history)
    only(report, "replica_mismatches")
    assert report.to_json()["replica_mismatches"]["examples"] == [
        "t-1: node-2 lacks batch at offset 3"
    ]


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 21)]
    assert percentile(values, 50) == 10.0
    assert percentile(values, 95) == 19.0
    assert percentile(values, 100) == 20.0
    assert percentile([3.0], 95) == 3.0
    assert percentile([1.0, 2.0], 50) == 1.0
    assert percentile([], 50) is None


def recovery_history() -> History:
    """t-0 acked at +1, +2, +3, +6; t-1 at +1, +4.5."""
    history = build({TP0: [("a", i) for i in range(4)], TP1: [("b", i) for i in range(2)]})
    for w, at in zip(history.writes, [1.0, 2.0, 3.0, 6.0, 1.0, 4.5], strict=True):
        w.acked_at = T0 + at
    history.faults = [
        FaultRecord("kill", "node-1", T0 + 2.5, T0 + 4.0, [TP0, TP1], new_leader_after=0.2),
        FaultRecord("pause", "node-2", T0 + 5.0, T0 + 5.5, [TP0]),
        FaultRecord("kill", "node-3", T0 + 6.5, None, [TP1], new_leader_after=0.4),
        FaultRecord("partition", "producer-0", T0 + 3.5, T0 + 3.8, detail="isolated"),
    ]
    history.elections = [(T0 + 2.7, TP0, 2, 1), (T0 + 2.7, TP1, 2, 1), (T0 + 6.9, TP1, 1, 2)]
    return history


def test_recovery_figures() -> None:
    report = check(recovery_history())
    assert report.ok  # availability never fails a run
    by_fault = [(o.first_ack_after, o.first_ack_any_after) for o in report.fault_log]
    assert by_fault == [(2.0, 0.5), (1.0, 1.0), (None, None), (None, 1.0)]
    out = report.to_json()
    assert out["faults"] == {"total": 4, "by_kind": {"kill": 2, "partition": 1, "pause": 1}}
    assert out["elections"] == {"total": 3, "by_partition": {"t-0": 1, "t-1": 2}}
    recovery = out["recovery"]
    assert recovery["first_ack_after"] == {
        "p50": 1.0,
        "p95": 2.0,
        "max": 2.0,
        "count": 2,
        "not_recovered": 1,  # the fault without affected partitions does not count
    }
    assert recovery["new_leader_after"] == {"p50": 0.2, "p95": 0.4, "max": 0.4, "count": 2}
    assert recovery["first_ack_any_after"] == {"p50": 1.0, "p95": 1.0, "max": 1.0, "count": 3}
    kill = recovery["by_kind"]["kill"]
    assert kill["first_ack_after"] == {
        "p50": 2.0,
        "p95": 2.0,
        "max": 2.0,
        "count": 1,
        "not_recovered": 1,
    }
    assert kill["new_leader_after"]["count"] == 2
    assert recovery["by_kind"]["pause"]["first_ack_after"]["p50"] == 1.0
    assert recovery["by_kind"]["partition"]["first_ack_after"]["not_recovered"] == 0
    assert out["fault_log"][0] == {
        "kind": "kill",
        "target": "node-1",
        "detail": "",
        "injected_at": 2.5,
        "duration": 1.5,
        "affected": 2,
        "new_leader_after": 0.2,
        "first_ack_after": 2.0,
        "first_ack_any_after": 0.5,
    }
    assert out["fault_log"][2]["duration"] is None
    text = report.text()
    assert "recovery (ms" in text
    assert "2000" in text


def test_ack_exactly_at_injection_counts() -> None:
    history = recovery_history()
    history.faults = [FaultRecord("kill", "node-1", T0 + 3.0, affected=[TP0])]
    assert check(history).fault_log[0].first_ack_after == 0.0


def test_longest_write_outage() -> None:
    out = check(recovery_history()).to_json()["longest_write_outage"]
    assert out == {"seconds": 3.5, "partition": "t-1", "at": 1.0}


def test_longest_write_outage_tie_goes_to_the_first_partition() -> None:
    history = recovery_history()
    history.writes[-1].acked_at = T0 + 4.0  # t-1: 1 -> 4, as long as t-0: 3 -> 6
    out = check(history).to_json()["longest_write_outage"]
    assert out == {"seconds": 3.0, "partition": "t-0", "at": 3.0}


def test_no_outage_and_partitions_without_acks() -> None:
    history = build({TP0: [("a", 0)]})
    history.partitions.append(TP1)
    report = check(history)
    assert report.ok
    assert report.to_json()["longest_write_outage"] == {
        "seconds": None,
        "partition": None,
        "at": None,
    }
    assert report.to_json()["partitions_without_acks"] == ["t-1"]


def test_client_errors_are_truncated_in_json() -> None:
    history = build()
    history.client_errors = [f"error {i}" for i in range(30)]
    report = check(history)
    assert report.ok
    out = report.to_json()["client_errors"]
    assert out["count"] == 30
    assert out["examples"] == [f"error {i}" for i in range(20)]


def test_examples_are_capped_at_ten() -> None:
    history = build()
    history.writes.extend(
        Write("z", i, "t", 0, T0 + 1, "acked", 100 + i, T0 + 1.1) for i in range(25)
    )
    report = check(history)
    only(report, "lost", 25)
    assert len(report.lost.examples) == 10


def test_to_json_round_trips() -> None:
    history = recovery_history()
    history.final_log[TP0].append((4, encode_value("a", 0)))
    history.final_log[TP1].append((2, b"junk"))
    history.replica_mismatches = {TP0: "differs"}
    history.client_errors = ["producer-0 recreated"]
    report = check(history)
    out: dict[str, Any] = report.to_json()
    assert json.loads(json.dumps(out)) == out
    assert out == check(history).to_json()  # deterministic
    for key in (
        "ok",
        "writes",
        "lost",
        "moved",
        "duplicated",
        "reordered",
        "inconsistent_offsets",
        "truncated_reads",
        "corrupted",
        "unknown_values",
        "failed_but_present",
        "indeterminate_landed",
        "consumer_skips",
        "redelivered",
        "committed_regressions",
        "replica_mismatches",
        "faults",
        "elections",
        "recovery",
        "longest_write_outage",
        "throughput",
        "duration_s",
        "client_errors",
        "fault_log",
    ):
        assert key in out
    assert out["ok"] is False
    assert out["anomalies"] == ["duplicated", "corrupted", "replica_mismatches"]
    text = report.text()
    assert text.startswith("verdict: FAILED (duplicated, corrupted, replica_mismatches)")


def test_a_large_clean_history() -> None:
    writers, per_writer, partitions = 8, 25_000, 4
    tps = [("big", p) for p in range(partitions)]
    final_log: dict[TopicPartitionKey, list[tuple[int, bytes | None]]] = {tp: [] for tp in tps}
    writes: list[Write] = []
    reads: list[Read] = []
    deliveries: list[Delivery] = []
    for seq in range(per_writer):
        for n in range(writers):
            writer = f"producer-{n}"
            tp = tps[(seq + n) % partitions]
            log = final_log[tp]
            offset = len(log)
            value = encode_value(writer, seq)
            log.append((offset, value))
            at = T0 + len(writes) * 1e-4
            writes.append(Write(writer, seq, tp[0], tp[1], at, "acked", offset, at + 0.002))
            reads.append(Read("reader-0", tp[0], tp[1], offset, value, at + 0.003))
            deliveries.append(Delivery(f"member-{offset % 3}", tp[0], tp[1], offset, value))
    history = History(
        started_at=T0,
        ended_at=T0 + 30.0,
        partitions=tps,
        writes=writes,
        reads=reads,
        deliveries=deliveries,
        committed=[CommittedSample(T0 + 30.0, tp[0], tp[1], len(final_log[tp])) for tp in tps],
        final_log=final_log,
        final_committed={tp: len(final_log[tp]) for tp in tps},
        faults=[FaultRecord("kill", "node-1", T0 + 5.0, T0 + 6.0, [tps[0]], 0.1)],
        elections=[],
    )
    report = check(history)
    assert report.ok, report.text()
    assert report.writes.acked == 200_000
    assert report.fault_log[0].first_ack_after is not None
