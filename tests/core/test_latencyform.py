"""The plain form of a latency view (`watch --json`, recordings), and the view rebuilt from it."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tests.support.latency import log_line, recorder_with, view_of
from tests.support.latencymix import traffic_view
from tests.tui.frames import history
from uwsgitune.core.latencyform import empty_export, latency_summary, view_from_summary
from uwsgitune.core.latencyreport import LatencyView
from uwsgitune.render import jsonview

WINDOW_KEYS = {
    "seconds",
    "requests",
    "service",
    "queue",
    "total",
    "workers",
    "routes",
    "status",
    "stamps",
}


def test_the_summary_is_the_view_without_its_export_and_no_request() -> None:
    view = traffic_view(stamped=True, coverage=0.98, little_wait_ms=3.2)
    data = json.loads(json.dumps(latency_summary(view)))
    names = {f.name for f in dataclasses.fields(LatencyView)}
    assert set(data) == names - {"export"}
    assert set(data["short"]) == WINDOW_KEYS == set(data["long"])
    assert data["short"]["seconds"] == 10 and data["long"]["seconds"] == 60
    long = view.long
    assert long.service is not None and long.queue is not None
    assert data["long"]["service"]["p99_ms"] == round(long.service.p99_ms, 4)
    assert data["long"]["queue"]["p50_ms"] == round(long.queue.p50_ms, 4)
    assert set(data["long"]["workers"]) == {"1", "2", "3", "4"}
    assert data["long"]["routes"][0]["route"] == "/api/orders"
    assert data["long"]["status"]["2xx"] == long.requests
    assert data["long"]["stamps"]["format"] == "t=seconds (nginx ${msec})"
    assert data["coverage"] == 0.98 and data["trusted"] is True and data["faults"] == {}
    assert len(data["p99_series"]) == 60
    # No raw request: no client address, no full path with its query, no single line's time.
    text = json.dumps(data)
    assert "127.0.0.1 " not in text and "?" not in text and "HTTP/1.1" not in text


def test_a_view_rebuilt_from_its_summary_reads_the_same() -> None:
    for view in (
        traffic_view(stamped=True, coverage=0.5, little_wait_ms=1.0),
        traffic_view(trusted=False, coverage=None),
        view_of(
            recorder_with(
                [
                    (
                        1.0,
                        [b"garbage\n"] * 5,
                    ),
                    (2.0, [log_line(100)]),
                ]
            ),
            2.0,
        ),
    ):
        form = latency_summary(view)
        again = view_from_summary(json.loads(json.dumps(form)))
        assert latency_summary(again) == form
        assert again.export == empty_export()
        assert again.stamped is view.stamped and again.trusted is view.trusted
        assert set(again.long.workers) == set(view.long.workers)  # int keys again
    assert view.mismatch is not None and again.mismatch == view.mismatch


def test_older_and_newer_forms_are_read() -> None:
    form = json.loads(json.dumps(latency_summary(traffic_view())))
    newer = {**form, "future": 1, "long": {**form["long"], "future": 2}}
    assert view_from_summary(newer).long.requests == form["long"]["requests"]
    older = {k: v for k, v in form.items() if k not in ("silent_for", "mismatch", "refused")}
    view = view_from_summary(older)
    assert view.silent_for is None and view.refused == 0
    with pytest.raises(KeyError):
        view_from_summary({k: v for k, v in form.items() if k != "short"})


def test_watch_json_carries_the_latency_only_when_there_is_one() -> None:
    frames = history(3)
    view = traffic_view(coverage=0.9)
    doc = json.loads(jsonview.dumps([frames[-1], frames[-1]], [view, None]))
    first, second = doc["instances"]
    assert doc["schema_version"] == 1
    assert first["latency"]["long"]["requests"] == view.long.requests
    assert first["latency"]["coverage"] == 0.9
    assert "latency" not in second
    assert "latency" not in json.loads(jsonview.dumps([frames[-1]]))["instances"][0]
