"""The ceiling of a climb holds for the load it was learned at: more requests in service and
queued than then is a new load (`propose._demand_grew`). Pure, against the simulated plant.

Measured in the benchmark's `step`: 16 clients, the tuner at 16 stepped to 17 on a queue
of 0.7 and judged the step a tie while still saturated, so adding above 17 was learned not
to help. When the clients doubled to 32, 16 of them queued behind the 17 workers for the
whole phase (526 req/s where the other runs served 906): the pool bounded the throughput,
so nothing but the queue said the load had changed."""

from __future__ import annotations

from tests.tuner.plant import Plant
from uwsgitune.tuner import TunerSettings, TunerState, decide

S = TunerSettings(min_workers=2, max_workers=64)
TIE = TunerState(
    plateau_up=17,
    plateau_down=17,
    learned_at=0.0,
    learned_request=(1.0, 30.0),
    learned_demand=16.1,
)


def _decide(clients: int) -> str:
    plant = Plant(live=17, workers_max=64, cpu_ms=1, io_ms=30, clients=clients, noise=0.0)
    frames = [plant.frame(float(t)) for t in range(8)]
    d = decide(frames, TIE, S, now=7.0)
    return f"{d.action} {d.code} {d.desired}"


def test_a_load_that_doubled_is_climbed_past_the_old_ceiling() -> None:
    assert _decide(32).startswith("up saturated"), _decide(32)


def test_a_queue_that_grew_by_a_request_or_two_is_the_same_load() -> None:
    assert _decide(19) == "hold plateau 17"


def test_the_demand_is_recorded_when_a_plateau_is_learned() -> None:
    plant = Plant(live=17, workers_max=64, cpu_ms=1, io_ms=30, clients=18, noise=0.0)
    frames = [plant.frame(float(t)) for t in range(8)]
    fresh = TunerState(plateau_up=17, learned_at=6.0)
    d = decide(frames, fresh, S, now=7.0)
    assert d.state.learned_demand is not None and 17.5 <= d.state.learned_demand <= 18.5
    assert d.state.learned_request is not None
