"""Rule 7: health. Exceptions, harakiri, respawn storms, stuck requests, the signal queue.

Why: these are failures users see (errors, killed requests, dropped keep-alives) or that
precede them (a worker stuck in one request serves nobody else; a signal queue that keeps
growing means the master is not keeping up). Rates come from counter deltas, so a reload,
which resets every counter, never looks like a storm.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from uwsgitune.core.frame import Frame
from uwsgitune.core.units import percent, seconds
from uwsgitune.rules.build import ev, finding
from uwsgitune.rules.context import Context
from uwsgitune.rules.finding import Finding, Recommendation, Severity


# Each poll's part of the look-back's sums, kept as columns (`Context.raw`): never None.
def _requests(f: Frame) -> float:
    return (f.rps or 0.0) * (f.dt or 0.0)


def _exceptions(f: Frame) -> float:
    return (f.eps or 0.0) * (f.dt or 0.0)


def _seconds(f: Frame) -> float:
    return f.dt or 0.0


def _harakiri(f: Frame) -> int:
    return f.harakiri_delta or 0


def _respawns(f: Frame) -> int:
    return f.respawns_delta or 0


def _span(ctx: Context, frames: Sequence[Frame]) -> float:
    """Seconds the look-back's polls cover."""
    return sum(ctx.col("seconds", frames, _seconds))


def exceptions(ctx: Context) -> list[Finding]:
    s = ctx.settings
    frames = ctx.window()
    if not frames:
        return []
    reqs = sum(ctx.col("requests", frames, _requests))
    excs = sum(ctx.col("exceptions", frames, _exceptions))
    span = _span(ctx, frames)
    if span <= 0 or reqs / span < s.min_rps:
        return []
    ratio = excs / reqs
    if ratio < s.exception_ratio:
        return []
    severity: Severity = "critical" if ratio >= s.exception_critical else "warning"
    reason = (
        f"{percent(ratio)} of requests raised an exception ({excs:.0f} of {reqs:.0f}): see the "
        "app's log."
    )
    evidence = ev(exception_ratio=(ratio, "ratio"), exceptions=excs, requests=reqs)
    return [finding("health.exceptions", severity, reason, frames, evidence)]


def harakiri(ctx: Context) -> list[Finding]:
    s = ctx.settings
    frames = ctx.window()
    kills = int(sum(ctx.col("harakiri", frames, _harakiri)))
    if not kills:
        return []
    severity: Severity = "critical" if kills >= s.harakiri_critical else "warning"
    reason = (
        f"Harakiri killed {kills} worker(s) mid-request: some requests run past the harakiri limit."
    )
    return [finding("health.harakiri", severity, reason, frames, ev(harakiri=(kills, "kills")))]


MIN_STORM_SPAN = 1.0  # seconds of polls before a respawn rate means anything


def respawn_storm(ctx: Context) -> list[Finding]:
    s = ctx.settings
    frames = ctx.window()
    span = _span(ctx, frames)
    respawns = int(sum(ctx.col("respawns", frames, _respawns)))
    # A rate needs a real span: a few respawns over a sliver of time is not a storm (and
    # a span near zero would make the rate infinite).
    if span < MIN_STORM_SPAN or respawns * 60 / span < s.respawn_storm_per_min:
        return []
    rate = respawns * 60 / span
    reason = (
        f"Workers respawn {rate:.0f} times a minute: crashes, harakiri or a too low max-requests."
    )
    evidence = ev(respawns=respawns, respawns_per_minute=(rate, "1/min"))
    return [finding("health.respawn_storm", "critical", reason, frames, evidence)]


def stuck_requests(ctx: Context) -> list[Finding]:
    """The request's own age is the hold: it has been in service for `stuck_request_seconds`."""
    s, f = ctx.settings, ctx.latest
    stuck = [
        (r.age, w.slot, r.method, r.path)
        for w in f.workers
        if w.live
        for r in w.requests_in_flight
        if r.age is not None and r.age >= s.stuck_request_seconds
    ]
    if not stuck:
        return []
    age, slot, method, path = max(stuck)
    where = f"{method} {path}".strip() or "a request"
    reason = (
        f"{len(stuck)} request(s) in service for over {seconds(s.stuck_request_seconds)}; the "
        f"oldest, {where}, for {seconds(age)}."
    )
    limit = math.ceil(s.stuck_request_seconds)
    rec = Recommendation(
        "harakiri", "set", limit, "reload", f"a request past {limit} s gets its worker recycled"
    )
    evidence = ev(
        stuck=(len(stuck), "requests"), oldest_age=(age, "s"), worker_slot=slot, path=where
    )
    return [finding("health.stuck_requests", "warning", reason, [f], evidence, rec)]


def signal_queue(ctx: Context) -> list[Finding]:
    s = ctx.settings
    frames = ctx.window()
    if not frames:
        return []
    first, last = frames[0].signal_queue, frames[-1].signal_queue
    if last < s.signal_queue_min or last <= first:
        return []
    reason = (
        f"The master's signal queue grew from {first} to {last}: signal handlers are not "
        "keeping up."
    )
    evidence = ev(signal_queue=(last, "signals"), growth=(last - first, "signals"))
    return [finding("health.signal_queue", "warning", reason, frames, evidence)]
