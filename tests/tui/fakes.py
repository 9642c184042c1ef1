"""A scripted watch: gives the app frames without sockets or threads."""

from __future__ import annotations

from collections.abc import Sequence

from uwsgitune.core.frame import Frame
from uwsgitune.core.window import Window
from uwsgitune.tui.app import WatchApp
from uwsgitune.tui.polling import Snapshot
from uwsgitune.tui.warnings import builtin_warnings


class FakeWatch:
    def __init__(self, frames: Sequence[Frame] = (), interval: float = 1.0) -> None:
        self.script = list(frames)
        self.interval = interval
        self.next_due = 0.0
        self.window = Window()
        self.steps = 0

    def due(self) -> bool:
        return bool(self.script)

    def step(self) -> Frame:
        self.steps += 1
        f = self.script.pop(0)
        self.window.add(f)
        self.next_due = 1e18 if not self.script else 0.0
        return f


def snapshot(frames: Sequence[Frame], index: int = 0, retry_in: float | None = None) -> Snapshot:
    frames = tuple(frames)
    return Snapshot(index, frames[-1], frames, tuple(builtin_warnings(frames)), retry_in)


def make_app(n: int = 1, names: Sequence[str] | None = None) -> WatchApp:
    return WatchApp(
        [FakeWatch() for _ in range(n)],
        names=names or [f"/tmp/i{i}.sock" for i in range(n)],
        autopoll=False,
        annotator=lambda: builtin_warnings,
    )
