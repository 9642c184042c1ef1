"""The metrics: what each instance's latest state becomes as Prometheus metric families.

The collector (`UwsgiCollector`) follows prometheus_client's pattern for proxying another
system: `collect()` yields metric families built from one fresh read of the states, and
nothing is kept between scrapes, so a worker or an instance that is gone is gone from the
output. Each family holds the samples of every instance, each sample labelled `stats_uri`,
as the exposition format wants one family per name (`Families`). An instance whose last
poll failed shows `uwsgi_up 0` and none of its other uWSGI metrics; uwsgitune's own metrics
(poll errors, findings, actions) stay. An instance's families are built apart from the
others': whatever fails there costs only that instance its metrics, never the scrape.

What is exported, in the order `add_snapshot` adds it:
- **uwsgi_exporter's families** (timonwong/uwsgi_exporter 1.3), same names, labels and
  types. Existing Grafana dashboards and alerts query these, so they copy the exporter,
  quirks included: workers are the slots with `id != 0` (never-spawned slots are skipped,
  cheaped ones stay), `average_response_time_seconds` is uWSGI's half-life `avg_rt` (the
  true mean is `uwsgitune_mean_response_time_seconds`), and socket queues are what the stats
  say (0 for unix sockets; the kernel's numbers are `uwsgitune_socket_queue_length`). One
  deliberate improvement: `uwsgi_worker_rss_bytes` falls back to psutil without
  `--memory-report`. The exporter's own `uwsgi_exporter_scrape*` count uwsgitune's polls
  (it read the stats once per scrape; uwsgitune reads them once per poll), and carry
  `stats_uri` (the exporter's have no label: with one instance per process it needed none,
  and its /probe shared one set across every target: `handleProbe` gets one `NewMetrics()`).
- **Its optional families:** per-core (`--collect.cores`) is off by default, as in the
  exporter: an async pool of 64 workers x 1,000 cores would be 448,000 series. Caches:
  `hits`, `misses` and `full` are counters in the exporter but named without `_total`,
  which `promtool check metrics` rejects; they keep their names and are typed gauges here
  (PromQL's `rate()` reads them the same).
- **uWSGI's own metrics subsystem** (`--enable-metrics`, and the app's `--metric` values),
  as `uwsgi_metric{name=...}` (gauges) and `uwsgi_metric_total{name=...}` (counters). The
  stats document carries them under `metrics` as `{name: {type, oid, value}}`; types, from
  uWSGI's core/metrics.c: 0 counter, 1 gauge, 2 absolute (a value set from outside: a
  gauge), 3 alias (a gauge; it mirrors another metric). With 64 workers the built-in
  `worker.N.*` and `worker.N.core.M.*` names alone are ~1,000 series that repeat the
  `uwsgi_worker_*` families, so the count is capped (`uwsgi_metrics_max_series`): the app's
  and the `core.*` metrics are kept first, `worker.*` after them, in document order, and
  the number left out is `uwsgitune_uwsgi_metrics_dropped`.
- **The request log** (`--latency`, `state.latency`; docs/latency.md), from the cumulative
  totals the latency stage computes once per poll (`LatencyView.export`):
  `uwsgi_request_duration_seconds` (service time) and, once the proxy stamps requests,
  `uwsgi_request_queue_seconds`, histograms with log-spaced `le` bounds from 1 ms to 30 s
  (`loghist.PROM_BOUNDS`: ten a decade, so `histogram_quantile` interpolates within a few
  percent; the queue's `loghist.QUEUE_BOUNDS` from 10 µs);
  `uwsgi_request_status_total{class}`; per route, only with `latency_routes`
  (`uwsgi_request_route_duration_seconds{route}`: 47 buckets a route, so at most
  `MAX_EXPORTED_ROUTES` routes, then `other`, about 2,500 series). They are uwsgi_* names
  (`REQUEST_LOG_PREFIX`) as the issue names them and `histogram_quantile` users look for
  them, beside the 31 of uwsgi_exporter, which stay exactly its own. How far to trust them is
  uwsgitune's: `uwsgitune_latency_coverage_ratio` (lines logged / requests counted),
  `uwsgitune_latency_sampled_ratio` (1, or 1/K when uWSGI logs a sample: the request
  counts are then of the sample), `uwsgitune_latency_lines_total`,
  `uwsgitune_latency_lines_refused_total` (a foreign
  sender), `uwsgitune_latency_faults_total{kind}`, `uwsgitune_latency_trusted`, and the
  proxy's clock lead when the stamps show one, `uwsgitune_latency_proxy_clock_skew_seconds`.
- **uwsgitune's own** (`uwsgitune_*`): what no exporter has (the true mean response time,
  Little's L, busy ratio, CPU saturation, the kernel's socket queues), the findings, the
  recommendations, the actions, the tuner's wish, the polls' counts; and the process's
  `uwsgitune_build_info`, as `uwsgi_exporter_build_info`.

Samples are appended directly (`Metric.add_sample` is what the typed families' `add_metric`
ends in, without its per-call list and zip): a 64-worker scrape adds ~1,400 of them.
"""

