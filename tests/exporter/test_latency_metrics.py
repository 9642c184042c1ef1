"""The request log's families (`--latency`): histograms that are valid exposition and say what
the recorder counted, the status classes, per route only when asked, and the figures that say
how far to trust them. States carry views of a real recorder (tests/support/latency.py)."""

from __future__ import annotations

import math
import shutil
import subprocess
from dataclasses import replace

import pytest
from prometheus_client import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.samples import Sample

from tests.daemon.helpers import EXPORTER_NAMES, parse, types, value
from tests.exporter.test_collector import OWN, URI, snapshot
from tests.support.latency import log_line, lognormal_view, recorder_with, view_of
from uwsgitune.core.latency import MAX_EXPORTED_ROUTES, OTHER
from uwsgitune.core.latencyreport import LatencyView
from uwsgitune.core.loghist import PROM_BOUNDS, QUEUE_BOUNDS
from uwsgitune.exporter.exposition import PollExposition, chunks, render
from uwsgitune.exporter.metrics import (
    ExportOptions,
    UwsgiCollector,
    instance_families,
    polled_registry,
)
from uwsgitune.pipeline import InstanceState
from uwsgitune.pipeline.latencystage import FAULT_KINDS

DURATION = "uwsgi_request_duration_seconds"
QUEUE = "uwsgi_request_queue_seconds"
ROUTE = "uwsgi_request_route_duration_seconds"


def with_latency(view: LatencyView, *, up: bool = True) -> InstanceState:
    snap = snapshot("processes.json", "processes.json")
    if not up:
        snap = replace(snap, poll=None)  # the last poll failed: no document
    return replace(snap, latency=view)


def exposition(*snaps: InstanceState, routes: bool = False) -> str:
    """What a scrape serves: the exporter's own writer, as the daemon and `watch` render."""
    options = ExportOptions(latency_routes=routes)
    kept, live = PollExposition(lambda: snaps, polled_registry(), options).encoded(False)
    return (kept + live).decode()


def histogram_series(
    samples: dict[str, list[Sample]], name: str
) -> dict[tuple[tuple[str, str], ...], tuple[list[tuple[float, float]], float, float]]:
    """Per label set (without `le`): the buckets (bound, count) in order, `_count`, `_sum`."""
    out: dict[tuple[tuple[str, str], ...], tuple[list[tuple[float, float]], float, float]] = {}
    buckets: dict[tuple[tuple[str, str], ...], list[tuple[float, float]]] = {}
    for s in samples.get(f"{name}_bucket", []):
        key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
        buckets.setdefault(key, []).append((float(s.labels["le"]), s.value))
    for key, bs in buckets.items():
        labels = dict(key)
        count = next(s.value for s in samples[f"{name}_count"] if s.labels == labels)
        total = next(s.value for s in samples[f"{name}_sum"] if s.labels == labels)
        out[key] = (bs, count, total)
    return out


def assert_valid_histogram(bs: list[tuple[float, float]], count: float, total: float) -> None:
    """Prometheus's rules: `le` ascending ending in +Inf, cumulative counts, +Inf == count."""
    bounds = [b for b, _ in bs]
    assert bounds == sorted(bounds) and math.isinf(bounds[-1]), bounds
    counts = [n for _, n in bs]
    assert counts == sorted(counts), counts
    assert counts[-1] == count and total >= 0


def test_the_histograms_are_valid_and_count_every_request_the_recorder_counted() -> None:
    view = lognormal_view(wait_median_us=3_000)  # 60 s x 100 requests, the proxy stamps
    text = exposition(with_latency(view))
    samples = parse(text)
    assert types(text)[f"{DURATION}_bucket"] == "histogram"
    for name, hist, window, bounds in (
        (DURATION, view.export.duration, view.long.service, PROM_BOUNDS),
        (QUEUE, view.export.queue, view.long.queue, QUEUE_BOUNDS),
    ):
        ((key, (bs, count, total)),) = histogram_series(samples, name).items()
        assert dict(key) == {"stats_uri": URI}  # labelled as every other per-instance series
        assert_valid_histogram(bs, count, total)
        assert [b for b, _ in bs[:-1]] == list(bounds)  # log-spaced, 1 ms (10 µs) .. 30 s
        assert PROM_BOUNDS[0] == 0.001 and PROM_BOUNDS[-1] == 30.0 == QUEUE_BOUNDS[-1]
        assert count == 6000 == hist.count
        assert [n for _, n in bs] == list(hist.cumulative)
        assert window is not None
        assert total == pytest.approx(window.mean_ms * window.count / 1000, rel=1e-6)
    # The median of the buckets is where the recorder's is: the spread is carried over.
    bs = histogram_series(samples, DURATION)[(("stats_uri", URI),)][0]
    below = next(b for b, n in bs if n >= 3000)
    assert view.long.service is not None
    assert below / 1.3 <= view.long.service.p50_ms / 1000 <= below


