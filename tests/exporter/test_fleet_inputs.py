"""The daemon's per-instance sums of the per-worker families (`uwsgitune_worker_sum_*`, for
`recommend --prometheus`): each equals summing the same scrape's per-worker series, cheaped
and busy slots included; the CPU waits appear only when they are known."""

from __future__ import annotations

import pytest

from tests.daemon.helpers import parse, types
from tests.exporter.test_collector import render, snapshot

SUMS = {
    "uwsgitune_worker_sum_requests_total": "uwsgi_worker_requests_total",
    "uwsgitune_worker_sum_exceptions_total": "uwsgi_worker_exceptions_total",
    "uwsgitune_worker_sum_running_time_seconds_total": "uwsgi_worker_running_time_seconds",
    "uwsgitune_worker_sum_harakiri_total": "uwsgi_worker_harakiri_count_total",
    "uwsgitune_worker_sum_spawns_total": "uwsgi_worker_respawn_count_total",
    "uwsgitune_worker_sum_busy": "uwsgi_worker_busy",
    "uwsgitune_worker_sum_cheap": "uwsgi_worker_cheap",
    "uwsgitune_worker_sum_rss_bytes": "uwsgi_worker_rss_bytes",
}


@pytest.mark.parametrize(
    "doc", ["64-workers-2-threads-busy.json", "combined-threads-cheaper.json", "cheaper.json"]
)
def test_each_sum_is_the_sum_of_the_per_worker_series(doc: str) -> None:
    text = render(snapshot(doc, doc))
    samples, kinds = parse(text), types(text)
    for own, workers in SUMS.items():
        (mine,) = samples[own]
        assert mine.value == pytest.approx(sum(s.value for s in samples[workers])), own
        assert kinds[own] == ("counter" if own.endswith("_total") else "gauge"), own
    per_worker = samples["uwsgi_worker_cores"]
    assert samples["uwsgitune_worker_slots"][0].value == len(per_worker)
    assert samples["uwsgitune_worker_max_cores"][0].value == max(s.value for s in per_worker)
    reporting = sum(s.value > 0 for s in samples["uwsgi_worker_rss_bytes"])
    assert samples["uwsgitune_worker_rss_reporting"][0].value == reporting
    # recorded documents carry no /proc: the run-queue wait and niced CPU are unknown, absent
    assert "uwsgitune_runq_cores" not in samples and "uwsgitune_host_nice_ratio" not in samples
