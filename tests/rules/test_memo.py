"""The rules runner keeps each poll's per-frame signals between polls: computed once per
frame, not once per poll over the whole look-back, with the same findings, over a window
that compacts its older frames as the daemon's does."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.frames import MIB, MONO0, T0, tcp, varying
from tests.support.frames import frame as synthetic
from tests.support.instances import replayed
from uwsgitune.cli.recommend import settings_for
from uwsgitune.core.address import parse_address
from uwsgitune.core.frame import Frame
from uwsgitune.core.window import WHOLE_FRAMES, Window
from uwsgitune.daemon.instance import WINDOW_SECONDS
from uwsgitune.pipeline.rules import LOOKBACK_SECONDS, RulesRunner
from uwsgitune.rules import context
from uwsgitune.rules.columns import Columns
from uwsgitune.rules.facts import Facts

RECORDINGS = sorted((Path(__file__).resolve().parents[1] / "data" / "recordings").glob("*.jsonl"))


def frames_of(name: str) -> list[Frame]:
    path = next(p for p in RECORDINGS if p.name == name)
    return replayed(path)


@pytest.mark.parametrize("recording", [p.name for p in RECORDINGS])
def test_a_compacting_window_gives_the_findings_of_a_whole_one(recording: str) -> None:
    whole, compact = Window(), Window(whole=WHOLE_FRAMES)
    a, b = RulesRunner(Facts()), RulesRunner(Facts())
    for frame in frames_of(recording):
        whole.add(frame)
        compact.add(frame)
        assert a.run(whole.frames()) == b.run(compact.frames())


def test_each_polls_signals_are_computed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    real = context.cpu_saturation

    def counted(f: Frame) -> float | None:
        nonlocal calls
        calls += 1
        return real(f)

    monkeypatch.setattr(context, "cpu_saturation", counted)
    frames = max((frames_of(p.name) for p in RECORDINGS), key=len)
    rules, seen = RulesRunner(Facts()), []
    for frame in frames:
        seen.append(frame)
        rules.run(seen)
    assert len(frames) > 20 and 0 < calls <= len(frames)


@pytest.mark.parametrize("recording", [p.name for p in RECORDINGS])
def test_kept_columns_give_the_findings_of_columns_built_afresh(recording: str) -> None:
    """The daemon's runner keeps its columns across polls (rules/columns.py); a runner
    whose columns are new at every poll computes every value from the frames. Both see the
    daemon's compacting window, and agree at every poll."""
    frames = frames_of(recording)
    facts = Facts(stats_kind=parse_address(frames[0].source).kind)
    settings = settings_for(frames[-1].mono - frames[0].mono)  # as `recommend --replay`
    window = Window(whole=WHOLE_FRAMES)
    kept, fresh = RulesRunner(facts, settings), RulesRunner(facts, settings)
    raised: set[str] = set()
    for frame in frames:
        window.add(frame)
        fresh._columns = Columns()
        found = kept.run(window.frames())
        assert found == fresh.run(window.frames())
        raised |= {f.id for f in found}
    assert raised or recording == "healthy.jsonl"  # the recordings raise their findings


BASE = synthetic(0)


def _frame(i: int, t_shift: float = 0.0) -> Frame:
    return replace(BASE, mono=MONO0 + i, t=T0 + i + t_shift, rps=float(i))


def test_columns_compute_each_frame_once_and_follow_the_window() -> None:
    calls: list[float] = []

    def rps(f: Frame) -> float | None:
        calls.append(f.mono)
        return f.rps

    cols, frames = Columns(), [_frame(i) for i in range(40)]

    def read(start: int, stop: int, whole: int | None = None) -> list[float | None]:
        run = frames[start:stop]
        cols.sync([f.mono for f in run], [f.t for f in run])
        return cols.column("rps", rps, run, 0 if whole is None else whole, len(run))

    assert read(0, 30) == [float(i) for i in range(30)]
    assert read(0, 30) == [float(i) for i in range(30)] and len(calls) == 30
    assert read(5, 35) == [float(i) for i in range(5, 35)]  # 5 dropped, 5 new
    assert len(calls) == 35 and len(cols.monos) == 30 and len(cols.cols["rps"]) == 30
    assert read(5, 35, whole=20) == [float(i) for i in range(25, 35)]  # a shorter look-back
    assert len(calls) == 35


def test_columns_start_again_when_the_frames_do_not_line_up() -> None:
    cols, calls = Columns(), []

    def rps(f: Frame) -> float | None:
        calls.append(f.mono)
        return f.rps

    for shift, computed in ((0.0, 10), (0.0, 10), (0.5, 20)):
        run = [_frame(i, shift) for i in range(10)]  # the third: same monos, other wall times
        cols.sync([f.mono for f in run], [f.t for f in run])
        assert cols.column("rps", rps, run, 0, 10) == [float(i) for i in range(10)]
        assert len(calls) == computed
    gone = [_frame(i) for i in range(50, 60)]  # nothing in common: a restart
    cols.sync([f.mono for f in gone], [f.t for f in gone])
    assert cols.monos == [f.mono for f in gone] and not any(cols.cols.values())


def _phase(i: int) -> dict[str, object]:
    """A long run of one instance whose trouble changes every 50 polls."""
    full = dict(busy_ratio=1.0, busy=4, idle=0, littles_l=4.0)
    return [
        {},
        dict(sockets=(tcp(1000, 1024),), **full),
        dict(eps=10.0, harakiri_delta=1 if i % 5 == 0 else 0, respawns_delta=1),
        dict(mem_per_worker=(50 + i % 50) * MIB),
        dict(static_share=0.6),
        dict(busy_ratio=0.95 if i % 20 < 8 else 0.05),
    ][i // 50 % 6]


def test_kept_columns_over_a_long_run_as_the_window_moves() -> None:
    """400 polls: the look-back drops its oldest frames at every poll, so the kept columns
    are cut and extended as the daemon's are, and findings rise and clear."""
    window = Window(WINDOW_SECONDS, whole=WHOLE_FRAMES)
    kept, fresh = RulesRunner(Facts()), RulesRunner(Facts())
    raised: set[str] = set()
    for frame in varying(400, _phase):
        window.add(frame)
        fresh._columns = Columns()
        found = kept.run(window.frames())
        assert found == fresh.run(window.frames())
        raised |= {f.id for f in found}
    assert len(kept._columns.monos) <= LOOKBACK_SECONDS + 1
    assert {"listen_queue.capacity_short", "health.exceptions", "memory.rss_growth"} <= raised
    assert "static_files" in raised
