"""Rule 5: memory. Worker RSS against the memory the instance may use, and RSS growth.

Why: workers x RSS past available memory (the cgroup limit included) ends in the OOM killer
picking a worker, or the whole instance, mid-request. RSS that grows steadily per worker is a
leak: `reload-on-rss` (or `max-requests`) recycles a worker before it hurts. RSS comes from
`--memory-report` or, without it, from /proc; without either the rule stays quiet.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from uwsgitune.core.units import size
from uwsgitune.rules.build import MIB, ev, finding
from uwsgitune.rules.context import Context, quantile
from uwsgitune.rules.finding import Finding, Recommendation


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float, float]:
    """Least squares y = a + b·x: (a, b, r²). r² is 0 for a flat or degenerate series."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum([(x - mx) ** 2 for x in xs])
    syy = sum([(y - my) ** 2 for y in ys])
    sxy = sum([(x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)])
    if sxx <= 0:
        return my, 0.0, 0.0
    b = sxy / sxx
    r2 = (sxy * sxy) / (sxx * syy) if syy > 0 else 0.0
    return my - b * mx, b, r2


def memory_pressure(ctx: Context) -> list[Finding]:
    s, f = ctx.settings, ctx.latest
    frames = ctx.window()
    used = ctx.col("mem_total_rss", frames)
    avail = ctx.col("mem_available", frames)
    if not frames or not used or not avail or not f.mem_per_worker:
        return []
    rss, free = quantile(used, 0.5), quantile(avail, 0.5)
    budget = rss + free
    fits = max(1, int(budget * s.memory_headroom // f.mem_per_worker))
    full_scale = f.workers_max * f.mem_per_worker
    pressed = budget > 0 and rss / budget >= s.memory_pressure
    if not pressed and (full_scale <= budget or f.workers_max <= f.live):
        return []
    evidence = ev(
        workers_rss=(rss, "bytes"),
        available=(free, "bytes"),
        memory_limit=(f.mem_limit, "bytes"),
        rss_per_worker=(f.mem_per_worker, "bytes"),
        workers_max=(f.workers_max, "workers"),
        full_scale_rss=(full_scale, "bytes"),
        workers_that_fit=(fits, "workers"),
    )
    if pressed:
        reason = (
            f"The workers use {size(rss)} with only {size(free)} left: the OOM "
            "killer is close; fewer workers (or smaller ones) keep the instance alive."
        )
        effect = f"{fits} workers fit in {size(budget * s.memory_headroom)} with room to spare"
        rec = Recommendation("processes", "lower", fits, "reload", effect, current=f.live)
        return [finding("memory.pressure", "critical", reason, frames, evidence, rec)]
    reason = (  # the full scale does not fit
        f"At its maximum of {f.workers_max} workers the instance would need "
        f"{size(full_scale)}, more than the {size(budget)} it can use."
    )
    effect = f"a full scale-up of {fits} workers stays within memory"
    rec = Recommendation("processes", "lower", fits, "reload", effect, current=f.workers_max)
    return [finding("memory.full_scale", "warning", reason, frames, evidence, rec)]


def rss_growth(ctx: Context) -> list[Finding]:
    s = ctx.settings
    look = ctx.recent(s.memory_window_seconds)
    monos, per_worker = ctx.monos(look), ctx.raw("mem_per_worker", look)
    known = [(m, v) for m, v in zip(monos, per_worker, strict=True) if v]
    if len(known) < s.min_frames:
        return []
    ys = [v for _, v in known]
    if min(ys) == max(ys):  # flat: whole bytes, so the fit's slope is exactly 0, no leak
        return []
    xs = [m - known[0][0] for m, _ in known]
    a, b, r2 = linear_fit(xs, ys)
    start, end = a, a + b * xs[-1]
    per_hour = b * 3600 / MIB
    growth = (end - start) / start if start > 0 else 0.0
    if per_hour < s.leak_min_mib_per_hour or growth < s.leak_min_growth or r2 < s.leak_min_r2:
        return []
    limit = math.ceil(end * s.reload_on_rss_factor / MIB)
    reason = (
        f"Worker RSS grows steadily, {size(b * 3600)}/hour per worker ({size(start)} → "
        f"{size(end)}): a leak; recycle workers with reload-on-rss (or max-requests)."
    )
    effect = f"a worker past {limit} MiB is respawned after its request, so memory stays bounded"
    rec = Recommendation("reload-on-rss", "set", limit, "reload", effect)
    frames = [f for f in look if f.mem_per_worker]
    evidence = ev(
        growth_rate=(per_hour, "MiB/hour"),
        rss_start=(start, "bytes"),
        rss_end=(end, "bytes"),
        relative_growth=(growth, "ratio"),
        fit_r2=(r2, "ratio"),
    )
    return [finding("memory.rss_growth", "warning", reason, frames, evidence, rec)]
