"""Rule 10: the latency of real traffic (the request log, `--latency`): four findings.

The rules read `Context.latency`, the poll's `LatencyView`, over its last 60 s (the long
window: the most requests, the steadiest percentiles). Nothing is said from data that
cannot be judged (`core.latencytarget.latency_problem`: a sender not proved to be the
master's, coverage below `latency_min_coverage`, no line for a while, fewer than
`latency_min_requests` requests, a format that does not match), and nothing without the
frames of a look-back (`Context.window`): a latency finding, like every other, is about a
span the polls cover.

With a target (`latency_target`, shared with the tuner, which reads it the same way:
core/latencytarget.py), a miss is split by its cause:

- `latency.queue_over_target`: service time alone is under the target, the wait for a
  worker (the proxy's stamp, or Little's mean wait from the listen queue) takes it past.
  A capacity problem: the worker count the capacity rules size (Little's law, bounded by
  the CPUs and the memory: `listenqueue.sized_target`), as they advise it.
- `latency.service_over_target`: service time alone reaches it. Not capacity: more workers
  cannot make a request faster. The slowest routes and workers are named.

Without a target, and with one:

- `latency.slow_worker`: one worker much slower than its peers. Requests reach workers
  about at random, so the workers' medians agree; one whose median (p50, robust to a few
  slow requests) is more than `slow_worker_factor` times the median of the others' medians
  (robust to a second odd worker), and `slow_worker_min_ms` above it, holds something the
  others do not (a stuck thread, memory pressure, a bad connection). Only workers with
  `slow_worker_min_requests` each are compared, and at least three of them.
- `latency.slow_route`: routes taking at least `slow_route_share` of all service time whose
  p99 reaches the target (or `slow_route_ms` without one), with at least
  `slow_route_min_requests` requests, when there is more than one route to compare.
  Said by `latency.service_over_target` when that stands (`SUPPRESSED_BY`).
"""

from __future__ import annotations

from statistics import median

from uwsgitune.core.latencyreport import OTHER, OTHER_WORKER, LatencyWindow, Percentiles
from uwsgitune.core.latencytarget import (
    LATENCY_UNITS,
    LatencyReading,
    latency_problem,
    read_latency,
)
from uwsgitune.core.units import ms, percent
from uwsgitune.rules.build import finding, worker_change
from uwsgitune.rules.context import Context
from uwsgitune.rules.finding import Evidence, Finding, Recommendation
from uwsgitune.rules.listenqueue import sized_target

SHOWN = 3  # routes and workers named in an evidence line


def _evidence(r: LatencyReading) -> tuple[Evidence, ...]:
    return tuple(Evidence(k, v, LATENCY_UNITS.get(k, "")) for k, v in r.evidence().items())


def _window(ctx: Context) -> LatencyWindow | None:
    """The last 60 s of the request log, when it may be judged and the polls cover a look-back."""
    view, s = ctx.latency, ctx.settings
    if view is None or not ctx.window():
        return None
    w = view.long
    if latency_problem(view, w, s.latency_min_requests, s.latency_min_coverage) is not None:
        return None
    return w


def _reading(ctx: Context) -> LatencyReading | None:
    """The last 60 s read against the target; None without one, or when not judged."""
    target, view, w = ctx.settings.latency_target, ctx.latency, _window(ctx)
    if target is None or view is None or w is None:
        return None
    s = ctx.settings
    r = read_latency(
        view, target, w, min_requests=s.latency_min_requests, min_coverage=s.latency_min_coverage
    )
    return r if r.problem is None and r.observed_ms is not None else None


def slowest_routes(w: LatencyWindow, n: int = SHOWN) -> str:
    """`/report p99 1.2 s (45% of time), /search p99 300 ms (20%)`: by p99."""
    routes = sorted((r for r in w.routes if r.route != OTHER), key=lambda r: -r.p99_ms)[:n]
    return ", ".join(f"{r.route} p99 {ms(r.p99_ms)} ({percent(r.share)} of time)" for r in routes)


def slowest_workers(w: LatencyWindow, n: int = SHOWN) -> str:
    """`worker 3 p50 80 ms p99 1.1 s, ...`: by p99."""
    workers = sorted(
        ((wid, p) for wid, p in w.workers.items() if wid != OTHER_WORKER),
        key=lambda item: -item[1].p99_ms,
    )[:n]
    return ", ".join(f"worker {wid} p50 {ms(p.p50_ms)} p99 {ms(p.p99_ms)}" for wid, p in workers)


def queue_over_target(ctx: Context) -> list[Finding]:
    r = _reading(ctx)
    if r is None or r.cause != "queue":
        return []
    f, frames = ctx.latest, ctx.window()
    target, bound = sized_target(ctx, frames)
    q = r.target.quantile
    reason = (
        f"{q} {ms(r.observed_ms)} is over the target {ms(r.target.ms)} over the last "
        f"{r.window}s because requests wait for a worker ({ms(r.queue_ms)}): service time "
        f"alone ({q} {ms(r.service_ms)}) meets it. A capacity problem."
    )
    evidence = (*_evidence(r), Evidence("live", f.live, "workers"))
    if target <= f.live:
        reason += f" The {bound} bounds the workers at {target}: more would not be served."
        evidence = (*evidence, Evidence("bounded_by", bound))
        return [finding("latency.queue_over_target", "warning", reason, frames, evidence)]
    effect = f"requests stop waiting for a worker, {q} back towards {ms(r.service_ms)}"
    evidence = (
        *evidence,
        Evidence("target_workers", target, "workers"),
        Evidence("bounded_by", bound),
    )
    rec = worker_change(ctx, target, effect)
    return [finding("latency.queue_over_target", "warning", reason, frames, evidence, rec)]


