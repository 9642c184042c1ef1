"""Benchmark the tuner against static counts and uWSGI's cheaper algorithms, under
bench/PROTOCOL.md (version `tuner_protocol.VERSION`).

For each scenario (a bounded, non-keepalive load on a real uWSGI, in phases) and each setup:
- the static grid (`static-N`: `processes = N`), whose best is the reference;
- each of uWSGI's cheaper algorithms (`spare`, `backlog`, `busyness`) at its defaults and at
  the settings uWSGI's docs suggest (`-docs`), with `processes 64`, `cheaper 2`, started
  from 64 live workers and from 2 (`spare-64`, `spare-2`, ...);
- uwsgitune in apply mode (manual cheaper algorithm, its override included last) started
  from 64 live workers (`tuner-64`) and from 2 (`tuner-2`).

A scenario's rounds (3 or more) run in one sitting, in turn (`tuner_protocol.round_order`).
Every run is one line APPENDED to bench/results/tuner64.jsonl, stamped with the protocol
version, the git commit and the decision path's code hash; nothing earlier is rewritten.
bench/tuner_report.py renders the file (and refuses to mix versions or hashes).

    .venv/bin/python bench/tuner_bench.py --scenarios cpu[,io,...] [--rounds 3]

A protocol run refuses to start with uncommitted changes in uwsgitune/ or in the bench's
own files, or beside runs of another version or hash in the same file.

Smoke only, NOT protocol (plumbing checks; runs stamped `smoke`, written elsewhere by
default, and refused by the report beside protocol runs):

    .venv/bin/python bench/tuner_bench.py --smoke 0.15 --scenarios cpu \
        --setups static-2,tuner-64,spare-2 --rounds 1

Other scenarios join through bench/thirdparty_scenarios.py: a module with `SCENARIOS`, a
dict of name to `tuner_protocol.Scenario`, loaded when the file is there.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import itertools
import json
import math
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from tuner_protocol import (  # noqa: E402
    ALGOS,
    BENCH_CODE,
    FLOOR,
    HIST_BASE,
    MIN_ROUNDS,
    OVERHEAD_S,
    PACKAGE,
    SCENARIO_NAMES,
    SCENARIOS,
    SITTING_MAX_S,
    TOP,
    VERSION,
    Phase,
    ProtocolError,
    Scenario,
    algo_of,
    check_combinable,
    code_hash,
    round_order,
    scaled,
    setups_of,
    sitting_seconds,
    start_of,
)

from tests.uwsgi_harness import url, uwsgi_instance  # noqa: E402
from uwsgitune.actuate.audit import AuditLog  # noqa: E402
from uwsgitune.actuate.service import TunerSetup, tuner_factory  # noqa: E402
from uwsgitune.core.address import parse_address  # noqa: E402
from uwsgitune.core.frame import Frame  # noqa: E402
from uwsgitune.launch import IniValue, UwsgiProcess  # noqa: E402
from uwsgitune.loadgen import LoadResult, LoadRun  # noqa: E402
from uwsgitune.pipeline import InstanceDriver, InstanceState, live_driver  # noqa: E402
from uwsgitune.tuner import TunerSettings  # noqa: E402

RESULTS = ROOT / "bench" / "results"
APP = ROOT / "bench" / "scenario_app.py"
RAW = RESULTS / "tuner64.jsonl"
SMOKE_RAW = Path("/tmp/uwt-tuner-smoke/tuner64.jsonl")
LOADGEN_NICE = -10  # this thread only (Linux); needs root, as the bench runs here
# What must be committed before a protocol run: the code the hash covers and the bench.
CLEAN_PATHS = (*PACKAGE, *BENCH_CODE)
Headers = tuple[tuple[str, str], ...]


def _plugins() -> dict[str, Scenario]:
    """Scenarios from bench/thirdparty_scenarios.py (`SCENARIOS`), when that file exists."""
    if not (ROOT / "bench" / "thirdparty_scenarios.py").exists():
        return {}
    mod = importlib.import_module("thirdparty_scenarios")
    return dict(getattr(mod, "SCENARIOS", {}))


@dataclass
class Run:
    setup: str
    seconds: float
    rps: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    failed: int = 0
    failures: dict[str, int] = field(default_factory=dict)  # kind: count
    failed_s: list[float] = field(default_factory=list)  # seconds into the run of each
    ok: int = 0
    phase_rps: list[float] = field(default_factory=list)
    per_second: list[int] = field(default_factory=list)  # requests finished in each second
    live: list[tuple[float, int]] = field(default_factory=list)  # from the load's start
    worker_seconds: float = 0.0  # the whole run's
    reloads: int = 0
    fifo_moves: int = 0
    changes: int = 0
    decisions: list[tuple[float, str]] = field(default_factory=list)  # the tuner's notes
    wall: tuple[float, float] = (0.0, 0.0)  # epoch seconds the run started and ended
    loadavg: tuple[tuple[float, ...], tuple[float, ...]] = ((), ())  # at its start and end
    # each second's latencies as {bucket: count}, bucket = round(log(ms) / log(HIST_BASE))
    latency_hist: list[dict[int, int]] = field(default_factory=list)
    # answers by HTTP status; the load counts a 3xx as served, and a third-party app that
    # lost its session answers fast 302s: the report counts anything but 200 as failed
    statuses: dict[int, int] = field(default_factory=dict)


async def _load(
    u: Callable[[str], str], phases: tuple[Phase, ...], headers: Headers = ()
) -> list[LoadResult]:
    out = []
    for ph in phases:
        run = LoadRun(
            u(ph.path), duration=ph.seconds, max_requests=400_000, timeout=30, headers=headers
        )
        out.append(
            await (run.closed_loop(ph.clients) if ph.clients else run.open_loop(ph.rate or 1))
        )
    return out


def _options(
    setup: str, override: Path, sc: Scenario, extra: dict[str, IniValue]
) -> dict[str, IniValue | None]:
    """The instance's uWSGI options for a setup (None: an option the harness leaves out)."""
    base: dict[str, IniValue | None] = {"listen": 128, "wsgi-file": sc.app or str(APP)}
    base.update(sc.options)
    base.update(extra)
    if sc.threads > 1:
        base["threads"] = sc.threads
    start = start_of(setup)
    if start is None:
        return {**base, "processes": int(setup.split("-")[1])}
    pool: dict[str, IniValue | None] = {**base, "processes": TOP, "cheaper": FLOOR}
    pool["cheaper-initial"] = start
    if setup.startswith("tuner-"):
        return {**pool, "cheaper-algo": "manual", "ini": str(override)}
    return {**pool, **ALGOS[algo_of(setup)]}