from __future__ import annotations

import logging
import platform
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from prometheus_client import ProcessCollector
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from uwsgitune import __version__
from uwsgitune.core import model
from uwsgitune.core.frame import Frame, WorkerView
from uwsgitune.core.latencyreport import STATUS_CLASSES, LatencyView, PromHistogram
from uwsgitune.core.model import Cache, Core, StatsDoc, Worker
from uwsgitune.core.signals import cpu_saturation
from uwsgitune.pipeline.latencystage import FAULT_KINDS
from uwsgitune.pipeline.state import InstanceState

StateSource = Callable[[], Iterable[InstanceState]]
log = logging.getLogger(__name__)
US = 1e6


@dataclass(frozen=True)
class ExportOptions:
    collect_cores: bool = False  # uwsgi_exporter's --collect.cores
    uwsgi_metrics_max_series: int = 500  # cap on uwsgi_metric{name} series per instance
    latency_routes: bool = False  # uwsgi_request_route_duration_seconds{route} (--latency-routes)


class Families:
    """A set of metric families filled instance by instance, yielded once per scrape. Families
    with no sample are not yielded."""

    def __init__(self) -> None:
        self._families: dict[str, Metric] = {}

    def _family(self, kind: str, name: str, doc: str) -> Metric:
        family = self._families.get(name)
        if family is None:
            # A counter family is named without `_total`; its samples carry it.
            base = name.removesuffix("_total") if kind == "counter" else name
            family = self._families[name] = Metric(base, doc, kind)
        return family

    def gauge(self, name: str, doc: str, uri: str, value: float | None, /, **labels: str) -> None:
        """Add one sample; `None` (unknown) adds nothing rather than a misleading zero."""
        if value is not None:
            labels["stats_uri"] = uri
            self._family("gauge", name, doc).samples.append(Sample(name, labels, float(value)))

    def counter(self, name: str, doc: str, uri: str, value: float | None, /, **labels: str) -> None:
        """`name` ends in `_total`, as it appears in the output."""
        if value is not None:
            labels["stats_uri"] = uri
            self._family("counter", name, doc).samples.append(Sample(name, labels, float(value)))

    def summary(self, name: str, doc: str, uri: str, count: int, total: float) -> None:
        samples = self._family("summary", name, doc).samples
        samples.append(Sample(f"{name}_count", {"stats_uri": uri}, float(count)))
        samples.append(Sample(f"{name}_sum", {"stats_uri": uri}, float(total)))

    def histogram(
        self, name: str, doc: str, uri: str, hist: PromHistogram, /, **labels: str
    ) -> None:
        """One histogram series: its cumulative `_bucket`s (`le` ascending, then +Inf),
        `_count` and `_sum`, as prometheus_client's HistogramMetricFamily writes them."""
        samples = self._family("histogram", name, doc).samples
        labels["stats_uri"] = uri
        bucket = f"{name}_bucket"
        for le, n in zip(_le_texts(hist.bounds), hist.cumulative, strict=True):
            samples.append(Sample(bucket, {**labels, "le": le}, float(n)))
        samples.append(Sample(f"{name}_count", labels, float(hist.count)))
        samples.append(Sample(f"{name}_sum", labels, hist.sum_seconds))

    def merge(self, other: Families) -> None:
        """Add every sample of `other` (one instance's families) to these."""
        for name, family in other._families.items():
            mine = self._families.get(name)
            if mine is None:
                self._families[name] = family
            else:
                mine.samples.extend(family.samples)

    def __iter__(self) -> Iterator[Metric]:
        return (f for f in self._families.values() if f.samples)


_LE_TEXTS: dict[tuple[float, ...], tuple[str, ...]] = {}


def _le_texts(bounds: tuple[float, ...]) -> tuple[str, ...]:
    """The `le` label values of `bounds`, then `+Inf`: formatted once per set of bounds."""
    texts = _LE_TEXTS.get(bounds)
    if texts is None:
        texts = _LE_TEXTS[bounds] = (*map(floatToGoString, bounds), "+Inf")
    return texts


