"""The latency target's form (`p99=250ms`) and how a window reads against it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.latency import lognormal_view
from uwsgitune.core.latencytarget import LatencyTarget, parse_latency_target, read_latency


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("p99=250ms", LatencyTarget("p99", 250.0)),
        ("p99=0.25s", LatencyTarget("p99", 250.0)),
        ("P95 = 800", LatencyTarget("p95", 800.0)),
        ("p99:1.5s", LatencyTarget("p99", 1500.0)),
        (" p95=250000us ", LatencyTarget("p95", 250.0)),
    ],
)
def test_the_forms_a_person_writes(text: str, want: LatencyTarget) -> None:
    assert parse_latency_target(text) == want


@pytest.mark.parametrize(
    "text", ["", "250ms", "p50=10ms", "p99=", "p99=-3ms", "p99=0", "p99=1h", "p99=20m"]
)
def test_anything_else_is_one_line_naming_the_form(text: str) -> None:
    with pytest.raises(ValueError, match=r"give it as p99=250ms or p95=0.25s$") as info:
        parse_latency_target(text)
    assert "\n" not in str(info.value)


@given(st.sampled_from(["p95", "p99"]), st.floats(0.001, 600_000, allow_nan=False))
def test_a_target_written_back_reads_the_same(q: str, value: float) -> None:
    t = parse_latency_target(f"{q}={value!r}ms")
    assert parse_latency_target(str(t)) == t


def test_stamped_waits_add_at_the_quantile_and_service_alone_names_the_cause() -> None:
    target = parse_latency_target("p99=250ms")
    view = lognormal_view(median_us=20_000, sigma=0.3, wait_median_us=150_000)
    r = read_latency(view, target, view.short, min_requests=200, min_coverage=0.7)
    assert r.basis == "stamped" and r.problem is None
    assert r.queue is not None and r.service is not None and view.short.total is not None
    # each request's wait + service, not the sum of the two p99s (which overstates it)
    assert r.observed_ms == pytest.approx(view.short.total.p99_ms)
    assert r.observed_ms < r.queue.p99_ms + r.service.p99_ms
    assert r.missed and r.cause == "queue" and r.near
    # under WHOLE_SHARE of the requests stamped: the sum, an upper bound
    few = replace(view, short=replace(view.short, total=replace(view.short.total, count=10)))
    r = read_latency(few, target, few.short, min_requests=200, min_coverage=0.7)
    assert r.observed_ms == pytest.approx(r.queue.p99_ms + r.service.p99_ms)  # type: ignore[union-attr]
    slow = lognormal_view(median_us=300_000, sigma=0.3, wait_median_us=1_000)
    r = read_latency(slow, target, slow.short, min_requests=200, min_coverage=0.7)
    assert r.cause == "service"


def test_a_skewed_stamp_falls_back_to_littles_mean_wait() -> None:
    target = parse_latency_target("p99=250ms")
    view = lognormal_view(median_us=20_000, sigma=0.3, little_wait_ms=40.0)
    r = read_latency(view, target, view.short, min_requests=200, min_coverage=0.7)
    assert r.basis == "little" and r.queue_ms == 40.0
    assert r.service_ms is not None and r.observed_ms == pytest.approx(r.service_ms + 40.0)
    assert "Little's law" in r.basis_text() and not r.missed


@pytest.mark.parametrize(
    ("view", "words"),
    [
        ({"coverage": 0.5}, "coverage 50% < 70%"),
        ({"coverage": None}, "coverage unknown"),
        ({"trusted": False}, "not proved"),
        ({"rps": 2}, "requests in the last 10s (< 200"),
    ],
)
def test_what_cannot_be_judged_says_why(view: dict[str, object], words: str) -> None:
    v = lognormal_view(median_us=20_000, **view)  # type: ignore[arg-type]
    r = read_latency(v, parse_latency_target("p99=1s"), v.short, min_requests=200, min_coverage=0.7)
    assert r.problem is not None and words in r.problem
