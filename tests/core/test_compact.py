"""The daemon's compact window (core/compact.py) changes no number a user sees.

The same polls go through a window of whole frames and through the daemon's compact one;
at every poll the rules' findings (with hysteresis), the tuner's decision and the TUI's
sparkline series must be identical. The polls are the recorded scenarios (real uWSGI under
real load) and synthetic ones with failed polls, reloads and threads under the GIL.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.frames import load, play, varying
from tests.support.instances import Load, replayed
from uwsgitune.cli.recommend import settings_for
from uwsgitune.core.address import parse_address
from uwsgitune.core.compact import HistoryFrame, busy_samples, compact
from uwsgitune.core.frame import Frame
from uwsgitune.core.window import WHOLE_FRAMES, Window
from uwsgitune.daemon.config import InstanceConfig
from uwsgitune.daemon.instance import WINDOW_SECONDS, InstanceRunner
from uwsgitune.pipeline import RulesRunner
from uwsgitune.render.jsonview import frame_to_dict
from uwsgitune.rules import Facts
from uwsgitune.rules.rulesettings import RuleSettings
from uwsgitune.tui.sparklines import series
from uwsgitune.tuner.decision import TunerState
from uwsgitune.tuner.policy import decide
from uwsgitune.tuner.tunersettings import TunerSettings

RECORDINGS = Path(__file__).resolve().parent.parent / "data" / "recordings"
TUNER = TunerSettings(min_workers=1, max_workers=128)


def _gil(i: int) -> dict[str, object]:
    """Threads under the GIL, with a busy share that crosses the rule's 50% sample line."""
    busy = (30.0, 50.0, 80.0, 100.0)[i % 4]
    return dict(live=2, threads=4, worker=dict(cpu_pct=90.0 + i % 10, busy_pct=busy))


def _gaps() -> list[Frame]:
    """Polls with failures, a reload and a restart between them (frames without rates)."""
    ok, busy = load(live=4, rps=80.0), load(live=6, threads=2, rps=300.0, busy=6)
    steps: list[tuple[str, float, Load]] = [("ok", i, ok) for i in range(12)]
    steps += [("error", 12 + i, ok) for i in range(4)] + [("ok", 16, ok), ("reload", 17, busy)]
    steps += [("ok", 18 + i, busy) for i in range(12)] + [("restart", 30, ok)]
    steps += [("error", 31, ok), ("ok", 32, ok), ("ok", 33, ok)]
    return play(steps)


def _recording(name: str) -> list[Frame]:
    return replayed(RECORDINGS / f"{name}.jsonl")


def _replay(
    frames: Sequence[Frame], whole: int | None, settings: RuleSettings
) -> list[tuple[object, ...]]:
    """Every poll's findings, tuner decision and sparkline series, from a window that keeps
    `whole` frames whole (None: all of them)."""
    window = Window(WINDOW_SECONDS, whole=whole)
    rules = RulesRunner(Facts(stats_kind=parse_address(frames[0].source).kind), settings)
    state, out = TunerState(), []
    for frame in frames:
        window.add(frame)
        held = window.frames()
        found = rules.run(held) if frame.ok else ()
        d = decide(held, state, TUNER, frame.mono)
        state = d.state
        out.append((found, rules.error, replace(d, state=None), d.state, series(held)))
    return out


def _same_everywhere(frames: Sequence[Frame], settings: RuleSettings) -> set[str]:
    whole = _replay(frames, None, settings)
    small = _replay(frames, WHOLE_FRAMES, settings)
    for i, (a, b) in enumerate(zip(whole, small, strict=True)):
        assert a == b, f"poll {i} differs"
    return {f.id for found, *_ in whole for f in found}  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", sorted(p.stem for p in RECORDINGS.glob("*.jsonl")))
def test_recorded_scenarios_give_the_same_numbers(name: str) -> None:
    frames = _recording(name)
    found = _same_everywhere(frames, settings_for(frames[-1].mono - frames[0].mono))
    assert found or name == "healthy", f"{name}: no finding: the comparison tests nothing"


def test_threads_under_the_gil_give_the_same_numbers() -> None:
    found = _same_everywhere(varying(40, _gil), settings_for(30.0))
    assert "threads_gil" in found


def test_failed_polls_and_reloads_give_the_same_numbers() -> None:
    _same_everywhere(_gaps(), settings_for(15.0))


def test_old_frames_lose_their_worker_views() -> None:
    window = Window(WINDOW_SECONDS, whole=2)
    for f in varying(10, _gil):
        window.add(f)
    held = window.frames()
    assert all(isinstance(f, HistoryFrame) and f.workers == () for f in held[:-2])
    assert all(not isinstance(f, HistoryFrame) and len(f.workers) == 2 for f in held[-2:])


def test_the_newest_rated_frame_stays_whole() -> None:
    """The rules read it as the latest (stuck requests) after failed or reload polls."""
    window = Window(WINDOW_SECONDS, whole=1)
    frames = _gaps()
    for f in frames[:16]:  # 12 good polls, then 4 failed ones
        window.add(f)
    held = window.frames()
    assert held[11] is frames[11] and held[11].workers
    assert isinstance(held[10], HistoryFrame)


def test_a_compact_frame_keeps_every_other_field() -> None:
    frames = varying(6, _gil)
    prev: Frame | None = None
    for f in frames:
        small = compact(f, prev)
        assert frame_to_dict(small) == frame_to_dict(replace(f, workers=()))
        for limit in (0.0, 91.0, 95.5, 99.0, 200.0):
            assert busy_samples(small, limit) == busy_samples(f, limit)
        if prev is not None:
            assert small.sockets is prev.sockets  # equal tuples are shared, not copied
        prev = small


def test_the_daemon_keeps_its_window_compact(tmp_path: Path) -> None:
    spec = InstanceConfig(name="a", stats=str(tmp_path / "stats.sock"))
    runner = InstanceRunner(spec, tmp_path)  # builds its driver; polls nothing yet
    assert runner.driver.window.whole == WHOLE_FRAMES
