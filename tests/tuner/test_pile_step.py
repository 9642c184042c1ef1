"""The saturated step's size from what the queue says of the arrival rate, pure
(`measures.pile`, `sizing._arriving`): a queue the backlog piled up over k polls is k
polls of arrivals past the throughput, not that many requests of steady demand; a queue
that waited at every poll at the count stands (a closed loop's clients). Sized on the pile
as a demand, a pod of 14 workers at a load that crept past them went to 32 on a queue of
40 piled up in one 5 s poll, and `load-fell` or Little's law took it back (the fleet
simulation's daily curve: bench/results/fleet.md)."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.support.instances import Instance, Load
from tests.tuner.plant import Plant, run
from uwsgitune.core.frame import Frame, SocketView
from uwsgitune.tuner import TunerSettings
from uwsgitune.tuner.measures import gather, pile
from uwsgitune.tuner.sizing import PILE_POLLS, _arriving


def _frames(
    queues: list[int | None], backlog: int = 100, dt: float = 5.0, spare: int = -1
) -> list[Frame]:
    """Polls `dt` s apart of 14 busy workers serving 280 req/s, the listen queue as given;
    at poll `spare` (of `queues`) only 4 in service (a load that jumped within the poll)."""
    inst = Instance("pile", 1_700_000_000.0, 0.0)
    out = []
    for i, q in enumerate([0, *queues]):
        held = 4.0 if i - 1 == spare else 14.0
        socket = SocketView("0.0.0.0:8000", "http", False, q, backlog, "stats")
        if q is None:  # a unix socket whose kernel queue could not be read
            socket = SocketView("/run/app.sock", "uwsgi", True, None, None, "none")
        load = Load(live=14, busy=14, rps=20 * held, in_service=held, sockets=(socket,))
        out.append(inst.frame(i * dt, load))
    return out[1:]  # the first poll has no rates


def test_a_pile_reads_as_its_growth_over_the_polls_since_the_queue_was_least() -> None:
    p = pile(_frames([0, 0, 12, 0, 30, 45]), 0.9)
    assert p is not None
    assert (p.standing, p.grown, p.over) == (0, 45, 10.0)
    assert p.excess == pytest.approx(4.5)
    assert p.x == pytest.approx(280.0)
    # a queue at every poll stands; what grew since the last poll at its least is a rate
    p = pile(_frames([30, 31, 29, 32]), 0.9)
    assert p is not None and (p.standing, p.grown, p.over) == (29, 3, 5.0)
    # a pile that stood still over the last poll came at once: it stands, whole
    p = pile(_frames([0, 0, 30, 31]), 0.9)
    assert p is not None and (p.standing, p.grown, p.excess) == (30, 0, 0.0)
    # the latest poll at the least: nothing grew
    p = pile(_frames([30, 31, 29]), 0.9)
    assert p is not None and (p.standing, p.grown, p.excess) == (29, 0, 0.0)
    # the pool busy through the growth, from the poll of the least on; not so when the
    # queue came onto a pool with workers to spare at that poll (a load that jumped)
    assert p.busy_through
    p = pile(_frames([0, 0, 12, 0, 30, 45], spare=3), 0.9)
    assert p is not None and p.grown == 45 and not p.busy_through


def test_a_full_backlog_or_an_unknown_queue_says_nothing_of_the_rate() -> None:
    assert pile(_frames([0, 40, 100], backlog=100), 0.9) is None
    assert pile(_frames([0, None, 40]), 0.9) is None


def _pod(
    sim: ModuleType, seed: int, rate: float, seconds: float
) -> list[tuple[float, str, int, int]]:
    """A tuned pod of the fleet simulation (5 ms CPU and 45 ms IO a request, 2 CPUs, 5 s
    polls) at 14 workers, serving 270 req/s, then `rate` from 60 s on: its changes."""
    pod = sim.Pod(sim.APPS["io"], -sim.STARTUP, True, seed)
    pod.workers = 14
    t = 0.0
    while t < seconds:
        t += sim.DT
        pod.serve(t, 270.0 if t < 60 else rate)
    return list(pod.codes)


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_a_load_just_past_the_pool_is_met_by_a_step_that_is_not_undone(
    sim: ModuleType, seed: int
) -> None:
    # 14 workers serve 280 req/s; 290 arrive (±2% a poll): 10 req/s past them, where each
    # 5 s poll piles up 50 requests. What arrives keeps 14.5 in service; random arrivals
    # spread about it as a Poisson count, so the ways up and down keep L + 2√L for it (22,
    # `level.reach`).
    codes = _pod(sim, seed, 290.0, 900.0)
    assert codes, "the pod never stepped up"
    _t, code, was, now = codes[0]
    assert (code, was) == ("saturated", 14), codes
    assert 15 <= now <= 23, codes  # sized on the rate, not on the pile (32: the ceiling)
    # and nothing takes it back while the load stays
    assert all(b > a for _t, _c, a, b in codes), codes


def test_a_closed_loop_that_jumps_reaches_its_clients_in_two_steps() -> None:
    # 8 clients of 31 ms on 8 workers, then 40: their queue piles up within one poll (read
    # as a rate: a step of L + 2√L), then waits at every poll at the new count (standing:
    # the clients, all of them served by the second step).
    def shape(plant: Plant, t: int) -> None:
        if t == 60:
            plant.clients = 40

    plant = Plant(live=8, workers_max=64, cpu_ms=1, io_ms=30, clients=8)
    settings = TunerSettings(min_workers=2, max_workers=64)
    ups = [(t, d) for t, _f, d in run(plant, settings, 90, shape) if d.is_change]
    assert [d.action for _t, d in ups] == ["up", "up"], [d.line() for _t, d in ups]
    (t1, first), (t2, second) = ups
    assert t1 <= 61 and 8 < first.desired < 40, first.line()
    assert "arriving" in first.reason, first.line()
    assert second.desired == 40 and t2 <= 60 + 15, second.line()


def test_a_closed_loop_that_doubles_on_a_busy_pool_is_met_in_one_step() -> None:
    # 16 clients on 16 workers, every one busy, then 32: 16 wait at once, not past twice
    # the workers, so the step waits for a second poll (`_brief`), where they stood still:
    # all of them, in one step (read as a rate, 16 -> 19, and 32 only 5 s later).
    def shape(plant: Plant, t: int) -> None:
        if t == 60:
            plant.clients = 32

    plant = Plant(live=16, workers_max=64, cpu_ms=1, io_ms=30, clients=16)
    settings = TunerSettings(min_workers=2, max_workers=64)
    ups = [(t, d) for t, _f, d in run(plant, settings, 90, shape) if d.is_change]
    assert len(ups) == 1 and ups[0][0] <= 62 and ups[0][1].desired == 32, [
        (t, d.line()) for t, d in ups
    ]


def test_what_waited_stands_unless_a_few_polls_of_the_growth_piled_it() -> None:
    """The least queue of the polls at the count counts as clients that stand (they come
    back as soon as they are served) unless the queue grows and PILE_POLLS polls of that
    growth would have piled it: then it is arrivals past the pool, which the rate holds."""
    settings = TunerSettings(max_workers=64)

    def arriving(queues: list[int | None]) -> float:
        frames = _frames(queues)
        got = _arriving(gather(frames, settings, frames[-1].mono, -1.0))
        assert got is not None
        return got[0]

    # 14 in service at 280 req/s: 30 waited through 4 polls, 3 more came in the last; 30
    # is far past 4 polls of 3: clients, beside the 14.15 the rate keeps in service
    assert arriving([30, 31, 29, 32]) == pytest.approx(14 * 280.6 / 280 + 29, abs=0.2)
    # 14 at the first poll, 27 at the second (a pod's first polls at a load past it): 14 is
    # what one poll of that growth piles, arrivals the rate (282.6 req/s) already holds
    assert arriving([14, 27]) == pytest.approx(14 * 282.6 / 280, abs=0.05)
    # ... and past PILE_POLLS polls of it, they stand: 53 then 66 (13 more)
    assert arriving([13 * PILE_POLLS + 1, 13 * PILE_POLLS + 14]) > 14 + 13 * PILE_POLLS
