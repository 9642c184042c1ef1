"""Live latency of real traffic: percentiles over the last 10 s and 60 s, per worker and route.

**What goes in.** `LatencyRecorder.ingest(datagrams, now)` parses each request log datagram
(`core/logline.py`) and records it; `add(line, now)` records one parsed `RequestLine`. `now`
is the receiver's clock in seconds (monotonic or wall, the same one every call): a request
is counted in the second it *arrived*, so a proxy's or an app's skewed clock never moves it
in time. Nothing here reads a clock, opens a socket or raises on bad input.

**Where it goes: one slice per second.** Every request is recorded once, into the current
second's `_Slice`: its service time (`%(micros)`), its queue wait when the proxy stamped it
(`core/reqstamp.py`), both into log-bucketed histograms (`core/loghist.py`: answers within
0.5% of the exact percentile), with their sums and exact maxima; the same service time under
its worker and under its route; its status class; the stamp's format and fate. The last
`SLICES` (60) closed slices are kept, their histograms frozen into arrays (8 bytes a bucket
instead of a dict's ~100): memory is bounded by 60 slices × (a few hundred buckets × (1 +
workers + routes)), and by `MAX_WORKERS` and `MAX_ROUTES` per slice, beyond which a request
is still counted in the totals but filed under `OTHER`. At 10k lines/s with 8 workers and
40 routes that is about 9 MB (51 MB with dicts).

**What comes out** (the frozen values of `core/latencyreport.py`, re-exported here).
`window(now, seconds)` merges the slices of the last `seconds` (the current, partial second
included) into a `LatencyWindow`: service time and queue wait
as `Percentiles` (p50, p95, p99, max, mean, min, in ms), per worker, the `top` routes by
share of service time with the rest folded into `OTHER` (so cardinality stays bounded),
requests by status class, and the stamps' `StampReport` (format detected, negative and
absurd waits counted, the clock skew stated as an offset, or the sentence saying there is no
stamp). `p99_series(now, seconds)` gives one p99 per second for a sparkline. Reading costs a
merge of the window's slices: do it once per poll, not per request.

**Prometheus.** A slice is folded into cumulative totals when a later second begins;
`export()` returns those totals plus the open slice: `uwsgi_request_duration_seconds` and
`uwsgi_request_queue_seconds` as cumulative `le` buckets (`loghist.PROM_BOUNDS`: 1 ms to 30
s, log-spaced; the queue's `QUEUE_BOUNDS` from 10 µs), their sums and counts, requests by
status class, and per route (first `MAX_EXPORTED_ROUTES` routes seen, the rest under `OTHER`,
so a counter never moves between series). Every value only grows.

**Coverage.** `recorded` counts the requests recorded; `coverage(lines, requests)` is the
share of the requests uWSGI's stats counted (a delta) that arrived as lines (the delta of
`recorded` over the same polls).

**Routes** are normalised as everywhere else in uwsgitune (`core/route.py`: no query, no
token-like segment, at most three segments), after the parser has already dropped the query.

**Queue wait, trusted or not.** `LatencyWindow.queue` holds the stamped requests' waits,
negative ones counted as 0. When `stamps.skew_ms` is set the proxy's clock runs ahead and
those waits read short by up to that much (`stamps.note` says so): a consumer that acts on
queue wait (the tuner) must not act on it then. Without stamps, `queue` is None and
`stamps.note` is `reqstamp.NO_STAMP`; the mean wait comes from `reqstamp.little_wait`.

**The public API** (one thread: the poll loop's; nothing here is thread-safe):

    rec = LatencyRecorder(top=TOP_ROUTES)
    rec.ingest(datagrams, now) -> int          # per drain of the socket, bounded by the caller
    rec.add(request_line, now)                 # one parsed line
    rec.window(now, 10 | 60) -> LatencyWindow  # once per poll, per window shown
    rec.p99_series(now, 60) -> (ms | None, ...)
    rec.export() -> LatencyExport              # Prometheus histograms, status, routes
    rec.recorded, rec.tally (logline.LineTally: faults by kind, .mismatch())
    coverage(lines_delta, requests_delta) -> 0..1 | None

**Reading cheaply.** The two `WINDOWS` keep running sums (`_Running`): a second is merged
in when it closes and taken out when it leaves, so reading a window merges the open second
into a copy of the sums instead of merging sixty seconds; each closed second keeps its p99
for `p99_series`. Other window lengths merge their seconds.

**A drain in C.** Where the package's C extension is built (core/_fastlog.c: with the
package, wherever a C compiler is; `ACCELERATED` says so), `ingest` hands the batch to it
first (`_put_fast`): it takes exactly the lines `parse_batch` takes (or none, and touches
nothing), parses each and counts it into the open second's service histogram, its
worker's and its route's parts, the status classes and, for nginx's `t=${msec}` stamps in
bounds, the queue and whole histograms, with the same bucket (`ceil(log(v) * _INV)` in
C's doubles, as `math` computes it); the parts of a worker id or a path are found through
the same resolvers as below (`_worker`, `_route_part`), once per second each. Other stamp
formats and waits out of bounds come back to the Python rules. The Python path below runs
where it is not built, or with `LatencyRecorder(fast=False)`; the tests compare the two on
every kind of line (tests/core/test_fastlog.py and the batch tests).

**A drain at once, in Python.** `ingest` hands the whole batch to `logline.parse_batch` (one regex
over the batch); when every line takes it, `_put_batch` reads the batch's columns into
numbers at once, while they are in the CPU's caches (C loops: `zip`, `map(int)`, counting
the status codes, nginx-stamped waits; stamps of other formats are recorded line by line),
and keeps them. `_flush` counts up to `MAX_PENDING` kept lines at once into the open
second: the service histogram, sum and maximum (each value's bucket computed once, by
`_buckets`' C loops), each line into its worker's and its route's part (the parts found
once per distinct worker id and path, then one plain loop over the lines that counts into
their histograms and keeps their sums and maxima in lists: the cheapest way CPython has,
measured against grouping by a sort), and the queue waits and whole times (zeros counted
apart; a wait out of bounds takes the per-line rules). `_flush` runs before anything reads
or closes the open second (`window`, `p99_series`, `export`, `_roll`) and when
`MAX_PENDING` lines wait, so every reading sees every line. A batch that `parse_batch`
refuses is parsed and recorded line by line (`_put`), as every line was before; both paths
count the same (tests/core/test_logline_batch.py, test_latency_pending.py).

**Cost** (bench/results/latency_cost.md): about 1 µs of CPU per line through the C path in
a tight loop, 3-4 µs paced at 10k lines/s (the Python path: ~4 and ~7), the rest closing a
second (~1 ms per 1,000 lines: freezing it, the running sums, the Prometheus fold); reading both
windows, the p99 series and the export about 5-10 ms at 10k lines/s with 40 routes and 8
workers (the routes ranked by their totals first, so only the shown ones' histograms are
built; the Prometheus totals kept as cumulative `le` counts).
"""

