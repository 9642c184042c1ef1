"""The collector on recorded stats documents: names, labels and types of uwsgi_exporter."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace

import pytest
from prometheus_client import generate_latest

from tests.conftest import stats_fixture
from tests.daemon.helpers import EXPORTER_NAMES, parse, types, value
from tests.states import decided, finding
from uwsgitune.core.derive import Tracker
from uwsgitune.core.model import parse_stats
from uwsgitune.core.samples import Poll
from uwsgitune.exporter.metrics import REQUEST_LOG_PREFIX, registry_for
from uwsgitune.pipeline import InstanceState, PollCounts

URI = "unix:///run/uwsgi/app.sock"
# the exporter's self-metrics; uWSGI's metrics; the request log's (`--latency`)
OWN = ("uwsgi_exporter_", "uwsgi_metric", REQUEST_LOG_PREFIX)


def snapshot(*docs: str, **extra: object) -> InstanceState:
    """Fold recorded documents one second apart; the state of the last poll."""
    tracker = Tracker(URI)
    frame, poll = None, None
    for i, name in enumerate(docs):
        poll = Poll(URI, 1000.0 + i, 10.0 + i, doc=parse_stats(stats_fixture(name)))
        frame = tracker.update(poll)
    return InstanceState(URI, "app", "observe", frame, poll, **extra)  # type: ignore[arg-type]


def render(*snaps: InstanceState) -> str:
    return generate_latest(registry_for(lambda: list(snaps))).decode()


def exporter_names(text: str) -> set[str]:
    return {n for n in types(text) if n.startswith("uwsgi_") and not n.startswith(OWN)}


def test_every_exporter_metric_with_its_type_and_labels() -> None:
    text = render(snapshot("64-workers.json", "64-workers.json"))
    assert exporter_names(text) == EXPORTER_NAMES  # all 31, and no uwsgi_* name of our own
    kinds = types(text)
    for name in EXPORTER_NAMES:
        assert kinds[name] == ("counter" if name.endswith("_total") else "gauge"), name
    samples = parse(text)
    assert value(samples, "uwsgi_workers", stats_uri=URI) == 64
    assert set(samples["uwsgi_socket_queue_length"][0].labels) == {"stats_uri", "name", "proto"}
    assert set(samples["uwsgi_worker_requests_total"][0].labels) == {"stats_uri", "worker_id"}
    app_labels = set(samples["uwsgi_worker_app_requests_total"][0].labels)
    assert app_labels == {"stats_uri", "worker_id", "app_id", "mountpoint", "chdir"}
    assert {s.labels["worker_id"] for s in samples["uwsgi_worker_busy"]} == {
        str(i) for i in range(1, 65)
    }


def test_units_follow_the_exporter() -> None:
    snap = snapshot("processes.json")
    doc = snap.doc
    assert doc is not None
    w = doc.workers[0]
    samples = parse(render(snap))
    wid = str(w.id)
    assert value(samples, "uwsgi_worker_running_time_seconds", worker_id=wid) == pytest.approx(
        w.running_time / 1e6
    )
    assert value(
        samples, "uwsgi_worker_average_response_time_seconds", worker_id=wid
    ) == pytest.approx(w.avg_rt / 1e6)
    assert value(samples, "uwsgi_worker_last_spawn_time_seconds", worker_id=wid) == pytest.approx(
        w.last_spawn
    )
    assert value(samples, "uwsgi_worker_requests_total", worker_id=wid) == w.requests
    assert value(samples, "uwsgi_up") == 1


def test_never_spawned_slots_are_skipped_and_gone_workers_disappear() -> None:
    cheap = parse(render(snapshot("cheaper.json")))
    assert value(cheap, "uwsgi_workers") == 2
    assert {s.labels["worker_id"] for s in cheap["uwsgi_worker_busy"]} == {"1", "2"}
    assert value(cheap, "uwsgitune_workers_cheap") == 2
    # The same scrape target, after the instance shrank from 64 workers: nothing stale stays.
    big = parse(render(snapshot("64-workers.json")))
    assert len(big["uwsgi_worker_busy"]) == 64
    assert len(cheap["uwsgi_worker_busy"]) == 2


def test_a_failed_poll_leaves_up_zero_and_only_own_metrics() -> None:
    good = snapshot("processes.json", counts=PollCounts(3, 1, 0.01, 0.002))
    assert good.frame is not None
    down = replace(good, frame=replace(good.frame, kind="error", error="refused"), poll=None)
    samples = parse(render(down))
    assert value(samples, "uwsgi_up") == 0
    left = [n for n in samples if n.startswith("uwsgi_") and not n.startswith(OWN)]
    assert left == ["uwsgi_up"]
    assert value(samples, "uwsgi_exporter_last_scrape_error") == 1
    assert value(samples, "uwsgitune_poll_errors_total") == 1
    assert value(samples, "uwsgitune_poll_duration_seconds_count") == 3
    never = parse(render(InstanceState("tcp://127.0.0.1:1")))
    assert value(never, "uwsgi_up", stats_uri="tcp://127.0.0.1:1") == 0


def test_beyond_the_exporter_and_own_metrics() -> None:
    snap = snapshot(
        "processes.json",
        "processes.json",
        findings=(
            finding("listen_queue.capacity_short", "critical", "processes", 12),
            finding("memory.rss_growth", "warning", "reload-on-rss", "512"),  # no number: no metric
        ),
        actions=(("fifo_add", "ok", 2), ("reload", "refused", 1)),
        tuning=decided("up", "saturated", 8),
    )
    samples = parse(render(snap))
    assert value(samples, "uwsgitune_tuner_desired_workers", action="up", code="saturated") == 8
    assert (
        value(
            samples,
            "uwsgitune_findings_active",
            rule="listen_queue.capacity_short",
            severity="critical",
        )
        == 1
    )
    assert value(samples, "uwsgitune_recommended_value", setting="processes") == 12
    assert value(samples, "uwsgitune_actions_total", kind="reload", result="refused") == 1
    assert value(samples, "uwsgitune_busy_ratio") == 0  # identical documents: nothing served
    assert value(samples, "uwsgitune_littles_l") == 0
    assert value(samples, "uwsgitune_workers_live") == 4
    assert value(samples, "uwsgitune_instance_info", name="app", mode="observe") == 1
    assert samples["uwsgitune_socket_queue_length"][0].labels["source"] == "stats"


def test_two_instances_share_families() -> None:
    a = snapshot("processes.json")
    b = replace(snapshot("threads.json"), stats_uri="tcp://127.0.0.1:9191")
    samples = parse(render(a, b))
    assert {s.labels["stats_uri"] for s in samples["uwsgi_up"]} == {URI, "tcp://127.0.0.1:9191"}


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
@pytest.mark.parametrize(
    "doc", ["64-workers-2-threads-busy.json", "cheaper.json", "enable-metrics.json"]
)
def test_promtool_accepts_the_exposition(doc: str) -> None:
    snap = snapshot(
        doc,
        doc,
        findings=(finding("listen_queue.bursts", "info"),),
        counts=PollCounts(2, 0, 0.1, 0.05),
    )
    out = subprocess.run(
        ["promtool", "check", "metrics"],
        input=render(snap).encode(),
        capture_output=True,
        timeout=30,
    )
    # promtool exits 0 and prints lint notes only for style problems; we want none at all.
    assert out.returncode == 0, out.stderr
    assert out.stdout.decode().strip() == "" and out.stderr.decode().strip() == "", out


@pytest.mark.parametrize("doc", ["64-workers-2-threads-busy.json", "cheaper.json", "emperor.json"])
def test_fast_text_is_byte_identical_to_generate_latest(doc: str) -> None:
    from uwsgitune.exporter.exposition import render as fast

    a = snapshot(
        doc,
        doc,
        findings=(finding("a.b", "info"),),
        actions=(("fifo", "ok", 1),),
        counts=PollCounts(2, 1, 0.1, 0.05),
    )
    weird = replace(snapshot("processes.json"), stats_uri='unix:///a "b"\\c\nd', name="é")
    registry = registry_for(lambda: [a, weird])
    assert fast(registry) == generate_latest(registry)
