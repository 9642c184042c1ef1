"""The rules runner keeps each poll's per-frame signals between polls: computed once per
frame, not once per poll over the whole look-back, with the same findings, over a window
that compacts its older frames as the daemon's does."""

from __future__ import annotations

from pathlib import Path

import pytest

from uwsgitune.cli.watch import replay_frames
from uwsgitune.core.frame import Frame
from uwsgitune.core.window import WHOLE_FRAMES, Window
from uwsgitune.pipeline.rules import RulesRunner
from uwsgitune.rules import context
from uwsgitune.rules.facts import Facts
from uwsgitune.sources.recording import read_recording

RECORDINGS = sorted((Path(__file__).resolve().parents[1] / "data" / "recordings").glob("*.jsonl"))


def frames_of(name: str) -> list[Frame]:
    path = next(p for p in RECORDINGS if p.name == name)
    return list(replay_frames(read_recording(path)))


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
