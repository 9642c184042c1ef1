"""`InstancePipeline`: one instance's poll, rules and tuner, publishing one state per poll.

`step` runs in the instance's poll thread (the TUI's, the daemon's, `watch --plain`'s or
`tune`'s loop): it polls, runs the rules once on the window, hands the frame and the
findings to the tuner, and assigns the new frozen `InstanceState` to `state`. Other
threads (a metrics scrape) read `state`: one reference, never torn.

A tuner that waits on a reload or a restart polls through `poll`, which publishes each of
those polls at once (with the findings and tuning of the last step): a long apply never
leaves a stale `uwsgi_up 1` on /metrics, and the step ends on the latest poll.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from uwsgitune.core.frame import Frame
from uwsgitune.core.samples import Poll
from uwsgitune.pipeline.rules import RulesRunner
from uwsgitune.pipeline.state import InstanceState, PollCounts, count_actions
from uwsgitune.rules.facts import Facts
from uwsgitune.rules.finding import Finding
from uwsgitune.sources.watcher import InstanceWatch
from uwsgitune.tuner.result import StepResult

# The tuner's step: the frame of a good poll and the rules' findings in, its result out.
Tuner = Callable[[Frame, tuple[Finding, ...]], StepResult | None]


class Window(Protocol):
    def frames(self) -> tuple[Frame, ...]: ...


class Watch(Protocol):
    """What a pipeline needs of `uwsgitune.sources.watcher.InstanceWatch`."""

    interval: float
    next_due: float

    @property
    def window(self) -> Window: ...

    @property
    def last_poll(self) -> Poll | None: ...

    def step(self) -> Frame: ...

    def due(self) -> bool: ...


class InstancePipeline:
    def __init__(
        self,
        watch: Watch,
        stats_uri: str,
        *,
        name: str = "",
        mode: str = "",
        rules: RulesRunner | None = None,
        tuner: Tuner | None = None,
        mono: Callable[[], float] = time.monotonic,
    ) -> None:
        self.watch, self.rules, self.tuner = watch, rules, tuner
        self._mono = mono
        self._since: float | None = None  # the tuner's last listen restart
        self._counts = PollCounts()
        self._latest: Frame | None = None  # the last poll made from inside the tuner
        self.state = InstanceState(stats_uri, name=name, mode=mode, counts=self._counts)
        self.after_step: Callable[[], object] | None = None  # in the stepping thread

    def _poll(self) -> Frame:
        start = time.perf_counter()
        frame = self.watch.step()
        seconds = time.perf_counter() - start
        self._counts = self._counts.after(frame.ok, seconds, frame.stats_repairs > 0, frame.t)
        return frame

    def step(self) -> InstanceState:
        """Poll now; rules and tuner on a good frame; publish and return the new state."""
        frame = self._poll()
        old = self.state
        findings, tuning, error = old.findings, None, old.rules_error
        frames = self.watch.window.frames()  # one copy of the window per poll
        if frame.ok and self.rules is not None:
            findings, error = self.rules.run(frames, self._since), self.rules.error
        self._latest = None
        if self.tuner is not None:  # on a failed poll too: it says why it waits
            tuning = self.tuner(frame, findings)
            self._since = tuning.listen_since if tuning is not None else self._since
        if self._latest is not None:  # the tuner polled since: end on the latest poll
            frame, frames = self._latest, self.watch.window.frames()
        self.state = self._state(frame, frames, findings, tuning, error)
        if self.after_step is not None:
            self.after_step()
        return self.state

    def poll(self) -> Frame:
        """A poll from inside the tuner's step (a reload or a restart waiting), published
        at once: the frame and the window move on, findings and tuning stay the last step's."""
        frame = self._latest = self._poll()
        old = self.state
        new = self._state(frame, self.watch.window.frames(), old.findings, None, old.rules_error)
        self.state = replace(new, tuning=old.tuning)
        return frame

    def _state(
        self,
        frame: Frame,
        frames: tuple[Frame, ...],
        findings: tuple[Finding, ...],
        tuning: StepResult | None,
        error: str | None,
    ) -> InstanceState:
        old = self.state
        poll = self.watch.last_poll
        good = poll if frame.ok and poll is not None and poll.mono == frame.mono else None
        retry = None if frame.ok else max(0.0, self.watch.next_due - self._mono())
        return replace(
            old,
            frame=frame,
            poll=good,
            frames=frames,
            findings=findings,
            tuning=tuning,
            counts=self._counts,
            actions=count_actions(old.actions, tuning),
            retry_in=retry,
            rules_error=error,
        )

    def republish(self, mode: str, recommend: bool = True) -> InstanceState:
        """The same poll under a new mode (the daemon's config was reloaded)."""
        self.state = replace(self.state, mode=mode, recommend=recommend)
        return self.state


def pipeline_for(
    watch: InstanceWatch,
    *,
    name: str = "",
    mode: str = "",
    tuner: Tuner | None = None,
    rules: RulesRunner | None = None,
) -> InstancePipeline:
    """A pipeline over a real watch, with the rules (knowing the stats address kind)."""
    rules = rules or RulesRunner(Facts(stats_kind=watch.address.kind))
    return InstancePipeline(
        watch, watch.address.uri, name=name, mode=mode, rules=rules, tuner=tuner
    )
