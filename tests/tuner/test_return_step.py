"""The saturated steps up, pure.

When a load comes back from a quiet spell, the recent polls' mean queue is diluted by the
quiet ones, so where the CPU model bounds the step the latest poll's queue counts too
(`sizing._queued`). Without that, `drop`'s return went 2 -> 18 on a mean of 15 queued with
46 queued at the poll, and held there at 92% of the throughput.

At the model's count with the CPUs saturated and requests queued, requests that wait mostly
on IO get one strict probe within the model's band (`io-share-probe`): kept only if it
serves more than the noise."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tests.tuner.plant import Plant
from uwsgitune.tuner import TunerSettings, TunerState
from uwsgitune.tuner.facts import Facts
from uwsgitune.tuner.model import Estimate
from uwsgitune.tuner.sizing import saturated_up
from uwsgitune.tuner.state import Probe
from uwsgitune.tuner.verdict import judge

S = TunerSettings(min_workers=2, max_workers=64)
# 2 ms CPU and 12 ms IO a request on 2 CPUs: 14 requests in service keep them busy, and
# the model's count (x `cpu_workers_per_cpu`) is 23.
MODEL = Estimate(23, 2.0, 0.5, 12.0, 2.0, 14.0, 0.02, 1)


def _back(
    queue: float, queue_now: float, model: Estimate | None, live: int = 2, **kw: Any
) -> Facts:
    """Two live workers, every one busy, the CPUs mostly idle, a queue: the first poll of a
    load of 48 clients back after a quiet spell (`kw`: other facts)."""
    latest = Plant(live=live).frame(1.0)
    facts = Facts(
        latest=latest, now=100.0, live=live, regime=(latest,), x=14.7, w=7.6, noise=0.05,
        x_part=None, w_part=None, noise_part=0.1, l_recent=0.3, l_window=0.8,
        window_covered=True, queue=queue, busy_ratio=0.13, cpu_sat=0.02, cpu_used=0.03,
        cpus=2.0, mem_cap=1600, model=model, queue_min=S.queue_min, busy_full=S.busy_full,
        queue_now=queue_now, busy_now=1.0, demand_peak=48.0,
    )  # fmt: skip
    return replace(facts, **kw)


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


def _hot(model: Estimate, live: int = 23, queue: float = 25.0, **kw: Any) -> Facts:
    """At the model's count, the CPUs saturated, 25 queued: a closed loop of 48 clients."""
    facts = dict(busy_ratio=0.99, cpu_sat=0.99, cpu_used=1.6, x=650.0, w=31.0) | kw
    return _back(queue, queue, model, live, **facts)


def test_io_bound_requests_at_saturated_cpus_get_one_strict_step_within_the_band() -> None:
    p = saturated_up(_hot(MODEL), TunerState(), S)
    # 23 + 25% (probe_step), below the band's top (23 + 50%)
    assert p is not None and (p.code, p.desired) == ("io-share-probe", 29), p
    assert p.probe and p.strict and p.past_hot_cpu
    assert saturated_up(_hot(MODEL, live=34), TunerState(), S).desired == 35  # the band's top
    held = [
        saturated_up(_hot(MODEL, live=35), TunerState(), S),  # at the band's top
        saturated_up(_hot(MODEL), TunerState(plateau_up=23), S),  # tried: served no more
        saturated_up(_hot(replace(MODEL, io_ms=1.0)), TunerState(), S),  # CPU-bound
        saturated_up(_hot(MODEL, queue=0.0), TunerState(), S),  # all busy, nothing queued
    ]
    assert [h.code if h else None for h in held] == ["cpu-saturated"] * 4, held


@pytest.mark.parametrize(("after", "kept"), [(690.0, True), (660.0, False), (600.0, False)])
def test_a_strict_probe_is_kept_only_if_it_served_more(after: float, kept: bool) -> None:
    """650 req/s before, noise 5%: +6% is kept, +1.5% (a tie) and -8% are reverted, and the
    count they left is remembered as the plateau."""
    probe = Probe(23, 29, 650.0, 0.05, 90.0, 2.0, strict=True)
    st, revert = judge(_hot(MODEL, live=29, x=after), TunerState(probe=probe))
    assert (revert is None) == kept, revert
    assert st.plateau_up == (None if kept else 23)
    if revert is not None:
        assert (revert.desired, revert.code) == (23, "revert")
    # the same tie on a probe that is not strict is kept
    lax = replace(probe, strict=False)
    assert judge(_hot(MODEL, live=29, x=660.0), TunerState(probe=lax))[1] is None
