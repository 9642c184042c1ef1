"""An instance's frames rebuilt from its Prometheus series, for the same rules. Pure.

Theory of operation
-------------------
`recommend --prometheus` reads each instance's signals (core/promsignals.py) on a step grid:
`SeriesSet` gathers a range query's answers into one `InstanceSeries` per instance (its
label set, the socket labels and `worker_id` aside), an array of floats per signal, NaN
where Prometheus had no sample. `rebuild` folds one instance's grid into frames the way
`core/derive.py`'s `Tracker` folds polls:

- a step where `uwsgi_up` or a worker counter has no sample is a gap: no frame; the next
  step with data rates against the last one before the gap (a longer `dt`), as a poll after
  failed polls does. `uwsgi_up 0` is an error frame (no rates).
- a step whose summed counters went down is a reload (uWSGI resets every slot on `r`; the
  daemon's `uwsgitune_reloads_seen_total` growing says the same): no rates, and the next
  step rates from it. Counters are never differenced across a reset.
- rates are exact growths between the two steps' samples: requests/s, exceptions/s,
  Little's L = Δrunning_time/Δt, the true mean response time Δrunning_time/Δrequests, and
  the busy ratio L / (live · threads).

What no series carries stays unknown, never zero: without uwsgitune's daemon, the CPU, the
kernel's queues of unix sockets, the memory left, somaxconn; from any source, a worker's
own CPU and the requests in flight. `unknown_rules` names, per instance, the rules that could
not be judged and the series they need; their findings are not shown (a rule that reads
an unknown as "quiet" would otherwise say something no data said).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Literal

from uwsgitune.core.address import AddressError, parse_address
from uwsgitune.core.frame import Frame, FrameKind, SocketView
from uwsgitune.core.model import Socket
from uwsgitune.core.promsignals import BY_NAME, DAEMON_MARK, SOCKET_LABELS, SUMS, WORKER
from uwsgitune.core.signals import fullest_fill, requests_waiting

NAN = math.nan
Labels = tuple[tuple[str, str], ...]
SocketKey = tuple[str, str]  # (name, proto)
# The signals a step needs to be a frame at all: without them it is a gap.
REQUIRED = ("up", "requests", "running", "slots")
COUNTERS = ("requests", "exceptions", "running", "harakiri", "respawns")


def instance_labels(labels: Mapping[str, str], socket: bool) -> Labels:
    """An instance's identity: a series' labels without its name and the labels the query
    aggregates or splits on (the worker, the socket)."""
    drop = {"__name__", WORKER, *(SOCKET_LABELS if socket else ())}
    return tuple(sorted((k, v) for k, v in labels.items() if k not in drop))


def instance_name(labels: Labels) -> str:
    """How an instance is shown: its `stats_uri` and target, else every label."""
    d = dict(labels)
    parts = [d[k] for k in ("instance", "stats_uri", "pod") if k in d]
    return " ".join(parts) if parts else ",".join(f"{k}={v}" for k, v in labels) or "{}"


@dataclass
class InstanceSeries:
    """One instance's signals on the grid `start + i*step`, `n` steps; NaN: no sample."""

    labels: Labels
    start: float
    step: float
    n: int
    values: dict[str, array[float]] = field(default_factory=dict)
    sockets: dict[SocketKey, dict[str, array[float]]] = field(default_factory=dict)
    socket_source: dict[SocketKey, str] = field(default_factory=dict)

    def grid(self, signal: str, socket: SocketKey | None = None) -> array[float]:
        where = self.values if socket is None else self.sockets.setdefault(socket, {})
        got = where.get(signal)
        if got is None:
            got = where[signal] = array("d", [NAN]) * self.n
        return got

    @property
    def name(self) -> str:
        return instance_name(self.labels)

    @property
    def daemon(self) -> bool:
        """Its series come from uwsgitune's daemon (the daemon's CPU series are there)."""
        cpu = self.values.get(DAEMON_MARK)
        return cpu is not None and any(not math.isnan(v) for v in cpu)


