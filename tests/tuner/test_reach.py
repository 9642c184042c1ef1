"""What the ways up and down keep for a load (`level.reach`, `level.dispersion`), pure.

Both used to stop at the most requests seen at once, over spans of different lengths (up:
the polls at this count; down: the down window), and the most of a noisy count grows with
the polls read. Once the fleet simulation's pods showed the requests that random arrivals
put past the workers at a poll, a pod at a steady load went 16 -> 20 -> 21 -> 22 and down
to 18 and up again (fleet turns missed in 7 of 9 runs). They now keep one count: the
requests in the instance plus beta standard deviations of their spread, which is square-root
staffing for random arrivals and the clients' own count for a closed loop."""

from __future__ import annotations

import itertools
import math
import random
from types import ModuleType

import pytest

from tests.support.instances import Instance, Load
from uwsgitune.core.frame import Frame, SocketView
from uwsgitune.core.staffing import workers_for
from uwsgitune.tuner.level import OPEN, ceiling, dispersion, reach


def _frames(counts: list[int], l_mean: float, live: int = 40, queued: int = 0) -> list[Frame]:
    """Polls 5 s apart whose busy workers read `counts` (no more than `live`; past them,
    queued, and `queued` more), each poll's L `l_mean`."""
    inst = Instance("reach", 1_700_000_000.0, 0.0)
    out = [inst.frame(0.0, Load(live=live, busy=0, rps=0.0, in_service=0.0))]
    for i, n in enumerate(counts, start=1):
        q = max(n - live, 0) + queued
        sock = SocketView("127.0.0.1:8000", "http", False, q, 100, "stats")
        load = Load(
            live=live, busy=min(n, live), rps=l_mean * 20, in_service=l_mean, sockets=(sock,)
        )
        out.append(inst.frame(i * 5.0, load))
    return out[1:]


def _poisson(rng: random.Random, mean: float) -> int:
    # Knuth's: fine for the means here
    limit, k, p = math.exp(-mean), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def test_random_arrivals_spread_like_a_poisson_count_and_a_closed_loop_hardly_at_all() -> None:
    rng = random.Random(7)
    open_ = _frames([_poisson(rng, 14.0) for _ in range(60)], 14.0)
    d_open = dispersion(open_, 0.0, 8)
    assert d_open is not None and OPEN < d_open < 1.6, d_open
    # 16 clients that keep their workers busy: 16 at nearly every instant
    closed = _frames([16 if i % 7 else 15 for i in range(30)], 15.9)
    d_closed = dispersion(closed, 0.0, 8)
    assert d_closed is not None and d_closed < 0.05, d_closed
    # too few polls to tell
    assert dispersion(closed[:5], 0.0, 8) is None
    # random arrivals on a pool they keep busy: the workers read busy at every poll, and
    # the queue beside them shows the spread (read on the workers alone: 0.04)
    tight = _frames([_poisson(rng, 14.0) for _ in range(60)], 12.0, live=12)
    d_tight = dispersion(tight, 0.0, 8)
    assert d_tight is not None and d_tight > OPEN, d_tight
    # 24 clients on 16 workers: 8 queued at every poll, the spread still a closed loop's
    full = _frames([16] * 30, 16.0, live=16, queued=8)
    d_full = dispersion(full, 0.0, 8)
    assert d_full is not None and d_full < 0.05, d_full


def test_reach_is_square_root_staffing_for_random_arrivals_and_the_clients_for_a_closed_loop() -> (
    None
):
    # random arrivals: L + 2√L, however high the spread reads (it wanders: 0.6-1.5)
    for d in (OPEN, 1.0, 1.5, 3.0):
        assert reach(14.0, d, 1, 2.0) == workers_for(14.0, 1, 2.0) == 22
    # a closed loop: no spare past its clients
    assert reach(16.0, 0.0, 1, 2.0) == 16
    assert 16 < reach(16.0, 0.02, 1, 2.0) <= 18
    # in processes' worth: 64 requests in threads of 4
    assert reach(64.0, 0.0, 4, 2.0) == 16
    assert reach(0.0, 1.0, 1, 2.0) == 0


def test_a_closed_loops_clients_are_a_ceiling_and_a_random_loads_most_is_not() -> None:
    # 16 clients of 50 ms on a real uWSGI read 16 at 11 polls of 16, 11-15 at the rest
    closed = _frames([16, 16, 13, 16, 16, 15, 16, 16, 11, 16, 16, 16, 12, 16, 16, 16], 15.3)
    assert ceiling(closed, 0.0) == 16
    # a Poisson count's most is one poll's or a few: never a ceiling over 30 polls
    rng = random.Random(3)
    for _ in range(20):
        polls = _frames([_poisson(rng, 14.5) for _ in range(30)], 14.5)
        assert ceiling(polls, 0.0) is None
    # 3 polls of 4 at the most (a level's polls)
    assert ceiling(_frames([16, 16, 15, 16], 15.8), 0.0) == 16
    assert ceiling(_frames([16, 14, 15, 16], 15.3), 0.0) is None
    # a small random load (mean 1.4): its most, 2, at 8 polls of 30 but 1 at 10: not piled
    small = _frames([2] * 8 + [1] * 10 + [0] * 12, 1.4)
    assert ceiling(small, 0.0) is None


def _turns(codes: list[tuple[float, str, int, int]]) -> int:
    dirs = [to > was for _t, _c, was, to in codes]
    return sum(1 for a, b in itertools.pairwise(dirs) if a != b)


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_a_pod_at_a_steady_random_load_keeps_its_count(sim: ModuleType, seed: int) -> None:
    """Two hours at 280 req/s (5 ms CPU and 45 ms IO: 14 in service) from 16 workers: the
    pod goes to square-root staffing of its load and stays (before: up by the most seen at
    once, down when that poll left the down window, up again). Until the spread is read
    (`DISPERSION_POLLS`), a step up stops at the most seen at once, so it may take two."""
    pod = sim.Pod(sim.APPS["io"], -sim.STARTUP, True, seed)
    pod.workers = 16
    t = 0.0
    while t < 7200:
        t += sim.DT
        pod.serve(t, 280.0)
    codes = list(pod.codes)
    assert _turns(codes) == 0 and len(codes) <= 3, codes
    assert abs(pod.workers - workers_for(14.0, 1, 2.0)) <= 1, codes