def test_the_openmetrics_parser_accepts_the_histograms() -> None:
    """An independent check of the histogram rules (its parser refuses a broken one)."""
    collector = UwsgiCollector(lambda: [with_latency(lognormal_view(wait_median_us=2_000))])
    families = {f.name: f for f in openmetrics_families(openmetrics_latest(collector).decode())}
    assert families[DURATION].type == families[QUEUE].type == "histogram"


def test_the_exporter_writer_renders_them_as_prometheus_client_does() -> None:
    """Byte for byte, and on its fast path: no fallback to rendering the whole registry."""
    snap = with_latency(lognormal_view(wait_median_us=2_000))
    options = ExportOptions(latency_routes=True)
    collector = UwsgiCollector(lambda: [snap], options)
    assert render(collector) == generate_latest(collector)
    assert chunks(instance_families(snap, options)) is not None


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_promtool_check_metrics_is_clean_with_the_request_log() -> None:
    text = exposition(with_latency(lognormal_view(wait_median_us=2_000)), routes=True)
    out = subprocess.run(
        ["promtool", "check", "metrics"], input=text.encode(), capture_output=True, timeout=30
    )
    assert out.returncode == 0 and not out.stdout.strip() and not out.stderr.strip(), out


def test_no_queue_histogram_until_the_proxy_stamps() -> None:
    samples = parse(exposition(with_latency(lognormal_view())))
    assert f"{DURATION}_count" in samples
    assert not any(n.startswith(QUEUE) for n in samples)


def test_requests_by_status_class_every_class_written() -> None:
    lines = [log_line(1000, status=s) for s in (200, 200, 201, 302, 404, 500, 503, 999)]
    view = view_of(recorder_with([(10.0, lines)]), 10.0)
    samples = parse(exposition(with_latency(view)))
    got = {s.labels["class"]: s.value for s in samples["uwsgi_request_status_total"]}
    assert got == {"1xx": 0, "2xx": 3, "3xx": 1, "4xx": 1, "5xx": 2, "other": 1}


def test_per_route_only_behind_the_flag_and_capped() -> None:
    paths = [f"/r{i}/x" for i in range(MAX_EXPORTED_ROUTES + 20)]
    rec = recorder_with([(t, [log_line(2000, path=p) for p in paths]) for t in (10.0, 11.0, 12.0)])
    snap = with_latency(view_of(rec, 12.0))
    assert ROUTE not in exposition(snap)
    samples = parse(exposition(snap, routes=True))
    series = histogram_series(samples, ROUTE)
    routes = {dict(k)["route"] for k in series}
    assert len(routes) == MAX_EXPORTED_ROUTES + 1 and OTHER in routes  # the rest in `other`
    for bs, count, total in series.values():
        assert_valid_histogram(bs, count, total)
    assert sum(count for _, count, _ in series.values()) == 3 * len(paths)
    assert series[(("route", OTHER), ("stats_uri", URI))][1] == 3 * 20


def test_what_says_how_far_to_trust_the_picture() -> None:
    rec = recorder_with([(10.0, [log_line(1000)] * 5 + [b"garbage\n", b"x uwt1 1 2\n"])])
    view = replace(view_of(rec, 10.0, coverage=0.4, trusted=False), refused=7)
    samples = parse(exposition(with_latency(view)))
    assert value(samples, "uwsgitune_latency_coverage_ratio", stats_uri=URI) == 0.4
    assert value(samples, "uwsgitune_latency_lines_total", stats_uri=URI) == 5
    assert value(samples, "uwsgitune_latency_lines_refused_total", stats_uri=URI) == 7
    assert value(samples, "uwsgitune_latency_trusted", stats_uri=URI) == 0
    faults = {s.labels["kind"]: s.value for s in samples["uwsgitune_latency_faults_total"]}
    assert set(faults) == set(FAULT_KINDS)  # every kind, 0 included: rate() sees the first
    assert faults["no_marker"] + faults["fields"] == 2 and sum(faults.values()) == 2
    assert (
        value(parse(exposition(with_latency(lognormal_view()))), "uwsgitune_latency_trusted") == 1
    )


