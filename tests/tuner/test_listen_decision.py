"""The listen decision, pure: nothing, advise, held (why) or apply (the target); its pacing is
`decide`'s (one hourly limit, one cool-down helper)."""

from __future__ import annotations

from dataclasses import replace

from tests.tuner.plant import Plant
from uwsgitune.core.frame import Frame, SocketView
from uwsgitune.rules.finding import EvidenceWindow, Finding, Recommendation
from uwsgitune.tuner import Decision, TunerSettings, TunerState
from uwsgitune.tuner.backlog import ListenGate, decide_listen
from uwsgitune.tuner.policy import cooling, hour_full, last_hour

S = TunerSettings(max_changes_per_hour=3, listen_cooldown=600)
HOLD = Decision("hold", "steady", 2, 2, "steady")
OPEN = ListenGate(applying=True, override=True)


def _frame(backlog: int = 100, somaxconn: int | None = 4096) -> Frame:
    f = Plant(live=2).frame(1.0)
    sock = SocketView("127.0.0.1:9000", "http", False, 0, backlog, "stats")
    return replace(f, sockets=(sock,), somaxconn=somaxconn)


def _bursts(value: int = 512, fid: str = "listen_queue.bursts") -> Finding:
    rec = Recommendation("listen", "raise", value, "restart", "holds bursts", current=100)
    return Finding(fid, "warning", "bursts", (), EvidenceWindow(0, 1, 2), rec)


def _decide(
    findings: list[Finding],
    gate: ListenGate = OPEN,
    d: Decision = HOLD,
    state: TunerState | None = None,
    now: float = 10_000.0,
):  # type: ignore[no-untyped-def]
    return decide_listen(findings, _frame(), d, state or TunerState(), S, now, gate)


def test_no_standing_advice_is_nothing() -> None:
    assert _decide([]) is None


def test_without_a_restart_command_or_for_a_short_pool_it_is_advice() -> None:
    ld = _decide([_bursts()], ListenGate(applying=False, override=True))
    assert ld is not None and ld.kind == "advise" and ld.target == 512
    ld = _decide([_bursts(fid="config.default_listen")])
    assert ld is not None and ld.kind == "advise" and not ld.wish.appliable


def test_applied_when_nothing_holds_it() -> None:
    ld = _decide([_bursts()])
    assert ld is not None and (ld.kind, ld.target, ld.why) == ("apply", 512, None)


def test_held_while_stopped_without_an_override_or_on_doubtful_numbers() -> None:
    ld = _decide([_bursts()], replace(OPEN, stopped="reload failed: x"))
    assert ld is not None and ld.kind == "held" and ld.why == "apply STOPPED (reload failed: x)"
    ld = _decide([_bursts()], replace(OPEN, override=False))
    assert ld is not None and ld.why == "no --override to write listen to"
    stale = Decision("wait", "stale", 2, 2, "stats are 9.0s old (> 2s)")
    ld = _decide([_bursts()], d=stale)
    assert ld is not None and ld.kind == "held" and ld.why == stale.reason


def test_held_by_the_hourly_limit_and_the_cool_down() -> None:
    now = 10_000.0
    busy = TunerState(changes=(now - 3000, now - 100, now - 10))
    ld = _decide([_bursts()], state=busy, now=now)
    assert ld is not None and ld.kind == "held" and ld.why == "3 changes in the last hour"
    old = TunerState(changes=(now - 4000, now - 100, now - 10))  # one is over an hour old
    ld = _decide([_bursts()], state=old, now=now)
    assert ld is not None and ld.kind == "apply"
    ld = _decide([_bursts()], replace(OPEN, last_listen=now - 100), now=now)
    assert ld is not None and ld.kind == "held"
    assert ld.why == "a listen change 100s ago (cool-down 600s)"
    ld = _decide([_bursts()], replace(OPEN, last_listen=now - 600), now=now)
    assert ld is not None and ld.kind == "apply"


def test_the_pacing_helpers_are_the_policys() -> None:
    assert last_hour((0.0, 100.0, 101.0, 3700.0), 3700.0) == (101.0, 3700.0)
    assert hour_full((100.0, 200.0), 300.0, S) is None
    assert hour_full((100.0, 200.0, 250.0), 300.0, S) == 3
    assert cooling(None, 10.0, 5.0) is None
    assert cooling(7.0, 10.0, 5.0) == 3.0 and cooling(5.0, 10.0, 5.0) is None
