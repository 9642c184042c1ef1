"""A change's polls count once its workers are warm (tuner/measures.py `_warmed`): a worker's
first requests pay its process's warm-up (measured: 16 fresh Django workers served 15 req/s
in the polls after a reload, where 2 serve 22, and the step was reverted on them)."""

from __future__ import annotations

from dataclasses import replace

from msgspec.structs import replace as struct_replace

from tests.tuner.plant import Plant
from uwsgitune.core.frame import Frame
from uwsgitune.tuner import TunerSettings
from uwsgitune.tuner.measures import WARM_LIMIT, WARM_REQUESTS, gather

S = TunerSettings(max_workers=64)
START = 10.0  # the change settled here


def _cold(f: Frame, slow: float = 0.5) -> Frame:
    """The same poll with every live worker short of its warm-up, serving at `slow`."""
    workers = tuple(
        struct_replace(w, requests=WARM_REQUESTS - 1) if w.live else w for w in f.workers
    )
    return replace(f, workers=workers, rps=(f.rps or 0.0) * slow)


def _frames(cold_until: float, polls: int = 40) -> list[Frame]:
    plant = Plant(live=4, workers_max=8, cpu_ms=3, clients=8, noise=0.0)
    frames = [plant.frame(float(t)) for t in range(polls)]
    return [_cold(f) if START <= f.mono < cold_until else f for f in frames]


def test_the_polls_of_cold_workers_and_the_one_after_do_not_count() -> None:
    frames = _frames(cold_until=START + 4)
    f = gather(frames[:25], S, 24.0, START)
    # cold at 10-13; the poll at 14 rates 13 -> 14, from cold workers: from 15 on
    assert f.regime[0].mono == START + 5 and f.x is not None
    warm = gather(
        [*frames[:10], *[fr for fr in frames[10:25] if fr.mono >= START + 5]], S, 24.0, START
    )
    assert f.x == warm.x  # as though the cold polls were never there


def test_workers_that_never_warm_hold_nothing_past_the_limit() -> None:
    frames = _frames(cold_until=1e9, polls=int(START + WARM_LIMIT) + 8)
    f = gather(frames, S, frames[-1].mono, START)
    assert f.regime and f.regime[0].mono >= START + WARM_LIMIT  # the limit's polls count


def test_no_change_no_warm_up() -> None:
    frames = [_cold(f) for f in _frames(cold_until=0.0)]
    f = gather(frames[:20], S, 19.0, float("-inf"))
    assert len(f.regime) == 20  # every poll (the plant rates its first): a pool as found