def service_over_target(ctx: Context) -> list[Finding]:
    r = _reading(ctx)
    view = ctx.latency
    if r is None or view is None or r.cause != "service":
        return []
    q, w = r.target.quantile, view.long
    reason = (
        f"{q} {ms(r.observed_ms)} is over the target {ms(r.target.ms)} over the last "
        f"{r.window}s, and service time alone ({q} {ms(r.service_ms)}) is: not capacity, "
        "more workers cannot make a request faster. The slowest routes and workers are named."
    )
    evidence = (
        *_evidence(r),
        Evidence("slowest_routes", slowest_routes(w) or None),
        Evidence("slowest_workers", slowest_workers(w) or None),
    )
    rec = Recommendation(
        "outside:application",
        "set",
        None,
        "outside",
        f"faster requests on the slowest routes bring {q} under {ms(r.target.ms)}",
    )
    return [finding("latency.service_over_target", "warning", reason, ctx.window(), evidence, rec)]


def _slow_worker(
    w: LatencyWindow, factor: float, margin: float, least: int
) -> tuple[int, Percentiles, float, int] | None:
    """(worker, its spread, the peers' median p50, peers) of the slowest worker past both
    bounds; None when none is, or fewer than three workers have enough requests."""
    judged = {wid: p for wid, p in w.workers.items() if wid != OTHER_WORKER and p.count >= least}
    if len(judged) < 3:
        return None
    wid, p = max(judged.items(), key=lambda item: item[1].p50_ms)
    peers = median(q.p50_ms for k, q in judged.items() if k != wid)
    if p.p50_ms > factor * peers and p.p50_ms - peers >= margin:
        return wid, p, peers, len(judged) - 1
    return None


def slow_worker(ctx: Context) -> list[Finding]:
    s, w = ctx.settings, _window(ctx)
    if w is None:
        return []
    found = _slow_worker(w, s.slow_worker_factor, s.slow_worker_min_ms, s.slow_worker_min_requests)
    if found is None:
        return []
    wid, p, peers, n = found
    reason = (
        f"Worker {wid}'s median request took {ms(p.p50_ms)} over the last {w.seconds}s, "
        f"{p.p50_ms / max(peers, 1e-9):.1f}× the median of its {n} peers' ({ms(peers)}): "
        "requests reach workers about at random, so it holds something the others do not "
        "(a stuck thread, memory pressure, a bad connection)."
    )
    evidence = (
        Evidence("worker", wid),
        Evidence("worker_p50", p.p50_ms, "ms"),
        Evidence("worker_p99", p.p99_ms, "ms"),
        Evidence("worker_requests", p.count, "requests"),
        Evidence("peers_p50_median", round(peers, 2), "ms"),
        Evidence("peers", n, "workers"),
        Evidence("latency_window_s", w.seconds, "s"),
        Evidence("latency_coverage", ctx.latency.coverage if ctx.latency else None, "ratio"),
    )
    return [finding("latency.slow_worker", "warning", reason, ctx.window(), evidence)]


def slow_route(ctx: Context) -> list[Finding]:
    s, w = ctx.settings, _window(ctx)
    if w is None or len(w.routes) < 2:
        return []
    target = s.latency_target
    bound = target.ms if target is not None else s.slow_route_ms
    slow = [
        r
        for r in w.routes
        if r.route != OTHER
        and r.count >= s.slow_route_min_requests
        and r.share >= s.slow_route_share
        and r.p99_ms >= bound
    ]
    if not slow:
        return []
    worst = max(slow, key=lambda r: r.share)
    named = "the target" if target is not None else "slow"
    reason = (
        f"{worst.route} takes {percent(worst.share)} of all service time over the last "
        f"{w.seconds}s, at p99 {ms(worst.p99_ms)} (p50 {ms(worst.p50_ms)}), at or over "
        f"{ms(bound)} ({named}): the route to make faster first."
    )
    evidence = (
        Evidence("route", worst.route),
        Evidence("route_share", round(worst.share, 4), "ratio"),
        Evidence("route_p50", worst.p50_ms, "ms"),
        Evidence("route_p99", worst.p99_ms, "ms"),
        Evidence("route_requests", worst.count, "requests"),
        Evidence("slow_p99", bound, "ms"),
        Evidence("slow_routes", ", ".join(r.route for r in slow)),
        Evidence("latency_window_s", w.seconds, "s"),
        Evidence("latency_coverage", ctx.latency.coverage if ctx.latency else None, "ratio"),
    )
    return [finding("latency.slow_route", "info", reason, ctx.window(), evidence)]
