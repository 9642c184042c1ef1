"""The tuner beside the TUI: advice on every poll, applied only by the `a` key, confirmed.

`watch ADDR --fifo PATH` runs the same `TuneLoop` as `uwsgitune tune`, in recommend mode: it
never acts by itself. It runs the rules once per poll for the loop (`PollRules`: the TUI's
own findings are of the screen's window). Its decision shows in the annotations pane. `a`
opens a confirmation with that decision; `y` asks the poll thread to apply it. The poll
thread then decides afresh on fresh stats (a stale frame, a cool-down or a change in flight
still refuse), applies only if the fresh decision is still the one confirmed, under the same
apply lock as the daemon, and reports the outcome in the next snapshot. Everything runs in
the poll thread; the UI thread only sets a request.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass

from uwsgitune.actuate.lock import ApplyLock
from uwsgitune.actuate.loop import TuneLoop
from uwsgitune.core.frame import Frame
from uwsgitune.tui.warnings import Annotation
from uwsgitune.tuner import Decision
from uwsgitune.tuner.findings import PollRules
from uwsgitune.tuner.result import StepResult


@dataclass(frozen=True)
class TunerView:
    """What a snapshot carries of the tuner: its decision and the last apply outcome."""

    decision: Decision | None
    outcome: str | None = None  # set once, on the snapshot after an apply request


class TuiTuner:
    def __init__(self, loop: TuneLoop, lock: ApplyLock) -> None:
        self.loop = loop
        self.lock = lock
        self.lines: deque[str] = deque(maxlen=200)  # what the loop said, newest last
        self._rules = PollRules()
        self._since: float | None = None  # the last listen restart: rules start afresh
        self._request: tuple[str, int] | None = None
        self._guard = threading.Lock()

    def request(self, action: str, desired: int) -> None:
        """From the UI thread: apply (action, desired) at the next poll, if still advised."""
        with self._guard:
            self._request = (action, desired)

    def step(self, frame: Frame) -> TunerView:
        """In the poll thread, after each poll: advise, then serve a pending request."""
        findings = self._rules.run(self.loop.watch.window.frames(), self._since)
        result = self._said(self.loop.step(frame, findings))
        with self._guard:
            request, self._request = self._request, None
        if request is None:
            return TunerView(result.decision)
        return self._apply(request, result.decision)

    def _said(self, result: StepResult) -> StepResult:
        self._since = result.listen_since
        self.lines.extend(n.text for n in result.notes if n.fresh)
        return result

    def _apply(self, expect: tuple[str, int], advised: Decision | None) -> TunerView:
        problem = self.lock.acquire()
        if problem is not None:
            return TunerView(advised, f"not applied: {problem}")
        try:
            result = self._said(self.loop.apply_now(expect))
        finally:
            self.lock.release()
        return TunerView(result.decision or advised, _outcome(result, expect))


def _outcome(result: StepResult, expect: tuple[str, int]) -> str:
    """What became of an apply request, in one line for the screen."""
    d = result.decision
    if d is None:
        return "not applied: no stats yet"
    if (d.action, d.desired) != expect:
        return f"not applied: the advice is now {d.action} {d.live}->{d.desired} ({d.reason})"
    if result.outcome is None:
        return f"not applied: applying is stopped ({result.stopped})"
    if result.outcome.ok:
        return f"applied: {d.action} {d.live}->{d.desired} via {d.via} ({result.outcome.detail})"
    return f"not applied: {result.outcome.result}: {result.outcome.detail}"


def tuner_annotation(view: TunerView) -> Annotation | None:
    d = view.decision
    if d is None:
        return None
    if d.is_change:
        return Annotation(
            key="tuner",
            severity="warning",
            reason=f"tuner advises {d.action} {d.live}->{d.desired} via {d.via} [{d.code}]: "
            f"{d.reason}",
            evidence=" ".join(f"{k}={v}" for k, v in d.evidence.items() if v is not None),
            recommendation="press a to apply (asks first)",
            origin="tuner",
        )
    return Annotation(
        key="tuner",
        severity="info",
        reason=f"tuner: {d.action} at {d.live} [{d.code}]: {d.reason}",
        origin="tuner",
    )
