"""The rules engine over one instance's recent frames, run once per poll for every sink."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from uwsgitune.core.frame import Frame
from uwsgitune.core.latencyreport import LatencyView
from uwsgitune.rules.columns import Columns
from uwsgitune.rules.engine import EngineState, evaluate
from uwsgitune.rules.facts import NO_FACTS, Facts
from uwsgitune.rules.finding import Finding
from uwsgitune.rules.rulesettings import RuleSettings

# Rules look back at most this far (idle and memory windows are 60 s by default).
LOOKBACK_SECONDS = 120.0


def _mono(f: Frame) -> float:
    return f.mono


def _lookback(frames: Sequence[Frame], edge: float, since: float | None) -> list[Frame]:
    """The frames at or after `edge` and after `since`. A window's frames are in poll order
    (monotonic time): found by bisection, not a scan of the window (6,000 frames at 10 Hz)."""
    if frames[0].mono > frames[-1].mono:  # not in time order: a hand-made sequence
        return [f for f in frames if f.mono >= edge and (since is None or f.mono > since)]
    start = bisect.bisect_left(frames, edge, key=_mono)
    if since is not None:
        start = max(start, bisect.bisect_right(frames, since, key=_mono))
    return list(frames[start:])


class RulesRunner:
    """Findings with hysteresis (the engine's state is kept between polls). A listen restart
    by the tuner (`since`: the result's `listen_since`) starts the rules afresh: frames from
    before it describe a socket that is gone."""

    def __init__(
        self,
        facts: Facts = NO_FACTS,
        settings: RuleSettings | None = None,
        lookback: float = LOOKBACK_SECONDS,
    ) -> None:
        self.facts, self.settings, self.lookback = facts, settings, lookback
        self.state = EngineState()
        self.error: str | None = None
        self._since: float | None = None
        self._columns = Columns()

    def run(
        self,
        frames: Sequence[Frame],
        since: float | None = None,
        latency: LatencyView | None = None,
    ) -> tuple[Finding, ...]:
        """Findings for the frames of the look-back after `since` (monotonic), oldest first,
        and the poll's request log view (`latency`, read by the latency rules). A failing
        rule is a bug: it is reported in `error`, and the polls go on without findings."""
        if since != self._since:
            self.state, self._since = EngineState(), since
        if not frames:
            return ()
        recent = _lookback(frames, frames[-1].mono - self.lookback, self._since)
        try:
            found, self.state = evaluate(
                recent, self.facts, self.settings, self.state, self._columns, latency
            )
        except Exception as exc:  # a bug in one rule must not stop the polls
            self.error = f"rules engine failed: {exc!r}"
            return ()
        self.error = None
        return found
