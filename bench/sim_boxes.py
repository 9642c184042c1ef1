"""The tuner on bigger boxes, by simulation (issue 39, section 2): the pure `decide` through
the discrete-event plant (bench/sim_plant.py) at 4, 16 and 64 CPUs, in the scenarios of
the real 2-CPU runs (bench/tuner_bench.py's before protocol v1, frozen below), and the
plant itself checked against the real 2-CPU runs.

    .venv/bin/python bench/sim_boxes.py [--boxes 4,16,64] [--scenarios cpu,io] [--seeds 1]
        [--no-validate] [--jobs 2]

Writes bench/results/sim_boxes.md and sim_boxes.json. DEFINITIONS below were written before
the first run and are copied into the results as they are.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from sim_plant import Box, Costs, Phase, Result, route  # noqa: E402

from uwsgitune.core.frame import Frame  # noqa: E402
from uwsgitune.tuner import TunerSettings, TunerState, decide  # noqa: E402

RESULTS = ROOT / "bench" / "results"
BOXES = (4, 16, 64)
POOL_MAX = 256
FLOOR = 2
STARTS = {"tuner-64": 64, "tuner-2": 2}
RPS_SHARE = 0.95
P99_BOUND = 1.2
CONVERGE_S = 60.0
MAX_RELOADS = 2
PHASED_WARMUP = 15.0
STEP_S = 30.0  # after the load doubles: within 5% of the new best within this long
RETURN_S = 15.0  # drop: within 5% of the phase's best within this long of the return

DEFINITIONS = f"""\
## Definitions (written before the run)

- **The plant** (bench/sim_plant.py, its docstring): a discrete-event uWSGI, every request
  an event. Closed-loop clients or an open-loop rate, per the scenario's phases; a pool of
  processes x threads; a listen backlog; C cores shared by processor sharing among the
  processes with CPU work, each request's CPU cost growing per runnable process beyond C;
  one thread's CPU work at a time in a process (the GIL); IO takes no CPU; each request's
  CPU and IO drawn uniformly within +-{Costs().cpu_spread:.0%} and +-{Costs().io_spread:.0%}
  of their means (jitter: without it, requests in step stay in step); a per-worker
  heap built by each new worker (`thrash`). Each second the real `Tracker` turns what the
  plant did into the frame the tuner reads, and the tuner's decisions act on the plant: a
  FIFO change at the next poll, a reload after the requests in service (the pause) plus a
  stall of {Costs().reload_stall_s:g} s.
- **Its costs**, fitted on the real 2-CPU runs (bench/results/tuner64.json), each on one
  row, the other rows predicted: {Costs().overhead_cpu_ms} ms of CPU a request besides the
  app's (cpu static-2: 552 req/s on 2 CPUs for 3 ms of app CPU); {Costs().client_ms} ms the
  client spends outside the server, exponential (io static-40: 763 req/s for 40 clients of
  50 ms); {Costs().switch:.2%} more CPU per runnable process beyond the cores (cpu
  static-64: 512 against 552); for the heap route `/ws/20000/32`, 2.17 ms of app CPU
  (thrash tuner-2 on 2 workers: 717 req/s), {Costs().heap_switch:.1%} per runnable beyond
  the cores (thrash tuner-64: about 440 req/s on 32 workers against 740 on 4) and
  {Costs().heap_build_ms:g} ms of CPU for each new worker to build its heap (tuner-64's
  5 s start at 64 workers). The existing plant's 1% per worker is 8 times the slope this
  VM shows for `/cpu/3`.
- **Validation (2 CPUs).** The real benchmark's own protocol at load factor 1: `listen`
  128, `processes` 64, the grid's stationary runs at the scenario's grid length, the
  tuners from 64 and 2 for the scenario's length. Predicted against measured, per scenario
  and setup (the single-sitting rows of tuner64.json): throughput over the whole run,
  steady throughput (after the warm-up: min(30 s, a third) for a stationary load, 15 s for a
  phased one) and the mean live workers after the warm-up; the error is predicted /
  measured - 1.
