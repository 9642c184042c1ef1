"""Turn a stream of polls into frames: counter deltas, reset detection, Little's law.

Theory of operation
-------------------
uWSGI's per-worker counters live in the worker *slot*: they survive a worker respawn and all
reset to 0 on a graceful reload `r` (`uwsgitune.core.resets` tells a reset slot, a reload
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

from dataclasses import dataclass, field, replace
from typing import Any

from uwsgitune.core.frame import Frame, FrameKind, VassalView, WorkerView, with_fields
from uwsgitune.core.hostview import host_fields, socket_views
from uwsgitune.core.model import StatsDoc
from uwsgitune.core.redact import printable
from uwsgitune.core.resets import (
    detect_reload,
    loaded_at_estimate,
    respawns_between,
    slot_reset,
    slot_resets,
)
from uwsgitune.core.samples import Poll
from uwsgitune.core.workerview import baseline, procs_by_pid, worker_view

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
    # the views of the slots that did not change at `_quiet_at` (None: changed): `_workers`
    _quiet: list[WorkerView | None] = field(default_factory=list, repr=False)
    _quiet_at: Poll | None = field(default=None, repr=False)

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
        resets: list[bool] = []
        if prev is not None and prev.doc is not None:
            if prev.doc.pid != doc.pid:
                kind = "restart"
            elif detect_reload(prev.doc, doc, resets := slot_resets(prev.doc, doc)):
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
        return self._build(poll, doc, prev if rated else None, dt, kind, resets)

    def _build(
        self,
        poll: Poll,
        doc: StatsDoc,
        prev: Poll | None,
        dt: float | None,
        kind: FrameKind,
        resets: list[bool],
    ) -> Frame:
        """The frame of `poll`; with a `prev` poll to rate against (`resets`: its slots'),
        its rates too."""
        prev_host = prev.host if prev else None
        threads = doc.threads  # a scan of every worker: once, not once per worker
        workers = self._workers(poll, doc, prev, dt if prev and dt else 0.0, resets, threads)
        frame = self._base(poll, doc, kind, dt, workers, threads)
        prev_doc = prev.doc if prev else None
        fields = host_fields(frame, poll.host, prev_host, dt if prev else None, doc, prev_doc)
        if prev is not None and dt is not None:
            fields.update(_frame_rates(frame, prev.doc, doc, dt, resets))  # type: ignore[arg-type]
        return with_fields(frame, fields) if fields else frame  # one copy, not one per part

    def _workers(
        self,
        poll: Poll,
        doc: StatsDoc,
        prev: Poll | None,
        step: float,
        resets: list[bool],
        threads: int,
    ) -> Workers:
        """Each slot's view, rated since `prev` (`step` seconds before; 0: unrated). A slot
        whose worker and process read the same as at `prev`, as they did at the poll before
        it, keeps the view it had at `prev`: every delta 0 and no request in service, so
        every field is the same (an idle worker: most of a large pool). A slot whose pid
        changed since `prev` (a respawn) rates its CPU from the new process's birth."""
        now, then = procs_by_pid(poll.host), procs_by_pid(prev.host if prev else None)
        prev_workers = prev.doc.workers if prev and prev.doc else ()
        kept = self._quiet if prev is not None and prev is self._quiet_at else []
        n_prev, n_resets, n_kept = len(prev_workers), len(resets), len(kept)
        views: list[WorkerView] = []
        quiet: list[WorkerView | None] = []
        for i, w in enumerate(doc.workers):
            p = prev_workers[i] if i < n_prev else None
            reset = i < n_resets and resets[i]
            # A pid new in this slot since `prev` is a process born since (uWSGI never moves
            # one between slots; a sample under its pid then was another's): all its CPU is.
            new = p is not None and p.pid != w.pid and bool(then)
            procs = (now.get(w.pid), baseline(w.pid, then, new))
            same = p is not None and procs[0] == procs[1] and w == p  # rated, not reset
            view = kept[i] if same and i < n_kept else None
            if view is None:
                view = worker_view(i, w, p, reset, step, procs, poll.t, threads)
            views.append(view)
            quiet.append(view if same and not view.requests_in_flight else None)
        self._quiet, self._quiet_at = quiet, poll
        return tuple(views)

    def _base(
        self,
        poll: Poll,
        doc: StatsDoc,
        kind: FrameKind,
        dt: float | None,
        workers: Workers,
        threads: int,
    ) -> Frame:
        """Everything the document alone tells, and the tracker's own state."""
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
            threads=threads,
            workers_max=len(doc.workers),
            workers=workers,
            sockets=socket_views(doc.sockets, poll.host),
            signal_queue=doc.signal_queue,
            **_totals(doc, workers),
        )


