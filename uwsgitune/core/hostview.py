"""The host's part of a frame: sockets' kernel queues, memory, CPU and run-queue time.

CPU and run-queue time come from per-process samples (`ProcSample`) of the master and the
workers, as deltas between two host samples; memory and limits from the latest sample.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec

from uwsgitune.core.frame import Frame, SocketView
from uwsgitune.core.model import Socket, StatsDoc
from uwsgitune.core.redact import printable
from uwsgitune.core.samples import HostSample, ProcSample
from uwsgitune.core.workerview import baseline, procs_by_pid


def socket_views(sockets: tuple[Socket, ...], host: HostSample | None) -> tuple[SocketView, ...]:
    kernel = {q.path: q for q in host.unix_queues} if host else {}
    tcp = {q.name: q for q in host.tcp_queues} if host else {}
    out = []
    for s in sockets:
        if not (s.name + s.proto).isprintable():  # names a peer sent, made safe to print
            s = msgspec.structs.replace(s, name=printable(s.name), proto=printable(s.proto))
        if s.is_unix:
            q = kernel.get(s.name)
            if q is not None:
                out.append(SocketView(s.name, s.proto, True, q.queue, q.backlog, "kernel"))
            else:
                out.append(SocketView(s.name, s.proto, True, None, None, "none"))
        elif (t := tcp.get(s.name)) is not None:  # the kernel now, not the master's sample
            out.append(SocketView(s.name, s.proto, False, t.queue, t.backlog, "kernel"))
        else:
            out.append(SocketView(s.name, s.proto, False, s.queue, s.max_queue or None, "stats"))
    return tuple(out)


def _delta(cur: int | None, prev: int | None) -> int | None:
    if cur is None or prev is None:
        return None
    return max(cur - prev, 0)


def _share(part: float, total: float) -> float | None:
    return min(max(part / total * 100, 0.0), 100.0) if total > 0 else None


def _busy_shares(frame: Frame, prev_doc: StatsDoc | None) -> dict[int, float]:
    """Each live worker's share of the poll spent in requests. A worker's run-queue wait
    counts towards its requests in that share only: idle workers woken together for every
    new connection (the thundering herd) wait for a CPU too, outside any request, and the
    master serves none. With threads, a process's threads take turns at accept() under
    uWSGI's own lock, so a process's wait counts whole.

    The share is Δrunning_time over the poll, but uWSGI adds a request's running time when
    it ends: a worker in one request from the poll before to this one (busy at both, none
    finished between: `prev_doc`) read 0 and was in it the whole poll, so its share is 1.
    Without that, a pool whose requests outlast the poll lost the wait of every poll but the
    one each request ended in, and read it as IO: 64 workers on a CPU-bound Django page
    (16 s a request under contention) read 1.3 s of run-queue wait and 14.5 s of IO a
    request, where the workers were runnable in 1,279 of 1,280 samples (issue 39)."""
    live = [w for w in frame.workers if w.status != "cheap" and w.pid > 0]  # `w.live`, inlined
    if frame.threads > 1:
        return {w.pid: 1.0 for w in live}
    before = {w.pid: w.requests for w in prev_doc.workers if w.busy} if prev_doc else {}
    return {
        w.pid: 1.0
        if w.status == "busy" and before.get(w.pid) == w.requests
        else min(max(w.busy_pct or 0.0, 0.0) / 100, 1.0)
        for w in live
    }


class InstanceCpu(NamedTuple):
    """CPU seconds the master and workers used between two host samples, the run-queue
    seconds their requests waited, and each threaded process's GIL share (used + waited,
    per second). Waits are None when a process's run-queue time is not known."""

    used: float
    runq: float | None
    gil: list[float] | None
    # of `used`, what the host counts as niced: user time of processes at a positive nice
    niced: float = 0.0


def _pids(doc: StatsDoc | None) -> set[int]:
    """The instance's processes in `doc`: its master and live workers."""
    return {doc.pid} | {w.pid for w in doc.workers if w.pid > 0} if doc else set()