def _driver(
    proc: UwsgiProcess, setup: str, override: Path, top: int, audit: AuditLog
) -> InstanceDriver:
    """The instance's driver, one poll a second with the rules; for a tuner setup, with the
    tuner of `uwsgitune tune --mode apply`."""
    address = parse_address(proc.stats)
    if not setup.startswith("tuner-"):
        return live_driver(address, interval=1.0)
    settings = TunerSettings(min_workers=FLOOR, max_workers=top)
    tuning = TunerSetup(
        stats=address,
        fifo=Path(proc.fifo),
        settings=lambda _slots: settings,
        mode="apply",
        override=override,
        ini=proc.ini,
        audit=audit,
    )
    return live_driver(address, interval=1.0, tuner=tuner_factory(tuning), mode="apply")


def _observe(driver: InstanceDriver, run: Run, t0: float) -> None:
    """Until the driver is stopped: the live count of every poll (those an apply's wait
    makes too) and what the tuner said, once a step."""
    seen: list[object] = [None, None]  # the last frame, the last step's result

    def record(state: InstanceState) -> None:
        frame: Frame | None = state.frame
        if frame is not None and frame is not seen[0] and frame.ok:
            run.live.append((round(time.monotonic() - t0, 1), frame.live))
        seen[0] = frame
        result = state.tuning
        if result is not None and result is not seen[1]:
            seen[1] = result
            at = round(time.monotonic() - t0, 1)
            run.decisions += [(at, n.text) for n in result.notes if n.fresh]

    driver.subscribe(record)
    try:
        driver.run()
    finally:
        driver.close()  # the apply lock released, in this thread


