"""The latency target in closed loop with a simulated open-loop instance (M/M/c): from too
many workers and from too few, the tuner settles on the fewest workers whose p99 of queue
wait + service time meets the target, and stays there. Pure: frames from the real Tracker,
request log lines through a real recorder, no clock."""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass

import pytest

from tests.support.latency import log_line, view_of
from tests.tuner.plant import Plant
from uwsgitune.core.latency import LatencyRecorder
from uwsgitune.tuner import TunerSettings, TunerState, decide

RATE = 80.0  # requests/s, Poisson
SERVICE_S = 0.05  # mean service time: 1 ms CPU + 49 ms IO, lognormal (sigma 0.3)
SIGMA = 0.3
TARGET_MS = 250.0
SETTINGS = TunerSettings(max_workers=32, latency_target=f"p99={TARGET_MS:g}ms")


def erlang_c(n: int, a: float) -> float:
    """The chance a request waits for one of `n` workers at offered load `a` (M/M/c)."""
    if n <= a:
        return 1.0
    below = sum(a**k / math.factorial(k) for k in range(n))
    top = a**n / math.factorial(n) * n / (n - a)
    return top / (below + top)


def p99_ms(n: int, rate: float = RATE) -> float:
    """p99 of queue wait plus p99 of service time at `n` workers (what the tuner judges)."""
    a = rate * SERVICE_S
    if n <= a:
        return math.inf  # the queue grows without bound
    c = erlang_c(n, a)
    wait = 0.0 if c <= 0.01 else math.log(c / 0.01) / (n / SERVICE_S - rate)
    service = SERVICE_S * math.exp(2.3263 * SIGMA - SIGMA**2 / 2)  # lognormal p99, mean kept
    return (wait + service) * 1000


@dataclass
class QueuePlant(Plant):
    """Open loop, c workers: the listen queue and the waits of an M/M/c queue."""

    def steady(self, n: int) -> tuple[float, float, float]:
        lam = self.rate or 0.0
        a = lam * SERVICE_S
        if n <= a * 1.02:  # saturated: the queue grows
            return n / SERVICE_S, float(n), 50.0
        wq = erlang_c(n, a) / (n / SERVICE_S - lam)
        return lam, a, lam * wq

    def wait_s(self, rng: random.Random) -> float:
        lam = self.rate or 0.0
        a = lam * SERVICE_S
        if self.live <= a * 1.02:
            return 2.0
        if rng.random() >= erlang_c(self.live, a):
            return 0.0
        return rng.expovariate(self.live / SERVICE_S - lam)


def run(
    live: int, seconds: int, rates: dict[int, float] | None = None
) -> list[tuple[int, int, float | None]]:
    """(t, live workers, p99 judged) each second, the tuner's changes applied at once;
    `rates`: the arrival rate from a second on."""
    plant = QueuePlant(live=live, workers_max=32, cpu_ms=1, io_ms=49, clients=None, rate=RATE)
    rec, rng = LatencyRecorder(10), random.Random(3)
    mu = math.log(SERVICE_S) - SIGMA**2 / 2
    frames, state, out = [], TunerState(), []
    for t in range(seconds):
        plant.rate = (rates or {}).get(t, plant.rate)
        frames = [*frames[-300:], plant.frame(float(t))]
        lines = [
            log_line(
                int(rng.lognormvariate(mu, SIGMA) * 1e6),
                wid=1 + i % plant.live,
                wait_us=int(plant.wait_s(rng) * 1e6),
            )
            for i in range(int(plant.rate or 0))
        ]
        rec.ingest(lines, float(t))
        d = decide(frames, state, SETTINGS, now=float(t), latency=view_of(rec, float(t)))
        state = d.state
        judged = d.evidence.get("p99_ms")
        out.append((t, plant.live, judged if isinstance(judged, float) else None))
        if d.is_change:
            plant.live = d.desired
            if d.via == "reload":
                plant.reload_at = float(t + 1)
    return out


@pytest.mark.parametrize("start", [32, 3])
def test_from_too_many_or_too_few_it_settles_on_the_fewest_that_meet_the_target(
    start: int,
) -> None:
    fewest = next(n for n in range(1, 33) if p99_ms(n) <= TARGET_MS)
    assert p99_ms(fewest - 1) > TARGET_MS  # the model: one fewer misses
    run_ = run(start, 260)
    tail = run_[-60:]
    assert {n for _, n, _ in tail} == {fewest}, [n for _, n, _ in run_[::10]]
    judged = [p for _, _, p in tail if p is not None]
    assert judged and max(judged) < TARGET_MS  # met, as the tuner reads it


def test_a_load_that_grows_past_the_target_grows_the_pool_once_and_it_stays() -> None:
    # 80 req/s at its fewest; then 100 req/s, which that count misses by queue wait
    before = next(n for n in range(1, 33) if p99_ms(n) <= TARGET_MS)
    after = next(n for n in range(1, 33) if p99_ms(n, 100.0) <= TARGET_MS)
    assert p99_ms(before, 100.0) > TARGET_MS and after > before
    run_ = run(before, 300, {60: 100.0})
    assert {n for _, n, _ in run_[:60]} == {before}
    tail = run_[-80:]
    assert {n for _, n, _ in tail} == {after}, [n for _, n, _ in run_[::10]]
    counts = [n for _, n, _ in run_[60:]]
    changes = sum(a != b for a, b in itertools.pairwise(counts))
    assert changes <= 3  # up once (a probe_step), at most one step back towards the fewest
