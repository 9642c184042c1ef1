"""Turn a stream of polls into frames: counter deltas, reset detection, Little's law.

Theory of operation
-------------------
uWSGI's per-worker counters (`requests`, `exceptions`, `running_time`, `tx`, `harakiri_count`,
`respawn_count`) live in the worker *slot*: they survive a worker respawn (`w`, `c`,
harakiri, max-requests, cheaping) and all reset to 0 on a graceful reload `r`. So:

- a slot is *reset* when a counter went down, or when its pid changed while `respawn_count`
  did not grow (a respawn adds one; a reload puts it back to 1);
- the instance *reloaded* when the master pid is unchanged and most previously live slots
  reset; it *restarted* when the master pid changed;
- a reload/restart frame carries no rates (the traffic between the reset and the poll is
  unknown), so rates are never negative and never spike; the next frame has them again;
- a lone slot reset without a reload counts its new value as its delta (a lower bound).

Little's law: Δrunning_time/Δt is the mean number of requests in service (L), and
Δrunning_time/Δrequests is the true mean response time (W). uWSGI's own `avg_rt` is
`(avg + last)/2`, a half-life average, and is shown only as that.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from uwsgitune.core.frame import Frame, FrameKind, RequestView, SocketView, VassalView, WorkerView
from uwsgitune.core.model import Core, Socket, StatsDoc, Worker
from uwsgitune.core.samples import HostSample, Poll, ProcSample


def slot_reset(prev: Worker, cur: Worker) -> bool:
    """True when this slot's counters restarted from zero between the two documents."""
    if (
        cur.requests < prev.requests
        or cur.running_time < prev.running_time
        or cur.exceptions < prev.exceptions
        or cur.tx < prev.tx
    ):
        return True
    respawned = prev.pid > 0 and cur.pid > 0 and cur.pid != prev.pid
    return respawned and cur.respawn_count <= prev.respawn_count


def detect_reload(prev: StatsDoc, cur: StatsDoc) -> bool:
    """A graceful reload: same master, and most slots that were live have reset."""
    if len(prev.workers) != len(cur.workers):
        return True  # `processes` changed: only a reload re-reads it
    pairs = [
        (p, c) for p, c in zip(prev.workers, cur.workers, strict=True) if p.pid > 0 and c.pid > 0
    ]
    if not pairs:
        return False
    resets = sum(1 for p, c in pairs if slot_reset(p, c))
    return resets * 2 > len(pairs)


def _rate(delta: float, dt: float) -> float:
    return max(delta, 0.0) / dt if dt > 0 else 0.0


def _request_views(cores: tuple[Core, ...], now: float) -> tuple[RequestView, ...]:
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
        out.append(RequestView(core=core.id, method=method, path=path, age=age))
    return tuple(out)


Procs = dict[int, ProcSample]


def _procs(host: HostSample | None) -> Procs:
    return {p.pid: p for p in host.procs} if host else {}


