"""Hysteresis: a finding is raised only after its condition held over a window, and goes away
only after the condition stayed gone for `clear_seconds`. Nothing flaps."""

from __future__ import annotations

import itertools

from tests.support.frames import frame, tcp
from uwsgitune.core.frame import Frame
from uwsgitune.rules import EngineState, Finding, evaluate
from uwsgitune.rules.rulesettings import RuleSettings

FULL = dict(sockets=(tcp(1024, 1024),), busy_ratio=1.0, littles_l=4.0)
ID = "listen_queue.capacity_short"
SETTINGS = RuleSettings(window_seconds=20, clear_seconds=30)


def run(frames: list[Frame], settings: RuleSettings = SETTINGS) -> list[tuple[Finding, ...]]:
    """Evaluate after each poll over the last 60 s, threading the state, like the daemon."""
    state: EngineState | None = None
    out = []
    for i in range(len(frames)):
        findings, state = evaluate(frames[max(0, i - 60) : i + 1], settings=settings, state=state)
        out.append(findings)
    return out


def active(findings: tuple[Finding, ...]) -> bool:
    return any(f.rule == "listen_queue" and not f.clearing for f in findings)


def shown(findings: tuple[Finding, ...]) -> bool:
    return any(f.rule == "listen_queue" for f in findings)


def test_needs_to_hold_before_raising() -> None:
    frames = [frame(i) for i in range(20)] + [frame(i, **FULL) for i in range(20, 40)]
    results = run(frames)
    # one or two saturated polls are not a finding; 15% of a covered window is
    assert not shown(results[20]) and not shown(results[21])
    assert shown(results[23])
    # once the saturation outlasts the idle past, it reads as capacity short
    assert any(f.id == ID for f in results[-1])


def test_stays_while_clearing_then_goes() -> None:
    frames = [frame(i, **FULL) for i in range(30)] + [frame(i) for i in range(30, 100)]
    results = run(frames)
    assert active(results[29])
    # the window still holds saturated polls for a while; once the rule goes quiet the
    # engine keeps the finding, marked clearing, until it has been gone for clear_seconds
    last_seen = max(i for i, r in enumerate(results) if active(r))
    clearing = [i for i, r in enumerate(results) if shown(r) and not active(r)]
    assert clearing == list(range(last_seen + 1, last_seen + 30))
    assert not shown(results[last_seen + 30])


def test_flapping_input_does_not_flap() -> None:
    """Saturated 4 s out of every 12: the finding, once raised, stays up."""
    frames = [frame(i, **FULL) if i % 12 < 4 else frame(i) for i in range(150)]
    states = [shown(r) for r in run(frames)]
    transitions = sum(1 for a, b in itertools.pairwise(states) if a != b)
    assert transitions == 1


def test_since_is_kept_while_active() -> None:
    frames = [frame(i, **FULL) for i in range(40)]
    results = run(frames)
    sinces = {f.since for r in results for f in r if f.rule == "listen_queue"}
    assert len(sinces) == 1


def test_no_frames_keeps_the_state() -> None:
    frames = [frame(i, **FULL) for i in range(30)]
    findings, state = evaluate(frames)
    again, same = evaluate([], state=state)
    assert again == findings and same is state


def test_one_shot_without_state() -> None:
    frames = [frame(i, **FULL) for i in range(30)]
    findings, state = evaluate(frames, settings=SETTINGS)
    assert active(findings) and ID in state.tracks
