"""The custom collector: every scrape renders the latest snapshot of each instance.

Following prometheus_client's pattern for proxying another system (`collect()` yields
metric families from one fresh snapshot), nothing is kept between scrapes: a worker or an
instance that is gone is gone from the output. An instance whose last poll failed shows
`uwsgi_up 0` and none of its other uWSGI metrics; uwsgitune's own metrics (poll errors,
findings, actions) stay.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from prometheus_client import ProcessCollector
from prometheus_client.core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from uwsgitune.core.frame import Frame
from uwsgitune.core.signals import cpu_saturation
from uwsgitune.exporter import compat, optional
from uwsgitune.exporter.families import Families
from uwsgitune.exporter.selfmetrics import BuildInfo, add_self
from uwsgitune.exporter.uwsgi_metrics import add_uwsgi_metrics
from uwsgitune.pipeline.state import InstanceState

StateSource = Callable[[], Iterable[InstanceState]]
log = logging.getLogger(__name__)


def _ratio(pct: float | None) -> float | None:
    return None if pct is None else pct / 100


def _seconds(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000


# (name, help, value) of the per-instance gauges that no exporter has.
FRAME_GAUGES: tuple[tuple[str, str, Callable[[Frame], float | None]], ...] = (
    ("mean_response_time_seconds", "True mean response time: Δrunning_time / Δrequests.",
     lambda f: _seconds(f.mean_rt_ms)),
    ("littles_l", "Mean requests in service (Little's L): Δrunning_time / Δt.",
     lambda f: f.littles_l),
    ("busy_ratio", "Little's L / (live workers x threads), 0-1.", lambda f: f.busy_ratio),
    ("workers_live", "Live workers (status not cheap).", lambda f: f.live),
    ("workers_busy", "Live workers serving a request.", lambda f: f.busy),
    ("workers_idle", "Live workers waiting for a request.", lambda f: f.idle),
    ("workers_cheap", "Cheaped or never-spawned worker slots.", lambda f: f.cheap),
    ("workers_max", "Worker slots (processes).", lambda f: f.workers_max),
    ("threads_per_worker", "Threads (cores) per worker.", lambda f: f.threads),
    ("host_cpus", "Logical CPUs of the host.", lambda f: f.cpu_count),
    ("effective_cpus", "CPUs the instance may use: affinity and cgroup quota.",
     lambda f: f.effective_cpus),
    ("host_cpu_ratio", "Host CPU busy, of all host CPUs, 0-1.", lambda f: _ratio(f.host_cpu_pct)),
    ("instance_cpu_cores", "CPU the instance used, in cores.", lambda f: f.instance_cpu_cores),
    ("cpu_saturation_ratio", "Instance CPU / the CPU it can get, effective CPUs less what "
     "others hold (1 = all of it): what the rules and the tuner compare with cpu_saturated.",
     cpu_saturation),
    ("memory_available_bytes", "Memory the instance can still take (host, cgroup-bounded).",
     lambda f: f.mem_available),
    ("memory_limit_bytes", "Memory the instance may use: cgroup limit or host RAM.",
     lambda f: f.mem_limit),
    ("somaxconn", "net.core.somaxconn, the ceiling of any listen backlog.", lambda f: f.somaxconn),
)  # fmt: skip


@dataclass(frozen=True)
class ExportOptions:
    collect_cores: bool = False  # uwsgi_exporter's --collect.cores
    uwsgi_metrics_max_series: int = 500  # cap on uwsgi_metric{name} series per instance


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
        log.warning("metrics of %s dropped from this scrape: %s", snap.stats_uri,
                    type(exc).__name__)  # fmt: skip
        own = Families()
        compat.add_up(own, snap.stats_uri, False)
    return own


def add_snapshot(out: Families, snap: InstanceState, options: ExportOptions | None = None) -> None:
    options = options or ExportOptions()
    uri = snap.stats_uri
    compat.add_up(out, uri, snap.up)
    add_self(out, snap)
    add_own(out, snap)
    doc, frame = snap.doc, snap.frame
    if not snap.up or doc is None or frame is None:
        return
    compat.add_main(out, uri, doc)
    compat.add_sockets(out, uri, doc)
    compat.add_workers(out, uri, doc, frame.workers)
    if options.collect_cores:
        optional.add_cores(out, uri, doc)
    optional.add_caches(out, uri, doc)
    add_uwsgi_metrics(out, uri, doc, options.uwsgi_metrics_max_series)
    add_frame(out, uri, frame)
    add_host(out, snap)


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
    handler's counts, which change per scrape, follow them (`selfmetrics.handler_text`)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BuildInfo())
    if process:
        registry.register(ProcessCollector(registry=None))
    return registry
