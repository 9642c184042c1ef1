"""A scripted watch: gives the app frames without sockets or threads."""

from __future__ import annotations

from collections.abc import Sequence

from uwsgitune.core.frame import Frame
from uwsgitune.core.samples import Poll
from uwsgitune.core.window import Window
from uwsgitune.pipeline import InstancePipeline, InstanceState, RulesRunner
from uwsgitune.tui.app import WatchApp


class FakeWatch:
    def __init__(self, frames: Sequence[Frame] = (), interval: float = 1.0) -> None:
        self.script = list(frames)
        self.interval = interval
        self.next_due = 0.0
        self.window = Window()
        self.steps = 0
        self.last_poll: Poll | None = None

    def due(self) -> bool:
        return bool(self.script)

    def step(self) -> Frame:
        self.steps += 1
        f = self.script.pop(0)
        self.window.add(f)
        self.next_due = 1e18 if not self.script else 0.0
        return f


def snapshot(
    frames: Sequence[Frame], index: int = 0, retry_in: float | None = None, findings: bool = False
) -> tuple[int, InstanceState]:
    """(index, state) for `app.show`: a state as a pipeline publishes it, with the rules'
    findings when asked."""
    frames = tuple(frames)
    found = RulesRunner().run(frames) if findings else ()
    state = InstanceState(
        "fake", frame=frames[-1], frames=frames, findings=found, retry_in=retry_in
    )
    return index, state


def pipeline(watch: FakeWatch) -> InstancePipeline:
    """A pipeline over a scripted watch, without rules (the built-in warnings only)."""
    return InstancePipeline(watch, "fake")


def make_app(n: int = 1, names: Sequence[str] | None = None) -> WatchApp:
    return WatchApp(
        [pipeline(FakeWatch()) for _ in range(n)],
        names=names or [f"/tmp/i{i}.sock" for i in range(n)],
        autopoll=False,
    )
