"""Rule 6: threads under the GIL.

Why: Python threads of one worker share one GIL, so CPU-bound requests in a threaded worker
run one at a time: a busy worker sits near 100% of one core however many threads it has,
while other CPUs idle. Processes instead of threads spread the same concurrency over the CPUs.
It samples the workers over the last `gil_window_seconds` at most: the signature is steady.
The rule needs per-worker CPU (from /proc) and stays quiet without it, or when the CPU the
instance may use is saturated anyway (then more processes would not help either).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from uwsgitune.core.compact import busy_samples
from uwsgitune.core.frame import Frame
from uwsgitune.core.units import percent
from uwsgitune.rules.build import ev, finding
from uwsgitune.rules.context import Context, frame_dt, quantile
from uwsgitune.rules.finding import Finding, Recommendation


def gil_samples(ctx: Context, frames: Sequence[Frame]) -> tuple[int, int]:
    """(busy worker samples near one core, busy worker samples) in polls with CPU to spare.

    Polls where the host's CPU is used up are skipped: there a worker below one core is
    starved by its neighbours, which says nothing about the GIL.
    """
    s = ctx.settings
    near = total = 0
    limit = s.gil_cpu_pct
    dt = max(frame_dt(frames) or 1.0, 1e-3)  # a degenerate interval must not overflow
    recent = frames[-min(int(s.gil_window_seconds / dt), len(frames)) - 1 :]
    for frame in recent:
        cpu = ctx.cpu(frame)
        if cpu is None or cpu >= s.cpu_saturated:
            continue
        # a worker busy >= 50% of the poll is a sample; an old frame keeps only those
        hot, busy = busy_samples(frame, limit)
        near, total = near + hot, total + busy
    return near, total


def threads_gil(ctx: Context) -> list[Finding]:
    s, f = ctx.settings, ctx.latest
    frames = ctx.window()
    if not frames or f.threads <= 1:
        return []
    near, total = gil_samples(ctx, frames)
    if total < s.min_frames or near / total < s.gil_busy_share:
        return []
    cpu = quantile([c for c in ctx.col("cpu", frames) if c < s.cpu_saturated], 0.5)
    eff = f.effective_cpus or 1.0
    processes = max(f.live + 1, min(f.live * f.threads, math.ceil(eff * s.cpu_workers_per_cpu)))
    reason = (
        f"Busy workers run near 100% of one core each with {f.threads} threads: the GIL "
        f"serialises them while the CPUs are only {percent(cpu)} used; use processes instead of "
        "threads."
    )
    effect = (
        f"CPU-bound requests run on {min(processes, math.ceil(eff))} cores instead of one per "
        "worker"
    )
    rec = Recommendation(
        "threads",
        "lower",
        1,
        "reload",
        effect,
        current=f.threads,
        together=(("processes", processes),),
    )
    evidence = ev(
        threads=(f.threads, "threads"),
        near_one_core_share=(near / total, "ratio"),
        cpu_saturation=(cpu, "ratio"),
        live=(f.live, "workers"),
        effective_cpus=(f.effective_cpus, "cpus"),
        target_processes=(processes, "workers"),
    )
    return [finding("threads_gil", "warning", reason, frames, evidence, rec)]
