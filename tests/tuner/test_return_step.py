"""The saturated step up when a load comes back from a quiet spell, pure: the recent polls'
mean queue is diluted by the quiet ones, so where the CPU model bounds the step the latest
poll's queue counts too (`sizing._queued`). Without that, `drop`'s return went 2 -> 18 on a
mean of 15 queued with 46 queued at the poll, and held there at 92% of the throughput."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.tuner.plant import Plant
from uwsgitune.core.staffing import Estimate
from uwsgitune.tuner import TunerSettings, TunerState
from uwsgitune.tuner.measures import Measures
from uwsgitune.tuner.sizing import saturated_up

S = TunerSettings(min_workers=2, max_workers=64)
# 2 ms CPU and 12 ms IO a request on 2 CPUs: 14 requests in service keep them busy, and
# the model's count (x `cpu_workers_per_cpu`) is 23.
MODEL = Estimate(23, 2.0, 0.5, 12.0, 2.0, 14.0, 0.02, 1)


def _back(queue: float, queue_now: float, model: Estimate | None) -> Measures:
    """Two live workers, every one busy, the CPUs mostly idle, a queue: the first poll of a
    load of 48 clients back after a quiet spell."""
    latest = Plant(live=2).frame(1.0)
    return Measures(
        latest=latest,
        now=100.0,
        live=2,
        regime=(latest,),
        x=14.7,
        w=7.6,
        noise=0.05,
        x_part=None,
        w_part=None,
        noise_part=0.1,
        l_recent=0.3,
        l_window=0.8,
        window_covered=True,
        queue=queue,
        busy_ratio=0.13,
        cpu_sat=0.02,
        cpu_used=0.03,
        cpus=2.0,
        mem_cap=1600,
        model=model,
        queue_min=S.queue_min,
        busy_full=S.busy_full,
        queue_now=queue_now,
        busy_now=1.0,
        demand_peak=48.0,
        # a queue at two of the last three polls: a load back, not a blip (`_brief`)
        queue_polls=2,
        recent_polls=3,
    )


def _step(queue: float, queue_now: float, model: Estimate | None) -> int:
    p = saturated_up(_back(queue, queue_now, model), TunerState(), S)
    assert p is not None and p.code == "saturated", p
    return p.desired


def test_where_the_model_bounds_the_step_the_latest_queue_counts() -> None:
    # 15 queued on average, 46 at the poll: the step takes the model's 23, not 2 + 15
    assert _step(15.0, 46.0, MODEL) == 23
    # a latest queue below the mean does not shrink the step
    assert _step(15.0, 3.0, MODEL) == 2 + 15


@pytest.mark.parametrize("cap", [30, 60])
def test_the_step_never_passes_the_model_or_the_latest_queue(cap: int) -> None:
    model = replace(MODEL, workers=cap)
    assert _step(15.0, 46.0, model) == min(cap, 2 + 46)


def test_without_a_model_only_the_mean_queue_counts() -> None:
    # no bound from the CPUs: the latest poll alone (one burst) does not size the step
    assert _step(15.0, 46.0, None) == 2 + 15