class UwsgiCollector(Collector):
    """Yields every family from `source()`, called once per scrape."""

    def __init__(self, source: StateSource, options: ExportOptions | None = None) -> None:
        self._source = source
        self.options = options or ExportOptions()

    def collect(self) -> Iterator[Metric]:
        out = Families()
        for snap in self._source():
            out.merge(instance_families(snap, self.options))
        yield from out


def instance_families(snap: InstanceState, options: ExportOptions) -> Families:
    """One instance's families, built apart: whatever fails there costs only that instance
    its metrics (it reads `uwsgi_up 0`), never another instance's or the scrape."""
    own = Families()
    try:
        add_snapshot(own, snap, options)
    except Exception as exc:  # a bug or a value the model let through: isolate it
        name = type(exc).__name__
        log.warning("metrics of %s dropped from this scrape: %s", snap.stats_uri, name)
        own = Families()
        add_up(own, snap.stats_uri, False)
    return own


def add_snapshot(out: Families, snap: InstanceState, options: ExportOptions | None = None) -> None:
    options = options or ExportOptions()
    uri = snap.stats_uri
    add_up(out, uri, snap.up)
    add_exporter_self(out, snap)
    add_own(out, snap)
    if snap.latency is not None:
        add_latency(out, uri, snap.latency, options.latency_routes)
    add_utilisation(out, snap)
    doc, frame = snap.doc, snap.frame
    if not snap.up or doc is None or frame is None:
        return
    add_main(out, uri, doc)
    add_sockets(out, uri, doc)
    add_workers(out, uri, doc, frame.workers)
    if options.collect_cores:
        add_cores(out, uri, doc)
    add_caches(out, uri, doc)
    add_uwsgi_metrics(out, uri, doc, options.uwsgi_metrics_max_series)
    add_frame(out, uri, frame)
    add_fleet_inputs(out, uri, doc, frame)
    add_host(out, snap)


# uwsgi_exporter's families -------------------------------------------------------------

# (name, help, value) of the per-worker gauges and counters, in the exporter's order.
WorkerValue = Callable[[Worker, WorkerView | None], float]
WORKER_GAUGES: tuple[tuple[str, str, WorkerValue], ...] = (
    ("accepting", "Is this worker accepting requests?", lambda w, v: w.accepting),
    ("delta_requests", "Number of delta requests", lambda w, v: w.delta_requests),
    ("signal_queue_length", "Length of signal queue.", lambda w, v: w.signal_queue),
    ("rss_bytes", "Worker RSS bytes.", lambda w, v: v.rss if v and v.rss else w.rss),
    ("vsz_bytes", "Worker VSZ bytes.", lambda w, v: w.vsz),
    ("running_time_seconds", "Worker running time in seconds.", lambda w, v: w.running_time / US),
    (
        "last_spawn_time_seconds",
        "Last spawn time in seconds since epoch.",
        lambda w, v: w.last_spawn,
    ),
    (
        "average_response_time_seconds",
        "Average response time in seconds (uWSGI's avg_rt: (avg + last) / 2, not a mean).",
        lambda w, v: w.avg_rt / US,
    ),
    ("apps", "Number of apps.", lambda w, v: len(w.apps)),
    ("cores", "Number of cores.", lambda w, v: len(w.cores)),
    ("busy", "Is busy", lambda w, v: w.status == "busy"),
    ("idle", "Is idle", lambda w, v: w.status == "idle"),
    ("cheap", "Is cheap", lambda w, v: w.status == "cheap"),
)
WORKER_COUNTERS: tuple[tuple[str, str, WorkerValue], ...] = (
    ("requests_total", "Total number of requests.", lambda w, v: w.requests),
    ("exceptions_total", "Total number of exceptions.", lambda w, v: w.exceptions),
    ("harakiri_count_total", "Total number of harakiri count.", lambda w, v: w.harakiri_count),
    ("signals_total", "Total number of signals.", lambda w, v: w.signals),
    ("respawn_count_total", "Total number of respawn count.", lambda w, v: w.respawn_count),
    ("transmitted_bytes_total", "Worker transmitted bytes.", lambda w, v: w.tx),
)
CORE_COUNTERS: tuple[tuple[str, str, Callable[[Core], int]], ...] = (
    ("requests_total", "Total number of requests.", lambda c: c.requests),
    ("static_requests_total", "Total number of static requests.", lambda c: c.static_requests),
    ("routed_requests_total", "Total number of routed requests.", lambda c: c.routed_requests),
    (
        "offloaded_requests_total",
        "Total number of offloaded requests.",
        lambda c: c.offloaded_requests,
    ),
    ("write_errors_total", "Total number of write errors.", lambda c: c.write_errors),
    ("read_errors_total", "Total number of read errors.", lambda c: c.read_errors),
)
CACHE_GAUGES: tuple[tuple[str, str, Callable[[Cache], int]], ...] = (
    ("hits", "Total number of hits (a counter).", lambda c: c.hits),
    ("misses", "Total number of misses (a counter).", lambda c: c.miss),
    ("full", "Total number of times cache full was hit (a counter).", lambda c: c.full),
    ("items", "Items in cache.", lambda c: c.items),
    ("max_items", "Max items for this cache.", lambda c: c.max_items),
)


