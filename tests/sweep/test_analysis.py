"""Pure analysis on synthetic curves: the physics, without a server."""

from __future__ import annotations

import pytest

from uwsgitune.sweep.analysis import Criteria, StepMeasure, aggregate, noise_pct, recommend
from uwsgitune.sweep.shape import classify


def step(
    w: int,
    tput: float,
    *,
    p99: float = 100.0,
    service: float | None = None,
    cpu: float | None = None,
    errors: int = 0,
    pass_no: int = 0,
) -> StepMeasure:
    return StepMeasure(
        workers=w,
        pass_no=pass_no,
        seconds=10.0,
        ok=int(tput * 10),
        errors=errors,
        throughput=tput,
        p50_ms=p99 / 2,
        p90_ms=p99 * 0.8,
        p99_ms=p99,
        live=w,
        service_ms=service,
        cpu_cores=cpu,
        rss_bytes=w * 20_000_000,
    )


def cpu_limited(cpus: int = 2) -> list[StepMeasure]:
    """Throughput flat past the CPUs; the server's time per request grows with workers."""
    out = []
    for w in (1, 2, 3, 4, 6, 8, 16):
        tput = 100.0 * min(w, cpus) * (0.98 if w > cpus else 1.0)
        out.append(step(w, tput, service=10.0 * max(1.0, w / cpus), cpu=min(w, cpus) * 0.95))
    return out


def io_bound() -> list[StepMeasure]:
    """Each worker adds 20 req/s (50 ms waits) up to 32, at almost no CPU."""
    return [step(w, 20.0 * w, service=50.0, cpu=0.01 * w) for w in (1, 2, 4, 8, 16, 32)]


def test_cpu_limited_recommends_the_knee_near_the_cpus() -> None:
    points = aggregate(cpu_limited())
    rec = recommend(points, Criteria())
    shape = classify(points, Criteria(), 2.0, clients=64)
    assert rec.workers == 2
    assert rec.memory_bytes == 40_000_000
    assert shape.kind == "cpu-limited" and shape.knee == 2
    assert "x8.0" in shape.reason  # 16 workers: 80 ms per request against 10 at the knee


def test_io_bound_recommends_high_and_says_it_is_still_rising() -> None:
    points = aggregate(io_bound())
    rec = recommend(points, Criteria())
    shape = classify(points, Criteria(), 2.0, clients=64)
    assert rec.workers == 32
    assert shape.kind == "io-bound" and shape.rising_at_top
    assert "sweep higher" in shape.reason


def test_io_bound_plateau_picks_the_smallest_within_tolerance() -> None:
    steps = [step(w, min(20.0 * w, 300.0), service=50.0, cpu=0.1) for w in (1, 2, 4, 8, 16, 32)]
    steps.append(step(12, 240.0, service=50.0, cpu=0.1))
    points = aggregate(steps)
    assert recommend(points, Criteria(within_pct=10)).workers == 16
    assert recommend(points, Criteria(within_pct=25)).workers == 12


def test_p99_target_filters_and_explains() -> None:
    steps = [step(1, 100, p99=900), step(2, 195, p99=400), step(4, 200, p99=150)]
    points = aggregate(steps)
    assert recommend(points, Criteria(p99_ms=200)).workers == 4
    none = recommend(points, Criteria(p99_ms=50))
    assert none.workers is None and "p99 under 50 ms" in none.reason


def test_errors_disqualify_a_count() -> None:
    steps = [step(1, 100), step(2, 180), step(4, 200, errors=500)]
    rec = recommend(aggregate(steps), Criteria())
    assert rec.workers == 2 and rec.best_workers == 2


def test_noise_from_repeats_widens_the_tolerance() -> None:
    # Two passes; each count's throughput differs by 20% between them.
    steps = [
        step(w, t * f, pass_no=i)
        for i, f in enumerate((0.9, 1.1))
        for w, t in ((1, 100.0), (2, 170.0), (4, 200.0))
    ]
    points = aggregate(steps)
    assert points[0].runs == 2
    assert noise_pct(points) == pytest.approx(20.0)
    rec = recommend(points, Criteria(within_pct=5))
    assert rec.tolerance_pct == pytest.approx(20.0)
    assert rec.workers == 2  # 170 is within 20% of 200, not within 5%


def test_no_repeats_means_unknown_noise() -> None:
    assert noise_pct(aggregate(io_bound())) is None


def test_very_noisy_curve_is_called_noisy() -> None:
    steps = [
        step(w, t * f, pass_no=i)
        for i, f in enumerate((0.6, 1.4))
        for w, t in ((1, 100.0), (2, 150.0), (4, 160.0))
    ]
    assert classify(aggregate(steps), Criteria(), 2.0).kind == "noisy"


def test_load_limited_when_clients_cap_the_workers() -> None:
    points = aggregate([step(w, 20.0 * min(w, 4), service=50.0) for w in (1, 2, 4, 8, 16)])
    shape = classify(points, Criteria(), 2.0, clients=4)
    assert shape.kind == "load-limited" and "--concurrency" in shape.reason


def test_open_loop_rate_served_everywhere_is_load_limited() -> None:
    points = aggregate([step(w, 50.0 if w >= 2 else 30.0) for w in (1, 2, 4, 8)])
    shape = classify(points, Criteria(), 2.0, rate=50.0)
    assert shape.kind == "load-limited" and shape.knee == 2
    assert recommend(points, Criteria()).workers == 2


def test_too_few_points_is_unclear_and_empty_is_handled() -> None:
    assert classify(aggregate([step(1, 10), step(2, 20)]), Criteria(), 2.0).kind == "unclear"
    assert recommend((), Criteria()).workers is None
