"""The fleet simulation (bench/fleet_sim.py): its HPA is Kubernetes' documented algorithm,
its verdicts count what they say, and a step of the load settles as the issue asks (each
controller turns at most once per load change; the replica count steady within three
stabilisation windows). Pure: simulated pods, the real tuner."""

from __future__ import annotations

from types import ModuleType

import pytest


def test_the_replica_count_follows_the_documented_ratio(sim: ModuleType) -> None:
    spec = sim.HpaSpec(0.1)
    # The docs: 200m against a target of 100m doubles the replicas; 50m halves them.
    assert sim.replica_count(1, [0.2], [True], spec) == 2
    assert sim.replica_count(4, [0.05] * 4, [True] * 4, spec) == 2
    # Within the tolerance (0.1): nothing.
    assert sim.replica_count(4, [0.108] * 4, [True] * 4, spec) == 4


def test_missing_metrics_dampen_the_move(sim: ModuleType) -> None:
    spec = sim.HpaSpec(1.0)
    # Scale-up: a pod without a metric counts at 0; here that cancels the move.
    assert sim.replica_count(2, [2.0, None], [True, True], spec) == 2
    # Scale-down: a pod without a metric counts at the target.
    assert sim.replica_count(3, [0.2, 0.2, None], [True] * 3, spec) == 2
    # CPU: an unready pod is set aside, then counted at 0 for a scale-up.
    cpu = sim.HpaSpec(0.9, resource_cpu=True)
    assert sim.replica_count(3, [1.8, 1.8, 5.0], [True, True, False], cpu) == 4


def test_a_scale_down_waits_for_the_stabilisation_window(sim: ModuleType) -> None:
    hpa = sim.Hpa(sim.HpaSpec(1.0))
    assert hpa.sync(0.0, 4, [1.0] * 4, [True] * 4) == 4
    for t in range(15, 300, 15):  # the load halved: 2 recommended, 4 within the window
        assert hpa.sync(float(t), 4, [0.5] * 4, [True] * 4) == 4
    assert hpa.sync(300.0, 4, [0.5] * 4, [True] * 4) == 2


def test_a_scale_up_is_limited_by_the_policies(sim: ModuleType) -> None:
    hpa = sim.Hpa(sim.HpaSpec(1.0))
    # 100% or 4 pods per 15 s, the larger: from 2, at most 6; then from 6, at most 12.
    assert hpa.sync(0.0, 2, [50.0] * 2, [True] * 2) == 6
    assert hpa.sync(5.0, 6, [50.0] * 6, [True] * 6) == 6  # the period's budget is spent
    assert hpa.sync(15.0, 6, [50.0] * 6, [True] * 6) == 12


def test_reversals_count_direction_changes_between_load_changes(sim: ModuleType) -> None:
    moves = [(10.0, 1), (20.0, 1), (30.0, -1), (110.0, 1), (120.0, -1), (130.0, 1)]
    assert sim.reversals(moves, [0.0]) == 4
    assert sim.reversals(moves, [0.0, 100.0]) == 2
    assert sim.reversals(moves, [0.0, 100.0, 125.0]) == 1
    assert sim.settle_times([(10.0, 1), (700.0, -1), (1300.0, 1)], [0.0, 600.0], 2000.0) == [700.0]


@pytest.mark.slow
def test_a_step_settles_within_three_stabilisation_windows(sim: ModuleType) -> None:
    """An IO-bound app (5 ms CPU, 45 ms IO) whose load triples: the tuned pods and the HPA
    on their signal each turn at most once per load change, and the replicas settle."""

    def rate(t: float, base: float) -> float:
        return base * (3.0 if t >= 300 else 1.0)

    trace = sim.Trace("step", 1500.0, (0.0, 300.0), rate)
    run = sim.run(trace, sim.APPS["io"])
    v = sim.verdicts(run, trace)
    assert v["hpa_reversals"] <= 1, run.replica_moves
    assert v["tuner_reversals"] <= 1, run.tuner_codes
    assert max(v["settle_s"]) <= 3 * 300
    assert run.throughput >= 0.95  # what the new pods' 30 s start drops, no more
