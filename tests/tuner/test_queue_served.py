"""A queue of a request or two that more workers do not serve (`verdict._unsaturated`,
`demand.queue_served`), and a verdict kept while pacing holds the next change back. Pure,
against the simulated plant.

Measured in the benchmark's `step` (16 clients on 16 workers, 1 ms CPU + 30 ms IO): the
closed loop read a mean queue of 0.7-1.3, a client's next request queued before its worker
showed idle. The tuner stepped to 18-19, served no more (482 -> 490 req/s), and held the
extra workers through the phase."""

from __future__ import annotations

from tests.tuner.plant import Plant, run
from uwsgitune.tuner import TunerSettings, TunerState, decide
from uwsgitune.tuner.decision import Probe

S = TunerSettings(min_workers=2, max_workers=64)


def _clients(n: int, until: int, then: int):  # type: ignore[no-untyped-def]
    def shape(plant: Plant, t: int) -> None:
        plant.clients = n if t < until else then

    return shape


def test_a_small_queue_no_client_waited_through_is_no_step() -> None:
    """16 clients on 16 workers: the mean queue of 0.7-1.3 waited at no poll through (0 at
    some), and past SMALL_QUEUE at none: the pool holds at 16 (`queue-small`), where it
    stepped to 18 and went back (`queue-served`) 5 s later."""
    plant = Plant(live=2, workers_max=64, cpu_ms=1, io_ms=30, clients=16, overlap=1.0)
    decisions = [d for _, _, d in run(plant, S, 150)]
    seen = [d for d in decisions if d.is_change]
    assert [(d.live, d.desired) for d in seen] == [(2, 16)], [d.line() for d in seen]
    assert plant.live == 16
    small = [d for d in decisions if d.code == "queue-small"]
    assert small and "no client waited through" in small[0].reason, small[:1]


def test_a_load_that_grows_is_not_held_by_what_a_small_queue_taught() -> None:
    # 16 clients, then 32: the queue of 16 is no small queue, and the throughput doubles
    # once served; the learned fact is about the smaller load.
    plant = Plant(live=2, workers_max=64, cpu_ms=1, io_ms=30, clients=16, overlap=1.0)
    seen = [(t, d) for t, _, d in run(plant, S, 120, _clients(16, 60, 32)) if d.is_change]
    ups = [(t, d) for t, d in seen if t >= 60 and d.action == "up"]
    assert ups and ups[0][0] <= 66 and plant.live >= 32, [d.line() for _, d in seen]


def test_a_larger_queue_that_served_no_more_is_not_learned() -> None:
    # Without the overlap the closed loop of 17 on 16 always queues one client: a step up
    # serves it (+6%), and is kept.
    plant = Plant(live=16, workers_max=64, cpu_ms=1, io_ms=30, clients=17, noise=0.0)
    seen = [d for _, _, d in run(plant, S, 90) if d.is_change]
    assert not [d for d in seen if d.code == "queue-served"]
    assert plant.live >= 17


def _frames(plant: Plant, n: int) -> list:  # type: ignore[type-arg]
    return [plant.frame(float(t)) for t in range(n)]


def test_a_verdict_reached_while_pacing_holds_a_change_is_kept() -> None:
    """A probe judged at a poll where the next change is paced keeps its verdict; it was
    judged again at every poll until the cool-down ended, against a stale measurement."""
    plant = Plant(live=8, workers_max=64, cpu_ms=1, io_ms=30, clients=64)
    frames = _frames(plant, 8)
    full = tuple(float(t) for t in range(-60, 0))  # the hour's changes: every change paced
    up = Probe(4, 8, 100.0, 0.05, -10.0, 2.0)  # 8 workers serve ~250/s: better
    d = decide(frames, TunerState(probe=up, changes=full), S, now=7.0)
    assert d.action == "wait" and d.code == "cooldown", d.line()
    assert d.state.probe is None and d.state.plateau_down == 5  # the verdict, kept
    # A verdict's own move (a revert) that pacing holds back is judged again: not lost.
    worse = Probe(16, 8, 600.0, 0.05, -10.0, 2.0)
    d = decide(frames, TunerState(probe=worse, changes=full), S, now=7.0)
    assert d.code == "cooldown" and "revert" in d.reason and d.state.probe == worse


def test_what_a_small_queue_taught_holds_only_at_that_throughput() -> None:
    # Learned at 16 workers and ~515 req/s; now 32 clients on 30 workers queue 2 (small),
    # at twice the throughput: a new load, sized as usual.
    from uwsgitune.tuner.decision import QueueServed

    learned = TunerState(queue_served=QueueServed(16, 515.0), learned_at=0.0)
    plant = Plant(live=30, workers_max=64, cpu_ms=1, io_ms=30, clients=32)
    d = decide(_frames(plant, 8), learned, S, now=7.0)
    assert d.action == "up" and d.code == "saturated", d.line()
    plant = Plant(live=16, workers_max=64, cpu_ms=1, io_ms=30, clients=16, overlap=1.0)
    d = decide(_frames(plant, 8), learned, S, now=7.0)
    assert d.action == "hold" and d.code in ("queue-served", "steady"), d.line()


def test_only_one_thread_pools_go_back_on_a_small_queue() -> None:
    """A threaded worker reads busy with one request of several, and uWSGI's `-` waits for
    a whole idle worker: in the benchmark's `threads-io` (4 threads), 16 -> 20 -> 16 went
    back only to 18, and Little's law took it to 20 again."""
    from uwsgitune.tuner.measures import gather
    from uwsgitune.tuner.verdict import judge

    for threads, back in ((1, True), (4, False)):
        plant = Plant(live=18, workers_max=64, cpu_ms=1, io_ms=30, clients=16, threads=threads)
        f = gather(_frames(plant, 8), S, 7.0, -1.0)
        assert f.x is not None and not f.saturated
        probe = Probe(16, 18, f.x, 0.05, 0.0, 2.0, queue_before=0.7)
        st, move = judge(f, TunerState(probe=probe), S)
        assert (move is not None and move.desired == 16) is back, threads
        assert (st.queue_served is not None) is back
