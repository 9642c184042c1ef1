"""The tuner beside the TUI: advice on every poll, applied only by the `a` key, confirmed.

`watch ADDR --fifo PATH` runs the same `TuneLoop` as `uwsgitune tune`, in recommend mode: it
never acts by itself. It is the pipeline's tuner (`advise`): it gets the rules' findings of
the poll and returns the `StepResult`, whose decision shows in the annotations pane. `a`
opens a confirmation with that decision; `y` asks the poll thread to apply it. The poll
thread then decides afresh on fresh stats (a stale frame, a cool-down or a change in flight
still refuse), applies only if the fresh decision is still the one confirmed, under the same
apply lock as the daemon, and reports the outcome as a note of kind `apply` in the result.
Once it holds the lock, and before anything else, it resumes a pool the lock's mark says a
reload cut short left paused (`TuneLoop.resume_left`, actuate/leftpaused.py): that is then
the outcome, and nothing else is applied until the user asks again on fresh advice.
Everything runs in the poll thread; the UI thread only sets a request.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import replace

from uwsgitune.actuate.lock import ApplyLock
from uwsgitune.actuate.loop import TuneLoop
from uwsgitune.core.frame import Frame
from uwsgitune.rules.finding import Finding
from uwsgitune.tuner.result import Note, StepResult

APPLY_WAIT_SECONDS = 20.0  # the halt's grace (10 s) and a rollback, as the daemon waits


class TuiTuner:
    def __init__(self, loop: TuneLoop, lock: ApplyLock) -> None:
        self.loop = loop
        self.lock = lock
        loop.lock = lock  # marks a reload under way while `a` holds it
        self.lines: deque[str] = deque(maxlen=200)  # what the loop said, newest last
        self._request: tuple[str, int] | None = None
        self._guard = threading.Lock()

    def halt(self) -> None:
        """The TUI is quitting: an apply in flight verifies within the grace or rolls back,
        and no new one starts (`TuneLoop.halt`)."""
        self.loop.halt.set()

    def wait_applied(self, timeout: float = APPLY_WAIT_SECONDS) -> bool:
        """After `halt`: wait until the poll thread has ended its apply and released the
        lock. False if it did not within `timeout` (its intent record stays in the audit log)."""
        deadline = time.monotonic() + timeout
        while self.lock.held and time.monotonic() < deadline:
            time.sleep(0.1)
        return not self.lock.held

    def request(self, action: str, desired: int) -> None:
        """From the UI thread: apply (action, desired) at the next poll, if still advised."""
        with self._guard:
            self._request = (action, desired)

    def advise(self, frame: Frame, findings: Sequence[Finding]) -> StepResult:
        """One poll with the rules' findings: the loop's advice, then a pending request
        served. Its outcome is a note of kind `apply`, "applied: ..." (level info) or
        "not applied: ..." (warning); the result then carries the fresh decision."""
        result = self.loop.step(frame, findings)
        with self._guard:
            request, self._request = self._request, None
        if request is not None:
            result = self._apply(request, result)
        self.lines.extend(n.text for n in result.notes if n.fresh)
        return result

    def _apply(self, expect: tuple[str, int], advised: StepResult) -> StepResult:
        problem = self.lock.acquire()
        if problem is not None:
            return _with_outcome(advised, advised, f"not applied: {problem}")
        try:
            now = self.loop.apply_now(expect)
        finally:
            self.lock.release()
        return _with_outcome(advised, now, _outcome(now, expect))


def finish_applies(tuners: Iterable[TuiTuner]) -> int:
    """After the app quit (its `halt` set): wait for an apply in flight to end in its own
    thread. 1 if one did not end in time."""
    code = 0
    for tuner in tuners:
        if tuner.lock.held:
            print("uwsgitune: waiting for the apply in flight to verify or roll back", flush=True)
        if not tuner.wait_applied():
            print("uwsgitune: the apply in flight did not end within 20 s; see the audit log")
            code = 1
    return code


def _with_outcome(advised: StepResult, now: StepResult, text: str) -> StepResult:
    """The poll's result with what the apply request did (`now`) and its outcome note."""
    note = Note("info" if text.startswith("applied") else "warning", "apply", text)
    if now is advised:
        return replace(advised, notes=(*advised.notes, note))
    return replace(now, decision=now.decision or advised.decision, advice=advised.advice,
                   notes=(*advised.notes, *now.notes, note),
                   records=(*advised.records, *now.records), listen=advised.listen,
                   listen_since=advised.listen_since)  # fmt: skip


def applied(result: StepResult) -> str | None:
    """The outcome of an apply request served in this result, if one was."""
    for note in result.notes:
        if note.kind == "apply" and note.text.startswith(("applied", "not applied")):
            return note.text
    return None


def _outcome(result: StepResult, expect: tuple[str, int]) -> str:
    """What became of an apply request, in one line for the screen."""
    d = result.decision
    if d is None:  # a pool a reload cut short left paused, seen to first (or no stats yet)
        return (
            f"not applied: {result.outcome.detail}"
            if result.outcome
            else "not applied: no stats yet"
        )
    if (d.action, d.desired) != expect:
        return f"not applied: the advice is now {d.action} {d.live}->{d.desired} ({d.reason})"
    if result.outcome is None:
        return f"not applied: applying is stopped ({result.stopped})"
    if result.outcome.ok:
        return f"applied: {d.action} {d.live}->{d.desired} via {d.via} ({result.outcome.detail})"
    return f"not applied: {result.outcome.result}: {result.outcome.detail}"