def _merge(results: list[LoadResult]) -> LoadResult:
    total = LoadResult(started=results[0].started, ended=results[-1].ended)
    for r in results:
        total.ok += r.ok
        total.errors += r.errors
        total.failed_at += r.failed_at
        for kind, n in r.error_kinds.items():
            total.error_kinds[kind] = total.error_kinds.get(kind, 0) + n
        total.latencies += r.latencies
        total.finished += r.finished
    return total


def _pct(lat: list[float], q: float) -> float:
    if not lat:
        return 0.0
    s = sorted(lat)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))] * 1000


def _measure(run: Run, results: list[LoadResult], t0: float) -> None:
    """The run's figures from the load's results; the live polls moved onto the load's
    clock (second 0: its start), as the per-second counts and histograms are."""
    total = _merge(results)
    run.rps, run.ok, run.failed = total.throughput, total.ok, total.errors
    for r in results:
        for status, n in r.statuses.items():
            run.statuses[status] = run.statuses.get(status, 0) + n
    run.failures = dict(total.error_kinds)
    run.failed_s = [round(t - total.started, 1) for t in total.failed_at]
    run.p50_ms, run.p99_ms = _pct(total.latencies, 0.5), _pct(total.latencies, 0.99)
    run.phase_rps = [r.throughput for r in results]
    span = int(total.ended - total.started) + 1
    run.per_second = [0] * span
    run.latency_hist = [{} for _ in range(span)]
    for lat, end in zip(total.latencies, total.finished, strict=True):
        second = min(int(end - total.started), span - 1)
        run.per_second[second] += 1
        bucket = round(math.log(max(lat * 1000, 0.01)) / math.log(HIST_BASE))
        run.latency_hist[second][bucket] = run.latency_hist[second].get(bucket, 0) + 1
    shift = total.started - t0
    run.live = [(round(t - shift, 1) + 0.0, n) for t, n in run.live]
    run.decisions = [(round(t - shift, 1) + 0.0, text) for t, text in run.decisions]
    pts = [(t, n) for t, n in run.live if 0 <= t <= run.seconds]
    run.worker_seconds = sum(a[1] * (b[0] - a[0]) for a, b in itertools.pairwise(pts))


@dataclass(frozen=True)
class Service:
    """What a scenario's service gives its runs: the uWSGI options its app needs and the
    headers every request carries (a session cookie: sent, never printed or recorded)."""

    options: dict[str, IniValue]
    headers: Headers = ()


@contextlib.contextmanager
def _service(sc: Scenario) -> Iterator[Service]:
    """The scenario's service (a database server, say), entered once a sitting. Its
    context manager yields the options, or an object with `uwsgi` (the options) and
    `headers`. None: nothing to start."""
    if sc.service is None:
        yield Service({})
        return
    module, func = sc.service.split(":")
    with getattr(importlib.import_module(module), func)() as got:
        if hasattr(got, "uwsgi"):
            yield Service(dict(got.uwsgi), tuple(getattr(got, "headers", ())))
        else:
            yield Service(dict(got))


