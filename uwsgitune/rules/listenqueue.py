"""Rule 1: listen queue saturation, and which of three situations it is.

Why: a full backlog means the kernel drops or refuses new connections (nginx answers 502)
while uWSGI's own `listen_queue_errors` stays 0. The fix depends on the cause:

- capacity short: every worker busy and CPU has headroom: more workers drain the queue;
- CPU saturated: more workers only add contention and a larger listen only makes clients
  wait longer before the same drops: more CPU, or less CPU per request, is the fix;
- bursts with idle gaps: the workers keep up on average; a larger listen (up to somaxconn,
  raised first when needed) absorbs the peaks.

A poll is saturated when a socket is at >= `listen_fill` of its backlog, or the host's
listen overflows grew while our queue was at least `overflow_min_fill` full (the counter is
host-wide, so it only counts with our own queue as witness). Sockets whose queue cannot be
read (unix sockets without netlink) keep the rule quiet.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from uwsgitune.core.frame import Frame
from uwsgitune.core.units import percent
from uwsgitune.rules.build import (
    demand_workers,
    ev,
    finding,
    listen_change,
    memory_cap,
    model_estimate,
    pow2_at_least,
    worker_change,
)
from uwsgitune.rules.context import (
    Context,
    all_busy,
    backlog,
    mean,
    quantile,
    share,
)
from uwsgitune.rules.finding import Evidence, Finding, Recommendation

Evs = tuple[Evidence, ...]


def saturated(ctx: Context, f: Frame, fill: float | None) -> bool:
    """The poll's fullest socket at `fill` (`ctx.fill(f)`) counts as saturated."""
    s = ctx.settings
    if fill is None:
        return False
    return fill >= s.listen_fill or (bool(f.listen_overflows_delta) and fill >= s.overflow_min_fill)


def littles_target(ctx: Context, frames: Sequence[Frame]) -> int:
    """Workers for the concurrency in the system (in service + waiting) at the target busy ratio.

    Little's law: L = λW. Δrunning_time/Δt measures L in service; the queue adds the
    connections waiting for a worker. A saturated queue hides the demand it dropped, so this
    is a lower bound, applied one bounded step at a time.
    """
    in_service = mean(ctx.col("littles_l", frames))
    waiting = mean(ctx.col("depth", frames))
    return demand_workers(in_service, waiting, max(frames[-1].threads, 1), ctx.settings)


def cpu_cap(ctx: Context, frames: Sequence[Frame], cpu: float | None) -> int | None:
    """Most workers the CPU left allows: the spare cores over the CPU one worker uses.

    `cpu` includes what neighbours take; a worker's share is the instance's own CPU per
    live worker. None when either is unknown or workers use no measurable CPU.
    """
    s, f = ctx.settings, frames[-1]
    eff = f.effective_cpus
    per_worker = mean(ctx.col("instance_cpu_cores", frames)) / max(f.live, 1)
    if cpu is None or not eff or per_worker < 0.005:
        return None
    spare = max(eff * s.cpu_saturated - cpu * eff, 0.0)
    return f.live + math.floor(spare / per_worker)


def sized_target(ctx: Context, frames: Sequence[Frame]) -> tuple[int, str]:
    """Little's-law target, bounded by CPU headroom, memory and one step; and what bound it."""
    s, f = ctx.settings, ctx.latest
    cpus = ctx.col("cpu", frames)
    cpu = quantile(cpus, 0.5) if cpus else None
    bounds = {"littles_law": littles_target(ctx, frames)}
    queued = mean(ctx.col("depth", frames))
    bounds["step"] = max(
        f.live + 1,
        math.floor(f.live * s.max_scale_factor),
        f.live + math.ceil(queued / max(f.threads, 1)),
    )
    model = model_estimate(frames, s)
    if model is not None and model.workers is not None:
        bounds["cpu"] = model.workers  # what the CPUs and the IO share need (the tuner's)
    else:
        by_cpu = cpu_cap(ctx, frames, cpu)
        if by_cpu is not None:
            bounds["cpu"] = by_cpu
    mem = memory_cap(f, s.memory_headroom)
    if mem is not None:
        bounds["memory"] = mem
    name = min(bounds, key=lambda k: bounds[k])
    return max(bounds[name], 1), name


