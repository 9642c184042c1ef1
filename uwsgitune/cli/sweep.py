"""`uwsgitune sweep`: find the best worker count of a staging instance by experiment.

Steps the live worker count through the master FIFO (cheaper-algo = manual), drives its own
bounded load, measures each step, and restores the original count at the end and on Ctrl-C.
Writes a table to stdout and sweep.json + sweep.svg to --out.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from uwsgitune.cli.common import addresses, positive_float
from uwsgitune.cli.errors import UserError
from uwsgitune.loadgen import LoadRun, one_request
from uwsgitune.sources.watcher import InstanceWatch
from uwsgitune.sweep import plan, report
from uwsgitune.sweep.analysis import Criteria
from uwsgitune.sweep.chart import render_svg
from uwsgitune.sweep.fifo import FifoError, MasterFifo
from uwsgitune.sweep.live import LiveCount
from uwsgitune.sweep.runner import LoadSpec, Sweep, SweepConfig, SweepOutcome

GENERATOR_CEILING = 2000.0  # req/s; see bench/results/sweep_vs_wrk.md


def _positive_int(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) <= 4096:
        raise argparse.ArgumentTypeError(f"{text!r}: use a whole number from 1 to 4096")
    return int(text)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "sweep",
        help="find the best worker count by experiment (staging instances)",
        description="Step the live worker count through the master FIFO under a load of our "
        "own; measure throughput, latency, errors, CPU and memory; recommend a count.",
    )
    p.add_argument("--url", required=True, help="loopback URL to load, e.g. http://127.0.0.1:8000/")
    p.add_argument("--stats", required=True, metavar="ADDR", help="the instance's stats address")
    p.add_argument("--fifo", required=True, metavar="PATH", help="the instance's master FIFO")
    p.add_argument("--workers", required=True, metavar="RANGE", help="1..32 or 1,2,4,8")
    _load_flags(p)
    _outcome_flags(p)
    p.set_defaults(func=run)


def _load_flags(p: argparse.ArgumentParser) -> None:
    """The load each step runs under, and how long."""
    load = p.add_mutually_exclusive_group()
    load.add_argument("--concurrency", type=_positive_int, metavar="N", help="closed-loop clients")
    load.add_argument("--rate", type=positive_float, metavar="R", help="open loop, requests/s")
    p.add_argument(
        "--step-seconds",
        type=positive_float,
        default=10.0,
        metavar="S",
        help="measured seconds per step (10)",
    )
    p.add_argument(
        "--warmup",
        type=positive_float,
        default=3.0,
        metavar="S",
        help="unmeasured seconds first (3)",
    )
    p.add_argument(
        "--repeat", type=_positive_int, default=2, metavar="K", help="passes, for the noise (2)"
    )


def _outcome_flags(p: argparse.ArgumentParser) -> None:
    """What counts as good enough, the limits, and where the results go."""
    p.add_argument(
        "--within",
        type=positive_float,
        default=10.0,
        metavar="PCT",
        help="of the best throughput (10; widened to the noise)",
    )
    p.add_argument(
        "--p99-ms",
        type=positive_float,
        default=None,
        metavar="MS",
        help="p99 target for the recommendation",
    )
    p.add_argument("--timeout", type=positive_float, default=10.0, metavar="S", help="per request")
    p.add_argument(
        "--max-minutes",
        type=positive_float,
        default=30.0,
        metavar="M",
        help="refuse longer sweeps (30)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="for sweep.json and sweep.svg (./uwsgitune-sweep-TIME)",
    )


def check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise UserError(f"--url {url}: give an http://HOST:PORT/PATH URL", code=2)
    host = parts.hostname
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        print(f"uwsgitune: warning: {host} is not loopback; sweep staging only", file=sys.stderr)
    try:
        probe = LoadRun(url, duration=1.0)
        status = asyncio.run(one_request(probe.host, probe.port, probe.request, 5.0))
    except (OSError, asyncio.TimeoutError, ConnectionError) as exc:
        raise UserError(f"--url {url}: {exc or type(exc).__name__}; is uWSGI serving it?") from None
    if status >= 400:
        print(f"uwsgitune: warning: {url} answers {status}; errors will count", file=sys.stderr)


def _prepare(args: argparse.Namespace) -> tuple[SweepConfig, LiveCount]:
    rng = plan.parse_workers(args.workers)  # PlanError: exit 2
    watch = InstanceWatch(addresses([args.stats])[0], interval=0.25, timeout=2.0)
    frame = watch.step()
    problem = plan.check_instance(frame, rng.top)
    if problem:
        raise UserError(problem)
    fifo = MasterFifo(args.fifo, frame.master_pid)
    try:
        fifo.check()
    except FifoError as exc:
        # A FIFO the master does not hold fails the run (exit 1); `tune`'s bad path is input (2).
        exc.code = 1
        raise
    check_url(args.url)
    clients = None if args.rate else (args.concurrency or max(4, 2 * rng.top))
    if clients is not None and clients < rng.top:
        print(
            f"uwsgitune: warning: {clients} clients cannot keep {rng.top} workers busy; "
            f"use --concurrency {2 * rng.top}",
            file=sys.stderr,
        )
    cfg = SweepConfig(
        load=LoadSpec(args.url, clients=clients, rate=args.rate, timeout=args.timeout),
        rng=rng,
        steps=plan.choose_steps(rng),
        step_seconds=args.step_seconds,
        warmup=args.warmup,
        repeat=args.repeat,
        criteria=Criteria(within_pct=args.within, p99_ms=args.p99_ms),
    )
    return cfg, LiveCount(watch, fifo)


def _announce(cfg: SweepConfig, args: argparse.Namespace) -> None:
    est = plan.estimate_seconds(
        len(cfg.steps), cfg.repeat, cfg.step_seconds, cfg.warmup, refinable=cfg.rng.contiguous
    )
    if est > args.max_minutes * 60:
        raise UserError(
            f"the sweep would take about {est / 60:.0f} min, over --max-minutes "
            f"{args.max_minutes:g}: lower --repeat/--step-seconds or raise --max-minutes",
            code=2,
        )
    load = f"{cfg.load.clients} clients" if cfg.load.clients else f"{cfg.load.rate:g} req/s"
    print(
        f"sweep: workers {', '.join(map(str, cfg.steps))} x {cfg.repeat} pass(es), "
        f"{cfg.warmup:g}s warm-up + {cfg.step_seconds:g}s per step, load {load} on "
        f"{cfg.load.url}; estimate {est:.0f}s (Ctrl-C restores the worker count)",
        flush=True,
    )


def _write(out_dir: Path, doc: dict[str, Any], svg: str) -> None:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "sweep.json").write_text(json.dumps(doc, indent=2) + "\n")
        (out_dir / "sweep.svg").write_text(svg)
    except OSError as exc:
        raise UserError(f"--out {out_dir}: {exc.strerror}; pick a writable directory") from None
    print(f"wrote {out_dir / 'sweep.json'} and {out_dir / 'sweep.svg'}")


def _meta(cfg: SweepConfig, out: SweepOutcome, args: argparse.Namespace) -> dict[str, Any]:
    return {
        "url": cfg.load.url,
        "stats": args.stats,
        "fifo": args.fifo,
        "clients": cfg.load.clients,
        "rate": cfg.load.rate,
        "step_seconds": cfg.step_seconds,
        "warmup": cfg.warmup,
        "repeat": cfg.repeat,
        "effective_cpus": out.effective_cpus,
        "original_live": out.original_live,
        "final_live": out.final_live,
        "restored": out.restored,
        "interrupted": out.interrupted,
        "error": out.error,
    }


def _finish(cfg: SweepConfig, out: SweepOutcome, args: argparse.Namespace) -> int:
    a = report.analyse(
        out.steps, cfg.criteria, out.effective_cpus, clients=cfg.load.clients, rate=cfg.load.rate
    )
    print(
        "\n".join(["", *report.table(a.points, a.recommendation.workers), "", *report.summary(a)])
    )
    if a.recommendation.best_throughput > GENERATOR_CEILING:
        print(
            f"warning: {a.recommendation.best_throughput:.0f} req/s is near this load "
            "generator's ceiling (a few thousand req/s): the client, not uWSGI, may be the limit"
        )
    if out.drift:
        print(
            f"warning: the live count moved during {len(out.drift)} step(s) (target, seen): "
            f"{out.drift}; is cheaper-algo = manual?"
        )
    title = f"uwsgitune sweep: {cfg.load.url}"
    svg = render_svg(
        a.points,
        title=title,
        recommended=a.recommendation.workers,
        effective_cpus=out.effective_cpus,
    )
    out_dir = args.out or Path(f"uwsgitune-sweep-{time.strftime('%Y%m%d-%H%M%S')}")
    _write(out_dir, report.document(a, out.steps, _meta(cfg, out, args)), svg)
    if out.interrupted:
        return 130
    if out.error:
        print(f"uwsgitune: {out.error}", file=sys.stderr)
    return 1 if out.error or not out.restored else 0


def run(args: argparse.Namespace) -> int:
    cfg, live = _prepare(args)
    _announce(cfg, args)
    out = Sweep(cfg, live, log=lambda line: print(line, flush=True)).run()
    return _finish(cfg, out, args)
