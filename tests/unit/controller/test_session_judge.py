"""When the fencing loop may judge broker sessions (found by the chaos harness: a controller
that could not hear heartbeats, stalled or cut off from its peers, fenced every broker,
itself included, and clients saw Metadata with no brokers at all)."""

from __future__ import annotations

from pydmq.controller.runtime import SessionJudge, Verdict

PERIOD, SESSION = 250, 1000


def test_judges_while_ticking_on_time_with_quorum_contact() -> None:
    judge = SessionJudge(PERIOD, SESSION, now_ms=0)
    for now in range(250, 5000, 250):
        assert judge.tick(now, quorum_contact_ms=now - 400) is Verdict.JUDGE


def test_a_stalled_loop_judges_nobody_then_renews_sessions() -> None:
    judge = SessionJudge(PERIOD, SESSION, now_ms=0)
    assert judge.tick(250, 200) is Verdict.JUDGE
    # The process was paused for 7 s: heartbeats sit unread in its sockets.
    assert judge.tick(7250, 7200) is Verdict.BLIND
    assert judge.newly_blind and judge.why == "event loop stalled"
    assert judge.tick(7500, 7450) is Verdict.RENEW
    assert judge.tick(7750, 7700) is Verdict.JUDGE


def test_a_leader_without_quorum_contact_judges_nobody_until_it_has_it_again() -> None:
    judge = SessionJudge(PERIOD, SESSION, now_ms=0)
    verdicts = []
    # Cut off from its peers at 200 ms: the followers' last fetches get older and older.
    for now in range(250, 1750, 250):
        verdicts.append(judge.tick(now, 200))
    assert verdicts[:4] == [Verdict.JUDGE] * 4  # contact is at most a session old
    assert verdicts[4:] == [Verdict.BLIND] * 2  # 1250 and 1500: more than a session
    assert not judge.newly_blind and judge.why == "no quorum contact"
    # The cut heals: the followers fetch again.
    assert judge.tick(1750, 1700) is Verdict.RENEW
    assert judge.tick(2000, 1900) is Verdict.JUDGE


def test_a_lone_voter_never_loses_contact() -> None:
    judge = SessionJudge(PERIOD, SESSION, now_ms=0)
    assert judge.tick(250, None) is Verdict.JUDGE
