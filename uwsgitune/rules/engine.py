"""The rules engine: a window of frames and the static facts in, findings out.

Theory of operation
-------------------
`evaluate` is pure and deterministic: it reads no clock (time is `Frame.mono`/`Frame.t`),
does no I/O, and gives the same answer for the same input.

Each rule is a small function `Context -> list[Finding]`. A rule's condition is a statistic
over a look-back (for most rules `window_seconds`): a share of polls, a mean, a fitted slope.
So a condition must *hold over a window* before a rule returns a finding at all; a glimpse
(a look-back the polls do not cover) says nothing.

The engine adds the other half of the hysteresis: a finding it raised stays, marked
`clearing`, until its rule has returned nothing for `clear_seconds`; reappearing in the
meantime cancels the clearing. `since` keeps the time the finding was first raised. All of it
lives in the `EngineState` passed in and returned, so a caller that evaluates once
(`uwsgitune recommend`) passes None, and one that evaluates every poll (the daemon) threads
the state through. Nothing flaps: a finding toggles at most once per `clear_seconds`.

Where two findings say the same thing, the more specific one wins (`SUPPRESSED_BY`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from uwsgitune.core.frame import Frame
from uwsgitune.core.latencyreport import LatencyView
from uwsgitune.rules import (
    capacity,
    gil,
    hazards,
    health,
    listenqueue,
    memory,
    static,
    taillatency,
)
from uwsgitune.rules.columns import Columns
from uwsgitune.rules.context import Context
from uwsgitune.rules.facts import NO_FACTS, Facts
from uwsgitune.rules.finding import SEVERITY_RANK, Finding
from uwsgitune.rules.rulesettings import DEFAULT_SETTINGS, RuleSettings

Rule = Callable[[Context], list[Finding]]

RULES: tuple[Rule, ...] = (
    listenqueue.listen_queue,
    capacity.oversubscribed_cpu,
    capacity.underprovisioned_io,
    capacity.idle_overprovisioned,
    memory.memory_pressure,
    memory.rss_growth,
    gil.threads_gil,
    health.exceptions,
    health.harakiri,
    health.respawn_storm,
    health.stuck_requests,
    health.signal_queue,
    hazards.hazards,
    static.static_files,
    taillatency.queue_over_target,
    taillatency.service_over_target,
    taillatency.slow_worker,
    taillatency.slow_route,
)

# finding id -> ids that, when present, make it redundant
SUPPRESSED_BY: Mapping[str, tuple[str, ...]] = {
    "underprovisioned_io": ("listen_queue.capacity_short",),
    "config.default_listen": ("listen_queue.bursts",),
    "idle_overprovisioned": ("oversubscribed_cpu",),
    "latency.slow_route": ("latency.service_over_target",),
}


@dataclass(frozen=True)
class Track:
    finding: Finding
    raised_mono: float
    seen_mono: float  # the last evaluation whose rules returned it


@dataclass(frozen=True)
class EngineState:
    tracks: Mapping[str, Track] = field(default_factory=dict)


def run_rules(ctx: Context) -> dict[str, Finding]:
    """Every rule's findings by id, redundant ones removed."""
    found: dict[str, Finding] = {}
    for rule in RULES:
        for f in rule(ctx):
            found[f.id] = f
    return {
        fid: f
        for fid, f in found.items()
        if not any(other in found for other in SUPPRESSED_BY.get(fid, ()))
    }


def _order(findings: list[Finding]) -> tuple[Finding, ...]:
    return tuple(sorted(findings, key=lambda f: (-SEVERITY_RANK[f.severity], f.id)))


def evaluate(
    frames: Sequence[Frame],
    facts: Facts | None = None,
    settings: RuleSettings | None = None,
    state: EngineState | None = None,
    columns: Columns | None = None,
    latency: LatencyView | None = None,
) -> tuple[tuple[Finding, ...], EngineState]:
    """Findings for one instance's frames (oldest first), and the state for the next call.
    `columns`: the per-frame signals kept from the previous calls (rules/columns.py);
    `latency`: the request log's view at the latest frame (the latency rules')."""
    prev = state or EngineState()
    facts, settings = facts or NO_FACTS, settings or DEFAULT_SETTINGS
    ctx = Context(tuple(frames), facts, settings, columns or Columns(), latency)
    if not ctx.rated:  # nothing observed: keep what we knew, change nothing
        return _order([t.finding for t in prev.tracks.values()]), prev
    now, clear = ctx.now, ctx.settings.clear_seconds
    tracks: dict[str, Track] = {}
    for fid, f in run_rules(ctx).items():
        old = prev.tracks.get(fid)
        since = old.finding.since if old else f.window.start
        tracks[fid] = Track(replace(f, since=since), old.raised_mono if old else now, now)
    for fid, old in prev.tracks.items():
        if fid not in tracks and now - old.seen_mono < clear:
            tracks[fid] = replace(old, finding=replace(old.finding, clearing=True))
    return _order([t.finding for t in tracks.values()]), EngineState(tracks)
