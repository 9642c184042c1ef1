"""uwsgi_exporter's metrics (timonwong/uwsgi_exporter 1.3), same names, labels and types.

Existing Grafana dashboards and alerts query these, so they copy the exporter, quirks
included: workers are the slots with `id != 0` (never-spawned slots are skipped, cheaped
ones stay), `average_response_time_seconds` is uWSGI's half-life `avg_rt` (the true mean is
`uwsgitune_mean_response_time_seconds`), and socket queues are what the stats say (0 for
unix sockets; the kernel's numbers are `uwsgitune_socket_queue_length`). One deliberate
improvement: `uwsgi_worker_rss_bytes` falls back to psutil without `--memory-report`.
"""

from __future__ import annotations

from collections.abc import Callable

from uwsgitune.core.frame import WorkerView
from uwsgitune.core.model import StatsDoc, Worker
from uwsgitune.exporter.families import Families

US = 1e6

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


def add_up(out: Families, uri: str, up: bool) -> None:
    out.gauge("uwsgi_up", "Whether the uwsgi server is up.", uri, 1.0 if up else 0.0)


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
