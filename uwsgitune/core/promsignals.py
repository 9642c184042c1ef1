"""What `recommend --prometheus` asks a Prometheus server: one PromQL expression per signal.

Theory of operation
-------------------
A frame (core/frame.py) is one instance at one poll. Prometheus holds the same instance as
series: uwsgi_exporter 1.3's families (every uwsgitune daemon exports them too, same names
and labels) and, from uwsgitune's daemon only, its `uwsgitune_*` families. Each `Signal`
below is one PromQL expression whose result has exactly one series per instance (the
socket signals: one per socket), so a range query returns per-instance series, never
per-worker ones: the per-worker families are summed, counted or maxed `without
(worker_id)` inside Prometheus. `without` keeps every other label, so an instance is its
label set: `job`/`instance` and the target's labels (`pod`, `deployment`), and on the
daemon's series `stats_uri` (one daemon exports several instances).

Counters are fetched as they are (summed per instance) and turned into rates here, between
two steps, as `core/derive.py` turns polls into rates: a step's rate is the exact growth
between the samples the two steps read, never PromQL's extrapolated `rate()`. uWSGI resets
every slot's counters together on a reload, so the per-instance sum drops: that step is a
reload (no rates), as it is for `recommend --replay`.

A step counts only when the instance's last scrape is recent (`stale_after`): Prometheus
answers an instant selector with the last sample of the 5 minutes before, which would turn
a scrape outage into a flat counter and a jump.

Gauges that are per-poll rates in the daemon (CPU) are averaged over each step
(`avg_over_time(...[step])`); queues, workers and memory are sampled at the step (the last
sample at or before it), as a poll samples them.

`source`: "exporter" signals exist in both sources; "daemon" ones only in uwsgitune's. A
rule whose input no series gave is "unknown" on that instance (core/promframes.py
`UNKNOWN_WHEN`): its findings are never shown on a guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SignalSource = Literal["exporter", "daemon"]
WORKER = "worker_id"
SOCKET_LABELS = ("name", "proto", "source")  # the socket families' own labels


@dataclass(frozen=True)
class Signal:
    """One per-instance series family: `expr` with `{sel}` (the label matchers) and `{step}`
    (the step as a PromQL duration). `socket`: one series per socket of an instance."""

    name: str
    expr: str
    source: SignalSource
    kind: Literal["counter", "gauge"] = "gauge"
    socket: bool = False
    # a per-worker aggregation: asked only for the instances whose daemon does not export
    # the same figure per instance (`SUMS`)
    per_worker: bool = False


def _per_worker(agg: str, metric: str) -> str:
    return f"{agg} without ({WORKER}) ({metric}{{sel}})"


def _pw(name: str, agg: str, metric: str, kind: Literal["counter", "gauge"] = "gauge") -> Signal:
    return Signal(name, _per_worker(agg, metric), "exporter", kind, per_worker=True)


SIGNALS: tuple[Signal, ...] = (
    # a step whose last scrape is older than `{stale}` reads as a gap, not as that scrape (the
    # last sample within it: a tenth of the cost of `uwsgi_up unless (time() - timestamp(...)
    # > stale)`, whose vector matching Prometheus does again at every step)
    Signal("up", "last_over_time(uwsgi_up{sel}[{stale}])", "exporter"),
    _pw("requests", "sum", "uwsgi_worker_requests_total", "counter"),
    _pw("exceptions", "sum", "uwsgi_worker_exceptions_total", "counter"),
    _pw("running", "sum", "uwsgi_worker_running_time_seconds", "counter"),
    _pw("harakiri", "sum", "uwsgi_worker_harakiri_count_total", "counter"),
    _pw("respawns", "sum", "uwsgi_worker_respawn_count_total", "counter"),
    _pw("slots", "count", "uwsgi_worker_busy"),
    _pw("busy", "sum", "uwsgi_worker_busy"),
    _pw("cheap", "sum", "uwsgi_worker_cheap"),
    _pw("threads", "max", "uwsgi_worker_cores"),
    # RSS of the workers that report one (uwsgi_exporter: 0 without --memory-report). A
    # join with `uwsgi_worker_cheap` would leave out a cheaped slot's last RSS, at five times
    # the query's cost: a cheap slot reports 0 (uWSGI) or no process (the daemon's /proc).
    _pw("rss", "sum", "uwsgi_worker_rss_bytes"),
    Signal(
        "rss_workers",
        f"count without ({WORKER}) (uwsgi_worker_rss_bytes{{sel}} > 0)",
        "exporter",
        per_worker=True,
    ),
    # the same figures as the daemon exports them per instance (exporter/metrics.py
    # `add_fleet_inputs`): one series an instance instead of one a worker
    Signal("requests_sum", "uwsgitune_worker_sum_requests_total{sel}", "daemon", "counter"),
    Signal("exceptions_sum", "uwsgitune_worker_sum_exceptions_total{sel}", "daemon", "counter"),
    Signal(
        "running_sum", "uwsgitune_worker_sum_running_time_seconds_total{sel}", "daemon", "counter"
    ),
    Signal("harakiri_sum", "uwsgitune_worker_sum_harakiri_total{sel}", "daemon", "counter"),
    Signal("respawns_sum", "uwsgitune_worker_sum_spawns_total{sel}", "daemon", "counter"),
    Signal("slots_sum", "uwsgitune_worker_slots{sel}", "daemon"),
    Signal("busy_sum", "uwsgitune_worker_sum_busy{sel}", "daemon"),
    Signal("cheap_sum", "uwsgitune_worker_sum_cheap{sel}", "daemon"),
    Signal("threads_sum", "uwsgitune_worker_max_cores{sel}", "daemon"),
    Signal("rss_sum", "uwsgitune_worker_sum_rss_bytes{sel}", "daemon"),
    Signal("rss_workers_sum", "uwsgitune_worker_rss_reporting{sel}", "daemon"),
    Signal("signal_queue", "uwsgi_signal_queue_length{sel}", "exporter"),
    Signal("queue", "uwsgi_socket_queue_length{sel}", "exporter", socket=True),
    Signal("max_queue", "uwsgi_socket_max_queue_length{sel}", "exporter", socket=True),
    # uwsgitune's daemon only
    Signal("k_queue", "uwsgitune_socket_queue_length{sel}", "daemon", socket=True),
    Signal("k_backlog", "uwsgitune_socket_backlog{sel}", "daemon", socket=True),
    Signal("cpu_cores", "avg_over_time(uwsgitune_instance_cpu_cores{sel}[{step}])", "daemon"),
    Signal("host_cpu", "avg_over_time(uwsgitune_host_cpu_ratio{sel}[{step}])", "daemon"),
    Signal("host_nice", "avg_over_time(uwsgitune_host_nice_ratio{sel}[{step}])", "daemon"),
    Signal("runq_cores", "avg_over_time(uwsgitune_runq_cores{sel}[{step}])", "daemon"),
    Signal("gil_busy", "avg_over_time(uwsgitune_gil_busy_ratio{sel}[{step}])", "daemon"),
    Signal("blocked", "avg_over_time(uwsgitune_busy_blocked_workers{sel}[{step}])", "daemon"),
    Signal("effective_cpus", "uwsgitune_effective_cpus{sel}", "daemon"),
    Signal("host_cpus", "uwsgitune_host_cpus{sel}", "daemon"),
    Signal("mem_available", "uwsgitune_memory_available_bytes{sel}", "daemon"),
    Signal("mem_limit", "uwsgitune_memory_limit_bytes{sel}", "daemon"),
    Signal("somaxconn", "uwsgitune_somaxconn{sel}", "daemon"),
    Signal("overflows", "uwsgitune_host_listen_overflows_total{sel}", "daemon", "counter"),
    Signal("drops", "uwsgitune_host_listen_drops_total{sel}", "daemon", "counter"),
    Signal("reloads", "uwsgitune_reloads_seen_total{sel}", "daemon", "counter"),
    Signal("tuner", "max without (action, code) (uwsgitune_tuner_desired_workers{sel})", "daemon"),
)
BY_NAME = {s.name: s for s in SIGNALS}
# A per-worker signal and the daemon's per-instance series of the same figure: a step reads
# the daemon's where it has one, the workers' sum elsewhere.
SUMS: dict[str, str] = {s.name: f"{s.name}_sum" for s in SIGNALS if s.per_worker}

# The daemon's series that mark an instance as uwsgitune's (the rest are optional: the tuner's
# wish exists only where a tuner runs).
DAEMON_MARK = "cpu_cores"


def promql_duration(seconds: float) -> str:
    """`60s`, `1500ms`: a step as a PromQL range (whole milliseconds)."""
    ms = max(round(seconds * 1000), 1)
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def matchers(selector: str) -> str:
    """`job="uwsgi"` or `{job="uwsgi"}` as the inside of a PromQL selector's braces."""
    text = selector.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    return text


def stale_after(step: float) -> float:
    """Seconds after its last scrape that an instance is a gap: two steps, at least 30 s.
    Prometheus itself answers with the last sample for 5 minutes (its lookback), so a
    scrape outage shorter than that would read as a flat counter, then a jump."""
    return max(2 * step, 30.0)


def query(signal: Signal, selector: str, step: float) -> str:
    """The signal's PromQL over the series `selector` matches."""
    inside = matchers(selector)
    sel = "{" + inside + "}" if inside else ""
    text = signal.expr.replace("{sel}", sel).replace("{step}", promql_duration(step))
    return text.replace("{stale}", promql_duration(stale_after(step)))
