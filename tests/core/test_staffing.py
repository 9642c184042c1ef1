"""The sizing model (core/staffing.py): pure, from frames with known figures."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.frames import frame
from tests.support.instances import Instance, Load
from tests.tuner.plant import Plant
from uwsgitune.core.frame import Frame
from uwsgitune.core.staffing import available_cpus, estimate, io_ms, workers_for
from uwsgitune.rules.build import worker_change
from uwsgitune.sources.procfs import runq_seconds


def _frames(plant: Plant, n: int = 4) -> list[Frame]:
    return [plant.frame(float(t)) for t in range(n)]


def test_a_cpu_bound_pool_needs_the_cpus_times_the_spare_concurrency() -> None:
    e = estimate(_frames(Plant(live=64, workers_max=64, cpu_ms=3, clients=64)), 1.5)
    assert e is not None and e.workers == 3
    assert e.io_ms == pytest.approx(0, abs=0.01)
    assert e.runq_ms is not None and e.runq_ms > 10 * e.cpu_ms  # 64 share 2 CPUs


def test_the_io_share_raises_the_count() -> None:
    # 2 ms CPU + 12 ms IO (+1% CPU per worker past the CPUs, for the context switches):
    # 2 CPUs x 14.3 / 2.3 = 12.5 in service keep the CPUs busy, 19 with 1.5 spare.
    e = estimate(_frames(Plant(live=16, workers_max=64, cpu_ms=2, io_ms=12, clients=64)), 1.5)
    assert e is not None and e.io_ms == pytest.approx(12, rel=0.02)
    assert e.cpu_ms == pytest.approx(2.28, rel=0.01)
    assert e.workers == 19
    assert e.cpu_share == pytest.approx(e.cpu_ms / (e.cpu_ms + e.io_ms))


def test_waiting_for_a_cpu_is_not_io_unless_schedstat_is_missing() -> None:
    plant = Plant(live=32, workers_max=64, cpu_ms=5, clients=32)
    known = estimate(_frames(plant), 1.5)
    assert known is not None and known.workers == 3
    plant.schedstat, plant.host_busy = False, 2.0  # both CPUs busy
    frames = _frames(plant)
    assert all(f.host_cpu_pct == 100.0 and f.cpu_count == 2 for f in frames)
    assert estimate(frames, 1.5) is None  # a saturated host: no honest split, no estimate


def test_threads_count_in_processes_with_a_gil_each() -> None:
    plant = Plant(live=8, workers_max=16, cpu_ms=5, io_ms=45, clients=40, threads=4)
    e = estimate(_frames(plant), 1.5)
    # 2 CPUs x 49.4 / 5.3 = 18.6 requests in service, x 1.5 = 28 threads: 7 processes of 4.
    assert e is not None and e.threads == 4 and e.workers == 7
    e = estimate(_frames(Plant(live=8, cpu_ms=5, threads=4)), 1.5)
    # CPU-bound: never fewer processes than a one-thread pool (2 CPUs x 1.5): one GIL each
    assert e is not None and e.workers == 3


def _gil_frames(load: Load, n: int = 4) -> list[Frame]:
    inst = Instance("x")
    return [inst.frame(float(t), load) for t in range(-1, n)][1:]  # the first has no rates


def test_waiting_for_the_gil_is_not_io() -> None:
    # Measured on real uWSGI (12 processes x 4 threads, /cpu/5 at 40 clients): 2.75 ms CPU,
    # 27.7 ms run queue and 35.8 ms more, each process's GIL held or wanted all the time.
    # Read as IO, that asks for 13 processes; it is the GIL's, and the pool needs what a
    # one-thread pool would: 2 CPUs x 2 = 4 processes (real: 4 served 532 req/s, 2 482).
    # The tracker knows the GIL share whenever it knows the run-queue wait, so the share is
    # unknown only without schedstat: there W - CPU is all read as IO, on a host with CPU
    # to spare (1.75 CPUs of the cgroup's quota), here with the same 35.8 ms remainder.
    measured = Load(
        live=12,
        threads=4,
        busy=12,
        rps=600.0,
        in_service=600 * 0.0662,
        worker_cpu=1.65 / 12,
        runq=16.6 / 12,
        host_busy=1.9,
        cpus=2,
        effective_cpus=2.0,
    )
    unknown_load = replace(
        measured,
        in_service=600 * (0.00275 + 0.0358),
        runq=None,
        host_busy=1.65,
        effective_cpus=1.75,
    )
    unknown = estimate(_gil_frames(unknown_load), 2.0)
    assert unknown is not None and unknown.workers == 13 and unknown.gil_busy is None
    busy = _gil_frames(measured)
    assert busy[-1].gil_busy == 1.0 and busy[-1].runq_cores == pytest.approx(16.6)
    e = estimate(busy, 2.0)
    assert e is not None and e.io_ms == 0.0 and e.workers == 4
    assert e.evidence()["gil_busy"] == 1.0
    # An IO-bound threaded pool barely holds its GIL: nearly all the remainder is IO.
    assert io_ms(52.0, 2.0, 0.0, 0.1) == pytest.approx(50 - 2 * 0.1 / 0.9)
    assert io_ms(52.0, 2.0, 0.0, None) == 50.0
    assert io_ms(10.0, 2.0, 1.0, 0.5) == pytest.approx(5.0)  # 7 left, 2 x 1 of it the GIL's


def test_too_few_requests_give_no_estimate_and_no_cpu_gives_no_bound() -> None:
    assert estimate(_frames(Plant(live=2, cpu_ms=5, clients=0)), 1.5) is None
    e = estimate(_frames(Plant(live=8, cpu_ms=0.001, io_ms=50, clients=8)), 1.5)
    assert e is not None and e.workers is None


def test_square_root_staffing() -> None:
    assert [workers_for(x, 1, 2.0) for x in (0, 1, 4, 40, 100)] == [0, 3, 8, 53, 120]
    assert workers_for(40, 4, 2.0) == 14


def test_the_cpus_others_use_are_not_available() -> None:
    f = frame(1, cpu_count=2, effective_cpus=2.0, host_cpu_pct=75.0, instance_cpu_cores=1.0)
    assert available_cpus(f) == pytest.approx(1.5)  # 1.5 busy in all, 0.5 of it others'


def test_run_queue_wait_is_read_from_schedstat(tmp_path: Path) -> None:
    (tmp_path / "7").mkdir()
    (tmp_path / "7" / "schedstat").write_text("1000 2500000000 12\n")
    assert runq_seconds(7, 1, proc=tmp_path) == 2.5
    for tid, wait in (("7", "1000000000"), ("8", "500000000")):
        (tmp_path / "7" / "task" / tid).mkdir(parents=True)
        (tmp_path / "7" / "task" / tid / "schedstat").write_text(f"1 {wait} 1\n")
    assert runq_seconds(7, 2, proc=tmp_path) == 1.5
    assert runq_seconds(9, 1, proc=tmp_path) is None


def test_a_finding_uses_cheap_slots_before_a_larger_pool() -> None:
    # The demo's overload: 4 of 8 slots cheap, 16 wanted: `+4` through the FIFO first.
    from tests.support.frames import series
    from uwsgitune.rules.context import Context
    from uwsgitune.rules.facts import NO_FACTS
    from uwsgitune.rules.rulesettings import DEFAULT_SETTINGS

    frames = series(10, live=4, workers_max=8, cheap=4)
    ctx = Context(tuple(frames), NO_FACTS, DEFAULT_SETTINGS)
    rec = worker_change(ctx, 16, "the queue drains")
    assert (rec.setting, rec.value, rec.apply) == ("cheaper-initial", 8, "fifo")
    assert "processes 8 → 16 (reload)" in rec.effect


def test_niced_batch_work_leaves_the_cpus_available() -> None:
    # The host is 100% busy, the instance uses 1 CPU; the other CPU runs a nice-19 build.
    host = dict(cpu_count=2, effective_cpus=2.0, host_cpu_pct=100.0, instance_cpu_cores=1.0)
    f = frame(1, host_nice_pct=50.0, **host)
    assert (f.host_cpu_pct, f.host_nice_pct, f.instance_cpu_cores) == (100.0, 50.0, 1.0)
    assert available_cpus(f) == pytest.approx(2.0)
    plain = frame(1, **host)
    assert available_cpus(plain) == pytest.approx(1.0)


def test_nice_gives_way_only_without_session_autogrouping(tmp_path: Path) -> None:
    from uwsgitune.sources.hostfiles import autogroup

    knob = tmp_path / "sys" / "kernel" / "sched_autogroup_enabled"
    knob.parent.mkdir(parents=True)
    knob.write_text("1\n")
    assert autogroup(tmp_path)  # niced work elsewhere competes: its CPU is not available
    knob.write_text("0\n")
    assert not autogroup(tmp_path)
    knob.unlink()
    assert not autogroup(tmp_path)  # a kernel without the knob has no autogrouping


def test_pstdev_in_floats_matches_the_exact_one() -> None:
    import random
    import statistics

    from uwsgitune.core.staffing import pstdev

    rng = random.Random(7)
    for _ in range(2000):
        xs = [rng.uniform(0, 1000) for _ in range(rng.randint(1, 12))]
        assert pstdev(xs) == pytest.approx(statistics.pstdev(xs), rel=1e-12, abs=1e-9)
    assert pstdev([5.0, 5.0, 5.0]) == 0.0