def instance_cpu(
    frame: Frame,
    host: HostSample,
    prev: HostSample,
    dt: float,
    doc: StatsDoc,
    prev_doc: StatsDoc | None,
) -> InstanceCpu:
    """`prev_doc`: the stats at `prev`; a pid not in it is new since: all its CPU falls in
    the interval (uWSGI forks a worker for each `+`, respawn and reload). One among them
    that `prev` could not read is left out (its CPU then is unknown)."""
    inst, runq, runq_known, niced = 0.0, 0.0, True, 0.0
    pids = _pids(doc)
    was = _pids(prev_doc)
    shares = _busy_shares(frame, prev_doc)
    before = procs_by_pid(prev)
    gil: list[float] = []
    for p in host.procs:
        if p.pid not in pids:
            continue
        q = baseline(p.pid, before, p.pid not in was)
        if q is None:
            continue
        used = max(p.cpu_seconds - q.cpu_seconds, 0.0)
        inst += used
        if p.nice > 0:
            niced += _user(p, q, used)
        if p.runq_seconds is None or q.runq_seconds is None:
            runq_known = False
            continue
        waited = max(p.runq_seconds - q.runq_seconds, 0.0)
        runq += waited * shares.get(p.pid, 0.0)
        if frame.threads > 1 and p.pid in shares:
            gil.append(min((used + waited) / dt, 1.0))
    if not runq_known:
        return InstanceCpu(inst, None, None, niced)
    return InstanceCpu(inst, runq, gil, niced)


def _user(p: ProcSample, q: ProcSample, used: float) -> float:
    """`p`'s user CPU since `q` (the host's nice column holds a niced process's user time
    only; its system time is the host's system CPU); all it `used` when either read no user
    time apart (an old recording)."""
    if p.user_seconds is None or q.user_seconds is None:
        return used
    return min(max(p.user_seconds - q.user_seconds, 0.0), used)


def busy_blocked(frame: Frame, host: HostSample) -> int | None:
    """Busy workers asleep at the host sample (`Frame.busy_blocked`): a time sample of the
    requests in service that wait on IO. Each poll sees a snapshot; over many polls their
    mean is the mean number blocked, and it is read at once, where schedstat counts a
    task's wait for a CPU only when it gets one (at 64 runnable workers on 2 CPUs, in a
    later poll). None when any busy worker's state is unknown, or with threads."""
    if frame.threads > 1:
        return None
    procs = host.by_pid
    blocked = 0
    for w in frame.workers:
        if w.status != "busy" or w.pid <= 0:
            continue
        p = procs.get(w.pid)
        if p is None or not p.state:
            return None
        if p.state == "S" or p.state == "D":
            blocked += 1
    return blocked


def _memory(frame: Frame, host: HostSample) -> dict[str, Any]:
    live_rss = [w.rss for w in frame.workers if w.rss and w.status != "cheap" and w.pid > 0]
    mem_source = "stats" if frame.memory_report else ("psutil" if live_rss else "none")
    return {
        "cpu_count": host.cpu_count,
        "effective_cpus": host.effective_cpus,
        "somaxconn": host.somaxconn,
        "mem_total_rss": sum(live_rss) if live_rss else None,
        "mem_per_worker": (sum(live_rss) // len(live_rss)) if live_rss else None,
        "mem_source": mem_source,
        "mem_available": host.available_memory,
        "mem_limit": host.memory_limit,
    }


def host_fields(
    frame: Frame,
    host: HostSample | None,
    prev: HostSample | None,
    dt: float | None,
    doc: StatsDoc,
    prev_doc: StatsDoc | None,
) -> dict[str, Any]:
    """The frame's fields from the host (`frame` has its workers); the CPU and listen
    deltas need a previous sample (and the document then: `prev_doc`). A dict for one
    `replace` of the frame per poll."""
    if host is None:
        return {}
    fields = _memory(frame, host)
    fields["busy_blocked"] = busy_blocked(frame, host)
    if prev is None or dt is None or dt <= 0:
        return fields
    total = host.cpu_total_seconds - prev.cpu_total_seconds
    busy = host.cpu_busy_seconds - prev.cpu_busy_seconds
    cpu = instance_cpu(frame, host, prev, dt, doc, prev_doc)
    fields.update(
        host_cpu_pct=min(max(busy / total * 100, 0.0), 100.0) if total > 0 else None,
        host_nice_pct=_share(host.cpu_nice_seconds - prev.cpu_nice_seconds, total),
        instance_cpu_cores=cpu.used / dt,
        instance_niced_cores=cpu.niced / dt,
        runq_cores=cpu.runq / dt if cpu.runq is not None else None,
        gil_busy=sum(cpu.gil) / len(cpu.gil) if cpu.gil else None,
        listen_overflows_delta=_delta(host.listen_overflows, prev.listen_overflows),
        listen_drops_delta=_delta(host.listen_drops, prev.listen_drops),
    )
    return fields