class SeriesSet:
    """Range-query answers gathered per instance (one signal at a time, page by page), for
    the instances listed (by their `uwsgi_up` label sets). uwsgi_exporter labels its
    uWSGI series `stats_uri` but not its `uwsgi_up`: a series whose label set is not an
    instance's is matched without its `stats_uri`. A series of no listed instance is left
    out."""

    def __init__(self, start: float, step: float, n: int, instances: Iterable[Labels]) -> None:
        self.start, self.step, self.n = start, step, n
        self.instances: dict[Labels, InstanceSeries] = {
            key: InstanceSeries(key, start, step, n) for key in instances
        }

    def _instance(self, labels: Mapping[str, str], socket: bool) -> InstanceSeries | None:
        key = instance_labels(labels, socket)
        inst = self.instances.get(key)
        if inst is None and "stats_uri" in labels:
            inst = self.instances.get(tuple(kv for kv in key if kv[0] != "stats_uri"))
        return inst

    def add(
        self, signal: str, labels: Mapping[str, str], points: Iterable[tuple[float, float]]
    ) -> int:
        """One answer series of `signal`; returns how many of its points fell on the grid
        (0 for a series of no listed instance)."""
        sig = BY_NAME[signal]
        inst = self._instance(labels, sig.socket)
        if inst is None:
            return 0
        sock: SocketKey | None = None
        if sig.socket:
            sock = (labels.get("name", ""), labels.get("proto", ""))
            if "source" in labels:
                inst.socket_source[sock] = labels["source"]
        grid = inst.grid(signal, sock)
        start, step, n, placed = self.start, self.step, self.n, 0
        if not isinstance(points, list):
            points = list(points)
        if points:  # the usual answer: every step from the first to the last, in one slice
            first = round((points[0][0] - start) / step)
            last = first + len(points) - 1
            if first >= 0 and last < n and round((points[-1][0] - start) / step) == last:
                grid[first : last + 1] = array("d", [v for _, v in points])
                return len(points)
        for t, v in points:
            i = round((t - start) / step)
            if 0 <= i < n:
                grid[i] = v
                placed += 1
        return placed


@dataclass(frozen=True)
class Rebuilt:
    """An instance's frames and what the grid said about them."""

    series: InstanceSeries
    frames: tuple[Frame, ...]
    steps: int  # steps in the range
    missing: int  # steps with no data (gaps)
    resets: int  # counter resets (reloads) seen
    tuner_desired: int | None  # the tuner's last wish (uwsgitune_tuner_desired_workers)


def _v(grid: array[float] | None, i: int) -> float | None:
    if grid is None:
        return None
    x = grid[i]
    return None if x != x else x  # NaN: no sample


def _socket_views(inst: InstanceSeries, i: int) -> tuple[SocketView, ...]:
    out = []
    for (name, proto), grids in sorted(inst.sockets.items()):
        unix = Socket(name=name).is_unix
        kq, kb = _v(grids.get("k_queue"), i), _v(grids.get("k_backlog"), i)
        if kq is not None or kb is not None:  # uwsgitune's: the kernel's, or the stats'
            src = inst.socket_source.get((name, proto), "kernel")
            source = src if src in ("stats", "kernel") else "none"
            queue = None if kq is None else int(kq)
            out.append(SocketView(name, proto, unix, queue, int(kb) if kb else None, source))  # type: ignore[arg-type]
            continue
        q, mq = _v(grids.get("queue"), i), _v(grids.get("max_queue"), i)
        if unix or q is None:  # uwsgi_exporter says 0 for a unix socket's queue: unknown
            out.append(SocketView(name, proto, unix, None, None, "none"))
        else:
            out.append(SocketView(name, proto, False, int(q), int(mq) if mq else None, "stats"))
    return tuple(out)


def _stats_kind(labels: Labels) -> str | None:
    uri = dict(labels).get("stats_uri")
    if uri is None:
        return None
    try:
        return parse_address(uri).kind
    except AddressError:
        return None


def stats_kind(inst: InstanceSeries) -> str | None:
    """The stats address kind, from the daemon's `stats_uri` label (uwsgi_exporter has none)."""
    return _stats_kind(inst.labels)


def _delta(cur: float | None, prev: float | None) -> int | None:
    return None if cur is None or prev is None else max(int(cur - prev), 0)


