"""Ranges, step choice, refinement, the estimate, and the preflight check on a Frame."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import frames
from uwsgitune.core.frame import Frame
from uwsgitune.sweep import plan


def test_parse_range_and_list() -> None:
    r = plan.parse_workers("1..32")
    assert r.values[0] == 1 and r.top == 32 and r.contiguous
    l = plan.parse_workers("8, 1,2,4")  # noqa: E741
    assert l.values == (1, 2, 4, 8) and not l.contiguous
    assert plan.parse_workers("4").values == (4,)


@pytest.mark.parametrize("text", ["0..4", "8..2", "a..b", "1..", "", "1,x", "1..5000", "-1,2"])
def test_parse_rejects_with_a_fix(text: str) -> None:
    with pytest.raises(plan.PlanError, match="--workers"):
        plan.parse_workers(text)


def test_choose_steps() -> None:
    assert plan.choose_steps(plan.parse_workers("1..6")) == (1, 2, 3, 4, 5, 6)
    assert plan.choose_steps(plan.parse_workers("1..32")) == (1, 2, 4, 8, 16, 32)
    assert plan.choose_steps(plan.parse_workers("3..40")) == (3, 4, 8, 16, 32, 40)
    assert plan.choose_steps(plan.parse_workers("1,3,9")) == (1, 3, 9)


def test_refine_adds_midpoints_around_the_knee() -> None:
    rng = plan.parse_workers("1..32")
    measured = (1, 2, 4, 8, 16, 32)
    assert plan.refine(rng, measured, 8) == (6, 12)
    assert plan.refine(rng, measured, 1) == ()  # (1+2)//2 == 1, already measured
    assert plan.refine(plan.parse_workers("1,4,16"), (1, 4, 16), 4) == ()  # a list: as given
    assert plan.refine(rng, measured, None) == ()


def test_serpentine_and_estimate() -> None:
    assert plan.serpentine((1, 2, 4), 1) == (4, 2, 1)
    est = plan.estimate_seconds(6, 2, 10.0, 3.0, refinable=True)
    assert est == (6 + 2) * 2 * (plan.SETTLE_SECONDS + 13.0) + 2 * plan.SETTLE_SECONDS


def frame(**kw: Any) -> Frame:
    """A poll of an instance with 8 slots, 2 live (the fields in `kw` change it)."""
    return frames.frame(1, **{"workers_max": 8, "live": 2, **kw})


def test_check_instance() -> None:
    assert (frame().workers_max, frame().live, frame().cheap) == (8, 2, 6)
    assert plan.check_instance(frame(), 6) is None
    msg = plan.check_instance(frame(workers_max=4, live=1), 6)
    assert msg and "processes = 4" in msg and "cheaper-algo = manual" in msg
    off = plan.check_instance(frame(live=8), 6)
    assert off and "cheaper mode looks off" in off and "cheaper = 1" in off
    err = plan.check_instance(frames.failed(1, "connection refused"), 6)
    assert err and "connection refused" in err and "--stats" in err