def _worker_view(
    slot: int,
    cur: Worker,
    prev: Worker | None,
    dt: float | None,
    procs: Procs,
    prev_procs: Procs,
    now: float,
    threads: int,
) -> WorkerView:
    """One worker slot, built in one go (this runs 64 times a poll: no `replace`)."""
    proc = procs.get(cur.pid)
    rss: int | None = cur.rss or (proc.rss if proc else None)
    in_flight = _request_views(cur.cores, now)
    ages = [r.age for r in in_flight if r.age is not None]
    rps = eps = busy_pct = cpu_pct = mean_rt_ms = None
    if prev is not None and dt is not None and dt > 0:
        reset = slot_reset(prev, cur)
        d_req = cur.requests - (0 if reset else prev.requests)
        d_exc = cur.exceptions - (0 if reset else prev.exceptions)
        d_rt = cur.running_time - (0 if reset else prev.running_time)
        prev_proc = prev_procs.get(cur.pid)
        if proc and prev_proc:
            cpu_pct = _rate(proc.cpu_seconds - prev_proc.cpu_seconds, dt) * 100
        rps, eps = _rate(d_req, dt), _rate(d_exc, dt)
        busy_pct = min(100.0, _rate(d_rt / 1e6, dt) / max(threads, 1) * 100)
        mean_rt_ms = (d_rt / d_req / 1000) if d_req > 0 else None
    return WorkerView(
        slot=slot,
        id=cur.id,
        pid=cur.pid,
        status=cur.status,
        requests=cur.requests,
        exceptions=cur.exceptions,
        signals=cur.signals,
        tx=cur.tx,
        avg_rt_us=cur.avg_rt,
        running_time_us=cur.running_time,
        rss=rss if cur.live else (cur.rss or None),
        vsz=cur.vsz or None,
        respawn_count=cur.respawn_count,
        harakiri_count=cur.harakiri_count,
        last_spawn=cur.last_spawn,
        rps=rps,
        eps=eps,
        busy_pct=busy_pct,
        cpu_pct=cpu_pct,
        mean_rt_ms=mean_rt_ms,
        request_age=max(ages) if ages else None,
        requests_in_flight=in_flight,
        cores_requests=tuple(c.requests for c in cur.cores),
        static_requests=sum(c.static_requests for c in cur.cores),
    )


def _socket_views(sockets: tuple[Socket, ...], host: HostSample | None) -> tuple[SocketView, ...]:
    kernel = {q.path: q for q in host.unix_queues} if host else {}
    tcp = {q.name: q for q in host.tcp_queues} if host else {}
    out = []
    for s in sockets:
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


def _loaded_at_estimate(doc: StatsDoc) -> float | None:
    """Best guess of the last (re)load from spawn times: slots spawned once since then."""
    first = [w.last_spawn for w in doc.workers if w.pid > 0 and w.respawn_count == 1]
    spawned = first or [w.last_spawn for w in doc.workers if w.pid > 0 and w.last_spawn > 0]
    return min(spawned) if spawned else None


def _delta(cur: int | None, prev: int | None) -> int | None:
    if cur is None or prev is None:
        return None
    return max(cur - prev, 0)


