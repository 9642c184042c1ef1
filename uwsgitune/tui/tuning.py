"""The tuner beside the TUI: advice on every poll, applied only by the `a` key, confirmed.

`watch ADDR --fifo PATH` runs the same `TuneLoop` as `uwsgitune tune`, in recommend mode:
it never acts by itself. Its decision shows in the annotations pane. `a` opens a
confirmation with that decision; `y` asks the poll thread to apply it. The poll thread then
decides afresh on fresh stats (a stale frame, a cool-down or a change in flight still
refuse), applies only if the fresh decision is still the one confirmed, under the same
apply lock as the daemon, and reports the outcome in the next snapshot.
Everything runs in the poll thread; the UI thread only sets a request.
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


@dataclass(frozen=True)
class TunerView:
    """What a snapshot carries of the tuner: its decision and the last apply outcome."""

    decision: Decision | None
    outcome: str | None = None  # set once, on the snapshot after an apply request


class TuiTuner:
    def __init__(self, loop: TuneLoop, lock: ApplyLock) -> None:
        self.loop = loop
        self.lock = lock
        self.lines: deque[str] = deque(maxlen=200)
        loop.log = self.lines.append
        self._request: tuple[str, int] | None = None
        self._guard = threading.Lock()

    def request(self, action: str, desired: int) -> None:
        """From the UI thread: apply (action, desired) at the next poll, if still advised."""
        with self._guard:
            self._request = (action, desired)

    def step(self, frame: Frame) -> TunerView:
        """In the poll thread, after each poll: advise, then serve a pending request."""
        d = self.loop.step(frame)
        with self._guard:
            request, self._request = self._request, None
        if request is None:
            return TunerView(d)
        return TunerView(self.loop.last or d, self._apply(request))

    def _apply(self, expect: tuple[str, int]) -> str:
        problem = self.lock.acquire()
        if problem is not None:
            return f"not applied: {problem}"
        self.loop.outcome = None
        try:
            d = self.loop.apply_now(expect)
        finally:
            self.lock.release()
        if d is None:
            return "not applied: no stats yet"
        if (d.action, d.desired) != expect:
            return f"not applied: the advice is now {d.action} {d.live}->{d.desired} ({d.reason})"
        if self.loop.outcome is None:
            return f"not applied: applying is stopped ({self.loop.stopped})"
        result, detail = self.loop.outcome
        if result in ("sent", "verified"):
            return f"applied: {d.action} {d.live}->{d.desired} via {d.via} ({detail})"
        return f"not applied: {result}: {detail}"


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
