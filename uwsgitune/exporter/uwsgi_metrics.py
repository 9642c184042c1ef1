"""uWSGI's own metrics subsystem (`--enable-metrics`, and the app's `--metric` values), as
`uwsgi_metric{name=...}` (gauges) and `uwsgi_metric_total{name=...}` (counters).

The stats document carries them under `metrics` as `{name: {type, oid, value}}`. Types, from
uWSGI's core/metrics.c: 0 counter, 1 gauge, 2 absolute (a value set from outside: a gauge),
3 alias (a gauge; it mirrors another metric). With 64 workers the built-in `worker.N.*` and
`worker.N.core.M.*` names alone are ~1,000 series that repeat the `uwsgi_worker_*`
families, so the count is capped (`uwsgi_metrics_max_series`): the app's and the `core.*`
metrics are kept first, `worker.*` after them, in document order, and the number left out
is `uwsgitune_uwsgi_metrics_dropped`.
"""

from __future__ import annotations

from uwsgitune.core.model import Metric, StatsDoc
from uwsgitune.exporter.families import Families

COUNTER = 0
GAUGE_HELP = "uWSGI metric (gauge, absolute or alias), by its uWSGI name."
COUNTER_HELP = "uWSGI metric (counter), by its uWSGI name."


def _ordered(metrics: dict[str, Metric]) -> list[tuple[str, Metric]]:
    own = [(n, m) for n, m in metrics.items() if not n.startswith("worker.")]
    workers = [(n, m) for n, m in metrics.items() if n.startswith("worker.")]
    return own + workers


def add_uwsgi_metrics(out: Families, uri: str, doc: StatsDoc, max_series: int) -> None:
    if doc.metrics is None:
        return
    kept = _ordered(doc.metrics)
    dropped = max(0, len(kept) - max_series)
    for name, m in kept[:max_series]:
        if m.type == COUNTER:
            out.counter("uwsgi_metric_total", COUNTER_HELP, uri, m.value, name=name)
        else:
            out.gauge("uwsgi_metric", GAUGE_HELP, uri, m.value, name=name)
    doc_ = "uWSGI metrics left out by uwsgi_metrics_max_series."
    out.gauge("uwsgitune_uwsgi_metrics_dropped", doc_, uri, dropped)