def test_a_sampled_log_says_its_share_and_its_lines_outside_the_sample() -> None:
    every = parse(exposition(with_latency(lognormal_view())))
    assert value(every, "uwsgitune_latency_sampled_ratio", stats_uri=URI) == 1.0
    rec = recorder_with([(10.0, [log_line(1000)] * 5)])
    view = replace(view_of(rec, 10.0, coverage=0.98), sample_every=20, faults={"unsampled": 3})
    samples = parse(exposition(with_latency(view)))
    assert value(samples, "uwsgitune_latency_sampled_ratio", stats_uri=URI) == 0.05
    assert value(samples, "uwsgitune_latency_coverage_ratio", stats_uri=URI) == 0.98
    faults = {s.labels["kind"]: s.value for s in samples["uwsgitune_latency_faults_total"]}
    assert faults["unsampled"] == 3


def test_coverage_unknown_is_no_sample_rather_than_a_zero() -> None:
    samples = parse(exposition(with_latency(lognormal_view(coverage=None))))
    assert "uwsgitune_latency_coverage_ratio" not in samples
    assert value(samples, "uwsgitune_latency_lines_total") == 6000


def test_without_latency_nothing_of_it_and_the_drop_in_names_stay_the_31() -> None:
    plain = exposition(snapshot("processes.json", "processes.json"))
    assert "uwsgi_request" not in plain and "uwsgitune_latency" not in plain
    text = exposition(with_latency(lognormal_view(wait_median_us=1_000)), routes=True)
    uwsgi = {n for n in types(text) if n.startswith("uwsgi_") and not n.startswith(OWN)}
    assert uwsgi == EXPORTER_NAMES  # the request log's names are the declared uwsgi_request_*


def test_the_request_log_stays_while_a_stats_poll_fails() -> None:
    """The histograms come from the request log, not the stats: a failed poll keeps them."""
    samples = parse(exposition(with_latency(lognormal_view(), up=False)))
    assert value(samples, "uwsgi_up") == 0
    assert "uwsgi_workers" not in samples
    assert value(samples, f"{DURATION}_count", stats_uri=URI) == 6000


def test_two_instances_share_each_family() -> None:
    a = with_latency(lognormal_view(seed=1))
    b = replace(with_latency(lognormal_view(seed=2, rps=50)), stats_uri="unix:///b.sock")
    text = exposition(a, b)
    assert text.count(f"# TYPE {DURATION} histogram") == 1
    series = histogram_series(parse(text), DURATION)
    assert {dict(k)["stats_uri"]: c for k, (_, c, _) in series.items()} == {
        URI: 6000,
        "unix:///b.sock": 3000,
    }


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    """Prometheus's `histogram_quantile` (promql/quantile.go): the bucket that holds rank
    q x count, linear inside it, from 0 below the first bound."""
    count = buckets[-1][1]
    rank = q * count
    lower, below = 0.0, 0.0
    for bound, n in buckets:
        if n >= rank:
            if math.isinf(bound):
                return lower
            return lower + (bound - lower) * (rank - below) / (n - below)
        lower, below = bound, n
    raise AssertionError("no bucket holds the rank")


@pytest.mark.parametrize(("median_us", "sigma"), [(20_000, 0.6), (3_000, 1.0), (400_000, 0.3)])
def test_histogram_quantile_over_the_buckets_is_within_10_percent(
    median_us: int, sigma: float
) -> None:
    """The issue's bound for the exported buckets, on smooth spreads, against the recorder's
    percentiles (themselves within 0.5% of the exact ones)."""
    view = lognormal_view(median_us=median_us, sigma=sigma, rps=200)
    samples = parse(exposition(with_latency(view)))
    buckets = histogram_series(samples, DURATION)[(("stats_uri", URI),)][0]
    exact = view.long.service
    assert exact is not None
    for q, ms in ((0.5, exact.p50_ms), (0.95, exact.p95_ms), (0.99, exact.p99_ms)):
        got = histogram_quantile(q, buckets) * 1000
        assert got == pytest.approx(ms, rel=0.10), (q, got, ms)


def test_a_proxy_clock_ahead_is_stated_and_absent_otherwise() -> None:
    """Under a skew the queue histogram reads short: the offset is exported beside it."""
    ahead = [log_line(1000, wait_us=-50_000 - 1000 * (i % 3)) for i in range(500)]
    samples = parse(exposition(with_latency(view_of(recorder_with([(5.0, ahead)]), 5.0))))
    skew = value(samples, "uwsgitune_latency_proxy_clock_skew_seconds", stats_uri=URI)
    assert skew is not None and 0.045 <= skew <= 0.053
    fine = parse(exposition(with_latency(lognormal_view(wait_median_us=2_000))))
    assert f"{QUEUE}_count" in fine and "uwsgitune_latency_proxy_clock_skew_seconds" not in fine
