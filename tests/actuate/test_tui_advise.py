"""The TUI's tuner (recommend mode, `watch --fifo`): advice at every poll, and an apply
asked by hand (`request`, the `a` key) served at the next step, whose outcome is the typed
`StepResult.requested`, never text to match. No uWSGI: the service over simulated frames
(offline.py); the real path is in test_real_tui_tuner.py."""

from __future__ import annotations

from pathlib import Path

from tests.actuate.offline import at, offline
from tests.tuner.plant import Plant
from uwsgitune.actuate.lock import ApplyLock
from uwsgitune.actuate.service import TunerService
from uwsgitune.core.frame import Frame


def _tuner(tmp_path: Path) -> tuple[TunerService, list[Frame]]:
    frames = [Plant(live=2).frame(float(t)) for t in range(6)]
    tuner = offline(
        mode="recommend", fifo=tmp_path / "fifo", lock_dir=tmp_path, mono=lambda: frames[-1].mono
    )
    return tuner, frames


def test_advice_without_a_request_has_no_outcome(tmp_path: Path) -> None:
    tuner, frames = _tuner(tmp_path)
    result = tuner.step(at(frames))
    assert result is not None and result.decision is not None and result.requested is None
    assert result.mode == "recommend" and not result.records


def test_a_request_the_fresh_decision_does_not_match_is_refused(tmp_path: Path) -> None:
    tuner, frames = _tuner(tmp_path)
    first = tuner.step(at(frames))
    assert first is not None and first.decision is not None
    tuner.request("up", first.decision.desired + 5)
    result = tuner.step(at(frames))
    assert result is not None and result.requested is not None
    asked = result.requested
    assert asked.kind == "changed" and not asked.ok  # shown as an error on the screen
    assert asked.text.startswith("not applied: the advice is now")
    assert not result.records and result.outcome is None
    assert tuner.lock is None  # taken for that apply only


def test_a_request_while_another_holds_the_lock_is_not_applied(tmp_path: Path) -> None:
    tuner, frames = _tuner(tmp_path)
    other = ApplyLock(tmp_path / "fifo", "uwsgitune daemon", tmp_path)
    assert other.acquire() is None
    try:
        tuner.request("up", 3)
        result = tuner.step(at(frames))
        assert result is not None and result.requested is not None
        asked = result.requested
        assert asked.kind == "locked" and not asked.ok
        assert "uwsgitune daemon" in asked.text and asked.text.startswith("not applied")
        assert result.decision is not None  # the poll's advice stands
    finally:
        other.release()
