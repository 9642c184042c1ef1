"""The trim (sizing.cpu_trim): a CPU-bound pool that came down to a count within the band
above the model's is probed down to the model's count; one a climb reached is held."""

from __future__ import annotations

from tests.tuner.plant import Plant
from uwsgitune.tuner import TunerSettings, TunerState
from uwsgitune.tuner.measures import Measures, gather
from uwsgitune.tuner.sizing import cpu_trim, over_capacity

# The trim's arithmetic at `cpu_workers_per_cpu` 2 (the default until the band was seen to
# compound it): 3 ms CPU and 1 ms IO on 2 CPUs keep 2.67 in service, the model's 6.
S = TunerSettings(max_workers=64, cpu_workers_per_cpu=2)


def _measures(live: int, threads: int = 1) -> Measures:
    plant = Plant(live=live, workers_max=64, cpu_ms=3, io_ms=1, clients=64, noise=0.0)
    plant.threads = threads
    frames = [plant.frame(float(t)) for t in range(8)]
    return gather(frames, S, 7.0, -1.0)


def test_a_pool_come_down_within_the_band_is_probed_to_the_models_count() -> None:
    f = _measures(8)
    assert f.model is not None and f.model.workers == 6 and f.saturated
    assert over_capacity(f, TunerState(), S) is None  # 8 is within the band above 6
    came_down = TunerState(plateau_up=8)  # a step down to 8 was not worse
    p = cpu_trim(f, came_down, S)
    assert p is not None and (p.desired, p.code, p.probe) == (6, "cpu-trim", True)
    assert "judged on throughput" in p.reason
    # a climb's count, or a descent that lost below here, or threaded processes: no trim
    assert cpu_trim(f, TunerState(), S) is None
    assert cpu_trim(f, TunerState(plateau_up=8, plateau_down=8), S) is None
    assert cpu_trim(_measures(8, threads=2), TunerState(plateau_up=8), S) is None
    # at the model's count: nothing to trim
    at = _measures(6)
    assert cpu_trim(at, TunerState(plateau_up=6), S) is None


def test_a_trim_is_a_probe_step_never_under_the_models_count_nor_a_lost_step() -> None:
    f = _measures(9)
    p = cpu_trim(f, TunerState(plateau_up=9), S)
    assert p is not None and p.desired == 6  # 9 - 3 (a quarter, rounded up), the model's 6
    # a step down from 7 lost (so 7 is the least): the trim stops at 7, never under it
    p = cpu_trim(f, TunerState(plateau_up=9, plateau_down=7), S)
    assert p is not None and p.desired == 7
    assert cpu_trim(_measures(7), TunerState(plateau_up=7, plateau_down=7), S) is None
    # under a probe step above the model's count: the rest of the way (the simulated cpu
    # scenario held 7 on 4 CPUs, and 25 on 16, one over the live-worker bound)
    p = cpu_trim(_measures(7), TunerState(plateau_up=7), S)
    assert p is not None and (p.desired, p.code) == (6, "cpu-trim")


def _fed(live: int, io_ms: float = 0.0, clients: int = 64) -> Measures:
    """One-thread workers on 2 CPUs, 3 ms CPU a request, a closed loop of `clients`."""
    plant = Plant(live=live, workers_max=64, cpu_ms=3, io_ms=io_ms, clients=clients, noise=0.0)
    frames = [plant.frame(float(t)) for t in range(8)]
    return gather(frames, S, 7.0, -1.0)


def test_a_standing_queue_on_requests_all_cpu_needs_no_spare_workers() -> None:
    """A queue feeds every worker as it ends a request, and with no IO each is always
    runnable: the CPUs' count keeps them busy, and the spare `cpu_workers_per_cpu` adds
    only workers sharing them (`demand.capacity`)."""
    from uwsgitune.tuner.demand import capacity

    f = _fed(4)
    assert f.model is not None and f.model.workers == 4  # 2 CPUs x 2 a CPU
    assert capacity(f) == 2
    # IO to hide (3 ms CPU, 1 ms IO: 75% CPU), or too few requests to feed them (3 for
    # 2 workers): the model's count
    io = _fed(8, io_ms=1)
    assert io.model is not None and capacity(io) == io.model.workers == 6
    unfed = _fed(4, clients=3)
    assert unfed.model is not None and capacity(unfed) == unfed.model.workers


def test_a_climbs_count_is_trimmed_to_the_cpus_where_the_queue_feeds_every_worker() -> None:
    """The trim goes from a count a climb reached too: what it trims to is the CPUs' own
    count, not an estimate's noise. A loss still reverts it and stops there."""
    p = cpu_trim(_fed(4), TunerState(), S)
    assert p is not None and (p.desired, p.code, p.probe) == (2, "cpu-trim", True), p
    # in one move, not a probe step at a time: each step is a reload (5 -> 4 -> 3 -> 2 on a
    # CPU-bound Django page, 30 s apart)
    p = cpu_trim(_fed(6), TunerState(), S)
    assert p is not None and p.desired == 2, p
    assert cpu_trim(_fed(2), TunerState(), S) is None
    # one over the CPUs' count is not worth a reload; a step to 2 that lost leaves 3 least
    assert cpu_trim(_fed(3), TunerState(), S) is None
    assert cpu_trim(_fed(5), TunerState(plateau_down=3), S) is not None
    assert cpu_trim(_fed(4), TunerState(plateau_down=3), S) is None
    # unfed, a climb's count stays the band's to hold
    assert cpu_trim(_fed(4, clients=3), TunerState(), S) is None


def test_from_64_workers_a_fed_cpu_bound_pool_goes_to_the_cpus_count() -> None:
    """From 64 workers under 64 clients on 2 CPUs (no queue yet: a worker each), the first
    move goes to 2, not to the model's 4 with its spare: the 64 requests in the instance
    would keep 62 queued there."""
    from tests.tuner.plant import run

    plant = Plant(live=64, workers_max=64, cpu_ms=3, clients=64, noise=0.0)
    moves = [(d.live, d.desired, d.code) for _, _, d in run(plant, S, 60) if d.is_change]
    assert moves and moves[0][1:] == (2, "cpu-oversubscribed"), moves
    assert plant.live == 2, moves
