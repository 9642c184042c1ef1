"""One worker slot's view at one poll: its counters, its rates since the last poll, and the
requests its cores are serving."""

from __future__ import annotations

from typing import NamedTuple

from uwsgitune.core.frame import RequestView, WorkerView
from uwsgitune.core.model import Core, Worker
from uwsgitune.core.redact import printable
from uwsgitune.core.reload import slot_reset
from uwsgitune.core.route import route
from uwsgitune.core.samples import HostSample, ProcSample

Procs = dict[int, ProcSample]


def procs_by_pid(host: HostSample | None) -> Procs:
    return {p.pid: p for p in host.procs} if host else {}


def rate(delta: float, dt: float) -> float:
    return max(delta, 0.0) / dt if dt > 0 else 0.0


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


class WorkerRates(NamedTuple):
    """A slot's rates between two polls; all None without a previous poll."""

    rps: float | None = None
    eps: float | None = None
    busy_pct: float | None = None
    cpu_pct: float | None = None
    mean_rt_ms: float | None = None


NO_RATES = WorkerRates()


def worker_rates(
    cur: Worker,
    prev: Worker | None,
    dt: float | None,
    proc: ProcSample | None,
    prev_proc: ProcSample | None,
    threads: int,
) -> WorkerRates:
    """The slot's rates since `prev`, none without it. A reset slot counts its new value as
    its delta (a lower bound)."""
    if prev is None or dt is None or dt <= 0:
        return NO_RATES
    reset = slot_reset(prev, cur)
    d_req = cur.requests - (0 if reset else prev.requests)
    d_exc = cur.exceptions - (0 if reset else prev.exceptions)
    d_rt = cur.running_time - (0 if reset else prev.running_time)
    cpu_pct = None
    if proc and prev_proc:
        cpu_pct = rate(proc.cpu_seconds - prev_proc.cpu_seconds, dt) * 100
    return WorkerRates(
        rps=rate(d_req, dt),
        eps=rate(d_exc, dt),
        busy_pct=min(100.0, rate(d_rt / 1e6, dt) / max(threads, 1) * 100),
        cpu_pct=cpu_pct,
        mean_rt_ms=(d_rt / d_req / 1000) if d_req > 0 else None,
    )


def _oldest(in_flight: tuple[RequestView, ...]) -> float | None:
    ages = [r.age for r in in_flight if r.age is not None] if in_flight else None
    return max(ages) if ages else None


def _core_totals(cores: tuple[Core, ...]) -> tuple[int, tuple[int, ...]]:
    """Static requests of all cores, and each core's requests: one pass (per worker, per
    poll)."""
    static, per_core = 0, []
    for c in cores:
        static += c.static_requests
        per_core.append(c.requests)
    return static, tuple(per_core)


def worker_view(
    slot: int,
    cur: Worker,
    prev: Worker | None,
    dt: float | None,
    procs: tuple[Procs, Procs],
    now: float,
    threads: int,
) -> WorkerView:
    """One slot, built in one go (per worker, per poll); `procs`: this poll's, the last's."""
    proc = procs[0].get(cur.pid)
    in_flight = request_views(cur.cores, now) if cur.cores else ()
    rates = worker_rates(cur, prev, dt, proc, procs[1].get(cur.pid), threads)
    static, per_core = _core_totals(cur.cores)
    return WorkerView(
        slot=slot,
        id=cur.id,
        pid=cur.pid,
        status=printable(cur.status),
        last_spawn=cur.last_spawn,
        rss=(cur.rss or (proc.rss if proc else None)) if cur.live else (cur.rss or None),
        vsz=cur.vsz or None,
        requests=cur.requests,
        exceptions=cur.exceptions,
        signals=cur.signals,
        tx=cur.tx,
        static_requests=static,
        cores_requests=per_core,
        avg_rt_us=cur.avg_rt,
        running_time_us=cur.running_time,
        respawn_count=cur.respawn_count,
        harakiri_count=cur.harakiri_count,
        request_age=_oldest(in_flight),
        requests_in_flight=in_flight,
        rps=rates.rps,
        eps=rates.eps,
        busy_pct=rates.busy_pct,
        cpu_pct=rates.cpu_pct,
        mean_rt_ms=rates.mean_rt_ms,
    )
