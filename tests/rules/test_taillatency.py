"""The latency findings (rules/taillatency.py) from a real recorder fed request log lines,
against synthetic frames from the real Tracker: the target split by cause, the slow worker,
the slow route, and silence on data that cannot be judged."""

from __future__ import annotations

import math
import random

import pytest

from tests.support.frames import series, tcp
from tests.support.latency import log_line, lognormal_view, recorder_with, view_of
from uwsgitune.core.latencyreport import LatencyView
from uwsgitune.rules import Finding, RuleSettings, evaluate

TARGET = RuleSettings(latency_target="p99=250ms")
NOW = 1000.0


def findings(
    view: LatencyView | None, settings: RuleSettings = TARGET, **frame: object
) -> dict[str, Finding]:
    frames = series(40, **frame)
    found, _ = evaluate(frames, settings=settings, latency=view)
    return {f.id: f for f in found if f.rule == "latency"}


def mixed_view(
    spec: dict[tuple[int, str], tuple[float, int]],
    *,
    seconds: int = 60,
    seed: int = 2,
    **view: object,
) -> LatencyView:
    """Lines for (worker, route) -> (median service ms, requests per second), lognormal."""
    rng = random.Random(seed)
    batches = []
    for k in range(seconds):
        lines = []
        for (wid, path), (median_ms, per_s) in spec.items():
            for _ in range(per_s):
                us = max(1, int(rng.lognormvariate(math.log(median_ms * 1000), 0.3)))
                lines.append(log_line(us, wid=wid, path=path))
        batches.append((NOW - seconds + 1 + k, lines))
    return view_of(recorder_with(batches), NOW, **view)  # type: ignore[arg-type]


BUSY = {"live": 4, "busy_ratio": 1.0, "rps": 100, "sockets": (tcp(queue=8),)}


def test_a_miss_from_queue_wait_is_capacity_with_the_worker_count_advice() -> None:
    view = lognormal_view(median_us=20_000, sigma=0.3, wait_median_us=150_000)
    found = findings(view, **BUSY)
    f = found["latency.queue_over_target"]
    assert "latency.service_over_target" not in found
    assert f.value("latency_basis") == "stamped"
    assert f.value("p99_ms") > 250 and f.value("service_p99_ms") < 250  # type: ignore[operator]
    assert f.value("queue_p99_ms") > 150  # type: ignore[operator]
    assert f.value("latency_coverage") == 1.0 and f.value("latency_requests") >= 200  # type: ignore[operator]
    rec = f.recommendation
    assert rec is not None and rec.direction == "raise" and isinstance(rec.value, int)
    assert rec.value > 4 and "capacity problem" in f.reason


def test_without_the_stamp_the_wait_is_littles_mean_and_the_evidence_says_so() -> None:
    view = lognormal_view(median_us=20_000, sigma=0.3, little_wait_ms=300.0)
    f = findings(view, **BUSY)["latency.queue_over_target"]
    assert f.value("latency_basis") == "little" and f.value("little_wait_ms") == 300.0
    with pytest.raises(KeyError):
        f.value("queue_p99_ms")


def test_a_miss_from_service_time_is_not_capacity_and_names_routes_and_workers() -> None:
    view = mixed_view({(1, "/report"): (400, 3), (2, "/report"): (400, 3), (3, "/"): (20, 4)})
    found = findings(view, **BUSY)
    f = found["latency.service_over_target"]
    assert "latency.queue_over_target" not in found
    assert "latency.slow_route" not in found  # said by the service finding
    assert f.value("service_p99_ms") >= 250  # type: ignore[operator]
    assert str(f.value("slowest_routes")).startswith("/report p99")
    assert "worker 1" in str(f.value("slowest_workers"))
    assert f.recommendation is not None and f.recommendation.apply == "outside"


@pytest.mark.parametrize(
    ("why", "view"),
    [
        ("low coverage", {"coverage": 0.3}),
        ("coverage unknown", {"coverage": None}),
        ("untrusted", {"trusted": False}),
    ],
)
def test_data_that_cannot_be_judged_says_nothing(why: str, view: dict[str, object]) -> None:
    v = lognormal_view(median_us=20_000, sigma=0.3, wait_median_us=150_000, **view)
    assert findings(v, **BUSY) == {}, why


def test_too_few_requests_say_nothing() -> None:
    v = lognormal_view(seconds=60, rps=3, median_us=20_000, sigma=0.3, wait_median_us=150_000)
    assert v.long.requests < TARGET.latency_min_requests
    assert findings(v, **BUSY) == {}


def test_no_target_no_target_findings_and_no_view_no_latency_findings() -> None:
    v = lognormal_view(median_us=20_000, sigma=0.3, wait_median_us=150_000)
    assert findings(v, RuleSettings(), **BUSY) == {}
    assert findings(None, **BUSY) == {}


def test_one_worker_much_slower_than_its_peers() -> None:
    spec = {(w, "/"): (10.0, 5) for w in (1, 2, 4, 5)}
    spec[(3, "/")] = (50.0, 5)  # 5x its peers' median
    f = findings(mixed_view(spec), RuleSettings())["latency.slow_worker"]
    assert f.value("worker") == 3 and f.value("peers") == 4
    lossy = mixed_view(spec, coverage=0.3)  # the lines lost may be the others' slow ones
    assert "latency.slow_worker" not in findings(lossy, RuleSettings())
    assert 40 < f.value("worker_p50") < 60 and 8 < f.value("peers_p50_median") < 12  # type: ignore[operator]


@pytest.mark.parametrize(
    ("why", "slow", "others"),
    [
        ("2x is within the spread a worker may have", (20.0, 5), 3),
        ("too few requests on the slow worker", (50.0, 0), 3),
        ("one peer is not enough to compare", (50.0, 5), 1),
    ],
)
def test_a_worker_is_not_called_slow_on_thin_evidence(
    why: str, slow: tuple[float, int], others: int
) -> None:
    spec = {(w, "/"): (10.0, 5) for w in range(1, 1 + others)}
    spec[(9, "/")] = (slow[0], slow[1]) if slow[1] else (slow[0], 1)
    view = mixed_view(spec, seconds=40 if slow[1] == 0 else 60)
    settings = RuleSettings(slow_worker_min_requests=50)
    if slow[1] == 0:  # 40 requests in the minute: under the 50 each worker needs
        assert view.long.workers[9].count < 50
    assert "latency.slow_worker" not in findings(view, settings), why


def test_a_slow_route_with_a_large_share_of_service_time() -> None:
    view = mixed_view({(1, "/report"): (700, 1), (2, "/"): (10, 20), (3, "/"): (10, 20)})
    f = findings(view, RuleSettings())["latency.slow_route"]
    assert f.value("route") == "/report" and f.value("route_p99") >= 500  # type: ignore[operator]
    assert f.value("route_share") > 0.25  # type: ignore[operator]
    # the same route under a target it meets is no finding
    assert "latency.slow_route" not in findings(view, RuleSettings(latency_target="p99=5s"))