def _vassal_views(doc: StatsDoc) -> tuple[VassalView, ...]:
    return tuple(
        VassalView(
            printable(v.id), v.pid, bool(v.ready), bool(v.accepting), v.respawns, v.born, v.last_mod
        )
        for v in doc.vassals or ()
    )


def _totals(doc: StatsDoc, workers: Workers) -> dict[str, Any]:
    """The frame's counts and totals over the slots, in one pass (per poll, per worker)."""
    live = busy = idle = requests = exceptions = harakiri = respawns = 0
    avg_rt, avg_n, report = 0, 0, False
    for w, v in zip(doc.workers, workers, strict=True):
        if v.pid > 0 and v.status != "cheap":
            live += 1
            busy += v.status == "busy"
            idle += v.status == "idle"
            if w.requests > 0:
                avg_rt += w.avg_rt
                avg_n += 1
        requests += w.requests
        exceptions += w.exceptions
        harakiri += w.harakiri_count
        respawns += w.respawn_count - 1 if w.respawn_count > 1 else 0
        report = report or w.rss > 0
    return {
        "live": live,
        "busy": busy,
        "idle": idle,
        "cheap": len(workers) - live,
        "requests_total": requests,
        "exceptions_total": exceptions,
        "avg_rt_ms": avg_rt / avg_n / 1000 if avg_n else None,
        "harakiri_total": harakiri,
        "respawns_total": respawns,
        "memory_report": report,
    }


def _frame_rates(
    frame: Frame, prev: StatsDoc, cur: StatsDoc, dt: float, resets: list[bool]
) -> dict[str, Any]:
    """The frame's rates since `prev`, `dt` seconds before (`frame` has its workers)."""
    d_req = sum([w.rps or 0.0 for w in frame.workers]) * dt  # lists: faster than generators
    d_exc = sum([w.eps or 0.0 for w in frame.workers]) * dt
    d_rt_s = 0.0
    d_static = 0
    for p, c, reset in zip(prev.workers, cur.workers, resets, strict=False):
        if reset:
            d_rt_s += c.running_time / 1e6
            continue
        d_rt_s += (c.running_time - p.running_time) / 1e6
        if p.cores and len(p.cores) == len(c.cores):
            for pc, cc in zip(p.cores, c.cores, strict=True):
                d = cc.static_requests - pc.static_requests
                d_static += d if d > 0 else 0
    littles_l = max(d_rt_s, 0.0) / dt
    capacity = frame.live * max(frame.threads, 1)
    harakiri = sum([w.harakiri_count for w in prev.workers])
    return {
        "rps": d_req / dt,
        "eps": d_exc / dt,
        "mean_rt_ms": (d_rt_s * 1000 / d_req) if d_req >= 1 else None,
        "littles_l": littles_l,
        "busy_ratio": min(littles_l / capacity, 1.0) if capacity else None,
        "static_share": (d_static / d_req) if d_req >= 1 else None,
        "harakiri_delta": max(frame.harakiri_total - harakiri, 0),
        "respawns_delta": respawns_between(prev, cur),
    }
