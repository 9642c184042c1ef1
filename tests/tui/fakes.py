"""A scripted source: gives the app's drivers polls without sockets."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from tests.tui.frames import SOURCE
from uwsgitune.core.frame import Frame
from uwsgitune.core.samples import Poll
from uwsgitune.pipeline import InstanceDriver, InstanceState, RulesRunner
from uwsgitune.tui.app import WatchApp


class ScriptedSource:
    """`pipeline.driver.Source` over scripted polls, read as fast as they come; `polls`
    counts those read."""

    paced = False
    kind = "unix"

    def __init__(self, polls: Sequence[Poll] = (), name: str = SOURCE) -> None:
        self.name = name
        self.uri = f"unix://{name}"
        self.script = deque(polls)
        self.polls = 0

    @property
    def exhausted(self) -> bool:
        return not self.script

    def poll(self) -> Poll:
        self.polls += 1
        return self.script.popleft()

    def raw(self) -> bytes | None:
        return None


def snapshot(
    frames: Sequence[Frame], index: int = 0, retry_in: float | None = None, findings: bool = False
) -> tuple[int, InstanceState]:
    """(index, state) for `app.show`: a state as a driver publishes it, with the rules'
    findings when asked."""
    frames = tuple(frames)
    found = RulesRunner().run(frames) if findings else ()
    state = InstanceState(
        "fake", frame=frames[-1], frames=frames, findings=found, retry_in=retry_in
    )
    return index, state


def driver(source: ScriptedSource, interval: float = 1.0) -> InstanceDriver:
    """A driver over a scripted source, without rules (the built-in warnings only)."""
    return InstanceDriver(source, interval=interval)


def make_app(n: int = 1, names: Sequence[str] | None = None) -> WatchApp:
    return WatchApp(
        [driver(ScriptedSource()) for _ in range(n)],
        names=names or [f"/tmp/i{i}.sock" for i in range(n)],
        autopoll=False,
    )
