"""The sizing rules in turn (`sizing.RULES`), after what probing learned is checked against
the load: the first rule that matches proposes the live count. Pure."""

from __future__ import annotations

from dataclasses import replace

from uwsgitune.tuner.facts import Facts
from uwsgitune.tuner.proposal import Proposal
from uwsgitune.tuner.settings import TunerSettings
from uwsgitune.tuner.sizing import RULES
from uwsgitune.tuner.state import TunerState
from uwsgitune.tuner.verdict import judge


def _request(f: Facts) -> tuple[float, float] | None:
    return (f.model.cpu_ms, f.model.io_ms) if f.model is not None else None


def _load_changed(f: Facts, st: TunerState, s: TunerSettings) -> bool:
    """What a request costs moved beyond the band since the plateaus were learned."""
    then, now = st.learned_request, _request(f)
    if then is None or now is None:
        return False
    scale = max(then[0] + then[1], 1e-3)
    return abs(now[0] - then[0]) / max(then[0], 1e-3) > s.model_band or (
        abs(now[1] - then[1]) / scale > s.model_band
    )


def propose(f: Facts, st: TunerState, s: TunerSettings) -> tuple[TunerState, Proposal]:
    # What probing learned holds for this load only: forget it when demand fell below
    # capacity, or a request's CPU or IO time moved (a new release, a slower database).
    if st.learned and _load_changed(f, st, s):
        st = st.unlearned()
    elif st.plateau_up is not None and not f.saturated:
        # Demand fell below capacity: a later climb starts afresh. A descent that hurt
        # stays learned: the larger pool it came back to is rarely saturated.
        st = replace(st, plateau_up=None)
    if st.learned and st.learned_request is None:
        st = replace(st, learned_request=_request(f))  # the cost at the count it settled on
    st, revert = judge(f, st, s)
    if revert is not None:
        return st, revert
    for _name, rule in RULES:
        prop = rule(f, st, s)
        if prop is not None:
            return st, prop
    raise AssertionError("littles_law always proposes")  # pragma: no cover
