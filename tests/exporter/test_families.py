"""uWSGI's metrics subsystem, per-core series and caches on recorded stats documents."""

from __future__ import annotations

import json

from tests.conftest import stats_fixture
from tests.daemon.helpers import parse, types, value
from tests.exporter.test_collector import URI, render, snapshot
from uwsgitune.core.model import parse_stats
from uwsgitune.exporter.exposition import render as render_text
from uwsgitune.exporter.metrics import ExportOptions, Families, add_snapshot

ENABLED = json.loads(stats_fixture("enable-metrics.json"))["metrics"]


def text_with(options: ExportOptions, *docs: str) -> str:
    from prometheus_client import CollectorRegistry

    from uwsgitune.exporter.metrics import UwsgiCollector

    snap = snapshot(*docs)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(UwsgiCollector(lambda: [snap], options))
    return render_text(registry).decode()


def test_uwsgi_metrics_with_their_type() -> None:
    text = text_with(ExportOptions(), "enable-metrics.json")
    kinds, samples = types(text), parse(text)
    assert kinds["uwsgi_metric"] == "gauge" and kinds["uwsgi_metric_total"] == "counter"
    counters = {s.labels["name"] for s in samples["uwsgi_metric_total"]}
    gauges = {s.labels["name"] for s in samples["uwsgi_metric"]}
    assert counters == {n for n, m in ENABLED.items() if m["type"] == 0}
    assert gauges == {n for n, m in ENABLED.items() if m["type"] != 0}
    assert value(samples, "uwsgi_metric", name="core.idle_workers") == 2
    assert value(samples, "uwsgi_metric", name="worker.1.avg_response_time") == 122
    assert value(samples, "uwsgitune_uwsgi_metrics_dropped", stats_uri=URI) == 0


def test_the_series_cap_keeps_the_non_worker_metrics_first() -> None:
    text = text_with(ExportOptions(uwsgi_metrics_max_series=6), "enable-metrics.json")
    samples = parse(text)
    kept = [s.labels["name"] for n in ("uwsgi_metric", "uwsgi_metric_total") for s in samples[n]]
    assert len(kept) == 6 and not any(k.startswith("worker.") for k in kept)
    assert value(samples, "uwsgitune_uwsgi_metrics_dropped") == len(ENABLED) - 6


def test_no_metrics_section_no_series() -> None:
    samples = parse(render(snapshot("processes.json")))
    assert "uwsgi_metric" not in samples and "uwsgitune_uwsgi_metrics_dropped" not in samples


def test_cores_only_with_collect_cores() -> None:
    off = parse(text_with(ExportOptions(), "threads.json"))
    assert not [n for n in off if n.startswith("uwsgi_worker_core_")]
    on = parse(text_with(ExportOptions(collect_cores=True), "threads.json"))
    doc = parse_stats(stats_fixture("threads.json"))
    cores = sum(len(w.cores) for w in doc.workers if w.id)
    assert len(on["uwsgi_worker_core_requests_total"]) == cores > 0
    assert set(on["uwsgi_worker_core_busy"][0].labels) == {"stats_uri", "worker_id", "core_id"}
    names = {n for n in on if n.startswith("uwsgi_worker_core_")}
    assert names == {
        f"uwsgi_worker_core_{n}"
        for n in (
            "busy",
            "requests_total",
            "static_requests_total",
            "routed_requests_total",
            "offloaded_requests_total",
            "write_errors_total",
            "read_errors_total",
        )
    }


def test_caches_keep_the_exporters_names() -> None:
    raw = json.loads(stats_fixture("processes.json"))
    raw["caches"] = [{"name": "c1", "hits": 5, "miss": 2, "full": 1, "items": 3, "max_items": 9}]
    doc = parse_stats(json.dumps(raw))
    snap = snapshot("processes.json")
    snap = type(snap)(
        **{
            **snap.__dict__,
            "poll": snap.poll.__class__(  # type: ignore[union-attr]
                **{**snap.poll.__dict__, "doc": doc}
            ),
        }
    )  # type: ignore[union-attr]
    out = Families()
    add_snapshot(out, snap)
    samples = {s.name: s for f in out for s in f.samples if s.name.startswith("uwsgi_cache")}
    assert {n: s.value for n, s in samples.items()} == {
        "uwsgi_cache_hits": 5,
        "uwsgi_cache_misses": 2,
        "uwsgi_cache_full": 1,
        "uwsgi_cache_items": 3,
        "uwsgi_cache_max_items": 9,
    }
    assert samples["uwsgi_cache_hits"].labels == {"name": "c1", "stats_uri": URI}