- **Boxes.** C = 4, 16, 64 cores. **Load factor** k = min(C / 2, 4): every phase's clients
  and open-loop rate times k, and `listen` 128 x k. At 2 CPUs the scenarios hold at most
  64 clients, the pool's top; k keeps the clients within the pool's top of {POOL_MAX} (the
  issue's "pools up to 256 workers") and the load per CPU of the 2-CPU runs up to 8 CPUs.
  So at 16 and 64 CPUs the same clients meet more cores: `cpu` asks for a count near C
  among 4 x 64 clients, `io` for 160 workers, `threads-io` for 64 processes of 4 threads,
  and at 64 CPUs `mixed`, `step`, `drop` and `bursty` are no longer CPU-bound (their best
  is then as many workers as clients, within the pool).
- **Setups.** `processes` {POOL_MAX}, the tuner (`decide`, apply mode, every setting at its
  default but min_workers {FLOOR} and max_workers {POOL_MAX}; 1 s polls) from 64 live
  workers (`tuner-64`) and from 2 (`tuner-2`); a static grid: the 2-CPU grid's counts x k,
  and C / 2, C, 2C, 4C, 2 and {POOL_MAX}, within 2-{POOL_MAX}; then, between the fewest
  count that reaches 95% of the best and the grid count below it, bisection down to a gap
  of max(1, 10%). The tuners' rows and every row of a phased scenario run the scenario's
  full length; the static rows of a stationary one run the real benchmark's grid length
  (`grid_seconds`, 40 s), as on the VM: a static pool is stationary within a second or
  two, so its shorter run samples the same state (its window: from the same second, 25 s,
  to its end).
- **Changed before any result** (03:15 UTC): a first run under the definitions as first
  committed (every row the full length; 3C / 2 and 3C in the grid too) was stopped after
  7 minutes, before any scenario had finished: the shared machine (load average 14-30)
  gave its two niced processes about 12% of a core each, hours in all. Nothing of it was
  read.
  Seeds: one per row unless `--seeds` says more (the rows' means). No cheaper algorithm is
  simulated: the worker-seconds target against them is not checked here.
- **One window for every row** of a scenario: from min(30 s, a third of the run) for a
  stationary load, from {PHASED_WARMUP:g} s for a phased one, to the end. No transient is cut.
- **Targets, per tuner row** (bench/results/tuner64.md's, issue 39's windows):
  1. throughput in the window >= {RPS_SHARE:.0%} of the best grid row's;
  2. p99 in the window (every request finished in it) <= {P99_BOUND:g}x the best grid
     row's p99 in the same window;
  3. mean live workers in the window <= max(1.5 n, n + 2), n the fewest grid count whose
     throughput reaches 95% of the best;
  4. `tuner-64`: converged within {CONVERGE_S:g} s with at most {MAX_RELOADS} reloads;
     converged: tuner_report.py's `converged`, the first poll from which the live count
     stays within target 3's bound for as long as the load of that moment lasts;
  5. `step`: after the load doubles, 5 s of throughput reach 95% of the best grid row's in
     that phase within {STEP_S:g} s;
  6. `drop`: on the return, 5 s of throughput reach 95% of the best grid row's in that phase
     within {RETURN_S:g} s (issue 39, section 3);
  7. no listen overflow (a real client's SYN dropped, sent again a second later).
  A miss is a miss. Also printed, not targets: the time the live count settles (last came
  within max(1, 10%) of its final value), FIFO moves.
"""


@dataclass(frozen=True)
class _Phase:
    path: str
    clients: int | None
    seconds: float
    rate: float | None = None


@dataclass(frozen=True)
class _Scenario:
    phases: tuple[_Phase, ...]
    grid: tuple[int, ...]
    grid_seconds: float | None = None
    threads: int = 1


def _mixed(c: int, s: float) -> _Phase:
    return _Phase("/mixed/2/12", c, s)


# The scenarios of the real 2-CPU runs this plant is validated against (bench/results/
# tuner64.json, measured before bench/PROTOCOL.md v1 changed their lengths and grids), as
# bench/tuner_bench.py defined them then: frozen here, so that the validation compares the
# plant with the runs it predicts. The boxes run the same table; moving them to v1's
# scenarios (bench/tuner_protocol.py) comes with the protocol's own runs.
SCENARIOS: dict[str, _Scenario] = {
    "cpu": _Scenario((_Phase("/cpu/3", 64, 75),), (2, 3, 4, 8, 64), 40),
    "mixed": _Scenario((_mixed(64, 75),), (8, 12, 16, 24, 32, 64), 40),
    "io": _Scenario((_Phase("/io/50", 40, 75),), (16, 32, 40, 48, 64), 40),
    "step": _Scenario(
        tuple(_Phase("/mixed/1/30", c, 25) for c in (16, 32, 16)), (8, 16, 24, 32, 48)
    ),
    "drop": _Scenario(
        (_mixed(48, 25), _Phase("/io/5", None, 25, rate=2.0), _mixed(48, 25)),
        (8, 16, 24, 32, 64),
    ),
    "bursty": _Scenario(
        (_Phase("/mixed/1/25", 48, 10), _Phase("/mixed/1/25", 4, 10)) * 3, (8, 16, 32, 48, 64)
    ),
    "thrash": _Scenario((_Phase("/ws/20000/32", 64, 45),), (3, 64), 45),
    "threads-cpu": _Scenario((_Phase("/cpu/3", 64, 75),), (2, 3, 4, 8, 16), 40, threads=4),
    "threads-io": _Scenario((_Phase("/io/50", 64, 75),), (4, 8, 12, 16, 24), 40, threads=4),
}


@dataclass(frozen=True)
class Plan:
    """A scenario on a box: its phases at the load factor, the pool, the grid."""

    name: str
    cpus: int
    k: float
    phases: tuple[Phase, ...]
    threads: int
    listen: int
    top: int
    grid: tuple[int, ...]
    grid_seconds: float | None = None

    @property
    def seconds(self) -> float:
        return sum(p.seconds for p in self.phases)

    @property
    def window(self) -> float:
        return min(30.0, self.seconds / 3) if len(self.phases) == 1 else PHASED_WARMUP


def plan(name: str, sc: Any, cpus: int) -> Plan | None:
    """The scenario `sc` (tuner_bench's) on `cpus` cores; None if a route is not modelled.
    At 2 CPUs: the real benchmark's own (k = 1, its grid and grid length)."""
    k = 1.0 if cpus == 2 else min(cpus / 2, 4.0)
    phases = []
    for p in sc.phases:
        work = route(p.path)
        if work is None:
            return None
        clients = round(p.clients * k) if p.clients else None
        phases.append(Phase(work, clients, p.rate * k if p.rate else None, p.seconds))
    if cpus == 2:
        return Plan(
            name, 2, 1.0, tuple(phases), sc.threads, 128, 64, tuple(sc.grid), sc.grid_seconds
        )
    c = cpus
    pts = {math.ceil(g * k) for g in sc.grid} | {c // 2, c, 2 * c, 4 * c, 2, POOL_MAX}
    grid = tuple(sorted(n for n in pts if FLOOR <= n <= POOL_MAX))
    return Plan(
        name, cpus, k, tuple(phases), sc.threads, round(128 * k), POOL_MAX, grid, sc.grid_seconds
    )


class TunerLoop:
    """`decide` in apply mode, as `uwsgitune tune --mode apply` runs it: the frames, the
    state, the changes it asks for."""

    def __init__(self, settings: TunerSettings) -> None:
        self.settings, self.state = settings, TunerState()
        self.frames: list[Frame] = []
        self.said: list[str] = []

    def __call__(self, t: float, frame: Frame) -> tuple[int, str] | None:
        self.frames = [*self.frames[-300:], frame]
        d = decide(self.frames, self.state, self.settings, now=t)
        self.state = d.state
        if d.is_change:
            self.said.append(f"{t:5.0f}s {d.action} {d.live}->{d.desired} via {d.via} [{d.code}]")
            return d.desired, d.via
        return None


def simulate(p: Plan, setup: str, seed: int) -> dict[str, Any]:
    """One row: a static count or a tuner, for the plan's length (the grid's at 2 CPUs)."""
    phases = p.phases
    if setup.startswith("static-") and p.grid_seconds and len(phases) == 1:
        phases = (Phase(phases[0].work, phases[0].clients, phases[0].rate, p.grid_seconds),)
    if setup.startswith("static-"):
        n, tuner = int(setup.split("-")[1]), None
    else:
        n = min(STARTS[setup], p.top)
        tuner = TunerLoop(TunerSettings(min_workers=FLOOR, max_workers=p.top))
    box = Box(p.cpus, n, threads=p.threads, listen=p.listen, workers_max=p.top, seed=seed)
    t0 = time.process_time()
    r = box.run(phases, tuner)
    return _row(p, setup, r, time.process_time() - t0, tuner.said if tuner else [])


def _row(p: Plan, setup: str, r: Result, cpu_s: float, said: list[str]) -> dict[str, Any]:
    seconds = r.seconds
    w = min(30.0, seconds / 3) if len(p.phases) == 1 else PHASED_WARMUP
    return {
        "setup": setup,
        "seconds": seconds,
        "rps": r.rps(),
        "steady_rps": r.rps(w),
        "window_rps": r.rps(p.window),
        "p99_ms": r.p(0.99, p.window),
        "p50_ms": r.p(0.5, p.window),
        "live": r.live,
        "mean_live": r.mean_live(w),
        "window_live": r.mean_live(p.window),
        "per_second": r.per_second,
        "phase_rps": [n / ph.seconds for n, ph in zip(r.phase_done, p.phases, strict=False)],
        "reloads": r.reloads,
        "fifo_moves": r.fifo_moves,
        "overflows": r.overflows,
        "decisions": said,
        "cpu_s": round(cpu_s, 2),
    }


def _mean_rows(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Seeds of one row: the means of its figures; the first seed's series."""
    if len(rows) == 1:
        return rows[0]
    out = dict(rows[0])
    for key in ("rps", "steady_rps", "window_rps", "p99_ms", "p50_ms", "mean_live", "window_live"):
        out[key] = fmean(r[key] for r in rows)
    for key in ("reloads", "fifo_moves", "overflows"):
        out[key] = max(r[key] for r in rows)
    out["seeds"] = [
        {k: r[k] for k in ("window_rps", "p99_ms", "window_live", "reloads")} for r in rows
    ]
    out["rounds"] = rows
    return out


def run_row(p: Plan, setup: str, seeds: int) -> dict[str, Any]:
    return _mean_rows([simulate(p, setup, seed) for seed in range(1, seeds + 1)])


# --- verdicts ------------------------------------------------------------------------


def fewest(grid: dict[str, dict[str, Any]]) -> tuple[int, float]:
    """(the fewest static count reaching 95% of the best, the best throughput)."""
    best = max(r["window_rps"] for r in grid.values())
    ok = [int(s.split("-")[1]) for s, r in grid.items() if r["window_rps"] >= RPS_SHARE * best]
    return min(ok), best


def live_limit(n: int) -> float:
    return max(1.5 * n, n + 2)


def phase_ends(p: Plan) -> list[float]:
    out, t = [], 0.0
    for ph in p.phases:
        t += ph.seconds
        out.append(t)
    return out


def converged(live: Sequence[Sequence[float]], limit: float, ends: list[float]) -> float | None:
    """tuner_report.py's: the first poll from which the live count stays within `limit` to
    the end of the phase it is in."""
    pts = [(float(t), n) for t, n in live]
    for i, (t, n) in enumerate(pts):
        end = next((e for e in ends if e > t), ends[-1])
        if n <= limit and all(m <= limit for ts, m in pts[i:] if ts < end):
            return t
    return None


def settled(live: Sequence[Sequence[float]]) -> float | None:
    if not live:
        return None
    final = live[-1][1]
    t, away = 0.0, False
    for ts, n in live:
        if abs(n - final) > max(1, 0.1 * final):
            away = True
        elif away:
            t, away = float(ts), False
    return t


def recovery(row: dict[str, Any], p: Plan, phase: int, best: float) -> float | None:
    """Seconds from the start of `phase` until 5 s of throughput reach 95% of `best`."""
    start = int(sum(ph.seconds for ph in p.phases[:phase]))
    end = start + int(p.phases[phase].seconds)
    per = row["per_second"]
    for t in range(start, max(start, end - 4)):
        if sum(per[t : t + 5]) / 5 >= 0.95 * best:
            return float(t - start)
    return None


def marks(p: Plan, row: dict[str, Any], grid: dict[str, dict[str, Any]]) -> list[tuple[str, bool]]:
    n, best = fewest(grid)
    top = max(grid.values(), key=lambda r: r["window_rps"])
    limit = live_limit(n)
    share = row["window_rps"] / best
    p99 = row["p99_ms"] / top["p99_ms"] if top["p99_ms"] else math.inf
    out = [
        (f"rps>=95% ({share:.1%})", share >= RPS_SHARE),
        (f"p99<={P99_BOUND:g}x ({p99:.2f}x)", p99 <= P99_BOUND),
        (f"live<={limit:g} ({row['window_live']:.1f})", row["window_live"] <= limit),
    ]
    if row["setup"] == "tuner-64":
        rounds = row.get("rounds", [row])
        conv = [converged(r["live"], limit, phase_ends(p)) for r in rounds]
        c = None if None in conv else max(x for x in conv if x is not None)
        ok = c is not None and c <= CONVERGE_S and row["reloads"] <= MAX_RELOADS
        out.append((f"conv<=60s, <=2 reloads ({c}s, {row['reloads']})", ok))
    phases = p.phases
    if len(phases) == 3 and phases[0].clients and phases[1].clients == 2 * phases[0].clients:
        ph_best = max(g["phase_rps"][1] for g in grid.values())
        rec = recovery(row, p, 1, ph_best)
        out.append((f"2x step <={STEP_S:g}s ({rec}s)", rec is not None and rec <= STEP_S))
    if len(phases) == 3 and phases[1].rate and phases[2].clients:
        ph_best = max(g["phase_rps"][2] for g in grid.values())
        rec = recovery(row, p, 2, ph_best)
        out.append((f"return <={RETURN_S:g}s ({rec}s)", rec is not None and rec <= RETURN_S))
    out.append((f"0 overflows ({row['overflows']})", row["overflows"] == 0))
    return out


# --- the runs --------------------------------------------------------------------------


def box_rows(p: Plan, seeds: int) -> dict[str, Any]:
    """The grid (bisected near its 95% knee), then the tuners, of one plan."""
    grid = {f"static-{n}": run_row(p, f"static-{n}", seeds) for n in p.grid}
    if p.cpus != 2:
        while True:
            n, best = fewest(grid)
            below = [m for m in (int(s.split("-")[1]) for s in grid) if m < n]
            if not below:
                break
            lo = max(below)
            if n - lo <= max(1, n // 10):
                break
            mid = (lo + n) // 2
            grid[f"static-{mid}"] = run_row(p, f"static-{mid}", seeds)
    tuners = {s: run_row(p, s, seeds) for s in STARTS}
    out: dict[str, Any] = {
        "cpus": p.cpus,
        "k": p.k,
        "listen": p.listen,
        "clients": [ph.clients for ph in p.phases],
        "rates": [ph.rate for ph in p.phases],
        "threads": p.threads,
        "grid": dict(sorted(grid.items(), key=lambda kv: int(kv[0].split("-")[1]))),
        "tuners": tuners,
    }
    if p.cpus != 2:
        n, best = fewest(grid)
        out["fewest"], out["best_rps"], out["limit"] = n, best, live_limit(n)
        out["marks"] = {s: marks(p, r, grid) for s, r in tuners.items()}
    return out


def _job(args: tuple[str, int, int]) -> tuple[str, int, dict[str, Any] | None]:
    name, cpus, seeds = args
    os.nice(10) if os.nice(0) < 10 else None
    p = plan(name, SCENARIOS[name], cpus)
    return name, cpus, None if p is None else box_rows(p, seeds)


def commit() -> str:
    out = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--", "bench/sim_plant.py", "uwsgitune"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return out.stdout.strip() + ("+dirty" if dirty else "")


# --- the report ------------------------------------------------------------------------


def _measured(real: dict[str, Any], name: str, setup: str) -> dict[str, Any] | None:
    r = real.get(name, {}).get("runs", {}).get(setup)
    if r is None:
        return None
    w = r["warmup_s"]
    pts = [n for t, n in r["live"] if t >= w]
    return {
        "rps": r["rps"],
        "steady_rps": r["steady_rps"],
        "mean_live": fmean(pts) if pts else None,
    }


def _err(a: float | None, b: float | None) -> str:
    if a is None or not b:
        return "-"
    return f"{a / b - 1:+.1%}"


def validation_table(sims: dict[str, Any], real: dict[str, Any]) -> list[str]:
    lines = [
        "| scenario | setup | rps sim | rps real | err | steady sim | steady real | err | "
        "live sim | live real | err |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    errs: list[float] = []
    for name, sc in sims.items():
        for setup, row in {**sc["grid"], **sc["tuners"]}.items():
            m = _measured(real, name, setup)
            if m is None:
                continue
            errs.append(abs(row["steady_rps"] / m["steady_rps"] - 1))
            lines.append(
                f"| {name} | {setup} | {row['rps']:.0f} | {m['rps']:.0f} | "
                f"{_err(row['rps'], m['rps'])} "
                f"| {row['steady_rps']:.0f} | {m['steady_rps']:.0f} | "
                f"{_err(row['steady_rps'], m['steady_rps'])} | {row['mean_live']:.1f} | "
                + (f"{m['mean_live']:.1f}" if m["mean_live"] is not None else "-")
                + f" | {_err(row['mean_live'], m['mean_live'])} |"
            )
    if errs:
        errs.sort()
        lines += [
            "",
            f"Steady throughput, |error| over {len(errs)} rows: median {errs[len(errs) // 2]:.1%}, "
            f"max {errs[-1]:.1%}.",
        ]
    return lines


def box_table(name: str, sc: dict[str, Any]) -> list[str]:
    head = (
        f"**{name}** at {sc['cpus']} CPUs: k {sc['k']:g}, clients {sc['clients']}"
        + (f", rates {sc['rates']}" if any(sc["rates"]) else "")
        + f", {sc['threads']} thread(s), listen {sc['listen']}; fewest at 95%: "
        f"{sc['fewest']} (limit {sc['limit']:g}), best {sc['best_rps']:.0f} req/s"
    )
    lines = [
        head,
        "",
        "| setup | req/s (window) | p99 ms | p50 ms | live | reloads | FIFO | overflows "
        "| settled s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for setup, r in {**sc["grid"], **sc["tuners"]}.items():
        lines.append(
            f"| {setup} | {r['window_rps']:.0f} | {r['p99_ms']:.0f} | {r['p50_ms']:.0f} | "
            f"{r['window_live']:.1f} | {r['reloads']} | {r['fifo_moves']} | {r['overflows']} | "
            f"{settled(r['live'])} |"
        )
    for setup, m in sc["marks"].items():
        missed = [label for label, ok in m if not ok]
        lines.append("")
        lines.append(
            f"- {setup}: "
            + ("all met" if not missed else "missed: " + "; ".join(missed))
            + " ("
            + ", ".join(label for label, _ in m)
            + ")"
        )
        said = sc["tuners"][setup]["decisions"]
        if said:
            lines.append(
                f"  - its changes: {'; '.join(s.strip() for s in said[:8])}"
                + (f" ... ({len(said)} in all)" if len(said) > 8 else "")
            )
    return [*lines, ""]


def summary(boxes: dict[str, dict[str, Any]]) -> list[str]:
    names = sorted({n for b in boxes.values() for n in b}, key=list(boxes[next(iter(boxes))]).index)
    cols = list(boxes)
    lines = [
        "| scenario | "
        + " | ".join(f"{c} CPUs: tuner-64 | {c} CPUs: tuner-2" for c in cols)
        + " |",
        "|---|" + "---|---|" * len(cols),
    ]
    for name in names:
        cells = []
        for c in cols:
            sc = boxes[c].get(name)
            for setup in STARTS:
                if sc is None:
                    cells.append("-")
                    continue
                missed = [label for label, ok in sc["marks"][setup] if not ok]
                cells.append("all met" if not missed else "missed: " + "; ".join(missed))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--boxes", default=",".join(map(str, BOXES)))
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--no-validate", action="store_true")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=RESULTS / "sim_boxes")
    args = ap.parse_args(argv)
    names = args.scenarios.split(",")
    cpus = [int(c) for c in args.boxes.split(",")]
    if not args.no_validate:
        cpus = [2, *cpus]
    sha, t0 = commit(), time.time()
    load0 = os.getloadavg()
    jobs = [(n, c, args.seeds) for c in cpus for n in names]
    jobs.sort(key=lambda j: -j[1])  # the biggest boxes first: the slowest jobs start early
    found: dict[int, dict[str, Any]] = {c: {} for c in cpus}
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for name, c, rows in pool.map(_job, jobs):
            print(f"{c:3} CPUs {name:12} done at {time.time() - t0:6.0f}s", flush=True)
            if rows is not None:
                found[c][name] = rows
    boxes = {c: {n: found[c][n] for n in names if n in found[c]} for c in cpus}
    load1 = os.getloadavg()
    real = json.loads((RESULTS / "tuner64.json").read_text())
    skipped = [n for n in names if all(n not in boxes[c] for c in cpus)]
    md = [
        "# The tuner on bigger boxes, by simulation (issue 39, section 2)",
        "",
        f"Commit {sha}; `bench/sim_boxes.py --boxes {args.boxes} --seeds {args.seeds}`; "
        f"{time.time() - t0:.0f} s wall; load average {load0[0]:.2f} before, {load1[0]:.2f} "
        f"after (2 cores, shared).",
        "",
        DEFINITIONS,
    ]
    if skipped:
        md += [f"Not simulated (a route the plant does not model): {', '.join(skipped)}.", ""]
    if 2 in boxes:
        md += ["## Validation: the plant at 2 CPUs against the real runs", ""]
        md += [*validation_table(boxes[2], real), ""]
    big = {c: b for c, b in boxes.items() if c != 2}
    if big:
        md += ["## Targets", "", *summary(big), ""]
        for c, b in big.items():
            md += [f"## {c} CPUs", ""]
            for name, sc in b.items():
                md += box_table(name, sc)
    out: Path = args.out
    out.with_suffix(".md").write_text("\n".join(md) + "\n")
    slim = {
        str(c): {
            n: {
                **sc,
                "grid": {s: _slim(r) for s, r in sc["grid"].items()},
                "tuners": {s: _slim(r) for s, r in sc["tuners"].items()},
            }
            for n, sc in b.items()
        }
        for c, b in boxes.items()
    }
    out.with_suffix(".json").write_text(json.dumps({"commit": sha, "boxes": slim}, indent=1))
    print(f"wrote {out.with_suffix('.md')}")
    return 0


def _slim(r: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in r.items() if k not in ("per_second", "rounds")}


if __name__ == "__main__":
    sys.exit(main())
