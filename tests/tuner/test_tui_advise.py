"""The TUI's tuner with the caller's findings (`advise`, for a pipeline that runs the rules):
an apply request's outcome is a typed `apply` note in the poll's result. No uWSGI: a fake
watch over simulated frames; the real path is in test_real_tui_tuner.py."""

from __future__ import annotations

from pathlib import Path

from uwsgitune.actuate.loop import TuneLoop
from uwsgitune.tui.tuning import TuiTuner, applied

from tests.tuner.plant import Plant
from uwsgitune.actuate.lock import ApplyLock
from uwsgitune.core.frame import Frame
from uwsgitune.tuner import TunerSettings


class _Window:
    def __init__(self, frames: list[Frame]) -> None:
        self.items = frames

    def frames(self) -> tuple[Frame, ...]:
        return tuple(self.items)


class _Watch:
    address = "unix:///run/app-stats.sock"
    last_poll = None  # no stats socket read: no peer to check

    def __init__(self, frames: list[Frame]) -> None:
        self.window = _Window(frames)

    @property
    def frame(self) -> Frame:
        """The latest frame (None before the first: `# type: ignore`d for brevity)."""
        return self.window.items[-1] if self.window.items else None  # type: ignore[return-value]


def _tuner(tmp_path: Path) -> tuple[TuiTuner, _Watch]:
    frames = [Plant(live=2).frame(float(t)) for t in range(6)]
    watch = _Watch(frames)
    loop = TuneLoop(watch, None, None, TunerSettings(max_workers=8), "recommend",  # type: ignore[arg-type]
                    mono=lambda: watch.frame.mono)  # fmt: skip
    return TuiTuner(loop, ApplyLock(tmp_path / "fifo", "uwsgitune watch", tmp_path)), watch


def test_advice_without_a_request_has_no_outcome(tmp_path: Path) -> None:
    tuner, watch = _tuner(tmp_path)
    result = tuner.advise(watch.frame, ())
    assert result.decision is not None and applied(result) is None
    assert result.mode == "recommend" and not result.records


def test_a_request_the_fresh_decision_does_not_match_is_a_warning_note(tmp_path: Path) -> None:
    tuner, watch = _tuner(tmp_path)
    d = tuner.advise(watch.frame, ()).decision
    assert d is not None
    tuner.request("up", d.desired + 5)
    result = tuner.advise(watch.frame, ())
    text = applied(result)
    assert text is not None and text.startswith("not applied: the advice is now")
    (note,) = [n for n in result.notes if n.text == text]
    assert (note.kind, note.level) == ("apply", "warning")
    assert not result.records and text in tuner.lines


def test_a_request_while_another_holds_the_lock_is_not_applied(tmp_path: Path) -> None:
    tuner, watch = _tuner(tmp_path)
    other = ApplyLock(tmp_path / "fifo", "uwsgitune daemon", tmp_path)
    assert other.acquire() is None
    try:
        tuner.request("up", 3)
        text = applied(tuner.advise(watch.frame, ()))
        assert text is not None and "uwsgitune daemon" in text and text.startswith("not applied")
    finally:
        other.release()
