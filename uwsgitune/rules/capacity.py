"""Rules 2-4: the worker count against the CPU and the load.

- Oversubscription on CPU-bound load: far more live workers than effective CPUs, the CPU
  saturated, and each request waiting for CPU most of its time. Under processor sharing a
  request's response time is its CPU time x workers / CPUs: response time rises with the
  worker count while throughput does not (100 workers gave 280 req/s where 6 gave 449).
  `stretch` = mean response time / CPU time per request is that factor, read per poll.
- Under-provisioned IO-bound load: all workers busy, CPU well below saturation, and a queue
  building: the workers wait on IO, more of them serve more. Sized by Little's law.
- Idle over-provisioning: a low busy ratio over a long look-back: fewer workers, and the
  memory that frees.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from uwsgitune.core.frame import Frame
from uwsgitune.core.staffing import RECENT_POLLS, sized
from uwsgitune.core.units import ms, percent, reading, seconds, size
from uwsgitune.rules.build import (
    demand_workers,
    ev,
    finding,
    model_estimate,
    worker_change,
)
from uwsgitune.rules.context import Context, all_busy, mean, quantile
from uwsgitune.rules.finding import Finding
from uwsgitune.rules.listenqueue import sized_target


class _Stretch(NamedTuple):
    """CPU-bound load stretched by too many workers: the numbers the finding shows."""

    cpu: float  # host CPU saturation (median)
    cpu_ms: float  # CPU time per request
    rt_ms: float  # mean response time
    stretch: float  # rt_ms / cpu_ms
    target: int  # workers


def _stretched(ctx: Context, frames: Sequence[Frame], eff: float) -> _Stretch | None:
    s, f = ctx.settings, ctx.latest
    cpus = ctx.col("cpu", frames)
    cpu = quantile(cpus, 0.5) if cpus else None
    own = mean(ctx.col("own_cpu", frames))
    if cpu is None or cpu < s.cpu_saturated or own < s.cpu_instance_min:
        return None
    cpu_ms = ctx.col("cpu_ms_per_request", frames)
    rt_ms = ctx.col("mean_rt_ms", frames)
    if not cpu_ms or not rt_ms or mean(cpu_ms) <= 0:
        return None
    stretch = mean(rt_ms) / mean(cpu_ms)
    if stretch < s.oversub_stretch:
        return None
    model = model_estimate(frames, s)
    target = max(1, math.ceil(eff * s.cpu_workers_per_cpu))
    count = sized(model, frames[-RECENT_POLLS:]) if model is not None else None
    if count is not None:
        target = count  # the tuner's count: the IO share of a request included
    if f.live <= target:
        return None
    return _Stretch(cpu, mean(cpu_ms), mean(rt_ms), stretch, target)


def oversubscribed_cpu(ctx: Context) -> list[Finding]:
    s, f = ctx.settings, ctx.latest
    frames = ctx.window()
    eff = f.effective_cpus
    if not frames or not eff or f.live < s.oversub_ratio * eff:
        return []
    found = _stretched(ctx, frames, eff)
    if found is None:
        return []
    cpu, cpu_ms, rt_ms, stretch, target = found
    reason = (
        f"{f.live} workers share {eff:g} CPUs that are {percent(cpu)} used, so each request "
        f"spends {reading(stretch, 'x')} its CPU time waiting for a CPU: fewer workers give the "
        "same or more throughput."
    )
    effect = (
        f"about the same req/s with mean response time near "
        f"{ms(cpu_ms * max(target / eff, 1.0))} instead of {ms(rt_ms)}, "
        f"and {f.live - target} workers' memory freed"
    )
    evidence = ev(
        live=(f.live, "workers"),
        effective_cpus=(eff, "cpus"),
        cpu_saturation=(cpu, "ratio"),
        mean_rt=(rt_ms, "ms"),
        cpu_per_request=(cpu_ms, "ms"),
        stretch=(stretch, "x"),
        rps=(mean(ctx.col("rps", frames)), "req/s"),
        target_workers=(target, "workers"),
    )
    rec = worker_change(ctx, target, effect, saturated=True)
    return [finding("oversubscribed_cpu", "warning", reason, frames, evidence, rec)]


def _io_bound(ctx: Context, frames: Sequence[Frame]) -> tuple[float, float] | None:
    """(own CPU, CPU time / response time) when requests wait on IO with CPU to spare.

    On a saturated host, waiting may be for the CPU, so the rule stays quiet there.
    """
    s = ctx.settings
    own, host = ctx.col("own_cpu", frames), ctx.col("cpu", frames)
    cpu_ms = ctx.col("cpu_ms_per_request", frames)
    rt_ms = ctx.col("mean_rt_ms", frames)
    if not own or not host or not cpu_ms or not rt_ms or mean(rt_ms) <= 0:
        return None
    cpu, on_cpu = quantile(own, 0.5), mean(cpu_ms) / mean(rt_ms)
    if cpu >= s.cpu_headroom or quantile(host, 0.5) >= s.cpu_saturated or on_cpu > s.io_cpu_share:
        return None
    return cpu, on_cpu


def underprovisioned_io(ctx: Context) -> list[Finding]:
    s, f = ctx.settings, ctx.latest
    frames = ctx.window()
    io = _io_bound(ctx, frames) if frames else None
    if io is None:
        return []
    cpu, on_cpu = io
    busy_share = ctx.share(f"all_busy@{s.busy_full}", frames, lambda x: all_busy(x, s.busy_full))
    depths = ctx.col("depth", frames)
    if busy_share < s.all_busy_share or not depths:
        return []
    queued = sum(1 for d in depths if d > 0) / len(depths)
    if queued < s.io_queue_share or mean(depths) < s.io_queue_min:
        return []
    target, bound = sized_target(ctx, frames)
    target = max(target, f.live + 1)
    lam = mean(ctx.col("rps", frames))
    w_ms = mean(ctx.col("mean_rt_ms", frames))
    reason = (
        f"All {f.live} workers are busy using only {percent(cpu)} of the CPUs and a queue of "
        f"{mean(depths):.0f} waiting: the load waits on IO; Little's law sizes it at {target} "
        "workers."
    )
    effect = f"the queue drains and requests stop waiting for a worker (bound: {bound})"
    evidence = ev(
        live=(f.live, "workers"),
        instance_cpu=(cpu, "ratio"),
        on_cpu_share=(on_cpu, "ratio"),
        all_busy_share=(busy_share, "ratio"),
        mean_queue=(mean(depths), "connections"),
        queued_share=(queued, "ratio"),
        arrival_rate=(lam, "req/s"),
        mean_rt=(w_ms, "ms"),
        in_service=(mean(ctx.col("littles_l", frames)), "requests"),
        target_workers=(target, "workers"),
        bounded_by=bound,
        memory_per_worker=(f.mem_per_worker, "bytes"),
    )
    rec = worker_change(ctx, target, effect)
    return [finding("underprovisioned_io", "warning", reason, frames, evidence, rec)]


def idle_overprovisioned(ctx: Context) -> list[Finding]:
    s, f = ctx.settings, ctx.latest
    frames = ctx.recent(s.idle_window_seconds)
    busy = ctx.col("busy_ratio", frames)
    if not frames or not busy or mean(busy) > s.idle_busy_max:
        return []
    peak = quantile(ctx.col("littles_l", frames), 0.95)
    need = demand_workers(peak, 0.0, max(f.threads, 1), s)  # the tuner's sizing
    target = max(need, s.idle_min_workers)
    if f.live - target < s.idle_min_reduction:
        return []
    freed = (f.live - target) * f.mem_per_worker if f.mem_per_worker else None
    span = frames[-1].mono - frames[0].mono
    mem_text = f"frees about {size(freed)}" if freed else "frees memory (RSS unknown)"
    reason = (
        f"Workers were {percent(mean(busy))} busy on average over {seconds(span)}: "
        f"{target} of the {f.live} live workers carry the peak; the rest {mem_text}."
    )
    rec = worker_change(
        ctx, target, f"same service at peak with {f.live - target} fewer workers; {mem_text}"
    )
    evidence = ev(
        mean_busy=(mean(busy), "ratio"),
        peak_in_service=(peak, "requests"),
        live=(f.live, "workers"),
        target_workers=(target, "workers"),
        memory_freed=(freed, "bytes"),
    )
    return [finding("idle_overprovisioned", "info", reason, frames, evidence, rec)]