def add_up(out: Families, uri: str, up: bool) -> None:
    out.gauge("uwsgi_up", "Whether the uwsgi server is up.", uri, 1.0 if up else 0.0)


def add_exporter_self(out: Families, snap: InstanceState) -> None:
    """`uwsgi_exporter_scrape*`: the polls of the instance, as the exporter's scrapes."""
    uri, counts = snap.stats_uri, snap.counts
    if counts is None:
        return
    help_ = "Total number of times uWSGI was scraped for metrics (uwsgitune: polled)."
    out.counter("uwsgi_exporter_scrapes_total", help_, uri, counts.polls)
    help_ = "Total number of times an error occurred scraping a uWSGI."
    out.counter("uwsgi_exporter_scrape_errors_total", help_, uri, counts.errors)
    help_ = "Duration of uWSGI scrape job."
    out.summary("uwsgi_exporter_scrape_duration_seconds", help_, uri, counts.polls, counts.seconds)
    if snap.frame is not None:
        help_ = "Whether the last scrape of metrics from uWSGI resulted in an error (1 for error)."
        out.gauge("uwsgi_exporter_last_scrape_error", help_, uri, 0.0 if snap.up else 1.0)


def add_main(out: Families, uri: str, doc: StatsDoc) -> None:
    out.gauge("uwsgi_listen_queue_length", "Length of listen queue.", uri, doc.listen_queue)
    out.gauge(
        "uwsgi_listen_queue_errors",
        "Number of listen queue errors (never incremented by uWSGI; "
        "see uwsgitune_host_listen_overflows_total).",
        uri,
        doc.listen_queue_errors,
    )
    out.gauge("uwsgi_signal_queue_length", "Length of signal queue.", uri, doc.signal_queue)
    out.gauge("uwsgi_workers", "Number of workers.", uri, sum(1 for w in doc.workers if w.id))


def add_sockets(out: Families, uri: str, doc: StatsDoc) -> None:
    seen: set[tuple[str, str]] = set()
    for s in doc.sockets:
        if (s.name, s.proto) in seen:
            continue  # the exporter keeps the first of duplicate (name, proto)
        seen.add((s.name, s.proto))
        lb = {"name": s.name, "proto": s.proto}
        out.gauge("uwsgi_socket_queue_length", "Length of socket queue.", uri, s.queue, **lb)
        out.gauge(
            "uwsgi_socket_max_queue_length", "Max length of socket queue.", uri, s.max_queue, **lb
        )
        out.gauge("uwsgi_socket_shared", "Is shared socket?", uri, s.shared, **lb)
        out.gauge("uwsgi_socket_can_offload", "Can socket offload?", uri, s.can_offload, **lb)


def add_workers(out: Families, uri: str, doc: StatsDoc, views: tuple[WorkerView, ...]) -> None:
    for slot, w in enumerate(doc.workers):
        if not w.id:
            continue  # a never-spawned slot: the exporter skips it
        view = views[slot] if slot < len(views) else None
        wid = str(w.id)
        for name, doc_, fn in WORKER_GAUGES:
            out.gauge(f"uwsgi_worker_{name}", doc_, uri, float(fn(w, view)), worker_id=wid)
        for name, doc_, fn in WORKER_COUNTERS:
            out.counter(f"uwsgi_worker_{name}", doc_, uri, float(fn(w, view)), worker_id=wid)
        for app in w.apps:
            lb = {"worker_id": wid, "app_id": str(app.id), "mountpoint": app.mountpoint}
            lb["chdir"] = app.chdir
            out.gauge(
                "uwsgi_worker_app_startup_time_seconds",
                "How long this app took to start.",
                uri,
                app.startup_time,
                **lb,
            )
            out.counter(
                "uwsgi_worker_app_requests_total",
                "Total number of requests.",
                uri,
                app.requests,
                **lb,
            )
            out.counter(
                "uwsgi_worker_app_exceptions_total",
                "Total number of exceptions.",
                uri,
                app.exceptions,
                **lb,
            )