def listen_queue(ctx: Context) -> list[Finding]:
    s = ctx.settings
    frames = ctx.window()
    fills = ctx.raw("fill", frames)
    sat = [f for f, fill in zip(frames, fills, strict=True) if saturated(ctx, f, fill)]
    n_known = len(fills) - fills.count(None)
    if not n_known or len(sat) / n_known < s.listen_min_share:
        return []
    sat_share = len(sat) / n_known
    known = [f for f, fill in zip(frames, fills, strict=True) if fill is not None]
    cpus = sorted(ctx.col("cpu", sat))
    cpu = cpus[len(cpus) // 2] if cpus else None
    owns = ctx.col("own_cpu", sat)
    own = mean(owns) if owns else None
    busy_share = share(sat, lambda f: all_busy(f, s.busy_full))
    idle = share(known, lambda f: not ctx.depth(f) and (f.busy_ratio or 0.0) < s.burst_idle_busy)
    base = ev(
        saturated_share=(sat_share, "ratio"),
        peak_queue=(max(ctx.depth(f) or 0 for f in known), "connections"),
        backlog=(backlog(ctx.latest), "connections"),
        overflows=(sum(f.listen_overflows_delta or 0 for f in known), "host-wide"),
        cpu_saturation=(cpu, "ratio"),
        instance_cpu=(own, "ratio"),
        all_busy_share=(busy_share, "ratio"),
        idle_share=(idle, "ratio"),
        live=(ctx.latest.live, "workers"),
        effective_cpus=(ctx.latest.effective_cpus, "cpus"),
        somaxconn=(ctx.latest.somaxconn, "connections"),
    )
    if cpu is not None and cpu >= s.cpu_saturated and (own or 0.0) >= s.cpu_instance_min:
        return [_cpu_saturated(ctx, known, base, cpu)]
    if idle >= s.burst_idle_share:
        return [_bursts(ctx, known, base)]
    if cpu is not None and busy_share >= s.all_busy_share:
        return [_capacity_short(ctx, known, base, own)]
    reason = (
        f"The listen queue was saturated in {percent(sat_share)} of polls, but neither all workers "
        "were busy nor was the CPU known to be saturated, so the cause is unclear."
    )
    return [finding("listen_queue.saturated", "warning", reason, known, base)]


def _cpu_saturated(ctx: Context, frames: list[Frame], base: Evs, cpu: float) -> Finding:
    reason = (
        f"The listen queue is saturated while the CPU is {percent(cpu)} used: more workers would "
        "only add contention and a larger listen only hides the drops; more CPU or cheaper "
        "requests would help."
    )
    rec = Recommendation(
        "outside:cpu",
        "raise",
        None,
        "outside",
        "more effective CPUs (or less CPU per request) raise throughput; nothing inside uWSGI does",
        current=None
        if ctx.latest.effective_cpus is None
        else f"{ctx.latest.effective_cpus:g} cpus",
    )
    return finding("listen_queue.cpu_saturated", "critical", reason, frames, base, rec)


def _bursts(ctx: Context, frames: list[Frame], base: Evs) -> Finding:
    s, f = ctx.settings, ctx.latest
    size = backlog(f) or 100
    peak = max(ctx.depth(x) or 0 for x in frames)
    wanted = pow2_at_least(max(size * s.burst_listen_factor, peak * 2))
    reason = (
        "The listen queue fills in bursts with idle gaps between them: the workers keep up on "
        f"average, and a larger listen ({size} → {wanted}) absorbs the peaks."
    )
    rec = listen_change(f, wanted, f"a backlog of {wanted} holds bursts that now overflow {size}")
    return finding("listen_queue.bursts", "warning", reason, frames, base, rec)


def _capacity_short(ctx: Context, frames: list[Frame], base: Evs, own: float | None) -> Finding:
    f = ctx.latest
    target, bound = sized_target(ctx, frames)
    target = max(target, f.live + 1)
    used = "an unknown share" if own is None else f"only {percent(own)}"
    reason = (
        f"The listen queue is saturated with all {f.live} workers busy while they use {used} of "
        f"the instance's CPUs: it is short of workers, not of CPU ({target} by Little's law, "
        f"bound: {bound})."
    )
    effect = f"{target} workers serve the waiting connections at once; re-measure after the change"
    rec = worker_change(ctx, target, effect)
    evidence = (*base, *ev(target_workers=(target, "workers"), bounded_by=bound))
    return finding("listen_queue.capacity_short", "critical", reason, frames, evidence, rec)