def run_setup(setup: str, sc: Scenario, service: Service) -> Run:
    run = Run(setup, sc.seconds)
    began, load0 = time.time(), os.getloadavg()
    override = Path(f"/tmp/uwt-bench-{setup}.ini")
    override.write_text("[uwsgi]\n")
    audit = AuditLog(Path(f"/tmp/uwt-bench-{setup}.audit.jsonl"))
    audit.path.unlink(missing_ok=True)
    options: dict[str, Any] = _options(setup, override, sc, service.options)  # None: left out
    with uwsgi_instance(**options) as proc:
        driver, t0 = _driver(proc, setup, override, TOP, audit), time.monotonic()
        th = threading.Thread(target=_observe, args=(driver, run, t0))
        th.start()
        # The generator shares the 2 CPUs with uWSGI: run it ahead of the workers, so that 64
        # runnable workers starve the app, not the load that measures it.
        os.setpriority(os.PRIO_PROCESS, 0, LOADGEN_NICE)
        try:
            results = asyncio.run(_load(lambda p: url(proc, p), sc.phases, service.headers))
        finally:
            os.setpriority(os.PRIO_PROCESS, 0, 0)
            driver.stop(interrupt=False)  # an apply in flight runs to its end
            th.join()
    _measure(run, results, t0)
    changes = [r for r in audit.records() if r.event == "change"]
    run.changes = len(changes)
    run.reloads = sum(1 for r in changes if r.via == "reload")
    run.fifo_moves = sum(1 for r in changes if r.via == "fifo")
    if not setup.startswith("tuner-"):  # the algorithms move through the master itself
        run.fifo_moves = sum(
            1 for a, b in zip(run.live, run.live[1:], strict=False) if a[1] != b[1]
        )
    override.unlink(missing_ok=True)
    run.wall = (began, time.time())
    run.loadavg = (load0, os.getloadavg())
    return run


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


def stamp(smoke: float | None) -> dict[str, Any]:
    """What every run of this sitting carries: the protocol version, the commit, the
    decision path's hash, whether the tree was clean, and the machine."""
    dirty = _git("status", "--porcelain", "--", *CLEAN_PATHS)
    autogroup = Path("/proc/sys/kernel/sched_autogroup_enabled")
    return {
        "protocol": VERSION,
        "smoke": smoke is not None,
        "smoke_factor": smoke,
        "commit": _git("rev-parse", "HEAD"),
        "dirty": bool(dirty),
        "code_hash": code_hash(ROOT),
        "package_hash": code_hash(ROOT, PACKAGE),
        "bench_hash": code_hash(ROOT, BENCH_CODE),
        "host": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "sched_autogroup": autogroup.read_text().strip() if autogroup.exists() else None,
        },
    }


def _read(raw: Path) -> list[dict[str, Any]]:
    if not raw.exists():
        return []
    return [json.loads(line) for line in raw.read_text().splitlines() if line.strip()]


