"""What the latency recorder (`core/latency.py`) answers with: frozen values for the sinks.

A `LatencyWindow` is one window (10 s or 60 s) of real traffic: service time and queue wait
as `Percentiles` (ms; nearest-rank, within 0.5% of the exact percentiles of the same
requests; max exact), per worker, the slowest routes (`RouteLatency`, the rest folded into
`OTHER`), requests by status class (`STATUS_CLASSES`), and the proxy stamps' `StampReport`.
A `LatencyExport` is the cumulative Prometheus view: `PromHistogram`s for
`uwsgi_request_duration_seconds` and `uwsgi_request_queue_seconds` (bounds in seconds,
cumulative counts, then +Inf), requests by status class, per route. `coverage` turns the
lines recorded and the requests the stats counted into the share logged.

Values are raw (ms, s, counts): sinks format them through `core/units.py`. The dataclasses
are plain and frozen, so `dataclasses.asdict` gives `watch --json` and recordings their form.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from uwsgitune.core import loghist
from uwsgitune.core.loghist import Counts

OTHER = "other"  # the routes beyond the cap or the top N
OTHER_WORKER = -1  # the workers beyond the cap
STATUS_CLASSES = ("other", "1xx", "2xx", "3xx", "4xx", "5xx")


@dataclass(frozen=True)
class Percentiles:
    """A latency spread in ms: nearest-rank percentiles (within 0.5%), exact max and mean."""

    count: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float
    mean_ms: float
    min_ms: float  # the lowest bucket's value: within 0.5% of the exact minimum


@dataclass(frozen=True)
class RouteLatency:
    route: str
    count: int
    p50_ms: float
    p99_ms: float
    share: float  # of the window's total service time, 0..1


@dataclass(frozen=True)
class StampReport:
    """How the proxy's stamps fared in a window, and what a person is told about them."""

    stamped: int  # requests whose stamp gave a queue wait (negative ones included, as 0)
    unstamped: int
    bad: int  # a stamp in no known format
    negative: int  # waits below zero: counted as 0
    absurd: int  # waits beyond the bounds: not recorded
    format: str | None  # the format most stamps were read as
    skew_ms: float | None  # the proxy's clock lead, stated, never applied
    note: str | None  # the sentence: no stamp, or the skew


@dataclass(frozen=True)
class LatencyWindow:
    seconds: int
    requests: int
    service: Percentiles | None  # None: no request in the window
    queue: Percentiles | None  # None: no stamped request
    workers: Mapping[int, Percentiles]  # by worker id (OTHER_WORKER: beyond the cap)
    routes: tuple[RouteLatency, ...]  # by share of service time, then OTHER
    status: Mapping[str, int]  # STATUS_CLASSES -> requests
    stamps: StampReport
    # queue wait + service time of each stamped request: the percentiles of the whole time,
    # exact within 0.5% (the sum of the two percentiles above overstates them)
    total: Percentiles | None = None


@dataclass(frozen=True)
class PromHistogram:
    """One Prometheus histogram: cumulative counts per `le` bound, then +Inf; sum in s."""

    bounds: tuple[float, ...]
    cumulative: tuple[int, ...]
    count: int
    sum_seconds: float


@dataclass(frozen=True)
class LatencyExport:
    duration: PromHistogram
    queue: PromHistogram
    status: Mapping[str, int]
    routes: Mapping[str, PromHistogram]


def percentiles_of(hist: Counts, total_us: int, top_us: int) -> Percentiles | None:
    """The spread of a histogram (µs) with its sum and exact maximum; None when empty."""
    n = sum(hist.values())
    if n == 0:
        return None
    # one pass over the sorted buckets for the lowest bucket and the three percentiles,
    # these capped by the exact maximum (the last rank's answer is the maximum itself)
    ranks = [loghist.rank(q, n) for q in (0.5, 0.95, 0.99)]
    low, *values = loghist.at_ranks(hist, [1, *ranks])
    p50, p95, p99 = (
        top_us if r == n else min(v, top_us) for r, v in zip(ranks, values, strict=True)
    )
    return Percentiles(
        n, p50 / 1e3, p95 / 1e3, p99 / 1e3, top_us / 1e3, total_us / n / 1e3, low / 1e3
    )


def coverage(lines: int, requests: int) -> float | None:
    """The share of the requests the stats counted that arrived as log lines, 0..1.

    Both are deltas over the same polls. The stats and the datagrams are not read at the same
    instant, so a period can see a few more lines than requests: the share is capped at 1.
    None when the stats counted no request.
    """
    if requests <= 0:
        return None
    return max(0.0, min(1.0, lines / requests))


@dataclass(frozen=True)
class LatencyView:
    """The live latency of one instance at one poll, as every sink reads it
    (`InstanceState.latency`; built by `pipeline/latencystage.py` once per poll).

    `short` and `long` are the last 10 s and 60 s of the lines recorded; `p99_series` one
    p99 of service time (ms) per second of the last 60, oldest first (None: a second with no
    line); `export` the cumulative Prometheus view. `lines` counts the lines recorded since
    uwsgitune began listening; `coverage` is the share of the requests the stats counted over
    the last 60 s that arrived as lines (None: no request counted, or no rate yet).

    Trust: `trusted` is False while any line recorded in the last 60 s came from a sender that
    could not be proved to be the instance's master (`trust_note` says why, in one line);
    such lines are shown but must never drive an apply. Lines from a sender proved NOT to be
    the master's are never recorded: `refused` counts them. `faults` counts what was not
    recorded, by kind (the parser's `LineFault`s, lowercased, and the receiver's `oversized`,
    `empty`, `cut`, `kernel_drops`); `mismatch` is the one line naming the ini line to fix
    when most lines do not match the format. `little_wait_ms` is the mean queue wait from
    the kernel's listen queue by Little's law (Lq / λ over the last 10 s), the estimate
    used when the proxy stamps nothing. `silent_for`: seconds since the last line arrived
    (None: none yet). `sample_every`: uWSGI logs 1 request in this many (1: every request;
    K > 1 with uwsgitune/uwsgi_sample.py): the percentiles are of a uniform sample, the
    counts (`lines`, the windows', the routes', `export`'s) are of the lines, and `coverage`
    counts each line for K requests."""

    address: str
    short: LatencyWindow
    long: LatencyWindow
    p99_series: tuple[float | None, ...]
    export: LatencyExport
    lines: int = 0
    coverage: float | None = None
    trusted: bool = True
    trust_note: str | None = None
    refused: int = 0
    faults: Mapping[str, int] = field(default_factory=dict)
    mismatch: str | None = None
    little_wait_ms: float | None = None
    silent_for: float | None = None
    sample_every: int = 1

    @property
    def stamped(self) -> bool:
        """The proxy stamps requests: `short.queue` is a measured queue wait."""
        return self.short.queue is not None

    def queue_trusted(self) -> bool:
        """Measured queue waits a consumer may act on: stamped, and no clock skew stated."""
        return self.stamped and self.short.stamps.skew_ms is None