@dataclass
class Tracker:
    """Folds the polls of one instance into frames. Pure: all time comes from the polls."""

    source: str
    prev: Poll | None = None  # last good poll
    last_frame: Frame | None = None
    loaded_at: float | None = None
    reloads_seen: int = 0
    disconnected_since: float | None = None

    def update(self, poll: Poll) -> Frame:
        if poll.doc is None:
            if self.disconnected_since is None:
                self.disconnected_since = poll.t
            base = self.last_frame or Frame(
                source=self.source, t=poll.t, mono=poll.mono, kind="error"
            )
            frame = replace(
                base,
                t=poll.t,
                mono=poll.mono,
                kind="error",
                error=poll.error or "no document",
                disconnected_since=self.disconnected_since,
                rps=None,
                eps=None,
                mean_rt_ms=None,
                littles_l=None,
                busy_ratio=None,
            )
            self.last_frame = frame
            return frame
        self.disconnected_since = None
        frame = self._frame(poll)
        self.prev = poll
        self.last_frame = frame
        return frame

    def _frame(self, poll: Poll) -> Frame:
        doc = poll.doc
        assert doc is not None
        prev = self.prev
        kind: FrameKind = "first"
        if prev is not None and prev.doc is not None:
            if prev.doc.pid != doc.pid:
                kind = "restart"
            elif detect_reload(prev.doc, doc):
                kind = "reload"
            else:
                kind = "ok"
        if kind in ("reload", "restart"):
            self.reloads_seen += 1
            self.loaded_at = _loaded_at_estimate(doc) or poll.t
        elif self.loaded_at is None:
            self.loaded_at = _loaded_at_estimate(doc)
        rated = kind == "ok" and prev is not None
        dt = (poll.mono - prev.mono) if prev is not None else None
        if dt is not None and dt <= 0:
            rated = False
        return self._build(poll, doc, prev if rated else None, dt, kind)

    def _build(
        self, poll: Poll, doc: StatsDoc, prev: Poll | None, dt: float | None, kind: FrameKind
    ) -> Frame:
        host, prev_host = poll.host, (prev.host if prev else None)
        prev_doc = prev.doc if prev else None
        threads = doc.threads
        procs, prev_procs = _procs(host), _procs(prev_host)
        prev_workers = prev_doc.workers if prev_doc else ()
        workers = tuple(
            _worker_view(
                i,
                w,
                prev_workers[i] if i < len(prev_workers) else None,
                dt if prev else None,
                procs,
                prev_procs,
                poll.t,
                threads,
            )
            for i, w in enumerate(doc.workers)
        )
        live = [w for w in workers if w.live]
        frame = Frame(
            source=self.source,
            t=poll.t,
            mono=poll.mono,
            kind=kind,
            dt=dt,
            version=doc.version,
            master_pid=doc.pid,
            loaded_at=self.loaded_at,
            reloads_seen=self.reloads_seen,
            emperor=doc.is_emperor,
            vassals=tuple(
                VassalView(
                    v.id, v.pid, bool(v.ready), bool(v.accepting), v.respawns, v.born, v.last_mod
                )
                for v in doc.vassals or ()
            ),
            workers_max=len(doc.workers),
            live=len(live),
            busy=sum(1 for w in live if w.status == "busy"),
            idle=sum(1 for w in live if w.status == "idle"),
            cheap=sum(1 for w in workers if not w.live),
            threads=threads,
            workers=workers,
            requests_total=sum(w.requests for w in doc.workers),
            exceptions_total=sum(w.exceptions for w in doc.workers),
            avg_rt_ms=_avg_rt_ms(doc),
            sockets=_socket_views(doc.sockets, host),
            harakiri_total=sum(w.harakiri_count for w in doc.workers),
            respawns_total=sum(max(w.respawn_count - 1, 0) for w in doc.workers),
            signal_queue=doc.signal_queue,
            memory_report=any(w.rss > 0 for w in doc.workers),
            read_ms=poll.read_seconds * 1000,
        )
        frame = _with_host(frame, host, prev_host, dt if prev else None, doc)
        if prev is None or dt is None:
            return frame
        return _with_rates(frame, prev.doc, doc, dt)  # type: ignore[arg-type]


def _avg_rt_ms(doc: StatsDoc) -> float | None:
    vals = [w.avg_rt for w in doc.workers if w.live and w.requests > 0]
    return sum(vals) / len(vals) / 1000 if vals else None


def _with_rates(frame: Frame, prev: StatsDoc, cur: StatsDoc, dt: float) -> Frame:
    d_req = sum(w.rps or 0.0 for w in frame.workers) * dt
    d_exc = sum(w.eps or 0.0 for w in frame.workers) * dt
    d_rt_s = 0.0
    d_static = 0
    for p, c in zip(prev.workers, cur.workers, strict=False):
        if slot_reset(p, c):
            d_rt_s += c.running_time / 1e6
            continue
        d_rt_s += (c.running_time - p.running_time) / 1e6
        if p.cores and len(p.cores) == len(c.cores):
            d_static += sum(
                max(cc.static_requests - pc.static_requests, 0)
                for pc, cc in zip(p.cores, c.cores, strict=True)
            )
    littles_l = max(d_rt_s, 0.0) / dt
    capacity = frame.live * max(frame.threads, 1)
    harakiri = sum(w.harakiri_count for w in prev.workers)
    return replace(
        frame,
        rps=d_req / dt,
        eps=d_exc / dt,
        mean_rt_ms=(d_rt_s * 1000 / d_req) if d_req >= 1 else None,
        littles_l=littles_l,
        busy_ratio=min(littles_l / capacity, 1.0) if capacity else None,
        static_share=(d_static / d_req) if d_req >= 1 else None,
        harakiri_delta=max(frame.harakiri_total - harakiri, 0),
        respawns_delta=respawns_between(prev, cur),
    )


