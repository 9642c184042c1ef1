"""The tuner with a latency target (issue 38) against the static grid and the throughput tuner.

Definitions, fixed before any run (bench/results/tuner_target.md repeats them):

- **App**: bench/scenario_app.py `/lnio/30/60`, a lognormal wait (median 30 ms, sigma 0.6:
  mean 36 ms, p99 about 121 ms). IO-bound: more workers cut the time a request waits for one,
  never the time it is served.
- **Load**: an open loop of `RATE` requests/s (one every 10 ms; uwsgitune's loadgen), fresh
  connections, each stamped `X-Request-Start: t=<ms>` as nginx's `t=${msec}` does. The
  load generator runs at nice -10 (as tuner_bench.py's), so the pool, not the load, is what
  is measured.
- **Every setup** runs `processes = 16`, `listen = 128`, and sends its request log (the
  doctor's `log-format`, `req-logger = socket:...`), so the logger's cost is in every row.
- **Grid**: `processes = N` for N in `GRID`, `GRID_SECONDS` each; a count's p99 is the load
  generator's (request written → answer read) over its last `GRID_SECONDS - GRID_WARMUP` s.
- **The target** is set by a rule fixed here, from the grid: T = the best grid p99 × 1.4,
  rounded up to 10 ms; the scenario is void (reported, not passed) unless T is below the
  2-worker p99. N* = the fewest grid count whose p99 is at most T.
- **Tuners**, `TUNER_SECONDS` each, started from 16 live workers (cheaper mode, manual
  algorithm, apply mode, min 2, max 16, the override included last), one poll a second:
  `tuner-throughput` is uwsgitune's tuner as it is without a target; `tuner-target` the same
  with `latency_target = p99=T` and the request log (`--latency`).
- **Steady state**: the last `STEADY_SECONDS` s of a tuner's run. Its count is the
  time-weighted mean of the live workers over it; its p99 the load generator's over it.
- **Pass**: (a) tuner-target's steady p99 ≤ T; (b) its steady count ≤ 1.2 × N*; (c) where
  the throughput tuner's steady count is above N*, tuner-target's is below it.

    .venv/bin/python bench/tuner_target_bench.py            # grid, then both tuners
    .venv/bin/python bench/tuner_target_bench.py --report   # the table from the raw file
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.uwsgi_harness import url, uwsgi_instance  # noqa: E402
from uwsgitune.actuate.audit import AuditLog  # noqa: E402
from uwsgitune.actuate.service import TunerSetup, tuner_factory  # noqa: E402
from uwsgitune.core.address import parse_address  # noqa: E402
from uwsgitune.core.latencytarget import parse_latency_target  # noqa: E402
from uwsgitune.core.logline import log_format  # noqa: E402
from uwsgitune.launch import IniValue  # noqa: E402
from uwsgitune.loadgen import LoadResult, LoadRun  # noqa: E402
from uwsgitune.pipeline import InstanceDriver, InstanceState, LatencyStage, live_driver  # noqa: E402
from uwsgitune.rules.rulesettings import RuleSettings  # noqa: E402
from uwsgitune.tuner import TunerSettings  # noqa: E402

RESULTS = ROOT / "bench" / "results"
RAW = RESULTS / "tuner_target.json"
APP = ROOT / "bench" / "scenario_app.py"
PATH = "/lnio/30/60"
RATE = 100.0
TOP = 16
FLOOR = 2
GRID = (2, 3, 4, 5, 6, 8, 16)
GRID_SECONDS = 60.0
GRID_WARMUP = 20.0
TUNER_SECONDS = 420.0
STEADY_SECONDS = 120.0
TARGET_FACTOR = 1.4
LOADGEN_NICE = -10


@dataclass
class Row:
    setup: str
    seconds: float
    ok: int = 0
    failed: int = 0
    p99_ms: float = 0.0  # the load generator's, over the steady (or grid) window
    p50_ms: float = 0.0
    count: float = 0.0  # time-weighted mean of the live workers over that window
    live: list[tuple[float, int]] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    uwsgitune_p99_ms: float | None = None  # what uwsgitune judged at the end (tuner-target)
    wall: tuple[float, float] = (0.0, 0.0)


def _pct(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))] * 1000


def _options(processes: int, log_port: int, tuned: bool, override: Path) -> dict[str, IniValue]:
    opts: dict[str, IniValue] = {
        "wsgi-file": str(APP),
        "listen": 128,
        "processes": processes,
        "disable-logging": None,
        "log-format": log_format(None),
        "req-logger": f"socket:127.0.0.1:{log_port}",
    }
    if tuned:
        opts.update(
            {
                "cheaper": FLOOR,
                "cheaper-initial": processes,
                "cheaper-algo": "manual",
                "ini": str(override),
            }
        )
    return opts


def _driver(
    proc: Any, stage: LatencyStage, target: str | None, override: Path, audit: AuditLog
) -> InstanceDriver:
    address = parse_address(proc.stats)
    goal = parse_latency_target(target) if target else None
    settings = TunerSettings(min_workers=FLOOR, max_workers=TOP, latency_target=goal)
    setup = TunerSetup(
        stats=address,
        fifo=Path(proc.fifo),
        settings=lambda _slots: settings,
        mode="apply",
        override=override,
        ini=proc.ini,
        audit=audit,
    )
    return live_driver(
        address,
        interval=1.0,
        tuner=tuner_factory(setup),
        mode="apply",
        rule_settings=RuleSettings(latency_target=goal),
        latency=stage,
    )


def _observe(driver: InstanceDriver, row: Row, t0: float, last: list[InstanceState]) -> None:
    seen: list[object] = [None, None]

    def record(state: InstanceState) -> None:
        frame = state.frame
        if frame is not None and frame is not seen[0] and frame.ok:
            row.live.append((round(time.monotonic() - t0, 1), frame.live))
        seen[0] = frame
        result = state.tuning
        if result is not None and result is not seen[1]:
            seen[1] = result
            at = f"{time.monotonic() - t0:5.1f}s"
            row.decisions += [f"{at} {n.text}" for n in result.notes if n.fresh]
        last[:] = [state]

    driver.subscribe(record)
    try:
        driver.run()
    finally:
        driver.close()


def _mean_live(live: list[tuple[float, int]], start: float, end: float) -> float:
    pts = [(t, n) for t, n in live if t <= end]
    if not pts:
        return math.nan
    total = 0.0
    for (a, n), (b, _) in zip(pts, [*pts[1:], (end, 0)], strict=True):
        lo, hi = max(a, start), min(b, end)
        if hi > lo:
            total += n * (hi - lo)
    return total / (end - start)


def run_one(setup: str, processes: int, seconds: float, target: str | None) -> Row:
    row = Row(setup, seconds)
    tuned = setup.startswith("tuner")
    override = Path(f"/tmp/uwt-target-{setup}.ini")
    override.write_text("[uwsgi]\n")
    audit = AuditLog(Path(f"/tmp/uwt-target-{setup}.audit.jsonl"))
    audit.path.unlink(missing_ok=True)
    stage = LatencyStage(("127.0.0.1", 0))
    port = stage.receiver.address[1]
    began = time.time()
    with uwsgi_instance(**_options(processes, port, tuned, override)) as proc:
        last: list[InstanceState] = []
        t0 = time.monotonic()
        if tuned:
            driver = _driver(proc, stage, target, override, audit)
        else:  # the grid: the same request log, read; no tuner
            driver = live_driver(parse_address(proc.stats), interval=1.0, latency=stage)
        th = threading.Thread(target=_observe, args=(driver, row, t0, last))
        th.start()
        os.setpriority(os.PRIO_PROCESS, 0, LOADGEN_NICE)
        try:
            run = LoadRun(url(proc, PATH), duration=seconds, timeout=30, stamp=True)
            result: LoadResult = asyncio.run(run.open_loop(RATE))
        finally:
            os.setpriority(os.PRIO_PROCESS, 0, 0)
            driver.stop(interrupt=False)
            th.join()
    stage.close()
    override.unlink(missing_ok=True)
    window = STEADY_SECONDS if tuned else seconds - GRID_WARMUP
    edge = result.ended - window
    lat = [x for x, end in zip(result.latencies, result.finished, strict=True) if end >= edge]
    row.ok, row.failed = result.ok, result.errors
    row.p99_ms, row.p50_ms = _pct(lat, 0.99), _pct(lat, 0.5)
    run_end = result.ended - result.started
    row.count = _mean_live(row.live, run_end - window, run_end)
    if last and last[0].latency is not None and last[0].latency.long.service is not None:
        row.uwsgitune_p99_ms = last[0].latency.long.service.p99_ms
    row.wall = (began, time.time())
    return row


def target_rule(grid: dict[int, Row]) -> tuple[str | None, float, int | None, str]:
    """(the target, T in ms, N*, a sentence): the rule of the module docstring."""
    best = min(r.p99_ms for r in grid.values())
    t_ms = math.ceil(best * TARGET_FACTOR / 10) * 10
    two = grid[min(grid)].p99_ms
    if not t_ms < two:
        return None, t_ms, None, f"void: T {t_ms} ms is not below the 2-worker p99 {two:.0f} ms"
    meets = [n for n, r in sorted(grid.items()) if r.p99_ms <= t_ms]
    n_star = meets[0] if meets else None
    return f"p99={t_ms}ms", t_ms, n_star, f"T = {best:.1f} × {TARGET_FACTOR} → {t_ms} ms"


def _commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "uwsgitune"], capture_output=True)
    return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def report(raw: dict[str, Any]) -> str:
    grid = {int(k): Row(**v) for k, v in raw["grid"].items()}
    tuners = {k: Row(**v) for k, v in raw.get("tuners", {}).items()}
    target, t_ms, n_star = raw["target"], raw["t_ms"], raw["n_star"]
    lines = [
        f"Commit {raw['commit']}, one sitting ({raw['started']} to {raw['ended']} UTC).",
        "",
        f"Target rule: {raw['rule']}; target `{target}`; N* (fewest grid count meeting it) = "
        f"{n_star}.",
        "",
        "| setup | p99 ms (load generator) | p50 ms | live workers (mean) | failed |",
        "|---|---|---|---|---|",
    ]
    for n, r in sorted(grid.items()):
        meets = "✓" if r.p99_ms <= t_ms else ""
        lines.append(f"| static-{n} | {r.p99_ms:.1f} {meets} | {r.p50_ms:.1f} | {n} | {r.failed} |")
    for name, r in tuners.items():
        lines.append(
            f"| {name} (steady) | {r.p99_ms:.1f} | {r.p50_ms:.1f} | {r.count:.2f} | {r.failed} |"
        )
    tt, tp = tuners.get("tuner-target"), tuners.get("tuner-throughput")
    if tt is not None and n_star is not None:
        a = tt.p99_ms <= t_ms
        b = tt.count <= 1.2 * n_star
        lines += [
            "",
            f"- (a) tuner-target's steady p99 {tt.p99_ms:.1f} ms ≤ T {t_ms} ms: "
            f"{'PASS' if a else 'MISS'}",
            f"- (b) its steady count {tt.count:.2f} ≤ 1.2 × N* = {1.2 * n_star:.1f}: "
            f"{'PASS' if b else 'MISS'}",
        ]
        if tp is not None:
            if tp.count > n_star:
                c = tt.count < tp.count
                lines.append(
                    f"- (c) the throughput tuner holds {tp.count:.2f} > N*: tuner-target's "
                    f"{tt.count:.2f} is below it: {'PASS' if c else 'MISS'}"
                )
            else:
                lines.append(
                    f"- (c) the throughput tuner holds {tp.count:.2f} ≤ N*: the target allows "
                    "no fewer; nothing to compare"
                )
    return "\n".join(lines)


def main() -> None:
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    ap = argparse.ArgumentParser()
    ap.add_argument("--report", action="store_true", help="only print the table of the raw file")
    ap.add_argument("--raw", type=Path, default=RAW)
    args = ap.parse_args()
    if args.report:
        print(report(json.loads(args.raw.read_text())))
        return
    raw: dict[str, Any] = {"commit": _commit(), "started": time.strftime("%H:%M:%S")}
    grid: dict[int, Row] = {}
    for n in GRID:
        grid[n] = r = run_one(f"static-{n}", n, GRID_SECONDS, None)
        print(f"static-{n:<3} p99 {r.p99_ms:7.1f} ms  p50 {r.p50_ms:6.1f}  failed {r.failed}")
    raw["grid"] = {str(n): asdict(r) for n, r in grid.items()}
    target, t_ms, n_star, rule = target_rule(grid)
    raw.update(target=target, t_ms=t_ms, n_star=n_star, rule=rule)
    print(rule, f"N* = {n_star}")
    raw["tuners"] = {}
    if target is not None:
        for name, goal in (("tuner-target", target), ("tuner-throughput", None)):
            r = run_one(name, TOP, TUNER_SECONDS, goal)
            raw["tuners"][name] = asdict(r)
            print(
                f"{name:17} steady p99 {r.p99_ms:7.1f} ms  count {r.count:5.2f}  failed {r.failed}"
            )
    raw["ended"] = time.strftime("%H:%M:%S")
    args.raw.write_text(json.dumps(raw, indent=1))
    print(report(raw))


if __name__ == "__main__":
    main()
