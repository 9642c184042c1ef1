"""A finding and the tuner's decision count workers alike under the settings an instance sets.

The rules size workers with the tuner's model (`uwsgitune.core.staffing`); the knobs of that
model (`cpu_workers_per_cpu`, `cpu_saturated`, `staffing_beta`) are shared settings, set in
`[instance.tuner]` or `[instance.rules]` for both. Each case below is a load where a finding
and a decision move the pool to one count; set differently from its default, the knob moves
that count, and the finding must move with the decision.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.support.frames import series, tcp
from tests.tuner.plant import Plant
from uwsgitune.core.frame import Frame
from uwsgitune.daemon.config import InstanceConfig, validate
from uwsgitune.rules import Finding, evaluate
from uwsgitune.tuner import TunerState, decide


def instance(table: str, **knobs: float) -> InstanceConfig:
    """An instance of the daemon's config (a ceiling above every count here), with `knobs`
    set in `[instance.<table>]`."""
    doc = {"name": "app", "stats": "/run/app.sock", "max_workers": 64, table: knobs}
    return validate({"instance": [doc]}, "f.toml").instance[0]


def oversubscribed() -> list[Frame]:
    """32 workers on 2 CPUs, a request 10 ms on a CPU and 2 ms waiting on IO: the model's
    count is 2.4 in service times `cpu_workers_per_cpu`, and the tuner goes there in one
    move. (With no IO, 32 clients would keep the CPUs' count fed: no spare to set.)"""
    plant = Plant(live=32, workers_max=32, cpus=2.0, cpu_ms=10.0, io_ms=2.0, clients=32)
    return [plant.frame(float(t)) for t in range(40)]


def backlog_full() -> list[Frame]:
    """4 busy workers and 3 connections waiting in a full backlog: the tuner sizes the 7
    requests by square-root staffing (7 + beta√7), as the listen rule does."""
    return series(30, sockets=(tcp(3, 3),), busy_ratio=1.0, busy=4, idle=0, littles_l=4.0)


CASES: dict[str, tuple[Callable[[], list[Frame]], str, str, float, int]] = {
    # name: frames, the finding, the knob, its value, the count it gives (default beside)
    "cpu_workers_per_cpu": (oversubscribed, "oversubscribed_cpu", "cpu_workers_per_cpu", 1, 3),
    "staffing_beta": (backlog_full, "listen_queue.capacity_short", "staffing_beta", 0.5, 9),
}
DEFAULT_COUNT = {"cpu_workers_per_cpu": 4, "staffing_beta": 13}


def counts(inst: InstanceConfig, frames: list[Frame], rule: str) -> tuple[int, int]:
    """(the finding's worker count, the decision's) on the same frames."""
    findings, _ = evaluate(frames, settings=inst.rule_settings())
    (found,) = [f for f in findings if f.id == rule]
    decision = decide(frames, TunerState(), inst.tuner_settings(frames[-1].workers_max))
    assert decision.is_change, decision.reason
    return _workers(found), decision.desired


def _workers(f: Finding) -> int:
    rec = f.recommendation
    assert rec is not None and isinstance(rec.value, int), f
    return rec.value


@pytest.mark.parametrize("case", sorted(CASES))
def test_finding_and_decision_agree_at_the_defaults(case: str) -> None:
    make, rule, _knob, _value, _count = CASES[case]
    assert counts(instance("tuner"), make(), rule) == (DEFAULT_COUNT[case],) * 2


@pytest.mark.parametrize("table", ["tuner", "rules"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_finding_and_decision_agree_with_a_shared_knob_set(case: str, table: str) -> None:
    make, rule, knob, value, count = CASES[case]
    inst = instance(table, **{knob: value})
    assert counts(inst, make(), rule) == (count, count)
