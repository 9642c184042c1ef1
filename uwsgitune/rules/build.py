"""Small builders shared by the rules: evidence, findings, worker-count and listen changes.

A finding sizes workers with the tuner's own model (`uwsgitune.core.staffing`) and the
rules' own settings: `cpu_saturated`, `cpu_workers_per_cpu` and `staffing_beta` are
`SharedSettings`, one value for the rules and the tuner, so a finding and the tuner's decision
agree on every count, configured or not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from uwsgitune.core.frame import Frame
from uwsgitune.core.settings import SharedSettings
from uwsgitune.core.staffing import Estimate, estimate, workers_for
from uwsgitune.rules.context import Context, backlog, evidence_window
from uwsgitune.rules.finding import Direction, Evidence, Finding, Recommendation, Severity

MIB = 1024 * 1024
Num = float | int | str | bool | None


def ev(**values: Num | tuple[Num, str]) -> tuple[Evidence, ...]:
    """`ev(queue=(16, "connections"), live=4)` -> evidence, in the order given."""
    out = []
    for name, v in values.items():
        if isinstance(v, tuple):
            out.append(Evidence(name, _round(v[0]), v[1]))
        else:
            out.append(Evidence(name, _round(v)))
    return tuple(out)


def _round(v: Num) -> Num:
    return round(v, 4) if isinstance(v, float) else v


def finding(
    rule_id: str,
    severity: Severity,
    reason: str,
    frames: Sequence[Frame],
    evidence: tuple[Evidence, ...],
    rec: Recommendation | None = None,
) -> Finding:
    return Finding(rule_id, severity, reason, evidence, evidence_window(frames), rec)


def cheaper_mode(ctx: Context) -> bool:
    """Cheaper mode is on when slots are cheap now, or the configuration says so."""
    return ctx.latest.cheap > 0 or bool(ctx.facts.config.cheaper)


def model_estimate(frames: Sequence[Frame], s: SharedSettings) -> Estimate | None:
    """The tuner's sizing model over the frames at the latest live count."""
    if not frames:
        return None
    live = frames[-1].live
    same = [f for f in frames if f.live == live and f.rps]
    return estimate(same, s.cpu_workers_per_cpu, s.cpu_saturated)


def demand_workers(in_service: float, queued: float, threads: int, s: SharedSettings) -> int:
    """Workers for the requests in service plus those waiting (square-root staffing)."""
    return workers_for(in_service + queued, threads, s.staffing_beta)


def worker_change(
    ctx: Context, target: int, effect: str, *, saturated: bool = False
) -> Recommendation:
    """Change the live worker count to `target`: FIFO `+`/`-` in cheaper mode, else reload.

    `-` only cheaps an idle worker, so a saturated instance shrinks through a reload.
    """
    f = ctx.latest
    direction: Direction = "raise" if target > f.live else "lower"
    if direction == "raise" and f.cheap > 0 and target > f.workers_max:
        # Cheap slots first: `+` through the FIFO now, the larger pool only if still short.
        effect += f"; if still short, processes {f.workers_max} → {target} (reload)"
        return Recommendation(
            "cheaper-initial", direction, f.workers_max, "fifo", effect, current=f.live
        )
    if cheaper_mode(ctx) and target <= f.workers_max and not (saturated and direction == "lower"):
        setting = "cheaper-initial" if direction == "raise" else "cheaper"
        return Recommendation(setting, direction, target, "fifo", effect, current=f.live)
    if cheaper_mode(ctx) and direction == "lower":
        return Recommendation(
            "cheaper-initial", direction, target, "reload", effect, current=f.live
        )
    if cheaper_mode(ctx):
        # More than the slots: the ceiling itself moves, and the live count starts there.
        return Recommendation(
            "processes",
            direction,
            target,
            "reload",
            effect,
            current=f.workers_max,
            together=(("cheaper-initial", target),),
        )
    return Recommendation("processes", direction, target, "reload", effect, current=f.live)


def memory_cap(f: Frame, headroom: float) -> int | None:
    """Most live workers the available memory allows, or None when RSS is unknown."""
    if not f.mem_per_worker or f.mem_available is None:
        return None
    return f.live + int(f.mem_available * headroom // f.mem_per_worker)


def pow2_at_least(n: float) -> int:
    return 1 << max(0, math.ceil(math.log2(max(n, 1))))


def listen_change(f: Frame, wanted: int, effect: str) -> Recommendation:
    """A larger listen: `listen` itself (a fresh bind, so restart), or somaxconn first."""
    current = backlog(f)
    if f.somaxconn is not None and wanted > f.somaxconn:
        return Recommendation(
            "net.core.somaxconn",
            "raise",
            wanted,
            "sysctl",
            f"first raise somaxconn (uWSGI refuses to start with listen above it); {effect}",
            current=f.somaxconn,
            together=(("listen", wanted),),
        )
    return Recommendation("listen", "raise", wanted, "restart", effect, current=current)