Column = list[float | None]


def _int(x: float | None) -> int | None:
    return None if x is None else int(x)


def _frame_maker() -> Callable[..., Frame]:
    """`Frame(**fields)` at two thirds of the cost (a fleet's day is 1,441 frames an instance):
    the frozen dataclass's `__init__` sets each of its 60 slots through `object.__setattr__`;
    this sets them through the slots' own descriptors, in code generated once, as
    `dataclasses` generates `__init__`. Only for a Frame with no `__post_init__` and no
    default factory (checked here, and tests/core/test_promframes.py compares the two)."""
    if hasattr(Frame, "__post_init__"):
        return Frame
    namespace: dict[str, Any] = {"_new": object.__new__, "_Frame": Frame}
    params, body = [], []
    for f in fields(Frame):
        if f.default is MISSING:
            if f.default_factory is not MISSING:
                return Frame
            params.append(f.name)
        else:
            namespace[f"_d_{f.name}"] = f.default
            params.append(f"{f.name}=_d_{f.name}")
        namespace[f"_s_{f.name}"] = getattr(Frame, f.name).__set__
        body.append(f"    _s_{f.name}(frame, {f.name})")
    code = f"def make(*, {', '.join(params)}):\n    frame = _new(_Frame)\n"
    exec(code + "\n".join(body) + "\n    return frame\n", namespace)
    made: Callable[..., Frame] = namespace["make"]
    return made


make_frame = _frame_maker()


