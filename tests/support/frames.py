"""Synthetic frames for the rules' and the tuner's tests: a healthy 4-worker instance,
changed per test.

Every frame comes out of the real `Tracker`, fed synthetic stats documents and host samples
(`tests.support.instances.Instance`): keyword arguments name the frame fields a test wants,
and are turned into the load that produces them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tests.support.instances import MIB, Instance, Load
from uwsgitune.core.frame import Frame, RequestView, SocketView

T0 = 1_700_000_000.0
MONO0 = 1000.0

__all__ = ["MIB", "T0", "failed", "frame", "play", "series", "tcp", "varying"]


def tcp(queue: int = 0, backlog: int = 1024) -> SocketView:
    return SocketView("127.0.0.1:8000", "http", False, queue, backlog, "stats")


def _in_service(kw: dict[str, Any], live: int, threads: int, rps: float) -> float:
    """Requests in service (Little's L) from whichever of its forms the test gave."""
    busy_pct = kw.get("worker", {}).get("busy_pct")
    if busy_pct is not None:
        return busy_pct / 100 * threads * live
    if "littles_l" in kw:
        return float(kw["littles_l"])
    if "busy_ratio" in kw:
        return float(kw["busy_ratio"]) * live * threads
    return rps * kw.get("mean_rt_ms", 30.0) / 1000


def _worker_cpu(kw: dict[str, Any], live: int) -> float:
    """Each worker's cores: the instance's 0.5 shared out, unless the test says."""
    cpu_pct = kw.get("worker", {}).get("cpu_pct")
    if cpu_pct is not None:
        return float(cpu_pct) / 100
    return float(kw.get("instance_cpu_cores") or 0.5) / live


def load(**kw: Any) -> Load:
    """The load whose frame has the fields in `kw` (the defaults: a healthy instance)."""
    live, threads = kw.get("live", 4), kw.get("threads", 1)
    cheap = kw.get("cheap", kw.get("workers_max", live) - live)
    rps = kw.get("rps", 40.0)
    worker_cpu = _worker_cpu(kw, live)
    host_cpu_pct = kw.get("host_cpu_pct", 20.0)
    cpus = kw.get("cpu_count", 4)
    # the host's busy CPU includes the instance's
    host_busy = None if host_cpu_pct is None else max(host_cpu_pct / 100 * cpus, worker_cpu * live)
    mem_per_worker = kw.get("mem_per_worker", 50 * MIB)
    age = kw.get("worker", {}).get("request_age")
    return Load(
        live=live,
        cheap=cheap,
        threads=threads,
        busy=kw.get("busy", 1),
        rps=rps,
        eps=kw.get("eps", 0.0),
        in_service=_in_service(kw, live, threads, rps),
        static_share=kw.get("static_share", 0.0),
        worker_cpu=worker_cpu,
        host_busy=host_busy,
        host_nice=kw.get("host_nice_pct", 0.0) / 100 * cpus,
        cpus=cpus,
        effective_cpus=kw.get("effective_cpus", 4.0),
        somaxconn=kw.get("somaxconn", 4096),
        rss=mem_per_worker,
        memory_report=kw.get("memory_report", True),
        mem_available=kw.get("mem_available", 4096 * MIB),
        sockets=kw.get("sockets", (tcp(),)),
        harakiri=kw.get("harakiri_delta", 0),
        respawns=kw.get("respawns_delta", 0),
        signal_queue=kw.get("signal_queue", 0),
        listen_overflows=kw.get("listen_overflows_delta", 0),
        request=None if age is None else kw["worker"]["request"],
        host=kw.get("instance_cpu_cores", 0.5) is not None,
        spawned=T0 - 100,
    )


KNOWN = {
    "live",
    "threads",
    "cheap",
    "workers_max",
    "rps",
    "littles_l",
    "busy_ratio",
    "mean_rt_ms",
    "instance_cpu_cores",
    "host_cpu_pct",
    "cpu_count",
    "mem_per_worker",
    "busy",
    "idle",
    "eps",
    "static_share",
    "effective_cpus",
    "somaxconn",
    "memory_report",
    "mem_available",
    "sockets",
    "harakiri_delta",
    "respawns_delta",
    "signal_queue",
    "listen_overflows_delta",
    "worker",
    "mem_total_rss",
    "mem_source",
    "host_nice_pct",
}


def _check(kw: dict[str, Any]) -> dict[str, Any]:
    unknown = set(kw) - KNOWN
    if unknown:
        raise TypeError(f"the synthetic instance cannot produce {sorted(unknown)}")
    return kw


def varying(n: int, fn: Callable[[int], dict[str, Any]], start: int = 0) -> list[Frame]:
    """n polls, 1 s apart, of one instance whose load at poll i makes the fields `fn(i)`."""
    inst = Instance("test", T0, MONO0)
    inst.frame(start - 1, load(**_check(fn(start))))  # the first poll has no rates
    return [inst.frame(i, load(**_check(fn(i)))) for i in range(start, start + n)]


def series(n: int, start: int = 0, **kw: Any) -> list[Frame]:
    """n polls of an instance with the fields in `kw` (a healthy one by default)."""
    return varying(n, lambda _: kw, start)


def frame(i: int, **kw: Any) -> Frame:
    """The i-th poll (1 s apart) of a healthy instance; keyword arguments name fields."""
    return series(1, i, **kw)[0]


def play(steps: Sequence[tuple[str, float, Load]], source: str = "test") -> list[Frame]:
    """One instance polled at each step's time (seconds, increasing) under its load: "ok" a
    poll, "error" a failed poll, "reload" the workers respawned, "restart" a new master,
    "first" a new tracker (the monitor restarted)."""
    inst = Instance(source, T0, MONO0)
    out = []
    for kind, i, step in steps:
        if kind == "first" and out:
            inst = Instance(source, T0, MONO0)
        if kind == "restart":
            inst.master_pid += 1
        if kind == "error":
            out.append(inst.error(i))
        else:
            out.append(inst.frame(i, step, reload=kind in ("reload", "restart")))
    return out


def failed(i: int, error: str = "connection refused", **kw: Any) -> Frame:
    """The i-th poll failing (`error`) after a good one with the fields in `kw`."""
    inst = Instance("test", T0, MONO0)
    inst.frame(i - 1, load(**_check(kw)))
    return inst.error(i, error)


def stuck(age: float, method: str = "GET", path: str = "/report") -> dict[str, Any]:
    """`worker=` for every live worker serving one request for `age` seconds."""
    return {"request_age": age, "request": RequestView(0, method, path, age)}
