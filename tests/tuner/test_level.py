"""A load that falls and settles is met in one decision; lulls between bursts are not.

The plant (tests/tuner/plant.py) is a closed loop of clients, one poll per second.
"""

from __future__ import annotations

from dataclasses import replace

from tests.tuner.plant import Plant, run
from uwsgitune.core.frame import SocketView
from uwsgitune.tuner import TunerSettings

S = TunerSettings(min_workers=1, max_workers=64)


def _phases(*spans: tuple[int, int]):  # type: ignore[no-untyped-def]
    """A shape that sets the clients: (until t, clients) in turn."""

    def shape(p: Plant, t: int) -> None:
        for until, clients in spans:
            if t < until:
                p.clients = clients
                return

    return shape


def test_a_load_that_halves_is_met_in_one_decision() -> None:
    # The bench's `step`: 1 ms CPU + 30 ms IO, 16 clients, then 32, then 16 again. The
    # pool held 33 for the whole down window (30 s) after the halving.
    plant = Plant(live=16, workers_max=64, cpu_ms=1, io_ms=30, clients=16)
    shape = _phases((60, 16), (120, 32), (200, 16))
    moves = [(t, d) for t, _, d in run(plant, S, 200, shape) if d.is_change]
    down = [(t, d) for t, d in moves if t >= 120]
    assert len(down) == 1, [(t, d.desired, d.code) for t, d in moves]
    t, d = down[0]
    assert d.code == "load-fell" and d.via == "fifo"
    assert t <= 120 + S.measure_frames + 3  # not the down window's 30 s
    assert 17 <= d.desired <= 18  # what 16 clients need and one spare
    assert plant.live == d.desired  # and it holds there


def test_a_fall_moves_by_at_most_half_and_then_waits_for_the_window() -> None:
    # 48 clients, then 2: the level asks for 2-5 workers, a lull may be short: half at once.
    plant = Plant(live=48, workers_max=64, cpu_ms=1, io_ms=30, clients=48)
    shape = _phases((40, 48), (200, 2))
    moves = [(t, d) for t, _, d in run(plant, S, 200, shape) if d.is_change]
    assert moves[0][1].code == "load-fell" and moves[0][1].desired == 24
    assert moves[0][0] <= 40 + S.measure_frames + 3
    assert all(t >= 40 + S.down_window for t, _ in moves[1:])  # the rest: the whole window
    assert plant.live <= 6


def test_lulls_between_bursts_shrink_the_pool_once_at_most() -> None:
    # The bench's `bursty`: 48 clients for 10 s, 4 for 10 s, and again. After one lull the
    # window shows the load coming back, so the next lulls keep the pool.
    plant = Plant(live=48, workers_max=64, cpu_ms=1, io_ms=25, clients=48)
    spans = tuple((10 * (i + 1), 48 if i % 2 == 0 else 4) for i in range(12))
    moves = [(t, d) for t, _, d in run(plant, S, 120, _phases(*spans)) if d.is_change]
    fell = [(t, d.desired) for t, d in moves if d.code == "load-fell"]
    assert len(fell) <= 1, fell
    assert all(d.desired >= 24 for _, d in moves if d.action == "down")
    assert plant.live >= 48 or any(t >= 100 for t, _ in moves)


def test_a_lone_connection_beside_a_full_pool_is_not_a_shortage() -> None:
    # 16 clients on 16 workers: a client's next request can arrive before its worker shows
    # idle, so now and then a poll reads 17 requests. That stepped the pool to 25.
    plant = Plant(live=16, workers_max=64, cpu_ms=1, io_ms=30, clients=16)
    full = plant.load

    def shape(p: Plant, t: int) -> None:
        p.load = full  # type: ignore[method-assign]
        if t % 5 == 0:
            one = SocketView("127.0.0.1:9000", "http", False, 1, 100, "stats")
            p.load = lambda: replace(full(), sockets=(one,))  # type: ignore[method-assign]

    moves = [(t, d) for t, _, d in run(plant, S, 90, shape) if d.is_change]
    assert all(d.desired <= 17 for _, d in moves), [(t, d.desired, d.code) for t, d in moves]
    # 17 clients on 16 workers: one waits at every poll, a shortage; the pool grows.
    plant = Plant(live=16, workers_max=64, cpu_ms=1, io_ms=30, clients=17)
    moves = [(t, d) for t, _, d in run(plant, S, 60) if d.is_change]
    assert moves and moves[0][1].action == "up" and plant.live >= 17


def test_one_poll_of_leftover_connections_is_not_a_burst() -> None:
    # The bench's `drop`: when 48 clients stop, one poll can read 20 connections queued
    # beside idle workers. Read as the load rising again, it kept the pool at 27 for the
    # whole quiet spell.
    plant = Plant(live=28, workers_max=64, cpu_ms=1, io_ms=30, clients=48)
    full = plant.load

    def shape(p: Plant, t: int) -> None:
        p.clients = 48 if t < 40 else 1
        p.load = full  # type: ignore[method-assign]
        if t == 42:
            left = SocketView("127.0.0.1:9000", "http", False, 20, 100, "stats")
            p.load = lambda: replace(full(), sockets=(left,))  # type: ignore[method-assign]

    moves = [(t, d) for t, _, d in run(plant, S, 60, shape) if d.is_change]
    fell = [(t, d) for t, d in moves if d.code == "load-fell"]
    assert fell and fell[0][0] <= 42 + S.measure_frames + 3, [(t, d.code) for t, d in moves]


def test_a_step_up_never_passes_the_requests_seen_at_once() -> None:
    # 32 clients on 33 workers, and at two polls in three a worker still busy after its
    # answer went out and the client's next request queued: 34 at once. Square-root
    # staffing of that demand stepped the pool to 45.
    plant = Plant(live=33, workers_max=64, cpu_ms=1, io_ms=30, clients=32)
    full = plant.load

    def shape(p: Plant, t: int) -> None:
        p.load = full  # type: ignore[method-assign]
        if t % 3:
            one = SocketView("127.0.0.1:9000", "http", False, 1, 100, "stats")
            p.load = lambda: replace(full(), busy=33, sockets=(one,))  # type: ignore[method-assign]

    moves = [(t, d) for t, _, d in run(plant, S, 60, shape) if d.is_change]
    assert all(d.desired <= 35 for _, d in moves), [(t, d.desired, d.code) for t, d in moves]
