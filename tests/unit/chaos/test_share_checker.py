"""The share group's checker: every anomaly it names, found in a small history, and a clean
history found clean; the share member's lines parsed back, a torn line skipped."""

from __future__ import annotations

from pathlib import Path

from pydmq.chaos.share_checker import ShareEvent, check_shares, read_share_events

LOG = {("t", 0): [(0, b"a"), (1, b"b"), (2, b"c")]}


def d(at: float, offset: int, value: bytes, member: str = "m0", count: int = 1) -> ShareEvent:
    return ShareEvent("D", at, member, ("t", 0, offset), count, value)


def a(at: float, offset: int, member: str = "m0") -> ShareEvent:
    return ShareEvent("A", at, member, ("t", 0, offset))


def f(at: float, offset: int, member: str = "m0") -> ShareEvent:
    return ShareEvent("F", at, member, ("t", 0, offset), error="unknown")


def test_a_clean_history_is_ok() -> None:
    events = [d(1, 0, b"a"), d(1, 1, b"b"), a(2, 0), f(2, 1), d(3, 1, b"b", "m1", 2), a(4, 1, "m1")]
    events += [d(5, 2, b"c"), a(6, 2)]
    report = check_shares(events, LOG, finished=True)
    assert report.ok, report.text()
    assert (report.deliveries, report.redeliveries, report.accepted, report.failed_acks) == (
        4,
        1,
        3,
        1,
    )


def test_every_anomaly_is_found() -> None:
    events = [
        d(1, 0, b"a"),
        a(2, 0),
        d(3, 0, b"a", "m1", 2),  # handed out again after its acceptance
        a(4, 0, "m1"),  # and accepted twice
        d(5, 1, b"x"),  # not what the log holds there
        d(5, 7, b"z"),  # beyond the log
    ]
    report = check_shares(events, LOG, finished=True)
    counts = {name: anomaly.count for name, anomaly in report.anomalies.items()}
    assert counts == {
        "share_accepted_twice": 1,
        "share_redelivered_after_accept": 1,
        "share_never_delivered": 1,  # offset 2
        "share_unknown_positions": 2,
    }
    assert not report.ok
    assert "t-0@2" in report.anomalies["share_never_delivered"].examples
    unfinished = check_shares(events, LOG, finished=False)
    assert unfinished.anomalies["share_never_delivered"].count == 0


def test_member_lines_are_parsed_and_a_torn_line_skipped(tmp_path: Path) -> None:
    path = tmp_path / "share-member-0.0.txt"
    path.write_text(
        "D 1.5 t 0 0 1 61\nA 2.0 t 0 0\nF 2.1 t 0 1 INVALID_RECORD_STATE\nD 3.0 t 0 2 1 6"
    )
    events = read_share_events("m", [path, tmp_path / "missing.txt"])
    assert [(e.kind, e.position, e.value, e.error) for e in events] == [
        ("D", ("t", 0, 0), b"a", ""),
        ("A", ("t", 0, 0), None, ""),
        ("F", ("t", 0, 1), None, "INVALID_RECORD_STATE"),
    ]
