"""Rule 8: configuration hazards, each a setting that will hurt under load or blinds us.

- A busy service on the default listen of 100: the first burst overflows it.
- No memory-report: RSS per worker is unknown to uWSGI's stats (we fall back to /proc).
- A cheaper algorithm other than `manual`: it moves the worker count itself and fights the
  tuner's `+`/`-` (spare cheaps them back within seconds).
- stats-http: a client that connects and sends nothing stalls the master loop ~4 s.
- listen at or near somaxconn: a larger listen makes uWSGI refuse to start.
- No cheaper mode where the load swings: workers cannot follow it without a reload.
Facts that are unknown (None) keep the rule quiet.
"""

from __future__ import annotations

import math

from uwsgitune.core.units import percent
from uwsgitune.rules.build import ev, finding, pow2_at_least
from uwsgitune.rules.context import Context, mean, quantile
from uwsgitune.rules.finding import Finding, Recommendation

DEFAULT_LISTEN = 100


def default_listen(ctx: Context) -> list[Finding]:
    s, f = ctx.settings, ctx.latest
    frames = ctx.window()
    if not frames or DEFAULT_LISTEN not in {x.backlog for x in f.sockets}:
        return []
    busy = mean(ctx.col("busy_ratio", frames))
    queued = ctx.share("depth", frames)
    if busy < s.busy_service_ratio and queued < 0.1:
        return []
    wanted = min(1024, f.somaxconn or 1024)
    if wanted <= DEFAULT_LISTEN:
        return []
    reason = (
        f"The service is {percent(busy)} busy with a queue in {percent(queued)} of polls on the "
        "default listen backlog of 100: a burst overflows it."
    )
    rec = Recommendation(
        "listen",
        "raise",
        wanted,
        "restart",
        f"bursts up to {wanted} connections wait instead of being dropped",
        current=DEFAULT_LISTEN,
    )
    evidence = ev(
        backlog=(DEFAULT_LISTEN, "connections"),
        mean_busy=(busy, "ratio"),
        queued_share=(queued, "ratio"),
    )
    return [finding("config.default_listen", "warning", reason, frames, evidence, rec)]


def no_memory_report(ctx: Context) -> list[Finding]:
    frames = ctx.window()
    if not frames or ctx.facts.config.memory_report or ctx.latest.requests_total == 0:
        return []
    if any(ctx.raw("memory_report", frames)):
        return []
    reason = (
        "memory-report is off: uWSGI's stats carry no RSS per worker, so memory rules rely on "
        "/proc."
    )
    rec = Recommendation(
        "memory-report",
        "enable",
        "true",
        "reload",
        "RSS per worker in the stats, at the end of each request",
    )
    return [
        finding(
            "config.no_memory_report",
            "info",
            reason,
            frames,
            ev(memory_source=ctx.latest.mem_source),
            rec,
        )
    ]


def cheaper_algo_conflict(ctx: Context) -> list[Finding]:
    algo = ctx.facts.config.cheaper_algo
    frames = ctx.window()
    cheaper_on = ctx.latest.cheap > 0 or bool(ctx.facts.config.cheaper)
    if not frames or algo is None or algo == "manual" or not cheaper_on:
        return []
    reason = (
        f"cheaper-algo {algo} moves the worker count itself and would fight the tuner's + and -."
    )
    rec = Recommendation(
        "cheaper-algo",
        "set",
        "manual",
        "reload",
        "the worker count moves only when told",
        current=algo,
    )
    return [finding("config.cheaper_algo", "info", reason, frames, ev(cheaper_algo=algo), rec)]


def stats_http(ctx: Context) -> list[Finding]:
    frames = ctx.window()
    if not frames or not ctx.facts.stats_http:
        return []
    reason = (
        "The stats server speaks HTTP (stats-http): a client that connects and sends nothing "
        "stalls the master ~4 s."
    )
    rec = Recommendation(
        "stats-http",
        "disable",
        "false",
        "reload",
        "a raw stats socket (unix) that cannot stall the master",
    )
    return [
        finding(
            "config.stats_http", "warning", reason, frames, ev(stats_kind=ctx.facts.stats_kind), rec
        )
    ]


def listen_near_somaxconn(ctx: Context) -> list[Finding]:
    s, f = ctx.settings, ctx.latest
    frames = ctx.window()
    size = max((x.backlog for x in f.sockets if x.backlog), default=None)
    if not frames or size is None or not f.somaxconn or size < s.somaxconn_near * f.somaxconn:
        return []
    wanted = pow2_at_least(f.somaxconn * 2)
    reason = (
        f"listen {size} is at the kernel's somaxconn {f.somaxconn}: a larger listen would stop "
        "uWSGI from starting."
    )
    rec = Recommendation(
        "net.core.somaxconn",
        "raise",
        wanted,
        "sysctl",
        "room to raise listen later",
        current=f.somaxconn,
    )
    evidence = ev(backlog=(size, "connections"), somaxconn=(f.somaxconn, "connections"))
    return [finding("config.listen_near_somaxconn", "info", reason, frames, evidence, rec)]


def no_cheaper(ctx: Context) -> list[Finding]:
    s, f = ctx.settings, ctx.latest
    frames = ctx.recent(s.idle_window_seconds)
    if not frames or f.cheap > 0 or ctx.facts.config.cheaper != 0:
        return []
    busy = ctx.col("busy_ratio", frames)
    peak, trough = quantile(busy, 0.9), quantile(busy, 0.1)
    if peak < s.scaling_peak or trough > s.scaling_trough:
        return []
    low = quantile(ctx.col("littles_l", frames), 0.1)
    minimum = max(1, math.ceil(low / (max(f.threads, 1) * s.target_utilisation)))
    minimum = min(minimum, max(f.workers_max - 1, 1))
    reason = (
        f"The load swings from {percent(trough)} to {percent(peak)} busy but cheaper mode is off: "
        "the worker count cannot follow it live."
    )
    rec = Recommendation(
        "cheaper",
        "set",
        minimum,
        "reload",
        "workers follow the load through the FIFO without reloads",
        current=0,
        together=(("cheaper-algo", "manual"), ("cheaper-initial", f.live)),
    )
    evidence = ev(busy_p90=(peak, "ratio"), busy_p10=(trough, "ratio"), live=(f.live, "workers"))
    return [finding("config.no_cheaper", "info", reason, frames, evidence, rec)]


def hazards(ctx: Context) -> list[Finding]:
    out: list[Finding] = []
    for rule in (
        default_listen,
        no_memory_report,
        cheaper_algo_conflict,
        stats_http,
        listen_near_somaxconn,
        no_cheaper,
    ):
        out.extend(rule(ctx))
    return out
