"""Synthetic frames for rule tests: a healthy 4-worker instance, changed per test."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from uwsgitune.core.frame import Frame, SocketView, WorkerView

MIB = 1024 * 1024
T0 = 1_700_000_000.0


def worker(slot: int, **kw: Any) -> WorkerView:
    base: dict[str, Any] = dict(
        slot=slot,
        id=slot + 1,
        pid=1000 + slot,
        status="idle",
        requests=100,
        exceptions=0,
        signals=0,
        tx=0,
        avg_rt_us=30_000,
        running_time_us=3_000_000,
        rss=50 * MIB,
        vsz=None,
        respawn_count=1,
        harakiri_count=0,
        last_spawn=T0 - 100,
        rps=10.0,
        eps=0.0,
        busy_pct=30.0,
        cpu_pct=12.0,
        mean_rt_ms=30.0,
    )
    base.update(kw)
    return WorkerView(**base)


def tcp(queue: int = 0, backlog: int = 1024) -> SocketView:
    return SocketView("127.0.0.1:8000", "http", False, queue, backlog, "stats")


def frame(i: int, **kw: Any) -> Frame:
    """The i-th poll (1 s apart) of a healthy instance; keyword arguments override fields."""
    live = kw.get("live", 4)
    wkw = kw.pop("worker", {})
    base: dict[str, Any] = dict(
        source="test",
        t=T0 + i,
        mono=1000.0 + i,
        kind="ok",
        dt=1.0,
        version="2.0.31",
        master_pid=999,
        workers_max=live,
        live=live,
        busy=1,
        idle=live - 1,
        threads=1,
        workers=tuple(worker(s, **wkw) for s in range(live)),
        requests_total=1000 + 40 * i,
        rps=40.0,
        eps=0.0,
        mean_rt_ms=30.0,
        littles_l=1.2,
        busy_ratio=0.3,
        static_share=0.0,
        sockets=(tcp(),),
        listen_overflows_delta=0,
        cpu_count=4,
        effective_cpus=4.0,
        host_cpu_pct=20.0,
        instance_cpu_cores=0.5,
        somaxconn=4096,
        mem_total_rss=live * 50 * MIB,
        mem_per_worker=50 * MIB,
        mem_source="stats",
        mem_available=4096 * MIB,
        mem_limit=8192 * MIB,
        memory_report=True,
        harakiri_delta=0,
        respawns_delta=0,
    )
    base.update(kw)
    return Frame(**base)


def series(n: int, start: int = 0, **kw: Any) -> list[Frame]:
    return [frame(i, **kw) for i in range(start, start + n)]


def varying(n: int, fn: Callable[[int], dict[str, Any]], start: int = 0) -> list[Frame]:
    """n frames whose overrides depend on the index."""
    return [frame(i, **fn(i)) for i in range(start, start + n)]


def with_workers(f: Frame, **kw: Any) -> Frame:
    return replace(f, workers=tuple(replace(w, **kw) for w in f.workers))
