"""Rule 9: static files served by the workers.

Why: a worker that streams a file is a worker not running the application, for as long as
the client takes to read it. `offload-threads` hands the file to a thread that does it
without the worker; nginx (or a CDN) in front keeps it off uWSGI altogether. The share comes
from the cores' `static_requests` and needs the cores (no `--stats-no-cores`).
"""

from __future__ import annotations

from uwsgitune.core.frame import Frame
from uwsgitune.core.units import percent
from uwsgitune.rules.build import ev, finding
from uwsgitune.rules.context import Context
from uwsgitune.rules.finding import Finding, Recommendation


def _counted(x: Frame) -> bool:
    """A poll that counts: its static share known, and requests served."""
    return x.static_share is not None and bool(x.rps)


# Each counted poll's part of the look-back's sums (None: not counted), kept as columns.
def _span(x: Frame) -> float | None:
    return (x.dt or 0.0) if _counted(x) else None


def _requests(x: Frame) -> float | None:
    return (x.rps or 0.0) * (x.dt or 0.0) if _counted(x) else None


def _static(x: Frame) -> float | None:
    return (x.static_share or 0.0) * (x.rps or 0.0) * (x.dt or 0.0) if _counted(x) else None


def static_files(ctx: Context) -> list[Finding]:
    s, f = ctx.settings, ctx.latest
    look = ctx.window()
    spans = ctx.col("static_span", look, _span)
    if len(spans) < s.min_frames:
        return []
    reqs = sum(ctx.col("static_reqs", look, _requests))
    static = sum(ctx.col("static_static", look, _static))
    span = sum(spans)
    if reqs <= 0 or span <= 0 or reqs / span < s.min_rps or static / reqs < s.static_share:
        return []
    ratio = static / reqs
    reason = (
        f"{percent(ratio)} of requests are static files served by the workers, each holding a "
        "worker while it sends."
    )
    offload = ctx.facts.config.offload_threads
    if offload:
        rec = Recommendation(
            "outside:nginx",
            "set",
            "static",
            "outside",
            "nginx serves the files; workers only run the app",
        )
    else:
        threads = max(1, round(f.effective_cpus or 1))
        rec = Recommendation(
            "offload-threads",
            "set",
            threads,
            "reload",
            "workers hand files to offload threads and return at once",
            current=offload,
        )
    frames = [x for x in look if _counted(x)]
    evidence = ev(static_share=(ratio, "ratio"), static_requests=static, requests=reqs)
    return [finding("static_files", "warning", reason, frames, evidence, rec)]
