"""The autoscaler's signal (tuner/utilisation.py): it does not move with the tuner's live
count, it is proportional to the load per pod, and it reads 1 where the tuner is at its
ceiling, workers or CPUs."""

from __future__ import annotations

import pytest

from tests.tuner.plant import Plant
from uwsgitune.core.frame import Frame
from uwsgitune.core.staffing import workers_for
from uwsgitune.tuner import TunerSettings, decide
from uwsgitune.tuner.decision import TunerState
from uwsgitune.tuner.utilisation import Utilisation, capacity_utilisation, served_by

SETTINGS = TunerSettings(min_workers=2, max_workers=16)


def polls(plant: Plant, seconds: int = 12) -> list[Frame]:
    return [plant.frame(float(t)) for t in range(seconds)]


def signal(plant: Plant, settings: TunerSettings = SETTINGS) -> Utilisation:
    u = capacity_utilisation(polls(plant), settings)
    assert u is not None
    return u


def io_bound(live: int, rate: float) -> Plant:
    # 5 ms CPU + 45 ms IO on 2 CPUs: the CPUs keep 20 requests busy, the workers bind first
    return Plant(live=live, workers_max=16, cpus=2.0, cpu_ms=5, io_ms=45, clients=None, rate=rate)


def test_served_by_is_the_inverse_of_the_tuners_sizing() -> None:
    for beta in (0.0, 1.0, 2.0, 3.5):
        for threads in (1, 4):
            for n in range(1, 200):
                assert workers_for(served_by(n, threads, beta), threads, beta) == n


def test_the_signal_does_not_move_with_the_live_count() -> None:
    # The tuner's actuator is the live count: whatever it does, the autoscaler reads the same.
    few, many = signal(io_bound(4, 60)), signal(io_bound(14, 60))
    assert few.ratio == pytest.approx(many.ratio, rel=0.05)
    assert few.capacity == many.capacity


def test_the_signal_is_proportional_to_the_load_per_pod() -> None:
    # The HPA's rule (replicas x value / target) lands in one step only on such a signal.
    one, two = signal(io_bound(12, 40)), signal(io_bound(12, 80))
    assert two.ratio == pytest.approx(2 * one.ratio, rel=0.06)


def test_the_workers_bound_reads_one_where_the_tuner_wants_its_ceiling() -> None:
    for rate in (40, 120, 160, 170, 180, 200, 240):
        u = signal(io_bound(16, rate))
        assert u.bound == "workers" and u.ceiling == 16
        wants = workers_for(u.demand, 1, SETTINGS.staffing_beta)
        assert (u.ratio > 1) == (wants > 16), (rate, u, wants)


def test_the_cpu_bound_reads_one_where_the_cpus_are_saturated() -> None:
    # 10 ms CPU on 2 CPUs: 200 req/s at most; cpu_saturated (0.85) is 170 req/s.
    for rate, hot in ((100, False), (150, False), (180, True), (400, True)):
        plant = Plant(live=8, workers_max=16, cpus=2.0, cpu_ms=10, clients=None, rate=rate)
        u = signal(plant)
        assert u.bound == "cpu"
        assert (u.ratio >= 1) == hot, (rate, u)


def test_at_a_ratio_over_one_the_tuner_adds_no_worker_past_its_ceiling() -> None:
    plant = io_bound(16, 400)  # far past what 16 workers serve: a queue
    frames = polls(plant, 40)
    u = capacity_utilisation(frames, SETTINGS)
    assert u is not None and u.ratio > 1
    d = decide(frames, TunerState(), SETTINGS, now=frames[-1].mono)
    assert d.desired <= 16


def test_no_signal_on_stale_stats() -> None:
    frames = polls(io_bound(8, 60))
    assert capacity_utilisation(frames, SETTINGS, now=frames[-1].mono + 60) is None
    assert capacity_utilisation([], SETTINGS) is None


def test_on_saturated_cpus_more_workers_do_not_raise_the_signal() -> None:
    # Little's L counts the wait for a CPU: it grows with every worker added to busy CPUs.
    # The demand counts a request's own time only.
    def at(live: int) -> Utilisation:
        return signal(Plant(live=live, workers_max=16, cpus=2.0, cpu_ms=10, clients=None, rate=400))

    assert at(16).ratio == pytest.approx(at(8).ratio, rel=0.1)


def test_a_queue_below_the_ceiling_is_the_tuners_not_the_autoscalers() -> None:
    # 4 of 16 workers, the load past what 4 serve: the tuner adds workers; the replica
    # count must not move for it.
    u = signal(io_bound(4, 400))
    assert u.ratio == pytest.approx(u.demand / u.capacity) and u.ratio < 1


def test_at_the_ceiling_the_queue_counts_up_to_the_capacity() -> None:
    # 16 of 16 workers and a queue (the plant holds 20): short by at least the queue, read
    # as at most one capacity more, so the autoscaler at most about doubles the pods.
    u = signal(io_bound(16, 600))
    assert u.ratio == pytest.approx((u.demand + min(20.0, u.capacity)) / u.capacity)
    assert u.ratio > 1


def test_a_tuner_that_does_not_act_has_the_instances_own_slots_for_ceiling() -> None:
    plant = Plant(live=4, workers_max=8, cpus=2.0, cpu_ms=5, io_ms=45, clients=None, rate=60)
    frames = polls(plant)
    acting = capacity_utilisation(frames, SETTINGS, acting=True)
    watching = capacity_utilisation(frames, SETTINGS, acting=False)
    assert acting is not None and watching is not None
    assert (acting.ceiling, watching.ceiling) == (16, 8)
    assert watching.ratio > acting.ratio
