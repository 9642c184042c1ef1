"""The rules, once per poll, for a tuner whose caller runs no rules of its own.

`TuneLoop.step` takes the findings of the poll; the daemon has them already (its findings
tracker), `uwsgitune tune` and the TUI's tuner run the rules here, with their own engine
state. A listen restart starts the rules afresh: frames from before it (the result's
`listen_since`) describe a socket that is gone.
"""

from __future__ import annotations

from collections.abc import Sequence

from uwsgitune.core.frame import Frame
from uwsgitune.rules.engine import EngineState, evaluate
from uwsgitune.rules.finding import Finding


class PollRules:
    def __init__(self) -> None:
        self._state = EngineState()
        self._since: float | None = None

    def run(self, frames: Sequence[Frame], since: float | None = None) -> tuple[Finding, ...]:
        """The findings of `frames` after `since` (monotonic; None: all of them)."""
        if since != self._since:
            self._state, self._since = EngineState(), since
        if since is not None:
            frames = [f for f in frames if f.mono > since]
        found, self._state = evaluate(frames, state=self._state)
        return found