def respawns_between(prev: StatsDoc, cur: StatsDoc) -> int:
    """Worker respawns between two documents, not counting uncheaps: a cheap slot brought
    back (by `+` or a cheaper algorithm) gets a new pid and `respawn_count` + 1, but nothing
    died. A slot that was live and respawned did die (crash, harakiri, max-requests, `r`)."""
    n = 0
    for p, c in zip(prev.workers, cur.workers, strict=False):
        d = max(c.respawn_count - p.respawn_count, 0)
        if d and not p.live and c.live:
            d -= 1  # the uncheap itself
        n += d
    return n


def _share(part: float, total: float) -> float | None:
    return min(max(part / total * 100, 0.0), 100.0) if total > 0 else None


def _busy_shares(frame: Frame) -> dict[int, float]:
    """Each live worker's share of the poll spent in requests. A worker's run-queue wait
    counts towards its requests in that share only: idle workers woken together for every
    new connection (the thundering herd) wait for a CPU too, outside any request, and the
    master serves none. With threads, a process's threads take turns at accept() under
    uWSGI's own lock, so a process's wait counts whole."""
    if frame.threads > 1:
        return {w.pid: 1.0 for w in frame.workers if w.live}
    return {w.pid: min(max(w.busy_pct or 0.0, 0.0) / 100, 1.0) for w in frame.workers if w.live}


def _with_host(
    frame: Frame, host: HostSample | None, prev: HostSample | None, dt: float | None, doc: StatsDoc
) -> Frame:
    if host is None:
        return frame
    live_rss = [w.rss for w in frame.workers if w.live and w.rss]
    mem_source = "stats" if frame.memory_report else ("psutil" if live_rss else "none")
    frame = replace(
        frame,
        cpu_count=host.cpu_count,
        effective_cpus=host.effective_cpus,
        somaxconn=host.somaxconn,
        mem_total_rss=sum(live_rss) if live_rss else None,
        mem_per_worker=(sum(live_rss) // len(live_rss)) if live_rss else None,
        mem_source=mem_source,  # type: ignore[arg-type]
        mem_available=host.available_memory,
        mem_limit=host.memory_limit,
    )
    if prev is None or dt is None or dt <= 0:
        return frame
    total = host.cpu_total_seconds - prev.cpu_total_seconds
    busy = host.cpu_busy_seconds - prev.cpu_busy_seconds
    inst, runq, runq_known = 0.0, 0.0, True
    pids = {doc.pid} | {w.pid for w in doc.workers if w.pid > 0}
    shares = _busy_shares(frame)
    before = _procs(prev)
    gil: list[float] = []
    for p in host.procs:
        q = before.get(p.pid)
        if p.pid in pids and q is not None:
            used = max(p.cpu_seconds - q.cpu_seconds, 0.0)
            inst += used
            if p.runq_seconds is None or q.runq_seconds is None:
                runq_known = False
                continue
            waited = max(p.runq_seconds - q.runq_seconds, 0.0)
            runq += waited * shares.get(p.pid, 0.0)
            if frame.threads > 1 and p.pid in shares:
                gil.append(min((used + waited) / dt, 1.0))
    return replace(
        frame,
        host_cpu_pct=min(max(busy / total * 100, 0.0), 100.0) if total > 0 else None,
        host_nice_pct=_share(host.cpu_nice_seconds - prev.cpu_nice_seconds, total),
        instance_cpu_cores=inst / dt,
        runq_cores=runq / dt if runq_known else None,
        gil_busy=sum(gil) / len(gil) if gil and runq_known else None,
        listen_overflows_delta=_delta(host.listen_overflows, prev.listen_overflows),
        listen_drops_delta=_delta(host.listen_drops, prev.listen_drops),
    )