def add_cores(out: Families, uri: str, doc: StatsDoc) -> None:
    for w in doc.workers:
        if not w.id:
            continue  # never-spawned slots, as for the worker families
        wid = str(w.id)
        for core in w.cores:
            lb = {"worker_id": wid, "core_id": str(core.id)}
            out.gauge("uwsgi_worker_core_busy", "Is core busy", uri, core.in_request, **lb)
            for name, help_, fn in CORE_COUNTERS:
                out.counter(f"uwsgi_worker_core_{name}", help_, uri, fn(core), **lb)


def add_caches(out: Families, uri: str, doc: StatsDoc) -> None:
    for cache in doc.caches:
        for name, help_, fn in CACHE_GAUGES:
            out.gauge(f"uwsgi_cache_{name}", help_, uri, fn(cache), name=cache.name)


# uWSGI's own metrics subsystem ---------------------------------------------------------

UWSGI_COUNTER = 0  # a metric's `type` in the stats (core/metrics.c); the others are gauges
GAUGE_HELP = "uWSGI metric (gauge, absolute or alias), by its uWSGI name."
COUNTER_HELP = "uWSGI metric (counter), by its uWSGI name."


def _ordered(metrics: dict[str, model.Metric]) -> list[tuple[str, model.Metric]]:
    own = [(n, m) for n, m in metrics.items() if not n.startswith("worker.")]
    workers = [(n, m) for n, m in metrics.items() if n.startswith("worker.")]
    return own + workers


def add_uwsgi_metrics(out: Families, uri: str, doc: StatsDoc, max_series: int) -> None:
    if doc.metrics is None:
        return
    kept = _ordered(doc.metrics)
    dropped = max(0, len(kept) - max_series)
    for name, m in kept[:max_series]:
        if m.type == UWSGI_COUNTER:
            out.counter("uwsgi_metric_total", COUNTER_HELP, uri, m.value, name=name)
        else:
            out.gauge("uwsgi_metric", GAUGE_HELP, uri, m.value, name=name)
    doc_ = "uWSGI metrics left out by uwsgi_metrics_max_series."
    out.gauge("uwsgitune_uwsgi_metrics_dropped", doc_, uri, dropped)


# uwsgitune's own -------------------------------------------------------------------------


def _ratio(pct: float | None) -> float | None:
    return None if pct is None else pct / 100


