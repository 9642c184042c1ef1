"""The discrete-event plant (bench/sim_plant.py) against results known in closed form: the
M/D/1 queue's mean wait (Pollaczek-Khinchine), processor sharing at C cores, one core a
process under the GIL; the frames it gives the tuner; its changes; determinism with a seed.
Pure: no uWSGI, no clock."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from uwsgitune.core.frame import Frame

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def sim() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sim_plant", BENCH / "sim_plant.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sim_plant"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _exact(sim: ModuleType, **kw: float) -> object:
    """Costs with no jitter, no overhead and no client time: the textbook queue."""
    base = dict(overhead_cpu_ms=0.0, client_ms=0.0, cpu_spread=0.0, io_spread=0.0)
    return sim.Costs(**{**base, **kw})


def test_an_m_d_1_queue_waits_as_pollaczek_khinchine_says(sim: ModuleType) -> None:
    # Poisson arrivals at 80/s, one worker, 10 ms of waiting each (no CPU): rho = 0.8, and
    # the mean wait in the queue is lambda D^2 / (2 (1 - rho)) = 20 ms, so 30 ms in all.
    box = sim.Box(2, 1, listen=10_000, costs=_exact(sim))
    r = box.run([sim.Phase(sim.Work(0.0, 10.0), None, 80.0, 400.0, poisson=True)])
    assert r.rps(20) == pytest.approx(80, rel=0.05)
    assert r.mean_ms(20) == pytest.approx(30.0, rel=0.1)
    # Little's law on the same run: L = lambda W, with L < 1 worker's worth beyond rho
    assert r.overflows == 0


def test_processor_sharing_at_c_cores(sim: ModuleType) -> None:
    """CPU-only requests, more clients than workers: n workers below the cores serve n / s;
    at or past them the cores' C / s, less the switch cost per runnable beyond C."""
    costs = _exact(sim, switch=0.01)
    work = sim.Work(10.0, 0.0)

    def rps(n: int) -> float:
        r = sim.Box(4, n, listen=1000, costs=costs).run([sim.Phase(work, 64, None, 20.0)])
        return float(r.rps(5))

    assert rps(2) == pytest.approx(200, rel=0.01)  # 2 workers, 2 of the 4 cores
    assert rps(4) == pytest.approx(400, rel=0.01)
    assert rps(12) == pytest.approx(400 / 1.08, rel=0.01)  # 8 runnable beyond the cores


def test_two_requests_on_one_core_share_it(sim: ModuleType) -> None:
    # Two workers, one core, 10 ms of CPU each, both always busy: under processor sharing
    # every request takes 20 ms (FIFO would take 10 and 20 by turns, p50 10 ms).
    box = sim.Box(1, 2, costs=_exact(sim))
    r = box.run([sim.Phase(sim.Work(10.0, 0.0), 2, None, 10.0)])
    assert r.rps(1) == pytest.approx(100, rel=0.01)
    assert r.p(0.01, 1) == pytest.approx(20, rel=0.03)  # the fastest is 20 ms too


def test_a_process_runs_one_thread_on_the_cpu_at_a_time(sim: ModuleType) -> None:
    """The GIL: 2 processes of 4 threads on 8 cores serve as 2 cores; IO-bound threads run
    side by side."""
    costs = _exact(sim)
    cpu = sim.Box(8, 2, threads=4, costs=costs).run([sim.Phase(sim.Work(10.0, 0.0), 8, None, 10)])
    assert cpu.rps(2) == pytest.approx(200, rel=0.01)
    io = sim.Box(8, 2, threads=4, costs=costs).run([sim.Phase(sim.Work(0.0, 10.0), 8, None, 10)])
    assert io.rps(2) == pytest.approx(800, rel=0.01)


def test_the_same_seed_gives_the_same_run(sim: ModuleType) -> None:
    def run(seed: int) -> tuple[list[int], list[dict[int, int]]]:
        box = sim.Box(2, 8, seed=seed)
        r = box.run([sim.Phase(sim.route("/mixed/2/12"), 32, None, 8.0)])
        return r.per_second, r.hist

    assert run(3) == run(3)
    assert run(3) != run(4)


def test_the_tuner_reads_what_the_plant_did(sim: ModuleType) -> None:
    """The frames through the real Tracker: 8 CPU-bound workers on 4 cores with 64 clients
    keep the 4 cores busy, 8 busy, 56 queued, the run queue 4 deep; a FIFO change shows at
    the next poll, a reload after its stall."""
    frames: list[Frame] = []
    asks = {5.0: (12, "fifo"), 10.0: (4, "reload")}

    def tuner(t: float, frame: Frame) -> tuple[int, str] | None:
        frames.append(frame)
        return asks.get(t)

    box = sim.Box(4, 8, listen=128, workers_max=16, costs=_exact(sim))
    r = box.run([sim.Phase(sim.Work(10.0, 0.0), 64, None, 15.0)], tuner)
    f = frames[3]  # t = 4
    assert (f.live, f.busy, f.cpu_count) == (8, 8, 4)
    assert f.instance_cpu_cores == pytest.approx(4.0, rel=0.01)
    assert f.runq_cores == pytest.approx(4.0, rel=0.01)
    assert f.rps == pytest.approx(400, rel=0.03)
    assert f.littles_l == pytest.approx(8.0, rel=0.01)
    assert [s.queue for s in f.sockets] == [56]
    assert [fr.live for fr in frames[4:7]] == [8, 12, 12]  # asked at 5, shown at 6
    assert frames[10].live == 4 and frames[10].kind != frames[8].kind  # the reload's frame
    assert r.per_second[10] < 0.2 * r.per_second[8]  # the stall: ~1 s without a worker
    assert (r.fifo_moves, r.reloads) == (1, 1)


def test_a_full_backlog_overflows_and_the_client_tries_again(sim: ModuleType) -> None:
    # 6 clients, 1 worker of 100 ms, a backlog of 4: the sixth is turned away at 0 and its
    # SYN goes again at 1 s, when the others have gone (their phase ended at 0.5 s).
    box = sim.Box(2, 1, listen=4, costs=_exact(sim))
    work = sim.Work(0.0, 100.0)
    r = box.run([sim.Phase(work, 6, None, 0.5), sim.Phase(work, 0, None, 2.5)])
    assert r.overflows == 1
    assert r.p(1.0) == pytest.approx(1100, rel=0.03)  # 1 s away, then served at once
