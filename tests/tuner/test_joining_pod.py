"""A pod that joins a loaded service, pure, through the fleet simulation's pod
(bench/fleet_sim.py): its first poll finds 4 workers and the backlog of 100 full. The step
is sized on what the kernel refused over the poll (`sizing._refused`, TcpExtListenOverflows),
not on the whole queue: sized on the queue, it went 4 -> 32, Little's law took it to 22
and 18 within 15 minutes, and a load that climbs took it up again later (a turn per load
change too many: bench/results/fleet.md, the daily curve).

Once the model's pod showed the requests past its workers at a poll (random arrivals:
Poisson about L), the step to 16 went on to 20-21 and then 22, down to 18 and up again:
the ways up and down stopped at the most requests seen at once over spans of different
lengths, and the most of a noisy count grows with the polls read. They stop at one
statistic now (`level.reach`): square-root staffing of the requests in the instance for
random arrivals, sized once on what the kernel refused."""

from __future__ import annotations

from types import ModuleType

import pytest


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_a_pod_that_joins_a_loaded_service_steps_once(sim: ModuleType, seed: int) -> None:
    # 5 ms CPU and 45 ms IO a request (20 req/s a worker), 2 CPUs, 5 s polls: 260 req/s,
    # climbing by 0.2% a minute, need 13 to 14 workers in service over the hour.
    pod = sim.Pod(sim.APPS["io"], 0.0, True, seed)
    t = sim.STARTUP
    while t < 3600:
        t += sim.DT
        pod.serve(t, 260.0 * (1 + 0.002 * t / 60))
    codes = list(pod.codes)
    _at, code, was, to = codes[0]
    # 13 in service: L + 2√L = 20.2
    assert (code, was) == ("saturated", 4) and 19 <= to <= 22, codes
    # then never down, and up only as the load climbs (14.6 in service at the hour: 23)
    assert all(b > a for _t, _c, a, b in codes), codes
    assert len(codes) <= 3 and codes[-1][3] <= 23, codes


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_a_pile_that_grows_is_arrivals_not_clients(sim: ModuleType, seed: int) -> None:
    """A pod joins at 104 req/s of 10 ms CPU and 30 ms IO: 4 workers serve 100, so its queue
    grows from its first poll (12, then 32), short of the backlog. What waited at every poll
    is the arrivals past the pool before the least, which the rate (104) already holds, not
    clients that stand: counted as such, each seed went 4 -> 12 (16 requests of demand for
    4.2 in service) and Little's law took it to 9 150 s later, a turn."""
    pod = sim.Pod(sim.APPS["mixed"], 0.0, True, seed)
    t = sim.STARTUP
    while t < 1800:
        t += sim.DT
        pod.serve(t, 104.0)
    codes = list(pod.codes)
    _at, code, was, to = codes[0]
    assert (code, was) == ("saturated", 4) and to <= 9, codes
    # never down: up to what the load needs (4.2 in service with its spread: 9), and no more
    assert all(b > a for _t, _c, a, b in codes), codes
    assert 8 <= codes[-1][3] <= 10, codes