def _seconds(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000


# (name, help, value) of the per-instance gauges that no exporter has.
FRAME_GAUGES: tuple[tuple[str, str, Callable[[Frame], float | None]], ...] = (
    (
        "mean_response_time_seconds",
        "True mean response time: Δrunning_time / Δrequests.",
        lambda f: _seconds(f.mean_rt_ms),
    ),
    (
        "littles_l",
        "Mean requests in service (Little's L): Δrunning_time / Δt.",
        lambda f: f.littles_l,
    ),
    ("busy_ratio", "Little's L / (live workers x threads), 0-1.", lambda f: f.busy_ratio),
    ("workers_live", "Live workers (status not cheap).", lambda f: f.live),
    ("workers_busy", "Live workers serving a request.", lambda f: f.busy),
    ("workers_idle", "Live workers waiting for a request.", lambda f: f.idle),
    ("workers_cheap", "Cheaped or never-spawned worker slots.", lambda f: f.cheap),
    ("workers_max", "Worker slots (processes).", lambda f: f.workers_max),
    ("threads_per_worker", "Threads (cores) per worker.", lambda f: f.threads),
    ("host_cpus", "Logical CPUs of the host.", lambda f: f.cpu_count),
    (
        "effective_cpus",
        "CPUs the instance may use: affinity and cgroup quota.",
        lambda f: f.effective_cpus,
    ),
    ("host_cpu_ratio", "Host CPU busy, of all host CPUs, 0-1.", lambda f: _ratio(f.host_cpu_pct)),
    ("instance_cpu_cores", "CPU the instance used, in cores.", lambda f: f.instance_cpu_cores),
    (
        "cpu_saturation_ratio",
        "Instance CPU / the CPU it can get, effective CPUs less what others hold (1 = all of "
        "it): what the rules and the tuner compare with cpu_saturated.",
        cpu_saturation,
    ),
    (
        "memory_available_bytes",
        "Memory the instance can still take (host, cgroup-bounded).",
        lambda f: f.mem_available,
    ),
    (
        "memory_limit_bytes",
        "Memory the instance may use: cgroup limit or host RAM.",
        lambda f: f.mem_limit,
    ),
    ("somaxconn", "net.core.somaxconn, the ceiling of any listen backlog.", lambda f: f.somaxconn),
)


def add_frame(out: Families, uri: str, frame: Frame) -> None:
    for name, doc, fn in FRAME_GAUGES:
        out.gauge(f"uwsgitune_{name}", doc, uri, fn(frame))
    out.counter(
        "uwsgitune_reloads_seen_total", "uWSGI reloads and restarts seen.", uri, frame.reloads_seen
    )
    out.gauge(
        "uwsgitune_loaded_timestamp_seconds",
        "Epoch of the last (re)load of the instance, best estimate.",
        uri,
        frame.loaded_at,
    )
    for s in frame.sockets:
        lb = {"name": s.name, "proto": s.proto, "source": s.source}
        queue_doc = "Connections waiting for accept(): the kernel's for unix sockets."
        out.gauge("uwsgitune_socket_queue_length", queue_doc, uri, s.queue, **lb)
        backlog_doc = "The socket's listen backlog, as the kernel applies it."
        out.gauge("uwsgitune_socket_backlog", backlog_doc, uri, s.backlog, **lb)


def add_host(out: Families, snap: InstanceState) -> None:
    host, uri = snap.host, snap.stats_uri
    if host is None:
        return
    out.counter(
        "uwsgitune_host_listen_overflows_total",
        "Kernel TcpExtListenOverflows, host-wide: connections dropped at a full backlog.",
        uri,
        host.listen_overflows,
    )
    out.counter(
        "uwsgitune_host_listen_drops_total",
        "Kernel TcpExtListenDrops, host-wide.",
        uri,
        host.listen_drops,
    )


def add_own(out: Families, snap: InstanceState) -> None:
    uri = snap.stats_uri
    version = snap.frame.version if snap.frame is not None else ""
    info = {"name": snap.name, "mode": snap.mode, "version": version}
    out.gauge("uwsgitune_instance_info", "The instance as uwsgitune knows it.", uri, 1, **info)
    active: dict[tuple[str, str], int] = {}
    for rule, severity in snap.finding_pairs():
        active[rule, severity] = active.get((rule, severity), 0) + 1
    for (rule, severity), n in sorted(active.items()):
        doc = "Active findings of the rules engine."
        out.gauge("uwsgitune_findings_active", doc, uri, n, rule=rule, severity=severity)
    for setting, value in snap.recommended():
        doc = "The value uwsgitune recommends for a setting."
        out.gauge("uwsgitune_recommended_value", doc, uri, value, setting=setting)
    for kind, result, n in snap.actions:
        doc = "Actions taken on the instance, by kind and result."
        out.counter("uwsgitune_actions_total", doc, uri, n, kind=kind, result=result)
    decision = snap.decision()
    if decision is not None:
        action, code, desired = decision
        doc = "The live worker count the tuner wants now; action and code say why."
        out.gauge("uwsgitune_tuner_desired_workers", doc, uri, desired, action=action, code=code)
    counts = snap.counts
    if counts is not None:
        out.counter("uwsgitune_poll_errors_total", "Failed polls.", uri, counts.errors)
        doc = "Polls whose document was invalid JSON only inside request data, repaired."
        out.counter("uwsgitune_stats_repairs_total", doc, uri, counts.repairs)
        doc = "Wall time of each poll (read, parse, host sampling)."
        out.summary("uwsgitune_poll_duration_seconds", doc, uri, counts.polls, counts.seconds)
        doc = "Unix time of the last poll done, good or failed: a stale value is stalled polling."
        out.gauge("uwsgitune_last_poll_timestamp_seconds", doc, uri, counts.last_t)


# Fleet readers' inputs (`recommend --prometheus`) -------------------------------------------

# The per-instance sums of uwsgi_exporter's per-worker families: (name, help, the per-worker
# family it sums, kind). Equal to `sum without (worker_id) (uwsgi_worker_...)` of the same
# scrape, so a fleet reader asks Prometheus for one series an instance instead of summing
# every worker's at every step.
WORKER_SUMS: tuple[tuple[str, str, str, str], ...] = (
    ("requests_total", "Requests of every worker slot.", "requests_total", "counter"),
    ("exceptions_total", "Exceptions of every worker slot.", "exceptions_total", "counter"),
    (
        "running_time_seconds_total",
        "Running time of every worker slot, in seconds.",
        "running_time_seconds",
        "counter",
    ),
    ("harakiri_total", "Harakiris of every worker slot.", "harakiri_count_total", "counter"),
    (
        "spawns_total",
        "uWSGI's respawn_count of every worker slot.",
        "respawn_count_total",
        "counter",
    ),
    ("busy", "Worker slots busy (uwsgi_worker_busy).", "busy", "gauge"),
    ("cheap", "Worker slots cheap (uwsgi_worker_cheap).", "cheap", "gauge"),
    ("rss_bytes", "RSS of every worker that reports one.", "rss_bytes", "gauge"),
)


def add_fleet_inputs(out: Families, uri: str, doc: StatsDoc, frame: Frame) -> None:
    """`uwsgitune_worker_sum_*` (see `WORKER_SUMS`), the slot count, and the CPU waits the
    staffing model reads (the run queue, the GIL) and the host's niced CPU: what a reader
    of Prometheus needs to rebuild the frame the rules judge."""
    fns = {name: fn for name, _, fn in (*WORKER_GAUGES, *WORKER_COUNTERS)}
    views = frame.workers
    slots = [(w, views[i] if i < len(views) else None) for i, w in enumerate(doc.workers) if w.id]
    for name, doc_, of, kind in WORKER_SUMS:
        total = sum((float(fns[of](w, v)) for w, v in slots), 0.0)
        add = out.counter if kind == "counter" else out.gauge
        add(f"uwsgitune_worker_sum_{name}", doc_, uri, total)
    rss = fns["rss_bytes"]
    out.gauge("uwsgitune_worker_slots", "Spawned worker slots.", uri, len(slots))
    doc_ = "Worker slots that report an RSS (above 0)."
    out.gauge("uwsgitune_worker_rss_reporting", doc_, uri, sum(rss(w, v) > 0 for w, v in slots))
    doc_ = "Threads (cores) of the worker with the most."
    out.gauge(
        "uwsgitune_worker_max_cores", doc_, uri, max((len(w.cores) for w, _ in slots), default=None)
    )
    doc_ = "Mean requests waiting for a CPU (the workers' run-queue wait / the poll)."
    out.gauge("uwsgitune_runq_cores", doc_, uri, frame.runq_cores)
    doc_ = (
        "Host CPU busy at a positive nice in processes not the instance's, of all host CPUs, "
        "0-1 (part of host_cpu_ratio)."
    )
    out.gauge("uwsgitune_host_nice_ratio", doc_, uri, _ratio(frame.others_nice_pct))
    doc_ = "With threads: the mean share of the poll each process's GIL was held or wanted."
    out.gauge("uwsgitune_gil_busy_ratio", doc_, uri, frame.gil_busy)
    doc_ = (
        "Busy workers asleep (waiting on IO, not for a CPU) at the poll, one-thread workers "
        "only: their mean over time / the request rate is the IO a request waits."
    )
    out.gauge("uwsgitune_busy_blocked_workers", doc_, uri, frame.busy_blocked)


# The request log (`--latency`) ------------------------------------------------------------

REQUEST_LOG_PREFIX = "uwsgi_request_"  # the uwsgi_* names of the request log, not the stats
DURATION_HELP = (
    "Service time of the requests uWSGI logged (%(micros): from the worker taking the request "
    "to its end), log-spaced buckets from 1 ms to 30 s."
)
QUEUE_HELP = (
    "Queue wait of the requests the front proxy stamped (X-Request-Start): the worker's start "
    "less the proxy's stamp."
)
STATUS_HELP = "Requests uWSGI logged, by status class (1xx..5xx; other: outside 100-599)."
ROUTE_HELP = "Service time of the requests uWSGI logged, per route (--latency-routes; capped)."


def add_latency(out: Families, uri: str, view: LatencyView, routes: bool) -> None:
    """The request log's families: rendered from `view.export`, which the latency stage
    computes once per poll, so a render formats numbers and nothing else.

    The histograms and the status classes describe uWSGI's requests and are named
    `uwsgi_request_*` (`REQUEST_LOG_PREFIX`), the names the issue and `histogram_quantile`
    users expect; what says how far to trust them is uwsgitune's (`uwsgitune_latency_*`). They
    come from the request log, not the stats, so they stay while a stats poll fails. Every
    status class and fault kind is written, 0 included, so `rate()` sees the first one.
    """
    export = view.export
    out.histogram("uwsgi_request_duration_seconds", DURATION_HELP, uri, export.duration)
    if export.queue.count > 0:  # the proxy stamps (cumulative: once there, it stays)
        out.histogram("uwsgi_request_queue_seconds", QUEUE_HELP, uri, export.queue)
    for cls in STATUS_CLASSES:
        n = export.status.get(cls, 0)
        out.counter("uwsgi_request_status_total", STATUS_HELP, uri, n, **{"class": cls})
    if routes:  # at most MAX_EXPORTED_ROUTES, then `other` (core/latency.py)
        for route, hist in export.routes.items():
            out.histogram(
                "uwsgi_request_route_duration_seconds", ROUTE_HELP, uri, hist, route=route
            )
    add_latency_trust(out, uri, view)


def add_latency_trust(out: Families, uri: str, view: LatencyView) -> None:
    """How complete and how trustworthy the request log's picture is."""
    doc = (
        "Requests logged / requests the stats counted over the last 60 s, 0-1 (a sampled "
        "log's line counts for the requests it stands for)."
    )
    out.gauge("uwsgitune_latency_coverage_ratio", doc, uri, view.coverage)
    doc = (
        "The share of requests uWSGI logs: 1, or 1/K with uwsgitune's sampling hook; the "
        "uwsgi_request_* counts are of the logged requests (divide a rate by this)."
    )
    out.gauge("uwsgitune_latency_sampled_ratio", doc, uri, 1.0 / max(1, view.sample_every))
    doc = "Request log lines recorded since uwsgitune began listening."
    out.counter("uwsgitune_latency_lines_total", doc, uri, view.lines)
    doc = "Request log lines refused: sent by a process proved not to be the instance's master."
    out.counter("uwsgitune_latency_lines_refused_total", doc, uri, view.refused)
    doc = "Request log datagrams not recorded, by kind (bad lines, receiver and kernel drops)."
    for kind in (*FAULT_KINDS, *sorted(set(view.faults) - set(FAULT_KINDS))):
        out.counter("uwsgitune_latency_faults_total", doc, uri, view.faults.get(kind, 0), kind=kind)
    doc = "1 when every line of the last 60 s came from a sender proved to be the master's."
    out.gauge("uwsgitune_latency_trusted", doc, uri, 1.0 if view.trusted else 0.0)
    skew = view.short.stamps.skew_ms  # None: no skew seen (or no stamp): no sample
    doc = (
        "The proxy's clock lead over the app's, seen in the last 10 s: queue waits read short "
        "by up to this (stated, never applied)."
    )
    out.gauge("uwsgitune_latency_proxy_clock_skew_seconds", doc, uri, _seconds(skew))


def add_utilisation(out: Families, snap: InstanceState) -> None:
    """The pod autoscaler's signal (tuner/utilisation.py, docs/kubernetes.md) and its parts;
    nothing without a tuner, at a poll without rates or with stale stats, or while an apply
    waits (a reload in flight: the step's value is from before it)."""
    util = snap.tuning.utilisation if snap.tuning is not None else None
    if util is None or snap.waiting is not None:
        return
    uri = snap.stats_uri
    doc = (
        "Demand / capacity at the tuner's ceiling (requests in service and queued over the "
        "requests the ceiling serves): 1 is the tuner at its ceiling. Scale replicas on this."
    )
    out.gauge("uwsgitune_capacity_utilisation", doc, uri, util.ratio)
    doc = "Requests in service at uncontended speed (the ratio adds the queue at the ceiling)."
    out.gauge("uwsgitune_capacity_demand_requests", doc, uri, util.demand)
    doc = "Requests the tuner's ceiling serves without queueing (workers' or CPUs' bound)."
    out.gauge("uwsgitune_capacity_requests", doc, uri, util.capacity)
    doc = "The most live workers the tuner may run: max_workers, or what memory allows."
    out.gauge("uwsgitune_capacity_ceiling_workers", doc, uri, util.ceiling)
    doc = "1 when the CPUs (the pod's quota), not the workers, bound the capacity."
    out.gauge("uwsgitune_capacity_cpu_bound", doc, uri, 1.0 if util.bound == "cpu" else 0.0)


class BuildInfo(Collector):
    """`uwsgitune_build_info{version,pythonversion}` 1, as `uwsgi_exporter_build_info`."""

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "uwsgitune_build_info",
            "A metric with a constant '1' value labeled by version and pythonversion.",
            labels=["version", "pythonversion"],
        )
        family.add_metric([__version__, platform.python_version()], 1.0)
        yield family


def registry_for(source: StateSource, options: ExportOptions | None = None) -> CollectorRegistry:
    """A private registry: this collector and the build info. No Python platform or GC
    collectors."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(UwsgiCollector(source, options))
    registry.register(BuildInfo())
    return registry


def polled_registry(process: bool = False) -> CollectorRegistry:
    """Rendered after the instances' families, once per poll like them (`exposition.py`):
    the build info, and for the daemon `process_*` (uwsgi_exporter has them too). The
    site's counts, which change per scrape, follow them (`site.handler_text`)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BuildInfo())
    if process:
        registry.register(ProcessCollector(registry=None))
    return registry