class _Fold:
    """The fold over one instance's steps (the Tracker's, for a grid). Each signal is read
    as a column (a list, None where NaN) once; a step reads its values by index."""

    def __init__(self, inst: InstanceSeries) -> None:
        self.inst = inst
        self.name = inst.name
        self._none: Column = [None] * inst.n
        self._cols = {k: [None if x != x else x for x in v] for k, v in inst.values.items()}
        for name, own in SUMS.items():  # the daemon's per-instance series where it has them
            got = self._cols.pop(own, None)
            if got is not None:
                pw = self._cols.get(name)
                self._cols[name] = (
                    got
                    if pw is None
                    else [a if a is not None else b for a, b in zip(got, pw, strict=True)]
                )
        self.resets = 0
        self.exporter = not inst.daemon
        self._counters: list[Column] = []

    def col(self, name: str) -> Column:
        got: Column | None = self._cols.get(name)
        return self._none if got is None else got

    def present(self) -> list[int]:
        """The steps with every `REQUIRED` signal: the others are gaps."""
        up, req, run, slots = (self.col(k) for k in REQUIRED)
        return [
            i
            for i, (a, b, c, d) in enumerate(zip(up, req, run, slots, strict=True))
            if a is not None and b is not None and c is not None and d is not None
        ]

    def reset(self, i: int, p: int) -> bool:
        """A counter went down (uWSGI reset its slots), or the daemon saw a reload."""
        for col in self._counters:
            cur, before = col[i], col[p]
            if cur is not None and before is not None and cur < before:
                return True
        col = self.col("reloads")
        return col[i] is not None and col[p] is not None and col[i] > col[p]  # type: ignore[operator]

    def socket_views(self) -> Callable[[int], tuple[SocketView, ...]]:
        """The step's socket views; the previous step's tuple when every value is the same."""
        inst = self.inst
        if not inst.sockets:
            return lambda i: ()
        grids = [g for per in inst.sockets.values() for g in per.values()]
        keys = list(zip(*([None if x != x else x for x in g] for g in grids), strict=True))
        last: list[Any] = [None, ()]

        def views(i: int) -> tuple[SocketView, ...]:
            key = keys[i]
            if last[0] != key:
                last[0], last[1] = key, _socket_views(inst, i)
            got: tuple[SocketView, ...] = last[1]
            return got

        return views

    def frames(self) -> list[Frame]:
        col, inst = self.col, self.inst
        self._counters = [self._cols[k] for k in COUNTERS if k in self._cols]
        up, req, run, slots, cheap, busy = (
            col(k) for k in ("up", "requests", "running", "slots", "cheap", "busy")
        )
        exc, hara, resp, threads = (
            col(k) for k in ("exceptions", "harakiri", "respawns", "threads")
        )
        rss, rss_n, sigq = col("rss"), col("rss_workers"), col("signal_queue")
        cpus, eff, host, cores = (
            col(k) for k in ("host_cpus", "effective_cpus", "host_cpu", "cpu_cores")
        )
        maxconn, avail, limit = col("somaxconn"), col("mem_available"), col("mem_limit")
        nice, runq, gil = col("host_nice"), col("runq_cores"), col("gil_busy")
        blocked = col("blocked")
        over, drops = col("overflows"), col("drops")
        sockets = self.socket_views()
        exporter, name, step, start = self.exporter, self.name, inst.step, inst.start
        mem_source: Literal["stats", "psutil"] = "stats" if exporter else "psutil"
        out: list[Frame] = []
        make = make_frame
        p: int | None = None
        for i in self.present():
            t = start + i * step
            if not up[i]:
                out.append(Frame(source=name, t=t, mono=t, kind="error", error="uwsgi_up 0"))
                continue
            kind: FrameKind = "first" if p is None else "ok"
            if p is not None and self.reset(i, p):
                kind = "reload"
                self.resets += 1
            n_slots, n_cheap, n_busy = int(slots[i] or 0), int(cheap[i] or 0), int(busy[i] or 0)
            live, n_threads = n_slots - n_cheap, max(int(threads[i] or 1), 1)
            r, rn = rss[i], int(rss_n[i] or 0)
            spawned = resp[i]
            h, hn, c, mc, a, lim = host[i], nice[i], cpus[i], maxconn[i], avail[i], limit[i]
            dt = rps = eps = mean_rt = littles = ratio = None
            d_hara = d_resp = d_over = d_drops = None
            if kind == "ok" and p is not None:
                dt = (i - p) * step
                d_req = (req[i] or 0.0) - (req[p] or 0.0)
                d_run = (run[i] or 0.0) - (run[p] or 0.0)
                littles = max(d_run, 0.0) / dt
                capacity = live * n_threads
                rps = d_req / dt
                eps = (_delta(exc[i], exc[p]) or 0) / dt
                mean_rt = d_run * 1000 / d_req if d_req >= 1 else None
                ratio = min(littles / capacity, 1.0) if capacity else None
                d_hara, d_resp = _delta(hara[i], hara[p]), _delta(resp[i], resp[p])
                d_over, d_drops = _delta(over[i], over[p]), _delta(drops[i], drops[p])
            p = i
            out.append(
                make(
                    source=name,
                    t=t,
                    mono=t,
                    kind=kind,
                    dt=dt,
                    reloads_seen=self.resets,
                    workers_max=n_slots,
                    live=live,
                    busy=n_busy,
                    idle=max(live - n_busy, 0),  # uwsgi_worker_idle: not read by the rules
                    cheap=n_cheap,
                    threads=n_threads,
                    requests_total=int(req[i] or 0),
                    exceptions_total=int(exc[i] or 0),
                    rps=rps,
                    eps=eps,
                    mean_rt_ms=mean_rt,
                    littles_l=littles,
                    busy_ratio=ratio,
                    sockets=sockets(i),
                    listen_overflows_delta=d_over,
                    listen_drops_delta=d_drops,
                    cpu_count=None if c is None else int(c),
                    effective_cpus=eff[i],
                    host_cpu_pct=None if h is None else h * 100,
                    host_nice_pct=None if hn is None else hn * 100,
                    instance_cpu_cores=cores[i],
                    runq_cores=runq[i],
                    gil_busy=gil[i],
                    busy_blocked=blocked[i],
                    somaxconn=None if mc is None else int(mc),
                    mem_total_rss=int(r) if r and rn else None,
                    mem_per_worker=int(r // rn) if r and rn else None,
                    mem_source=mem_source if rn else "none",
                    mem_available=None if a is None else int(a),
                    mem_limit=None if lim is None else int(lim),
                    memory_report=exporter and rn > 0,
                    harakiri_total=int(hara[i] or 0),
                    respawns_total=max(int(spawned - n_slots), 0) if spawned is not None else 0,
                    harakiri_delta=d_hara,
                    respawns_delta=d_resp,
                    signal_queue=int(sigq[i] or 0),
                )
            )
        return out


def needs_worker_series(inst: InstanceSeries) -> bool:
    """Some step of the instance is up without the daemon's per-instance sums
    (`uwsgitune_worker_sum_*`): its per-worker series must be summed instead."""
    up = inst.values.get("up")
    if up is None:
        return False
    own = inst.values.get("requests_sum")
    if own is None:
        return any(u == u and u for u in up)  # NaN != NaN: no sample
    return any(u == u and u and o != o for u, o in zip(up, own, strict=True))


def rebuild(inst: InstanceSeries) -> Rebuilt:
    """The instance's frames, oldest first, and its gaps, resets and the tuner's wish."""
    fold = _Fold(inst)
    frames = fold.frames()
    missing = inst.n - len(frames)
    tuner = inst.values.get("tuner")
    desired = next((int(x) for x in reversed(tuner or ()) if x == x), None)
    return Rebuilt(inst, tuple(frames), inst.n, missing, fold.resets, desired)


# The rules (finding ids, or a family before its dot) an instance's series may leave unknown:
# (ids, the instance lacks what they read, the series they need).
NeedCheck = Callable[[InstanceSeries, Sequence[Frame]], bool]


def _none(get: Callable[[Frame], object]) -> NeedCheck:
    return lambda inst, frames: all(get(f) is None for f in frames if f.has_rates)


UNKNOWN_WHEN: tuple[tuple[tuple[str, ...], NeedCheck, str], ...] = (
    (
        ("oversubscribed_cpu", "underprovisioned_io"),
        _none(lambda f: f.instance_cpu_cores if f.effective_cpus else None),
        "needs uwsgitune_instance_cpu_cores and uwsgitune_effective_cpus (uwsgitune's daemon)",
    ),
    (
        ("listen_queue", "config.default_listen"),
        _none(lambda f: fullest_fill(f) if requests_waiting(f) is not None else None),
        "needs a socket's queue and backlog: uwsgitune_socket_queue_length and _backlog "
        "(uwsgitune's daemon), or a TCP socket's uwsgi_socket_queue_length",
    ),
    (
        ("memory.pressure", "memory.full_scale"),
        _none(lambda f: f.mem_available if f.mem_per_worker else None),
        "needs uwsgitune_memory_available_bytes (uwsgitune's daemon) and worker RSS",
    ),
    (
        ("memory.rss_growth",),
        _none(lambda f: f.mem_per_worker),
        "needs uwsgi_worker_rss_bytes (uWSGI's --memory-report, or uwsgitune's daemon)",
    ),
    (
        ("config.no_memory_report",),
        lambda inst, frames: inst.daemon,
        "uwsgitune's daemon reads RSS from /proc without memory-report: its series cannot tell",
    ),
    (
        ("config.listen_near_somaxconn",),
        _none(lambda f: f.somaxconn),
        "needs uwsgitune_somaxconn (uwsgitune's daemon)",
    ),
    (
        ("config.stats_http",),
        lambda inst, frames: stats_kind(inst) is None,
        "needs the stats address (the daemon's stats_uri label; uwsgi_exporter has none)",
    ),
    (
        ("threads_gil", "health.stuck_requests", "static_files"),
        lambda inst, frames: True,
        "needs per-worker CPU, requests in flight or per-core counters: no series carries them",
    ),
)


def unknown_rules(inst: InstanceSeries, frames: Sequence[Frame]) -> dict[str, str]:
    """Rule ids this instance's series cannot judge, each with the series it needs."""
    out: dict[str, str] = {}
    for ids, lacks, why in UNKNOWN_WHEN:
        if lacks(inst, frames):
            out.update(dict.fromkeys(ids, why))
    return out


def is_unknown(finding_id: str, unknown: Mapping[str, str]) -> bool:
    """A finding of a rule left unknown (`listen_queue.bursts` of `listen_queue`)."""
    return finding_id in unknown or finding_id.split(".", 1)[0] in unknown
