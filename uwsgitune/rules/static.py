"""Rule 9: static files served by the workers.

Why: a worker that streams a file is a worker not running the application, for as long as
the client takes to read it. `offload-threads` hands the file to a thread that does it
without the worker; nginx (or a CDN) in front keeps it off uWSGI altogether. The share comes
from the cores' `static_requests` and needs the cores (no `--stats-no-cores`).
"""

from __future__ import annotations

from uwsgitune.rules.build import ev, finding
from uwsgitune.rules.context import Context
from uwsgitune.rules.finding import Finding, Recommendation


def static_files(ctx: Context) -> list[Finding]:
    s, f = ctx.settings, ctx.latest
    frames = [x for x in ctx.window() if x.static_share is not None and x.rps]
    if len(frames) < s.min_frames:
        return []
    reqs = sum((x.rps or 0.0) * (x.dt or 0.0) for x in frames)
    static = sum((x.static_share or 0.0) * (x.rps or 0.0) * (x.dt or 0.0) for x in frames)
    span = sum(x.dt or 0.0 for x in frames)
    if reqs <= 0 or span <= 0 or reqs / span < s.min_rps or static / reqs < s.static_share:
        return []
    ratio = static / reqs
    reason = (
        f"{ratio:.0%} of requests are static files served by the workers, each holding a worker "
        "while it sends."
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
    evidence = ev(static_share=(ratio, "ratio"), static_requests=static, requests=reqs)
    return [finding("static_files", "warning", reason, frames, evidence, rec)]
