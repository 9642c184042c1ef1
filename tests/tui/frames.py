"""Deterministic frames for the TUI tests: built directly, no clock, no uWSGI."""

from __future__ import annotations

from dataclasses import replace

from uwsgitune.core.frame import Frame, RequestView, SocketView, VassalView, WorkerView

T0 = 1_700_000_000.0  # a fixed epoch: every view reads time from the frames only


def worker(
    slot: int, *, busy: bool = False, live: bool = True, t: float = T0, **kw: object
) -> WorkerView:
    if not live:
        return WorkerView(slot, 0, 0, "cheap", 0, 0, 0, 0, 0, 0, None, None, 0, 0, 0.0)
    inflight = (RequestView(0, "GET", f"/io/{slot}", 1.5 + slot),) if busy else ()
    base = WorkerView(
        slot=slot,
        id=slot + 1,
        pid=1000 + slot,
        status="busy" if busy else "idle",
        requests=100 * (slot + 1),
        exceptions=slot % 2,
        signals=0,
        tx=4096 * (slot + 1),
        avg_rt_us=12_000 + slot * 500,
        running_time_us=5_000_000 * (slot + 1),
        rss=(30 + slot) * 1024 * 1024,
        vsz=200 * 1024 * 1024,
        respawn_count=1,
        harakiri_count=0,
        last_spawn=t - 300,
        rps=10.0 + slot,
        eps=0.0,
        busy_pct=80.0 if busy else 10.0,
        cpu_pct=20.0 + slot,
        mean_rt_ms=11.0 + slot,
        request_age=(1.5 + slot) if busy else None,
        requests_in_flight=inflight,
        cores_requests=(100 * (slot + 1),),
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def frame(
    i: int = 0,
    *,
    workers: int = 4,
    busy: int = 2,
    cheap: int = 0,
    queue: int = 3,
    backlog: int = 16,
    kind: str = "ok",
    cpu: float = 0.5,
    source: str = "/tmp/demo/stats.sock",
) -> Frame:
    t = T0 + i
    ws = tuple(worker(s, busy=s < busy, live=s < workers - cheap, t=t) for s in range(workers))
    live = [w for w in ws if w.live]
    return Frame(
        source=source,
        t=t,
        mono=1000.0 + i,
        kind=kind,  # type: ignore[arg-type]
        dt=1.0,
        version="2.0.31",
        master_pid=999,
        loaded_at=T0 - 600,
        workers_max=workers,
        live=len(live),
        busy=sum(1 for w in live if w.status == "busy"),
        idle=sum(1 for w in live if w.status == "idle"),
        cheap=workers - len(live),
        workers=ws,
        requests_total=sum(w.requests for w in ws),
        rps=sum(w.rps or 0 for w in ws) if kind == "ok" else None,
        mean_rt_ms=12.5 if kind == "ok" else None,
        avg_rt_ms=13.0,
        littles_l=1.6,
        busy_ratio=0.4,
        sockets=(
            SocketView("127.0.0.1:8000", "http", False, queue, backlog, "stats"),
            SocketView("/tmp/demo/app.sock", "uwsgi", True, 0, 100, "kernel"),
        ),
        listen_overflows_delta=0,
        cpu_count=4,
        effective_cpus=2.0,
        host_cpu_pct=40.0,
        instance_cpu_cores=cpu,
        somaxconn=4096,
        mem_total_rss=sum(w.rss or 0 for w in live),
        mem_per_worker=32 * 1024 * 1024,
        mem_source="stats",
        mem_available=8 * 1024**3,
        mem_limit=16 * 1024**3,
        memory_report=True,
    )


def history(n: int = 30, **kw: object) -> tuple[Frame, ...]:
    return tuple(frame(i, **kw) for i in range(n))  # type: ignore[arg-type]


def error_frame(i: int, last: Frame) -> Frame:
    return replace(
        last,
        t=T0 + i,
        mono=1000.0 + i,
        kind="error",
        error="connection refused",
        disconnected_since=T0 + i - 3,
        rps=None,
        mean_rt_ms=None,
    )


def emperor_frame(i: int = 0) -> Frame:
    vassals = (
        VassalView("app1.ini", 2001, True, True, 0, T0 - 100, T0 - 100),
        VassalView("app2.ini", 2002, False, False, 3, T0 - 50, T0 - 50),
    )
    return Frame(
        source="/tmp/emperor.sock",
        t=T0 + i,
        mono=1000.0 + i,
        kind="ok",
        version="2.0.31",
        master_pid=2000,
        emperor=True,
        vassals=vassals,
    )
