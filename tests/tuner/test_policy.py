"""The pure policy against synthetic frames and a simulated plant: no I/O, no clock."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

from tests.tuner.plant import MiB, Plant, run
from uwsgitune.tuner import TunerSettings, TunerState, decide

S = TunerSettings(max_workers=16)


def changes(plant: Plant, seconds: int, settings: TunerSettings = S, shape=None):  # type: ignore[no-untyped-def]
    return [(t, d) for t, _, d in run(plant, settings, seconds, shape) if d.is_change]


def test_io_bound_scales_up_fast() -> None:
    plant = Plant(live=1, workers_max=16, cpu_ms=1, io_ms=50, clients=12)
    steps = changes(plant, 60)
    assert steps and all(d.action == "up" for _, d in steps)
    # A queue at least as long as the pool: one step takes it all, without a measuring window.
    first_t, first = steps[0]
    assert first_t <= 2 and first.desired >= 12 and first.code == "saturated"
    assert first.evidence["rps"] is not None  # judged against the polls there were
    assert plant.live >= 12
    assert steps[-1][0] <= 20


def test_a_short_queue_steps_by_at_most_max_up_factor_after_measuring() -> None:
    plant = Plant(live=4, workers_max=16, cpu_ms=1, io_ms=50, clients=6)
    t, first = changes(plant, 30)[0]
    assert t >= S.measure_frames - 1  # the queue (2) is shorter than the pool (4): measure
    assert first.desired <= S.max_up_factor * 4


def test_a_step_up_stops_near_what_the_cpus_can_serve() -> None:
    # 1 worker, CPU-bound: 1 request in service keeps 1 core busy, so 2 CPUs serve about 2
    # (3 at cpu_workers_per_cpu 1.5), whatever the queue of 15 asks for.
    plant = Plant(live=1, workers_max=16, cpu_ms=10, clients=16)
    _, first = changes(plant, 30)[0]
    assert first.desired == 3 and "CPUs can keep about 3" in first.reason


def test_no_worker_added_while_cpu_saturated() -> None:
    plant = Plant(live=1, workers_max=16, cpu_ms=10, clients=16)
    for _, frame, d in run(plant, S, 120):
        if d.action == "up":
            assert (frame.cpu_saturation or 0) < S.cpu_saturated
    assert plant.live == 3  # up while the CPU had room, then trimmed to 1.5 per CPU
    plant = Plant(live=2, workers_max=16, cpu_ms=10, clients=16)
    frames = [plant.frame(float(t)) for t in range(5)]
    d = decide(frames, TunerState(), S, now=4.0)
    assert d.action == "hold" and d.code == "cpu-saturated"


def test_cpu_oversubscribed_pool_shrinks_slowly_by_reload() -> None:
    plant = Plant(live=16, workers_max=16, cpu_ms=10, clients=16)
    steps = changes(plant, 200)
    assert [d.desired for _, d in steps] == [8, 4, 3]
    assert all(d.via == "reload" for _, d in steps)  # every worker busy: `-` would stay pending
    gaps = [b[0] - a[0] for a, b in pairwise(steps)]
    assert all(g >= S.cooldown_down for g in gaps)


def test_scale_down_is_slow_and_stops_at_the_floor() -> None:
    settings = TunerSettings(min_workers=2, max_workers=8)
    plant = Plant(live=8, workers_max=8, cpu_ms=1, io_ms=20, clients=0)
    steps = changes(plant, 240, settings)
    assert [d.desired for _, d in steps] == [6, 4, 3, 2]
    assert steps[0][0] >= settings.down_window - settings.interval
    assert all(b[0] - a[0] >= settings.cooldown_down for a, b in pairwise(steps))
    assert all(d.via == "fifo" for _, d in steps)  # idle workers: `-` applies


def test_memory_cap_bounds_growth() -> None:
    plant = Plant(live=1, workers_max=16, cpu_ms=1, io_ms=50, clients=16, mem_available=300 * MiB)
    for _, _, d in run(plant, S, 80):
        assert d.desired <= 1 + (300 * 8 // 10) // 50
    assert plant.live <= 5
    budget = TunerSettings(max_workers=16, memory_budget=200 * MiB)
    plant = Plant(live=6, workers_max=16, cpu_ms=1, io_ms=50, clients=16)
    first = next(d for _, _, d in run(plant, budget, 30) if d.is_change)
    assert first.code == "memory-cap" and first.desired == 4


def test_floor_and_ceiling() -> None:
    settings = TunerSettings(min_workers=3, max_workers=5)
    plant = Plant(live=1, workers_max=8, cpu_ms=1, io_ms=50, clients=0)
    first = next(d for _, _, d in run(plant, settings, 10) if d.is_change)
    assert (first.code, first.desired) == ("floor", 3)
    plant = Plant(live=1, workers_max=8, cpu_ms=1, io_ms=50, clients=40)
    for _, _, d in run(plant, settings, 120):
        if d.is_change:
            assert 3 <= d.desired <= 5
    assert plant.live == 5


def test_cooldown_and_hourly_limit() -> None:
    plant = Plant(live=4, workers_max=16, cpu_ms=1, io_ms=50, clients=12)
    frames = [plant.frame(float(t)) for t in range(10)]
    st = TunerState(last_change=7.0, changes=(7.0,))
    d = decide(frames, replace(st, last_change=-100.0), S, now=9.0)
    assert d.action == "up"
    d = decide(frames, TunerState(last_change=-100.0, changes=(1.0,) * 60), S, now=9.0)
    assert d.action == "wait" and "changes in the last hour" in d.reason
    d = decide(frames, TunerState(last_change=5.0), S, now=9.0)
    assert d.action == "wait" and d.code in ("cooldown", "measuring")


def test_no_oscillation_in_steady_state() -> None:
    for plant in (
        Plant(live=2, workers_max=16, cpu_ms=1, io_ms=50, clients=None, rate=100, noise=0.05),
        Plant(live=3, workers_max=16, cpu_ms=5, io_ms=20, clients=16, noise=0.05),
        Plant(live=1, workers_max=16, cpu_ms=10, clients=16, noise=0.05),
        Plant(live=8, workers_max=8, cpu_ms=10, clients=6, noise=0.05),  # L inflated by CPU
    ):
        steps = changes(plant, 600)
        late = [t for t, _ in steps if t > 150]
        assert late == [], f"{plant}: changes after convergence at {late}"


def test_stale_reload_and_unreachable_frames_get_no_action() -> None:
    plant = Plant(live=1, workers_max=16, cpu_ms=1, io_ms=50, clients=12)
    frames = [plant.frame(float(t)) for t in range(10)]
    assert decide(frames, TunerState(), S, now=9.0).action == "up"
    stale = decide(frames, TunerState(), S, now=9.0 + S.stale_after + 0.1)
    assert (stale.action, stale.code) == ("wait", "stale")
    err = replace(frames[-1], kind="error", error="refused", mono=10.0)
    assert decide([*frames, err], TunerState(), S, now=10.0).code == "unreachable"
    settling = decide(frames, TunerState(last_reload=7.0), S, now=9.0)
    assert settling.code == "settling"
    reload = replace(frames[-1], kind="reload", rps=None, littles_l=None, mono=10.0)
    assert decide([*frames, reload], TunerState(), S, now=10.0).code == "no-rates"


def test_every_decision_explains_itself() -> None:
    plant = Plant(live=1, workers_max=16, cpu_ms=5, io_ms=20, clients=16)
    for _, _, d in run(plant, S, 60):
        assert d.reason and d.code
        assert f"[{d.code}]" in d.line()
        if d.is_change:
            assert d.evidence["rps"] is not None and "live" in d.evidence


def test_a_probe_that_hurts_is_reverted() -> None:
    plant = Plant(live=1, workers_max=16, cpu_ms=5, io_ms=20, clients=16)
    steps = changes(plant, 200)
    probe = next(d for _, d in steps if d.code == "cpu-oversubscribed")
    revert = next(d for _, d in steps if d.code == "revert")
    assert (revert.live, revert.desired) == (probe.desired, probe.live)  # back where it was
    assert plant.live >= probe.live  # and never probed down again
    assert sum(d.code == "cpu-oversubscribed" for _, d in steps) == 1


def test_a_load_drop_during_a_probe_is_not_blamed_on_the_step() -> None:
    def shape(p: Plant, t: int) -> None:
        p.clients = 12 if t < 6 else 0

    plant = Plant(live=1, workers_max=16, cpu_ms=1, io_ms=50, clients=12)
    decisions = [d for _, _, d in run(plant, S, 40, shape)]
    assert next(i for i, d in enumerate(decisions) if d.is_change) < 6
    assert decisions[1].action == "up"
    assert all(d.code != "revert" for d in decisions)


def test_cpu_contention_is_not_read_as_demand() -> None:
    # 6 clients on 8 workers and 2 CPUs: nothing queues, but L counts requests waiting for
    # a CPU; Little's law alone would keep 8 (it asks for 9).
    plant = Plant(live=8, workers_max=8, cpu_ms=10, clients=6)
    steps = changes(plant, 120, TunerSettings(max_workers=8))
    assert steps[0][1].code == "cpu-oversubscribed" and plant.live == 3
