"""Turn a stream of polls into frames: counter deltas, reset detection, Little's law.

Theory of operation
-------------------
uWSGI's per-worker counters live in the worker *slot*: they survive a worker respawn and all
reset to 0 on a graceful reload `r` (`uwsgitune.core.reload` tells a reset slot, a reload
and a restart apart). So:

- a reload/restart frame carries no rates (the traffic between the reset and the poll is
  unknown), so rates are never negative and never spike; the next frame has them again;
- a lone slot reset without a reload counts its new value as its delta (a lower bound).

Little's law: Δrunning_time/Δt is the mean number of requests in service (L), and
Δrunning_time/Δrequests is the true mean response time (W). uWSGI's own `avg_rt` is
`(avg + last)/2`, a half-life average, and is shown only as that.

Each worker's view is built in `uwsgitune.core.workerview`, the host's part (sockets, memory,
CPU, run-queue time) in `uwsgitune.core.hostview`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from uwsgitune.core.frame import Frame, FrameKind, VassalView, WorkerView
from uwsgitune.core.hostview import socket_views, with_host
from uwsgitune.core.model import StatsDoc
from uwsgitune.core.redact import printable
from uwsgitune.core.reload import detect_reload, loaded_at_estimate, respawns_between, slot_reset
from uwsgitune.core.samples import Poll
from uwsgitune.core.workerview import procs_by_pid, worker_view

__all__ = ["Tracker", "detect_reload", "respawns_between", "slot_reset"]

Workers = tuple[WorkerView, ...]


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
            frame = self._error(poll)
        else:
            self.disconnected_since = None
            frame = self._frame(poll)
            self.prev = poll
        self.last_frame = frame
        return frame

    def _error(self, poll: Poll) -> Frame:
        """The last frame again, marked as an error and without rates."""
        if self.disconnected_since is None:
            self.disconnected_since = poll.t
        base = self.last_frame or Frame(source=self.source, t=poll.t, mono=poll.mono, kind="error")
        return replace(
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
            stats_repairs=0,
        )

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
            self.loaded_at = loaded_at_estimate(doc) or poll.t
        elif self.loaded_at is None:
            self.loaded_at = loaded_at_estimate(doc)
        rated = kind == "ok" and prev is not None
        dt = (poll.mono - prev.mono) if prev is not None else None
        if dt is not None and dt <= 0:
            rated = False
        return self._build(poll, doc, prev if rated else None, dt, kind)

    def _build(
        self, poll: Poll, doc: StatsDoc, prev: Poll | None, dt: float | None, kind: FrameKind
    ) -> Frame:
        """The frame of `poll`; with a `prev` poll to rate against, its rates too."""
        prev_host = prev.host if prev else None
        procs = procs_by_pid(poll.host), procs_by_pid(prev_host)
        prev_workers = prev.doc.workers if prev and prev.doc else ()
        threads = doc.threads  # a scan of every worker: once, not once per worker
        workers = tuple(
            worker_view(
                i,
                w,
                prev_workers[i] if i < len(prev_workers) else None,
                dt if prev else None,
                procs,
                poll.t,
                threads,
            )
            for i, w in enumerate(doc.workers)
        )
        frame = self._base(poll, doc, kind, dt, workers)
        frame = with_host(frame, poll.host, prev_host, dt if prev else None, doc)
        if prev is None or dt is None:
            return frame
        return _with_rates(frame, prev.doc, doc, dt)  # type: ignore[arg-type]

    def _base(
        self, poll: Poll, doc: StatsDoc, kind: FrameKind, dt: float | None, workers: Workers
    ) -> Frame:
        """Everything the document alone tells, and the tracker's own state."""
        live = [w for w in workers if w.live]
        return Frame(
            source=self.source,
            kind=kind,
            t=poll.t,
            mono=poll.mono,
            dt=dt,
            read_ms=poll.read_seconds * 1000,
            stats_repairs=poll.repairs,
            loaded_at=self.loaded_at,
            reloads_seen=self.reloads_seen,
            version=printable(doc.version),
            master_pid=doc.pid,
            emperor=doc.is_emperor,
            vassals=_vassal_views(doc),
            threads=doc.threads,
            workers_max=len(doc.workers),
            live=len(live),
            busy=sum(1 for w in live if w.status == "busy"),
            idle=sum(1 for w in live if w.status == "idle"),
            cheap=sum(1 for w in workers if not w.live),
            workers=workers,
            requests_total=sum(w.requests for w in doc.workers),
            exceptions_total=sum(w.exceptions for w in doc.workers),
            avg_rt_ms=_avg_rt_ms(doc),
            sockets=socket_views(doc.sockets, poll.host),
            harakiri_total=sum(w.harakiri_count for w in doc.workers),
            respawns_total=sum(max(w.respawn_count - 1, 0) for w in doc.workers),
            signal_queue=doc.signal_queue,
            memory_report=any(w.rss > 0 for w in doc.workers),
        )


def _vassal_views(doc: StatsDoc) -> tuple[VassalView, ...]:
    return tuple(
        VassalView(
            printable(v.id), v.pid, bool(v.ready), bool(v.accepting), v.respawns, v.born, v.last_mod
        )
        for v in doc.vassals or ()
    )


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
