"""`uwsgitune sweep`: find the best worker count of a staging instance by experiment.

Steps the live worker count through the master FIFO (cheaper-algo = manual), drives a bounded
load (wrk or the built-in generator), measures each step, and restores the original count at
the end and on Ctrl-C. With `--threads` it sweeps a processes x threads grid, changing threads
through the override ini and a validated reload (`--allow-reload`), and restores them too.
Writes a table to stdout and sweep.json + sweep.svg to --out, a new directory or an empty
one only we write (`uwsgitune.sweep.outdir`).

Like every actor, a sweep holds the instance's apply lock (`uwsgitune.actuate.lock`, role
"uwsgitune sweep") from its checks until the instance is restored: it refuses to start
beside a daemon, `tune --mode apply` or the TUI that applies, and they see it as the holder.
It also refuses to act, as the tuner does, when the stats are not proved to be the master's
(`uwsgitune.actuate.peer`): checked first, then before every write. Taking the lock, it first
resumes a pool a killed holder left paused (cli/sweep_hold.py).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from uwsgitune.actuate.fifo import FifoError, MasterFifo
from uwsgitune.actuate.lock import ApplyLock
from uwsgitune.actuate.reload import Limits, Reloader, statuses_at
from uwsgitune.cli import sweep_hold
from uwsgitune.cli.common import addresses
from uwsgitune.cli.progress import timed
from uwsgitune.cli.sweep_args import add_arguments, check_target, check_url
from uwsgitune.core.address import StatsAddress
from uwsgitune.core.frame import Frame
from uwsgitune.errors import UserError
from uwsgitune.pipeline import InstanceDriver, live_driver
from uwsgitune.sweep import grid, outdir, plan, report
from uwsgitune.sweep.analysis import Criteria
from uwsgitune.sweep.chart import render_svg
from uwsgitune.sweep.generator import Builtin, Generator, LoadSpec
from uwsgitune.sweep.gridchart import render_grid_svg
from uwsgitune.sweep.live import BoundFifo, LiveCount, Poll, driver_polls
from uwsgitune.sweep.runner import Sweep, SweepConfig, SweepOutcome
from uwsgitune.sweep.threadaxis import ThreadAxis, parse_threads
from uwsgitune.sweep.wrk import Wrk, find_wrk

RELOAD_SECONDS = 3.0  # per threads value: the reload and its verification, typically


def register(sub: Any) -> None:
    p = sub.add_parser(
        "sweep",
        help="find the best worker count (and threads) by experiment (staging instances)",
        description="Step the live worker count through the master FIFO (and, with --threads, "
        "threads per worker through a validated reload) under a bounded load; measure "
        "throughput, latency, errors, CPU and memory; recommend a configuration.",
    )
    add_arguments(p)
    p.set_defaults(func=run)


@dataclass(frozen=True)
class Target:
    """The instance swept: its driver (polling in its own thread), fresh polls of it, why a
    write is refused now (None: it is not), and its guarded FIFO."""

    address: StatsAddress
    driver: InstanceDriver
    poll: Poll
    refused: Callable[[], str | None]
    fifo: BoundFifo


def _instance(args: argparse.Namespace, top: int) -> tuple[Target, Frame]:
    """The instance, checked: sweepable to `top`, its stats served by its master's uid, its
    FIFO held by its master, not production. Its driver polls until the sweep ends."""
    address = addresses([args.stats])[0]
    # Polled only when asked (`driver_polls`), never on a schedule: a step's closing poll
    # then derives its rates from the step's opening one, so the server's figures cover the
    # client's window, and no poll competes with the load generator for this process.
    driver = live_driver(address, interval=math.inf, timeout=2.0, rules=False)
    driver.start(name="poll:sweep")
    try:
        return _checked(args, top, address, driver)
    except BaseException:
        driver.stop()
        raise


def _checked(
    args: argparse.Namespace, top: int, address: StatsAddress, driver: InstanceDriver
) -> tuple[Target, Frame]:
    poll = driver_polls(driver)
    frame = poll()
    problem = plan.check_instance(frame, top)
    if problem:
        raise UserError(problem)
    time.sleep(0.5)
    frame = poll()  # a second poll: the traffic it serves before we load it
    refused = sweep_hold.refusal(args, address, driver)
    why = refused()
    if why is not None:
        raise UserError(why)
    check_target(args.url, address, frame.rps, args.yes)
    fifo = BoundFifo(args.fifo, frame.master_pid, refusal=refused)
    try:
        fifo.check()
    except FifoError as exc:
        # A FIFO the master does not hold fails the run (exit 1); `tune`'s bad path is input (2).
        exc.code = 1
        raise
    return Target(address, driver, poll, refused, fifo), frame


def _axis(
    args: argparse.Namespace, target: Target, frame: Frame, lock: ApplyLock
) -> tuple[tuple[int, ...], ThreadAxis | None]:
    """The thread counts and the axis that reloads to them (none without --threads)."""
    if args.threads is None:
        return (), None
    values = parse_threads(args.threads)
    if not args.allow_reload:
        raise UserError(
            f"--threads {args.threads} reloads the instance once per value; "
            "pass --allow-reload to allow it",
            code=2,
        )
    if args.ini is None or args.override is None:
        raise UserError(
            "--threads needs --ini (the instance's ini) and --override (the override ini "
            "uwsgitune owns, included last by it); `uwsgitune doctor` checks the setup",
            code=2,
        )
    reloader = Reloader(
        MasterFifo(args.fifo),
        args.override,
        args.ini,
        target.poll,
        statuses=statuses_at(target.address),  # the statuses alone: see actuate/reload.py
        lock=lock,
    )
    limits = Limits(somaxconn=frame.somaxconn)
    axis = ThreadAxis(reloader, args.ini, limits, target.poll, refusal=target.refused)
    axis.check(frame, values)
    return values, axis


def _generator(args: argparse.Namespace, spec: LoadSpec, live: LiveCount) -> Generator:
    wrk = find_wrk()
    if args.loadgen == "wrk" and wrk is None:
        raise UserError("--loadgen wrk: wrk is not installed (apt-get install wrk)", code=2)
    if args.loadgen == "wrk" and spec.rate is not None:
        raise UserError("--loadgen wrk runs a closed loop; drop --rate or use builtin", code=2)
    if wrk is not None and args.loadgen != "builtin" and spec.rate is None:
        return Wrk(spec, live.stop, wrk, threads=2)
    return Builtin(spec, live.stop)


def _prepare(args: argparse.Namespace, lock: ApplyLock, target: Target, frame: Frame) -> Sweep:
    rng = plan.parse_workers(args.workers)
    sweep_hold.take(args, target.refused, target.poll, lock)  # before the threads' checks
    threads, axis = _axis(args, target, frame, lock)
    check_url(args.url)
    clients = (
        None if args.rate else (args.concurrency or max(4, 2 * rng.top * max(threads or (1,))))
    )
    if clients is not None and clients < rng.top:
        print(
            f"uwsgitune: warning: {clients} clients cannot keep {rng.top} workers busy; "
            f"use --concurrency {2 * rng.top}",
            file=sys.stderr,
        )
    spec = LoadSpec(
        args.url, clients=clients, rate=args.rate, timeout=args.timeout, keepalive=args.keepalive
    )
    cfg = SweepConfig(
        load=spec,
        rng=rng,
        steps=plan.choose_steps(rng),
        step_seconds=args.step_seconds,
        warmup=args.warmup,
        repeat=args.repeat,
        criteria=Criteria(within_pct=args.within, p99_ms=args.p99_ms),
        threads=threads,
    )
    live = LiveCount(target.poll, target.fifo)
    gen = _generator(args, spec, live)
    log = lambda line: print(line, flush=True)  # noqa: E731
    return Sweep(cfg, live, gen, axis=axis, log=log)


def _announce(cfg: SweepConfig, sweep: Sweep, args: argparse.Namespace) -> float:
    grid_values = len(cfg.threads) or 1
    est = grid_values * plan.estimate_seconds(
        len(cfg.steps),
        cfg.repeat,
        cfg.step_seconds,
        cfg.warmup,
        refinable=cfg.rng.contiguous and not cfg.threads,
    ) + (grid_values + 1) * RELOAD_SECONDS * bool(cfg.threads)
    if est > args.max_minutes * 60:
        raise UserError(
            f"the sweep would take about {est / 60:.0f} min, over --max-minutes "
            f"{args.max_minutes:g}: lower --repeat/--step-seconds or raise --max-minutes",
            code=2,
        )
    load = f"{cfg.load.clients} clients" if cfg.load.clients else f"{cfg.load.rate:g} req/s"
    load += ", keepalive" if cfg.load.keepalive else ""
    threads = f" x threads {', '.join(map(str, cfg.threads))}" if cfg.threads else ""
    print(
        f"sweep: workers {', '.join(map(str, cfg.steps))}{threads} x {cfg.repeat} pass(es), "
        f"{cfg.warmup:g}s warm-up + {cfg.step_seconds:g}s per step, load {load} "
        f"({sweep.gen.name}) on {cfg.load.url}; estimate {est:.0f}s "
        "(Ctrl-C restores the instance)",
        flush=True,
    )
    return est


def _write(out: Path | None, doc: dict[str, Any], svg: str) -> None:
    """sweep.json and sweep.svg, new files in a directory only we write (sweep/outdir.py)."""
    try:
        with outdir.open_out(out) as d:
            outdir.write(d, "sweep.json", json.dumps(doc, indent=2) + "\n")
            outdir.write(d, "sweep.svg", svg)
    except OSError as exc:
        where = exc.filename or out or Path.cwd()
        raise UserError(f"--out {where}: {exc.strerror}; pick a writable directory") from None
    print(f"wrote {d.path / 'sweep.json'} and {d.path / 'sweep.svg'}")


def _meta(cfg: SweepConfig, out: SweepOutcome, args: argparse.Namespace) -> dict[str, Any]:
    return {
        "url": cfg.load.url,
        "stats": args.stats,
        "fifo": args.fifo,
        "loadgen": args.loadgen_name,
        "clients": cfg.load.clients,
        "rate": cfg.load.rate,
        "keepalive": cfg.load.keepalive,
        "step_seconds": cfg.step_seconds,
        "warmup": cfg.warmup,
        "repeat": cfg.repeat,
        "threads": list(cfg.threads),
        "effective_cpus": out.effective_cpus,
        "original_live": out.original_live,
        "final_live": out.final_live,
        "original_threads": out.original_threads,
        "final_threads": out.final_threads,
        "restored": out.restored,
        "interrupted": out.interrupted,
        "error": out.error,
    }


def _warnings(out: SweepOutcome) -> None:
    bound = sum(s.generator_bound for s in out.steps)
    if bound:
        print(
            f"warning: the load generator was the bottleneck in {bound} step(s) (flagged; "
            "never taken as the app's throughput): use --loadgen wrk, or fewer clients"
        )
    if out.drift:
        print(
            f"warning: the live count moved during {len(out.drift)} step(s) (target, seen): "
            f"{out.drift}; is cheaper-algo = manual?"
        )


def _results(
    cfg: SweepConfig, out: SweepOutcome, meta: dict[str, Any]
) -> tuple[dict[str, Any], str]:
    """Print the table and the verdict; the JSON document and the chart."""
    title = f"uwsgitune sweep: {cfg.load.url}"
    if cfg.threads:
        g = grid.analyse_grid(out.steps, cfg.criteria, out.effective_cpus)
        print("\n".join(["", *report.grid_table(g), "", *report.grid_summary(g)]))
        svg = render_grid_svg(g, title=title)
        return report.grid_document(g, out.steps, meta), svg
    a = report.analyse(
        out.steps, cfg.criteria, out.effective_cpus, clients=cfg.load.clients, rate=cfg.load.rate
    )
    print(
        "\n".join(["", *report.table(a.points, a.recommendation.workers), "", *report.summary(a)])
    )
    rec = a.recommendation.workers
    svg = render_svg(a.points, title=title, recommended=rec, effective_cpus=out.effective_cpus)
    return report.document(a, out.steps, meta), svg


def _finish(cfg: SweepConfig, out: SweepOutcome, args: argparse.Namespace) -> int:
    doc, svg = _results(cfg, out, _meta(cfg, out, args))
    _warnings(out)
    _write(args.out, doc, svg)
    if out.interrupted:
        return 130
    if out.failure is not None:
        raise out.failure  # one line, printed by the CLI's one handler
    return 0 if out.restored else 1


def run(args: argparse.Namespace) -> int:
    outdir.check(args.out)  # a --out it could not write into: said before anything moves
    rng = plan.parse_workers(args.workers)  # PlanError: exit 2
    if args.threads is not None:
        parse_threads(args.threads)  # a bad list fails before the instance is touched
    lock = ApplyLock(Path(args.fifo), "uwsgitune sweep")
    target, frame = _instance(args, rng.top)
    try:
        sweep = _prepare(args, lock, target, frame)
        args.loadgen_name = sweep.gen.name
        est = _announce(sweep.cfg, sweep, args)
        with timed("sweep", est):  # on a terminal: a bar of the estimate, the steps above it
            out = sweep.run()
        lock.release()  # the instance is restored: another actor may go on
        return _finish(sweep.cfg, out, args)
    finally:
        lock.release()
        target.driver.stop()