def _smoke_factor(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a factor, e.g. --smoke 0.15") from None
    if not 0 < x < 1:
        raise argparse.ArgumentTypeError(f"{x}: a smoke run is shorter, 0 < factor < 1")
    return x


def _service_missing(sc: Scenario) -> str | None:
    """Why the scenario's service cannot start here (its module's `missing()`), or None."""
    if sc.service is None:
        return None
    check = getattr(importlib.import_module(sc.service.split(":")[0]), "missing", None)
    return None if check is None else check()


def _plan(args: argparse.Namespace) -> dict[str, Scenario]:
    """The scenarios to run, smoke-scaled if asked (ProtocolError: an unknown name)."""
    known = {**SCENARIOS, **_plugins()}
    plan = {}
    for name in (n for n in args.scenarios.split(",") if n):
        if name not in known and name in SCENARIO_NAMES:
            raise ProtocolError(
                f"{name!r} is PROTOCOL.md's placeholder for a third-party app: "
                "bench/thirdparty_scenarios.py adds it, and is not here yet"
            )
        if name not in known:
            raise ProtocolError(f"no scenario {name!r}: one of {', '.join(known)}")
        why = _service_missing(known[name])
        if why is not None:
            raise ProtocolError(f"{name} cannot run here: {why}")
        plan[name] = known[name] if args.smoke is None else scaled(known[name], args.smoke)
    return plan


def _preflight(args: argparse.Namespace, plan: dict[str, Scenario], base: dict[str, Any]) -> None:
    """Refuse (ProtocolError) what the protocol does not allow, before anything runs: a
    subset of setups, too few rounds or uncommitted code in a protocol run, and runs the
    report could not combine with those already in the file."""
    if args.rounds < 1:
        raise ProtocolError(f"--rounds {args.rounds}: 1 or more (3 or more for the protocol)")
    if args.smoke is None:
        if args.setups:
            raise ProtocolError("--setups is for smoke runs: a protocol round runs every setup")
        if args.rounds < MIN_ROUNDS:
            raise ProtocolError(f"--rounds {args.rounds}: the protocol runs {MIN_ROUNDS} or more")
        if base["dirty"]:
            raise ProtocolError(
                "uncommitted changes in " + ", ".join(CLEAN_PATHS) + ": commit first, then run"
            )
        total = sum(sitting_seconds(sc, args.rounds) for sc in plan.values())
        if total >= SITTING_MAX_S:
            raise ProtocolError(
                f"{', '.join(plan)}: {total / 3600:.1f} h, and a sitting is under "
                f"{SITTING_MAX_S / 3600:g} h: run them in separate sittings"
            )
    probes = [{**base, "scenario": n, "scenario_def": sc.definition()} for n, sc in plan.items()]
    check_combinable([*_read(args.raw), *probes])


def main() -> None:
    # SIGTERM (and a closed terminal) stop the bench as Ctrl-C does: the uWSGI it started is
    # stopped on the way out, not left running without its parent.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGHUP, signal.default_int_handler)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", required=True, help=f"of {', '.join(SCENARIOS)}")
    ap.add_argument("--rounds", type=int, default=MIN_ROUNDS)
    ap.add_argument("--raw", type=Path, default=None, help=f"default {RAW} ({SMOKE_RAW} smoke)")
    ap.add_argument(
        "--smoke",
        type=_smoke_factor,
        default=None,
        metavar="FACTOR",
        help="NOT PROTOCOL: every length times FACTOR, any rounds and setups (plumbing only)",
    )
    ap.add_argument("--setups", default="", help="smoke only: a comma-separated subset")
    args = ap.parse_args()
    args.raw = args.raw or (SMOKE_RAW if args.smoke is not None else RAW)
    base = stamp(args.smoke)
    try:
        plan = _plan(args)
        _preflight(args, plan, base)
    except ProtocolError as e:
        sys.exit(f"tuner_bench: {e}")
    args.raw.parent.mkdir(parents=True, exist_ok=True)
    counts = {
        n: len(args.setups.split(",")) if args.setups else len(setups_of(sc))
        for n, sc in plan.items()
    }
    seconds = sum(counts[n] * args.rounds * (sc.seconds + OVERHEAD_S) for n, sc in plan.items())
    print(
        f"protocol v{VERSION}{' SMOKE (not protocol)' if args.smoke else ''}, commit "
        f"{base['commit'][:10]}, code hash {base['code_hash'][:12]}: "
        f"{sum(counts.values()) * args.rounds} runs, about {seconds / 60:.0f} min",
        flush=True,
    )
    for name, sc in plan.items():
        setups = setups_of(sc)
        if args.setups:
            setups = [s for s in args.setups.split(",") if s]
        sitting = f"{name}@{datetime.now(timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')}"
        with _service(sc) as service:
            for k, order in enumerate(round_order(setups, args.rounds)):
                for pos, setup in enumerate(order):
                    r = run_setup(setup, sc, service)
                    record = {
                        **base,
                        "scenario": name,
                        "scenario_def": sc.definition(),
                        "sitting": sitting,
                        "round": k + 1,
                        "rounds": args.rounds,
                        "position": pos,
                        "setups": setups,
                        "start": start_of(setup),
                        **asdict(r),
                    }
                    with args.raw.open("a") as f:  # appended, one line a run
                        f.write(json.dumps(record) + "\n")
                        f.flush()
                        os.fsync(f.fileno())
                    print(
                        f"{name:11} r{k + 1} {setup:16} rps {r.rps:7.1f} p99 {r.p99_ms:7.1f}ms "
                        f"failed {r.failed} reloads {r.reloads} moves {r.fifo_moves} "
                        f"live {r.live[-1][1] if r.live else '?'} load {r.loadavg[1][0]:.2f}",
                        flush=True,
                    )
    print(f"runs appended to {args.raw}; render them with bench/tuner_report.py {args.raw}")


if __name__ == "__main__":
    main()
