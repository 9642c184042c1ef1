"""One worker slot's view at one poll: its counters, its rates since the last poll, and the
requests its cores are serving."""

from __future__ import annotations

from uwsgitune.core.frame import RequestView, WorkerView
from uwsgitune.core.model import Core, Worker
from uwsgitune.core.redact import printable
from uwsgitune.core.route import route
from uwsgitune.core.samples import BORN, HostSample, ProcSample

Procs = dict[int, ProcSample]


def procs_by_pid(host: HostSample | None) -> Procs:
    return host.by_pid if host else {}


def baseline(pid: int, then: Procs, new: bool) -> ProcSample | None:
    """What a process had used at the last poll, to rate its CPU against: `BORN` for one new
    since (all its CPU falls in the interval), else its sample then (None: not read then,
    so not rated). The instance's CPU and each slot's CPU % both count from here."""
    return BORN if new else then.get(pid)


def request_views(cores: tuple[Core, ...], now: float) -> tuple[RequestView, ...]:
    out: list[RequestView] = []
    for core in cores:
        if not core.in_request:
            continue
        method = path = ""
        for var in core.vars:
            if var.startswith("REQUEST_METHOD="):
                method = var[15:]
            elif var.startswith("PATH_INFO="):
                path = var[10:]
            else:
                continue
            if method and path:
                break
        start = core.req_info.request_start
        age = max(0.0, now - start) if start > 0 else None
        view = RequestView(core.id, printable(method), printable(route(path)), age)
        out.append(view)
    return tuple(out)


def _oldest(in_flight: tuple[RequestView, ...]) -> float | None:
    ages = [r.age for r in in_flight if r.age is not None] if in_flight else None
    return max(ages) if ages else None


Rates = tuple[float | None, float | None, float | None, float | None, float | None]
NO_RATES: Rates = (None, None, None, None, None)


def _rates(
    cur: Worker,
    prev: Worker,
    reset: bool,
    dt: float,
    procs: tuple[ProcSample | None, ProcSample | None],
    threads: int,
) -> Rates:
    """(rps, eps, busy %, CPU %, mean response ms) since `prev`, `dt` seconds ago; a reset
    slot counts its new value as its delta (a lower bound). Flat: no helper calls or
    generators (per worker, per poll: the hot path at 1,000 workers)."""
    d_req = cur.requests - (0 if reset else prev.requests)
    d_exc = cur.exceptions - (0 if reset else prev.exceptions)
    d_rt = cur.running_time - (0 if reset else prev.running_time)
    busy = (d_rt / 1e6 if d_rt > 0 else 0.0) / dt / (threads if threads > 1 else 1) * 100
    cpu_pct = None
    proc, prev_proc = procs
    if proc and prev_proc:
        used = proc.cpu_seconds - prev_proc.cpu_seconds
        cpu_pct = (used if used > 0 else 0.0) / dt * 100
    return (
        (d_req if d_req > 0 else 0.0) / dt,
        (d_exc if d_exc > 0 else 0.0) / dt,
        busy if busy < 100.0 else 100.0,
        cpu_pct,
        (d_rt / d_req / 1000) if d_req > 0 else None,
    )


def _cores(cur: Worker, now: float) -> tuple[int, tuple[int, ...], tuple[RequestView, ...]]:
    """Static requests of all cores, each core's requests, the requests in service."""
    static, per, serving = 0, [], False
    for c in cur.cores:
        static += c.static_requests
        per.append(c.requests)
        serving = serving or bool(c.in_request)
    return static, tuple(per), request_views(cur.cores, now) if serving else ()


def rss_from_proc(w: Worker) -> bool:
    """Whether a frame reads this worker's RSS from /proc: a live worker whose stats carry
    none (no --memory-report, or no request served yet). The host sampler reads statm for
    these workers only."""
    return not w.rss and w.status != "cheap" and w.pid > 0


def worker_view(
    slot: int,
    cur: Worker,
    prev: Worker | None,
    reset: bool,
    dt: float,
    procs: tuple[ProcSample | None, ProcSample | None],
    now: float,
    threads: int,
) -> WorkerView:
    """One slot; rates since `prev` (None: unrated). `procs`: its process now and then.
    Its RSS: the stats' (--memory-report), else a live worker's from /proc, else None."""
    rates = _rates(cur, prev, reset, dt, procs, threads) if prev and dt > 0 else NO_RATES
    static, per_core, in_flight = _cores(cur, now) if cur.cores else (0, (), ())
    status = cur.status if cur.status.isprintable() else printable(cur.status)
    proc = procs[0]
    rss = (proc.rss if proc else None) if rss_from_proc(cur) else (cur.rss or None)
    return WorkerView(  # positional, in the struct's order: a third faster than keywords
        slot,
        cur.id,
        cur.pid,
        status,
        cur.requests,
        cur.exceptions,
        cur.signals,
        cur.tx,
        cur.avg_rt,
        cur.running_time,
        rss,
        cur.vsz or None,
        cur.respawn_count,
        cur.harakiri_count,
        cur.last_spawn,
        *rates,
        _oldest(in_flight) if in_flight else None,
        in_flight,
        per_core,
        static,
        bool(cur.accepting),
    )
