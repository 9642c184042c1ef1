"""A pod that joins a loaded service, pure, through the fleet simulation's pod
(bench/fleet_sim.py): its first poll finds 4 workers and the backlog of 100 full. The step
is sized on what the kernel refused over the poll (`sizing._refused`, TcpExtListenOverflows),
not on the whole queue: sized on the queue, it went 4 -> 32, Little's law took it to 22
and 18 within 15 minutes, and a load that climbs took it up again later (a turn per load
change too many: bench/results/fleet.md, the daily curve)."""

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
    assert len(codes) == 1, codes
    _at, code, was, to = codes[0]
    assert (code, was) == ("saturated", 4) and 14 <= to <= 18, codes