from __future__ import annotations

import collections
import math
import statistics
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from itertools import compress, repeat
from operator import add, mul, not_, sub
from typing import Protocol, TypeVar

from uwsgitune.core import loghist
from uwsgitune.core.latencyreport import (
    OTHER,
    OTHER_WORKER,
    STATUS_CLASSES,
    LatencyExport,
    LatencyWindow,
    Percentiles,
    PromHistogram,
    RouteLatency,
    StampReport,
    coverage,
    percentiles_of,
)
from uwsgitune.core.loghist import ZERO, Counts, FrozenHist, Hist
from uwsgitune.core.logline import (
    UNSAMPLED_MARKER,
    FastLine,
    LineFault,
    LineTally,
    RawLine,
    RequestLine,
    parse_batch,
    parse_raw,
    sample_every,
)
from uwsgitune.core.reqstamp import (
    MAX_WAIT_US,
    NGINX,
    NO_STAMP,
    SKEW_MIN_SHARE,
    StampFormat,
    WaitKind,
    classify_wait,
    parse_stamp,
    skew_offset,
)
from uwsgitune.core.route import route

__all__ = [  # what the recorder answers with lives in core/latencyreport.py
    "OTHER",
    "OTHER_WORKER",
    "STATUS_CLASSES",
    "LatencyExport",
    "LatencyRecorder",
    "LatencyWindow",
    "Percentiles",
    "PromHistogram",
    "RouteLatency",
    "StampReport",
    "coverage",
    "percentiles",
]
K = TypeVar("K", int, str)

# The common batch in C (core/_fastlog.c, built where a C compiler is): it takes exactly the
# lines `parse_batch` takes and records them as `_put_batch` and `_flush` do. Without it
# (or with `LatencyRecorder(fast=False)`), the Python path runs; tests run and compare both.
_FastStatus = tuple[int, int, int, int, int, int]
_FastRecord = Callable[
    [
        list[bytes],
        "_Part",
        "_Part",
        "_Part",
        dict[int, "_Part"],
        Callable[[int], "_Part"],
        dict[bytes, "_Part"],
        Callable[[bytes], "_Part"],
        float,
        int,
        int,
        int,
    ],
    "tuple[_FastStatus, int, int, list[tuple[int, bytes, int]], list[tuple[int, int]]] | None",
]
_fast_record: _FastRecord | None
_merge_frozen: Callable[[Hist, array[int], array[int], int], None] | None
try:
    from uwsgitune.core._fastlog import merge_frozen as _merge_frozen
    from uwsgitune.core._fastlog import record as _fast_record
except ImportError:  # not built: the Python path
    _fast_record = _merge_frozen = None
