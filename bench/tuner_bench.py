"""Benchmark the tuner against static worker counts and uWSGI's cheaper algorithms.

For each scenario (a bounded, non-keepalive closed-loop load on a real uWSGI, in phases) and
each setup: static grid (the reference), spare/backlog/busyness with the same bounds, and
uwsgitune in apply mode started from too many and too few workers. Writes
bench/results/tuner.md (table), tuner.json (raw) and tuner.svg (live workers over time).

    .venv/bin/python bench/tuner_bench.py [--seconds 60] [--warmup 15] [--scenarios cpu,io]
        [--grid 1,2,3,4,8] [--setups tuner-low,tuner-high]

Each run is measured twice: over the whole run (the ramp included) and in steady state,
over the requests that finished after `--warmup` seconds (the same window for every setup).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.uwsgi_harness import url, uwsgi_instance  # noqa: E402
from uwsgitune.actuate.audit import AuditLog  # noqa: E402
from uwsgitune.actuate.fifo import MasterFifo  # noqa: E402
from uwsgitune.actuate.loop import OverrideTarget, TuneLoop  # noqa: E402
from uwsgitune.core.address import parse_address  # noqa: E402
from uwsgitune.loadgen import LoadResult, LoadRun  # noqa: E402
from uwsgitune.sources.watcher import InstanceWatch  # noqa: E402
from uwsgitune.tuner import TunerSettings  # noqa: E402

RESULTS = ROOT / "bench" / "results"
MAX = 8
# phase: (path, clients (closed loop) or None, rate (open loop) or None, share of the run)
Phase = tuple[str, int | None, float | None, float]
SCENARIOS: dict[str, list[Phase]] = {
    "cpu": [("/cpu/10", 6, None, 1.0)],
    "io": [("/io/40", 10, None, 1.0)],
    "mixed": [("/mixed/4/20", 8, None, 1.0)],
    "bursty": [("/io/40", 10, None, 1 / 6), ("/io/40", 2, None, 1 / 6)] * 3,
    "drop": [
        ("/mixed/3/30", 8, None, 1 / 3),
        ("/io/5", None, 2.0, 1 / 3),
        ("/mixed/3/30", 8, None, 1 / 3),
    ],
}


@dataclass
class Run:
    setup: str
    rps: float = 0.0
    p99_ms: float = 0.0
    failed: int = 0
    ok: int = 0
    live: list[tuple[float, int]] = field(default_factory=list)
    changes: int = 0
    converged_s: float | None = None
    late_changes: int | None = None  # live-count moves in the second half of the run
    steady_rps: float = 0.0  # requests finished after the warm-up, per second
    steady_p99_ms: float = 0.0
    warmup_s: float = 0.0


async def _load(u: Callable[[str], str], phases: list[Phase], seconds: float) -> LoadResult:
    total = LoadResult(started=time.monotonic())
    for path, clients, rate, share in phases:
        run = LoadRun(u(path), duration=seconds * share, max_requests=200_000, timeout=30)
        r = await (run.closed_loop(clients) if clients else run.open_loop(rate or 1.0))
        total.ok += r.ok
        total.errors += r.errors
        total.latencies += r.latencies
        total.finished += r.finished
    total.ended = time.monotonic()
    return total


def _options(setup: str, override: Path) -> dict[str, Any]:
    if setup.startswith("static-"):
        return {"processes": int(setup.split("-")[1])}
    if setup.startswith("tuner-"):
        initial = MAX if setup == "tuner-high" else 1
        return {
            "processes": MAX,
            "cheaper": 1,
            "cheaper_initial": initial,
            "cheaper_algo": "manual",
            "ini": str(override),
        }
    return {"processes": MAX, "cheaper": 1, "cheaper_initial": 2, "cheaper_algo": setup}


def _observe(
    stats: str,
    stop: threading.Event,
    run: Run,
    t0: float,
    loop_for: Callable[[InstanceWatch], TuneLoop | None],
) -> None:
    watch = InstanceWatch(parse_address(stats), interval=1.0)
    loop = loop_for(watch)
    while not stop.is_set():
        frame = watch.step()
        if frame.ok:
            run.live.append((round(time.monotonic() - t0, 1), frame.live))
        if loop is not None:
            loop.step(frame)
        stop.wait(max(0.0, watch.next_due - time.monotonic()))


def _steady(result: LoadResult, warmup: float) -> tuple[float, float]:
    """(requests/s, p99 ms) over the requests that finished after `warmup` seconds."""
    edge = result.started + warmup
    lat = sorted(x for x, end in zip(result.latencies, result.finished, strict=True) if end >= edge)
    span = result.ended - edge
    if not lat or span <= 0:
        return 0.0, 0.0
    p99 = lat[min(len(lat) - 1, round(0.99 * (len(lat) - 1)))]
    return len(lat) / span, p99 * 1000


def run_setup(
    setup: str, phases: list[Phase], seconds: float, log: Path, warmup: float = 15.0
) -> Run:
    run = Run(setup, warmup_s=warmup)
    override = Path(f"/tmp/uwt-bench-{setup}.ini")
    override.write_text("[uwsgi]\n")
    audit = AuditLog(Path(f"/tmp/uwt-bench-{setup}.audit.jsonl"))
    audit.path.unlink(missing_ok=True)
    with uwsgi_instance(**_options(setup, override)) as proc, log.open("a") as out:
        out.write(f"=== {setup}\n")

        def loop_for(watch: InstanceWatch) -> TuneLoop | None:
            if not setup.startswith("tuner-"):
                return None
            settings = TunerSettings(min_workers=1, max_workers=MAX)
            target = OverrideTarget(override, proc.ini)
            return TuneLoop(
                watch,
                MasterFifo(proc.fifo),
                target,
                settings,
                "apply",
                audit,
                log=lambda s: out.write(s + "\n"),
            )

        stop, t0 = threading.Event(), time.monotonic()
        th = threading.Thread(target=_observe, args=(proc.stats, stop, run, t0, loop_for))
        th.start()
        result = asyncio.run(_load(lambda p: url(proc, p), phases, seconds))
        stop.set()
        th.join()
    run.rps, run.ok, run.failed = result.throughput, result.ok, result.errors
    run.p99_ms = (result.percentile(99) or 0) * 1000
    run.steady_rps, run.steady_p99_ms = _steady(result, warmup)
    run.changes = sum(1 for r in audit.records() if r.get("event") == "change")
    run.converged_s = _converged(run.live)
    late = [n for t, n in run.live if t > seconds / 2]
    run.late_changes = sum(1 for a, b in itertools.pairwise(late) if a != b)
    override.unlink(missing_ok=True)
    return run


def _converged(live: list[tuple[float, int]]) -> float | None:
    """The time after which the live count stayed within one of its final value."""
    if not live:
        return None
    final = live[-1][1]
    t = 0.0
    for ts, n in live:
        if abs(n - final) > 1:
            t = ts
    return t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--warmup", type=float, default=15)
    ap.add_argument("--scenarios", default="cpu,io,mixed,bursty,drop")
    ap.add_argument("--grid", default="1,2,3,4,8")
    ap.add_argument("--setups", help="only these setups, merged into the existing results")
    args = ap.parse_args()
    setups = [f"static-{n}" for n in args.grid.split(",")] + [
        "spare",
        "backlog",
        "busyness",
        "tuner-high",
        "tuner-low",
    ]
    if args.setups:
        setups = args.setups.split(",")
    raw_path = RESULTS / "tuner.json"
    raw: dict[str, Any] = json.loads(raw_path.read_text()) if raw_path.exists() else {}
    for name in args.scenarios.split(","):
        runs = []
        for setup in setups:
            r = run_setup(
                setup, SCENARIOS[name], args.seconds, RESULTS / "tuner-log.txt", args.warmup
            )
            print(
                f"{name:7} {setup:11} rps {r.rps:7.1f} p99 {r.p99_ms:7.1f}ms "
                f"steady {r.steady_rps:7.1f} {r.steady_p99_ms:7.1f}ms failed {r.failed} "
                f"changes {r.changes} live {r.live[-1][1] if r.live else '?'}",
                flush=True,
            )
            runs.append(r.__dict__)
        if args.setups and name in raw:  # replace just these rows, keep the order
            by = {r["setup"]: r for r in raw[name]["runs"]}
            by.update({r["setup"]: r for r in runs})
            runs = list(by.values())
        raw[name] = {
            "seconds": args.seconds,
            "warmup": args.warmup,
            "phases": SCENARIOS[name],
            "runs": runs,
        }
        raw_path.write_text(json.dumps(raw, indent=1))
    sys.path.insert(0, str(ROOT / "bench"))
    from tuner_report import write_report

    write_report(raw, RESULTS)


if __name__ == "__main__":
    main()