ACCELERATED = _fast_record is not None
SLICES = 60
WINDOWS = (10, 60)
MAX_WORKERS = 512
MAX_ROUTES = 256
MAX_EXPORTED_ROUTES = 50
MAX_PATHS = 4096  # paths whose route is remembered
MAX_PENDING = 2_000  # lines kept for `_flush`, at most (more do not stay in the CPU's caches)
TOP_ROUTES = 10
_STATUS_OF = tuple(min(s // 100, 6) if 100 <= s <= 599 else 0 for s in range(1000))
_INV = 1.0 / math.log(loghist.GAMMA)
_log = math.log
_ceil = math.ceil


class _Part:
    """One histogram with its sum and exact maximum (µs); the open second's are written in
    line by `LatencyRecorder._put`."""

    __slots__ = ("hist", "top", "total")

    def __init__(self) -> None:
        self.hist: Hist = {}
        self.total = 0
        self.top = 0

    def absorb(self, other: _PartView) -> None:
        loghist.merge(self.hist, other.hist)
        self.total += other.total
        self.top = max(self.top, other.top)


class _PartView(Protocol):
    """What reading needs of a histogram with its sum and maximum, open or kept."""

    @property
    def hist(self) -> Counts: ...
    @property
    def total(self) -> int: ...
    @property
    def top(self) -> int: ...


class _Kept:
    """A closed second's `_Part`, frozen (loghist.FrozenHist: 8 bytes a bucket)."""

    __slots__ = ("count", "hist", "top", "total")

    def __init__(self, part: _Part) -> None:
        self.hist = FrozenHist(part.hist)
        self.count = sum(part.hist.values())
        self.total = part.total
        self.top = part.top


class _Sum:
    """A running merge of kept parts: added as a second closes, taken out as it leaves."""

    __slots__ = ("count", "hist", "total")

    def __init__(self) -> None:
        self.hist: Hist = {}
        self.count = 0
        self.total = 0

    def add(self, part: _Kept) -> None:
        """`loghist.merge` in C (core/_fastlog.c `merge_frozen`), else as a plain loop over
        the kept buckets (their indexes read out of their array once): faster than its
        C-level chain here, measured."""
        hist = self.hist
        self.count += part.count
        self.total += part.total
        if _merge_frozen is not None:
            _merge_frozen(hist, part.hist.keys, part.hist.counts, 1)
            return
        get = hist.get
        for index, n in zip(part.hist.keys.tolist(), part.hist.counts, strict=True):
            hist[index] = get(index, 0) + n

    def drop(self, part: _Kept) -> None:
        """`loghist.unmerge` (the buckets left at 0 deleted), in C or as a plain loop."""
        hist = self.hist
        self.count -= part.count
        self.total -= part.total
        if _merge_frozen is not None:
            _merge_frozen(hist, part.hist.keys, part.hist.counts, -1)
            return
        for index, n in zip(part.hist.keys.tolist(), part.hist.counts, strict=True):
            left = hist[index] - n
            if left:
                hist[index] = left
            else:
                del hist[index]

    def with_open(self, part: _PartView | None, top: int) -> _Part:
        """This sum plus the open second's part, as one `_Part` whose maximum is `top`."""
        out = _Part()
        out.hist = dict(self.hist)
        out.total = self.total
        if part is not None:
            loghist.merge(out.hist, part.hist)
            out.total += part.total
        out.top = top
        return out


class _Running:
    """The closed seconds of one window (`WINDOWS`), merged as they close and taken out as
    they leave it, so that reading a window merges one second (the open one), not sixty.
    Maxima cannot be taken out: they are read from the seconds themselves (a few numbers)."""

    __slots__ = ("kept", "queue", "routes", "seconds", "service", "whole", "workers")

    def __init__(self, seconds: int) -> None:
        self.seconds = seconds
        self.kept: deque[_KeptSlice] = deque()
        self.service = _Sum()
        self.queue = _Sum()
        self.whole = _Sum()
        self.workers: dict[int, _Sum] = {}
        self.routes: dict[str, _Sum] = {}

    def add(self, s: _KeptSlice) -> None:
        self.kept.append(s)
        self.service.add(s.service)
        self.queue.add(s.queue)
        self.whole.add(s.whole)
        for wid, part in s.workers.items():
            self.workers.setdefault(wid, _Sum()).add(part)
        for name, part in s.routes.items():
            self.routes.setdefault(name, _Sum()).add(part)

    def expire(self, second: int) -> None:
        """Take out the seconds that a window ending in `second` no longer holds."""
        while self.kept and self.kept[0].second <= second - self.seconds:
            s = self.kept.popleft()
            self.service.drop(s.service)
            self.queue.drop(s.queue)
            self.whole.drop(s.whole)
            _drop_all(self.workers, s.workers)
            _drop_all(self.routes, s.routes)


def _drop_all(sums: dict[K, _Sum], parts: Mapping[K, _Kept]) -> None:
    for key, part in parts.items():
        total = sums[key]
        total.drop(part)
        if not total.count:
            del sums[key]


class _Slice:
    """Everything recorded in one second of arrival."""

    __slots__ = (
        "absurd",
        "bad_stamp",
        "behind",
        "formats",
        "negative",
        "queue",
        "rfast",
        "routes",
        "second",
        "service",
        "status",
        "unstamped",
        "wfast",
        "whole",
        "workers",
    )

    def __init__(self, second: int) -> None:
        self.second = second
        self.service = _Part()
        self.queue = _Part()
        self.whole = _Part()  # queue wait + service time of each stamped request
        self.behind: Hist = {}  # |raw wait| of the negative ones, for the skew
        self.workers: dict[int, _Part] = {}
        self.routes: dict[str, _Part] = {}
        self.status = [0] * len(STATUS_CLASSES)
        self.formats: dict[StampFormat, int] = {}
        self.unstamped = 0
        self.negative = 0
        self.absurd = 0
        self.bad_stamp = 0
        # the parts of this second's worker ids and paths, for the C path (`_fast_record`)
        self.wfast: dict[int, _Part] = {}
        self.rfast: dict[bytes, _Part] = {}


class _SliceView(Protocol):
    """What reading needs of a second, open (`_Slice`) or closed (`_KeptSlice`)."""

    @property
    def second(self) -> int: ...
    @property
    def service(self) -> _PartView: ...
    @property
    def queue(self) -> _PartView: ...
    @property
    def whole(self) -> _PartView: ...
    @property
    def behind(self) -> Counts: ...
    @property
    def workers(self) -> Mapping[int, _PartView]: ...
    @property
    def routes(self) -> Mapping[str, _PartView]: ...
    @property
    def status(self) -> Sequence[int]: ...
    @property
    def formats(self) -> Mapping[StampFormat, int]: ...
    @property
    def unstamped(self) -> int: ...
    @property
    def negative(self) -> int: ...
    @property
    def absurd(self) -> int: ...
    @property
    def bad_stamp(self) -> int: ...


class _KeptSlice:
    """A closed second, its histograms frozen: about a tenth of the open one's memory."""

    __slots__ = (*_Slice.__slots__, "p99_ms")

    def __init__(self, s: _Slice) -> None:
        self.second = s.second
        self.service = _Kept(s.service)
        self.queue = _Kept(s.queue)
        self.whole = _Kept(s.whole)
        self.behind = FrozenHist(s.behind)
        self.workers = {wid: _Kept(p) for wid, p in s.workers.items()}
        self.routes = {name: _Kept(p) for name, p in s.routes.items()}
        self.status = tuple(s.status)
        p = percentiles(self.service)
        self.p99_ms = None if p is None else p.p99_ms  # for p99_series, read each poll
        self.formats = s.formats
        self.unstamped = s.unstamped
        self.negative = s.negative
        self.absurd = s.absurd
        self.bad_stamp = s.bad_stamp


def _add(part: _Part, v: int) -> None:
    """One value (µs) into a part: its bucket, its sum, its maximum."""
    i = _ceil(_log(v) * _INV) if v > 0 else ZERO
    hist = part.hist
    hist[i] = hist.get(i, 0) + 1
    part.total += v
    if v > part.top:
        part.top = v


def _buckets(values: list[int]) -> list[int]:
    """`loghist.bucket(v)` of each value (µs, >= 0), in C loops: the same expression as
    `loghist.buckets`, and zeros (their own bucket) without a Python loop."""
    if not values or min(values) > 0:
        return list(map(_ceil, map(mul, map(_log, values), repeat(_INV))))
    ones = map(_ceil, map(mul, map(_log, map(max, values, repeat(1))), repeat(_INV)))
    return list(map(add, ones, map(mul, map(not_, values), repeat(ZERO))))  # 0 -> ZERO


def _count_codes_in_python(counts: dict[bytes, int], codes: Iterable[bytes]) -> None:
    for code in codes:
        counts[code] = counts.get(code, 0) + 1


# `collections._count_elements`: the C loop behind `Counter.update` (as in core/loghist.py).
_count_codes: Callable[[dict[bytes, int], Iterable[bytes]], None] = getattr(
    collections, "_count_elements", _count_codes_in_python
)


def _count_into(part: _Part, values: list[int]) -> None:
    """Values (µs, >= 0, in any order) into a part: their buckets (zeros counted apart,
    so the others' go through `_buckets`' C loops alone), their sum, their maximum."""
    zeros = values.count(0)
    if zeros:
        part.hist[ZERO] = part.hist.get(ZERO, 0) + zeros
        values = list(filter(None, values))
        if not values:
            return
    loghist.count(part.hist, _buckets(values))
    part.total += sum(values)
    part.top = max(part.top, max(values))


def percentiles(part: _PartView) -> Percentiles | None:
    return percentiles_of(part.hist, part.total, part.top)


# The lines of a batch read at most, spread from its end, for the sample's K
# (`LatencyRecorder.sample_every`), and the readings kept: K is their lower median. A line
# outside the sample (uWSGI's log-5xx ...) says none and is passed over.
SAMPLE_LOOKBACK = 8
SAMPLE_MEMORY = 33


class LatencyRecorder:
    """The latency of the requests logged, per second, for windows and Prometheus.

    Not thread-safe: one thread ingests and reads (the poll loop's), as with every core fold.
    """

    def __init__(self, top: int = TOP_ROUTES, *, fast: bool = True) -> None:
        self.top = top
        self._fast = _fast_record if fast else None
        self.tally = LineTally()
        self.recorded = 0
        self._k_seen: deque[int] = deque(maxlen=SAMPLE_MEMORY)  # `sample_every`'s readings
        self._open = _Slice(-1)
        self._closed: deque[_KeptSlice] = deque(maxlen=SLICES)
        self._sum_service = _Cum()
        self._sum_queue = _Cum(loghist.QUEUE_BOUNDS)
        self._sum_status = [0] * len(STATUS_CLASSES)
        self._sum_routes: dict[str, _Cum] = {}
        self._route_of: dict[bytes, str] = {}
        self._running = {seconds: _Running(seconds) for seconds in WINDOWS}
        # the open second's lines from `_put_batch` not yet counted (`_flush`): their
        # service times, worker ids and paths; the nginx-stamped ones' raw waits and
        # service times
        self._pending_values: list[int] = []
        self._pending_wids: list[bytes] = []
        self._pending_paths: list[bytes] = []
        self._pending_waits: list[int] = []
        self._pending_served: list[int] = []

    # -- recording -----------------------------------------------------------------------

    def ingest(self, datagrams: Iterable[bytes], now: float) -> int:
        """Parse and record each datagram, all at `now`; answer how many were recorded."""
        lines = datagrams if isinstance(datagrams, list) else list(datagrams)
        self._read_sample(lines)
        if self._fast is not None:
            got = self._put_fast(self._fast, lines, now)
            return got if got is not None else self._put(map(parse_raw, lines), now)
        rows = parse_batch(lines)
        if rows is None:  # a line the batch regex does not take: each line parsed alone
            return self._put(map(parse_raw, lines), now)
        return self._put_batch(rows, now)

    def _read_sample(self, lines: list[bytes]) -> None:
        """K from up to `SAMPLE_LOOKBACK` lines spread over the batch (lines outside the
        sample passed over), kept with the last `SAMPLE_MEMORY` read: the K is their lower
        median, so a minority of lines cannot move it. A client can put a `uwk<K>` word
        just before the marker of its own line where the user's format ends in a field it
        sends (a user agent) with the plain tail; one line, or a few, says nothing then."""
        step = max(1, len(lines) // SAMPLE_LOOKBACK)
        for line in lines[::-step][:SAMPLE_LOOKBACK]:
            if UNSAMPLED_MARKER in line:
                continue
            k = sample_every(line)
            if k is not None:
                self._k_seen.append(k)

    @property
    def sample_every(self) -> int:
        """1 in how many requests uWSGI logs: 1 unless the instance samples
        (uwsgitune/uwsgi_sample.py); the lower median of the readings kept."""
        return statistics.median_low(self._k_seen) if self._k_seen else 1

    def add(self, line: RequestLine, now: float) -> None:
        """Record one parsed line (as `ingest` does for a datagram) at `now`."""
        stamp = None if line.stamp is None else line.stamp.encode("ascii", "replace")
        path = line.path.encode("utf-8", "surrogateescape")
        self._put([(*line[:6], stamp, path)], now)  # type: ignore[list-item]

    def _put(self, lines: Iterable[RawLine | LineFault], now: float) -> int:
        # The per-line path (a batch `parse_batch` refuses, and `add`): what every line
        # touches is held in locals; one log serves the three service-time histograms.
        second = int(now)
        s = self._open if second <= self._open.second else self._roll(second)
        faults = self.tally.faults
        service = s.service
        hist = service.hist
        total, top = service.total, service.top
        workers, routes, route_of, status = s.workers, s.routes, self._route_of, s.status
        stamped: list[tuple[int, bytes, int]] = []
        recorded = unstamped = 0
        for got in lines:
            if type(got) is not tuple:
                faults[got] += 1  # type: ignore[index]
                continue
            start, v, code, wid, _, _, stamp, path = got
            i = _ceil(_log(v) * _INV) if v > 0 else ZERO
            hist[i] = hist.get(i, 0) + 1
            total += v
            if v > top:
                top = v
            p = workers.get(wid) or self._worker(s, wid)
            h = p.hist
            h[i] = h.get(i, 0) + 1
            p.total += v
            if v > p.top:
                p.top = v
            p = routes.get(route_of.get(path) or self._name(path)) or self._route_part(s, path)
            h = p.hist
            h[i] = h.get(i, 0) + 1
            p.total += v
            if v > p.top:
                p.top = v
            status[_STATUS_OF[code]] += 1
            recorded += 1
            if stamp is None:
                unstamped += 1
            else:
                stamped.append((start, stamp, v))
        service.total, service.top = total, top
        s.unstamped += unstamped
        if stamped:
            self._stamps(s, stamped)
        self.tally.parsed += recorded
        self.recorded += recorded
        return recorded

    def _put_fast(self, fast: _FastRecord, lines: list[bytes], now: float) -> int | None:
        """Record a batch through the C path, or None (nothing recorded) when one of its
        lines needs the per-line parser. The C code counts the service times (the
        second's, its workers' and routes'), the status classes and the nginx waits in
        bounds; the other stamps and the waits out of bounds come back to be recorded
        here, by the Python code that records them line by line."""
        second = int(now)
        s = self._open if second <= self._open.second else self._roll(second)
        self._flush()  # lines a Python batch kept (none, unless `_fast` was switched)
        got = fast(
            lines,
            s.service,
            s.queue,
            s.whole,
            s.wfast,
            partial(self._worker, s),
            s.rfast,
            partial(self._route_part, s),
            _INV,
            ZERO,
            MAX_WAIT_US,
            MAX_PATHS,
        )
        if got is None:
            return None
        by_class, nginx, unstamped, others, odd = got
        status = s.status
        for i, k in enumerate(by_class):
            status[i] += k
        s.unstamped += unstamped
        if others:
            self._stamps(s, others)
        for wait, served in odd:
            self._wait(s, wait, served)
        if nginx:
            s.formats[NGINX] = s.formats.get(NGINX, 0) + nginx
        n = len(lines)
        self.tally.parsed += n
        self.recorded += n
        return n

    def _put_batch(self, rows: list[FastLine], now: float) -> int:
        """Record a batch that `parse_batch` read (every line good): its columns read
        into numbers now, while the batch is in the CPU's caches (C loops: `zip`, `map`,
        counting), and kept for `_flush`, which counts many batches' lines into the
        second's histograms at once. Other stamp formats than nginx's are recorded now,
        line by line (`_stamps`)."""
        second = int(now)
        s = self._open if second <= self._open.second else self._roll(second)
        n = len(rows)
        starts, services, codes, wids, secs, millis, stamps, paths = zip(*rows, strict=True)
        vs = list(map(int, services))
        by_code: dict[bytes, int] = {}
        _count_codes(by_code, codes)  # Counter's C loop, without a Counter
        status = s.status
        for code, k in by_code.items():
            status[_STATUS_OF[int(code)]] += k
        self._pending_values += vs
        self._pending_wids += wids
        self._pending_paths += paths
        # the stamps: nginx's t=${msec} at once, other formats line by line, then nginx's
        # (the order in which `_stamps` counts the formats)
        nginx = n - secs.count(b"")
        unstamped = 0 if nginx == n else stamps.count(b"-") + stamps.count(b"") - nginx
        s.unstamped += unstamped
        if nginx + unstamped < n:
            self._stamps(
                s,
                [
                    (int(start), stamp, v)
                    for start, sec, stamp, v in zip(starts, secs, stamps, vs, strict=True)
                    if not sec and stamp != b"-" and stamp
                ],
            )
        if nginx:
            if nginx < n:
                kept = list(map(bool, secs))
                starts, secs, millis = (
                    tuple(compress(starts, kept)),
                    tuple(compress(secs, kept)),
                    tuple(compress(millis, kept)),
                )
                vs = list(compress(vs, kept))
            marks = map(int, map(add, secs, millis))  # ms since the epoch
            self._pending_waits += map(sub, map(int, starts), map(mul, marks, repeat(1000)))
            self._pending_served += vs
            s.formats[NGINX] = s.formats.get(NGINX, 0) + nginx
        if len(self._pending_values) >= MAX_PENDING:
            self._flush()
        self.tally.parsed += n
        self.recorded += n
        return n

    def _flush(self) -> None:
        """Count the lines kept by `_put_batch` into the open second (its service,
        worker, route, queue and whole histograms, sums and maxima), all at once: before
        the second closes or anything reads it."""
        values = self._pending_values
        if not values:
            return
        s, wids, paths = self._open, self._pending_wids, self._pending_paths
        waits, served = self._pending_waits, self._pending_served
        self._pending_values, self._pending_wids, self._pending_paths = [], [], []
        self._pending_waits, self._pending_served = [], []
        indexes = _buckets(values)
        service = s.service
        loghist.count(service.hist, indexes)
        service.total += sum(values)
        service.top = max(service.top, max(values))
        self._by_worker_and_route(s, wids, paths, values, indexes)
        if waits:
            self._waits(s, waits, served)

    def _by_worker_and_route(
        self,
        s: _Slice,
        wids: Sequence[bytes],
        paths: Sequence[bytes],
        values: list[int],
        indexes: list[int],
    ) -> None:
        """Each line's value (µs) and its bucket into its worker's part and its route's:
        the parts found once per distinct worker id and path (in the order they first
        come, as line by line), then one loop that counts into their histograms and keeps
        each one's sum and maximum in lists (the fastest CPython has for this: no sort, no
        attribute or method per line)."""
        workers, routes, route_of = s.workers, s.routes, self._route_of
        wcode = {wid: i for i, wid in enumerate(dict.fromkeys(wids))}
        rcode = {path: i for i, path in enumerate(dict.fromkeys(paths))}
        wparts = [workers.get(wid) or self._worker(s, wid) for wid in map(int, wcode)]
        rparts = [
            routes.get(name) or self._route_named(s, name)
            for name in (route_of.get(p) or self._name(p) for p in rcode)
        ]
        whists = [p.hist for p in wparts]
        rhists = [p.hist for p in rparts]
        wsum, wtop = [0] * len(wparts), [0] * len(wparts)
        rsum, rtop = [0] * len(rparts), [0] * len(rparts)
        for w, r, v, i in zip(
            map(wcode.__getitem__, wids),
            map(rcode.__getitem__, paths),
            values,
            indexes,
            strict=True,
        ):
            h = whists[w]
            h[i] = h.get(i, 0) + 1
            wsum[w] += v
            if v > wtop[w]:
                wtop[w] = v
            h = rhists[r]
            h[i] = h.get(i, 0) + 1
            rsum[r] += v
            if v > rtop[r]:
                rtop[r] = v
        for parts, sums, tops in ((wparts, wsum, wtop), (rparts, rsum, rtop)):
            for part, total, top in zip(parts, sums, tops, strict=True):
                part.total += total
                if top > part.top:
                    part.top = top

    def _waits(self, s: _Slice, waits: list[int], served: list[int]) -> None:
        """Record the queue waits (µs, raw: any sign) of stamped requests and their whole
        times (wait + service): those in bounds at once, the others one by one."""
        if min(waits) < 0 or max(waits) > MAX_WAIT_US:
            ok = [0 <= v <= MAX_WAIT_US for v in waits]
            for v, service, good in zip(waits, served, ok, strict=True):
                if not good:
                    self._wait(s, v, service)
            waits, served = list(compress(waits, ok)), list(compress(served, ok))
            if not waits:
                return
        _count_into(s.queue, waits)
        _count_into(s.whole, list(map(add, waits, served)))

    def _wait(self, s: _Slice, v: int, served: int) -> None:
        """One raw queue wait: in bounds, negative (counted as 0, its size kept for the
        skew) or absurd (counted, not recorded)."""
        queue = s.queue
        if 0 <= v <= MAX_WAIT_US:
            _add(queue, v)
        elif classify_wait(v) is WaitKind.NEGATIVE:
            s.negative += 1
            queue.hist[ZERO] = queue.hist.get(ZERO, 0) + 1  # counted as a wait of 0
            loghist.record(s.behind, -v)
            v = 0
        else:
            s.absurd += 1
            return
        _add(s.whole, v + served)  # the request's whole time: its wait, then its service

    def _stamps(self, s: _Slice, stamped: list[tuple[int, bytes, int]]) -> None:
        queue, whole = s.queue, s.whole
        hist, formats = queue.hist, s.formats
        total, top = queue.total, queue.top
        nginx = 0
        for start, stamp, served in stamped:
            if stamp[:2] == b"t=" and len(stamp) == 16 and stamp[12] == 46:
                # nginx's t=${msec}, as parse_stamp reads it, in line (the common case)
                text = stamp[2:12] + stamp[13:]
                if text.isdigit() and text[0] != 48:  # 48: "0", a 1970 stamp
                    nginx += 1
                    v = start - int(text) * 1000
                else:
                    s.bad_stamp += 1
                    continue
            else:
                read = parse_stamp(stamp)
                if read is None:
                    s.bad_stamp += 1
                    continue
                fmt = read[1]
                formats[fmt] = formats.get(fmt, 0) + 1
                v = start - read[0]
            if 0 <= v <= MAX_WAIT_US:  # classify_wait's OK, in line
                i = _ceil(_log(v) * _INV) if v > 0 else ZERO
                hist[i] = hist.get(i, 0) + 1
                total += v
                if v > top:
                    top = v
            elif classify_wait(v) is WaitKind.NEGATIVE:
                s.negative += 1
                hist[ZERO] = hist.get(ZERO, 0) + 1  # counted as a wait of 0
                loghist.record(s.behind, -v)
                v = 0
            else:
                s.absurd += 1
                continue
            _add(whole, v + served)  # the request's whole time: its wait, then its service
        queue.total, queue.top = total, top
        if nginx:
            formats[NGINX] = formats.get(NGINX, 0) + nginx

    def _name(self, path: bytes) -> str:
        """The route of a path (core/route.py), remembered for the next request."""
        name = route(path.decode("utf-8", "replace"))
        if len(self._route_of) < MAX_PATHS:
            self._route_of[path] = name
        return name

    def _worker(self, s: _Slice, wid: int) -> _Part:
        key = wid if len(s.workers) < MAX_WORKERS else OTHER_WORKER
        return s.workers.setdefault(key, _Part())

    def _route_part(self, s: _Slice, path: bytes) -> _Part:
        """The part of a path's route in `s`, as the per-line path finds it."""
        name = self._route_of.get(path) or self._name(path)
        return s.routes.get(name) or self._route_named(s, name)

    def _route_named(self, s: _Slice, name: str) -> _Part:
        key = name if len(s.routes) < MAX_ROUTES else OTHER
        return s.routes.setdefault(key, _Part())

    def _roll(self, second: int) -> _Slice:
        """Close the open slice (fold it into the totals), open one for `second`."""
        self._flush()
        done = self._open
        if done.second >= 0:
            self._fold(done)
            kept = _KeptSlice(done)
            self._closed.append(kept)
            for running in self._running.values():
                running.add(kept)
                running.expire(second)
        self._open = _Slice(second)
        return self._open

    def _fold(self, s: _Slice) -> None:
        self._sum_service.absorb(s.service)
        self._sum_queue.absorb(s.queue)
        for i, n in enumerate(s.status):
            self._sum_status[i] += n
        for name, part in s.routes.items():
            key = name
            if key not in self._sum_routes and len(self._sum_routes) >= MAX_EXPORTED_ROUTES:
                key = OTHER
            self._sum_routes.setdefault(key, _Cum()).absorb(part)

    # -- reading -------------------------------------------------------------------------

    def _recent(self, now: float, seconds: int) -> list[_SliceView]:
        since = int(now) - seconds
        slices: list[_SliceView] = [s for s in self._closed if since < s.second <= now]
        if since < self._open.second <= now:
            slices.append(self._open)
        return slices

    def window(self, now: float, seconds: int) -> LatencyWindow:
        """The last `seconds` (up to SLICES) before `now`, the current second included.

        A window of `WINDOWS` is read from its running sums; `now` must then not go back
        (seconds it has left are gone from the sums).
        """
        self._flush()
        seconds = min(seconds, SLICES)
        slices = self._recent(now, seconds)
        running = self._running.get(seconds)
        if running is None:
            service, queue, whole, workers, routes = _merge(slices)
        else:
            running.expire(int(now))
            service, queue, whole, workers, routes = _merge_running(running, slices, self._open)
        status = [0] * len(STATUS_CLASSES)
        for s in slices:
            for i, n in enumerate(s.status):
                status[i] += n
        shown = {wid: p for wid, p in ((w, percentiles(part)) for w, part in workers.items()) if p}
        return LatencyWindow(
            seconds=seconds,
            requests=sum(status),
            service=percentiles(service),
            queue=percentiles(queue),
            total=percentiles(whole),
            workers=dict(sorted(shown.items())),
            routes=self._top_routes(routes, service),
            status=dict(zip(STATUS_CLASSES, status, strict=True)),
            stamps=_stamp_report(slices),
        )

    def _top_routes(self, routes: _Routes, service: _Part) -> tuple[RouteLatency, ...]:
        """The `top` routes by service time, then OTHER: the rest, found as the whole
        service time less the routes kept (every request is under exactly one route), so
        only the kept routes' histograms are built."""
        ranked = sorted(routes.totals.items(), key=lambda kv: (-kv[1], kv[0]))
        kept = [(n, routes.part(n)) for n, _ in ranked[: self.top] if n != OTHER]
        names = {n for n, _ in kept}
        other = _Part()
        other.hist = dict(service.hist)
        other.total = service.total
        for _, part in kept:
            loghist.unmerge(other.hist, part.hist)
            other.total -= part.total
        other.top = max((t for n, t in routes.tops().items() if n not in names), default=0)
        if other.hist:
            kept.append((OTHER, other))
        out = []
        total = service.total
        for name, part in kept:
            p = percentiles(part)
            if p is not None:
                share = part.total / total if total else 0.0
                out.append(RouteLatency(name, p.count, p.p50_ms, p.p99_ms, share))
        return tuple(out)

    def p99_series(self, now: float, seconds: int = SLICES) -> tuple[float | None, ...]:
        """One p99 of service time (ms) per second, oldest first; None for a second unheard."""
        self._flush()
        by_second = {s.second: s for s in self._recent(now, min(seconds, SLICES))}
        out: list[float | None] = []
        for second in range(int(now) - min(seconds, SLICES) + 1, int(now) + 1):
            s = by_second.get(second)
            if isinstance(s, _KeptSlice):
                out.append(s.p99_ms)
            else:
                p = percentiles(s.service) if s is not None else None
                out.append(None if p is None else p.p99_ms)
        return tuple(out)

    def export(self) -> LatencyExport:
        """Cumulative totals for Prometheus: the closed slices plus the open one."""
        self._flush()
        s = self._open
        status = [a + b for a, b in zip(self._sum_status, s.status, strict=True)]
        routes = {name: total.copy() for name, total in self._sum_routes.items()}
        for name, part in s.routes.items():
            key = name if name in routes or len(routes) < MAX_EXPORTED_ROUTES else OTHER
            routes.setdefault(key, _Cum()).absorb(part)
        return LatencyExport(
            duration=self._sum_service.copy().absorb(s.service).prom(),
            queue=self._sum_queue.copy().absorb(s.queue).prom(),
            status=dict(zip(STATUS_CLASSES, status, strict=True)),
            routes={name: total.prom() for name, total in sorted(routes.items())},
        )


class _Cum:
    """A Prometheus histogram's running totals: cumulative counts per `le` bound (then
    +Inf) and the sum (µs). Cumulative counts add up, so a second is folded in as its own
    cumulative counts: the fine histograms of the totals are never kept."""

    __slots__ = ("bounds", "cum", "total")

    def __init__(self, bounds: tuple[float, ...] = loghist.PROM_BOUNDS) -> None:
        self.bounds = bounds
        self.cum = [0] * (len(bounds) + 1)
        self.total = 0

    def copy(self) -> _Cum:
        out = _Cum(self.bounds)
        out.cum = self.cum.copy()
        out.total = self.total
        return out

    def absorb(self, part: _PartView) -> _Cum:
        if len(part.hist):
            self.cum = list(map(add, self.cum, loghist.cumulative(part.hist, self.bounds)))
            self.total += part.total
        return self

    def prom(self) -> PromHistogram:
        cum = self.cum
        return PromHistogram(self.bounds, tuple(cum), cum[-1], self.total / 1e6)


class _Routes:
    """A window's routes: each one's total service time for ranking, its part built on
    demand (`part`), and each one's maximum (`tops`, read once)."""

    def __init__(
        self,
        totals: dict[str, int],
        part: Callable[[str], _Part],
        tops: Callable[[], dict[str, int]],
    ) -> None:
        self.totals = totals
        self.part = part
        self.tops = tops


Merged = tuple[_Part, _Part, _Part, dict[int, _Part], _Routes]


def _merge(slices: list[_SliceView]) -> Merged:
    """Service, queue, per worker and per route, merged from each second (any window)."""
    service, queue, whole = _Part(), _Part(), _Part()
    workers: dict[int, _Part] = {}
    routes: dict[str, _Part] = {}
    for s in slices:
        service.absorb(s.service)
        queue.absorb(s.queue)
        whole.absorb(s.whole)
        for wid, part in s.workers.items():
            workers.setdefault(wid, _Part()).absorb(part)
        for name, part in s.routes.items():
            routes.setdefault(name, _Part()).absorb(part)
    totals = {name: part.total for name, part in routes.items()}
    return (
        service,
        queue,
        whole,
        workers,
        _Routes(totals, routes.__getitem__, lambda: {n: p.top for n, p in routes.items()}),
    )


def _merge_running(running: _Running, slices: list[_SliceView], open_: _Slice) -> Merged:
    """The same from a window's running sums and the open second (when in the window)."""
    live = open_ if slices and slices[-1] is open_ else None
    service = running.service.with_open(
        live.service if live else None, max(s.service.top for s in slices) if slices else 0
    )
    queue = running.queue.with_open(
        live.queue if live else None, max(s.queue.top for s in slices) if slices else 0
    )
    whole = running.whole.with_open(
        live.whole if live else None, max(s.whole.top for s in slices) if slices else 0
    )
    workers: dict[int, _Part] = {}
    for wid in set(running.workers) | set(live.workers if live else ()):
        top = max((s.workers[wid].top for s in slices if wid in s.workers), default=0)
        part = live.workers.get(wid) if live else None
        workers[wid] = running.workers.get(wid, _Sum()).with_open(part, top)
    live_routes: Mapping[str, _PartView] = live.routes if live else {}
    totals = {name: total.total for name, total in running.routes.items()}
    for name, live_part in live_routes.items():
        totals[name] = totals.get(name, 0) + live_part.total
    tops_memo: dict[str, int] = {}

    def tops() -> dict[str, int]:
        if not tops_memo:
            for s in slices:
                for name, kept in s.routes.items():
                    if kept.top > tops_memo.get(name, -1):
                        tops_memo[name] = kept.top
        return tops_memo

    def route_part(name: str) -> _Part:
        return running.routes.get(name, _Sum()).with_open(
            live_routes.get(name), tops().get(name, 0)
        )

    return service, queue, whole, workers, _Routes(totals, route_part, tops)


def _stamp_report(slices: list[_SliceView]) -> StampReport:
    formats: dict[StampFormat, int] = {}
    behind: Hist = {}
    stamped = unstamped = bad = negative = absurd = 0
    for s in slices:
        for fmt, n in s.formats.items():
            formats[fmt] = formats.get(fmt, 0) + n
        loghist.merge(behind, s.behind)
        stamped += sum(s.queue.hist.values())
        unstamped += s.unstamped
        bad += s.bad_stamp
        negative += s.negative
        absurd += s.absurd
    skew = skew_offset(_low_quantile(behind, negative, stamped))
    note = skew[1] if skew else None
    if stamped == 0 and unstamped > 0:
        note = NO_STAMP
    return StampReport(
        stamped=stamped,
        unstamped=unstamped,
        bad=bad,
        negative=negative,
        absurd=absurd,
        format=max(formats, key=lambda f: formats[f]).name if formats else None,
        skew_ms=skew[0] / 1e3 if skew else None,
        note=note,
    )


def _low_quantile(behind: Hist, negative: int, waits: int) -> float | None:
    """The SKEW_MIN_SHARE quantile of the raw waits (µs) when it is below zero, else None.

    `behind` counts |raw| of the `negative` waits among all `waits`: the k-th smallest raw
    wait is minus the (negative - k + 1)-th smallest of them.
    """
    if negative == 0:
        return None
    k = loghist.rank(SKEW_MIN_SHARE, waits)
    if k > negative:
        return None
    (value,) = loghist.at_ranks(behind, (negative - k + 1,))
    return -value
