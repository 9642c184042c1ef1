"""The sizing rules in turn (`sizing.RULES`), after what probing learned is checked against
the load: the first rule that matches proposes the live count. Pure."""

from __future__ import annotations

from dataclasses import replace

from uwsgitune.tuner.decision import Proposal, TunerState
from uwsgitune.tuner.demand import SMALL_QUEUE
from uwsgitune.tuner.measures import Measures
from uwsgitune.tuner.sizing import RULES
from uwsgitune.tuner.tunersettings import TunerSettings
from uwsgitune.tuner.verdict import judge


def _request(f: Measures) -> tuple[float, float] | None:
    return (f.model.cpu_ms, f.model.io_ms) if f.model is not None else None


def _load_changed(f: Measures, st: TunerState, s: TunerSettings) -> bool:
    """What a request costs moved beyond the band since the plateaus were learned."""
    then, now = st.learned_request, _request(f)
    if then is None or now is None:
        return False
    scale = max(then[0] + then[1], 1e-3)
    return abs(now[0] - then[0]) / max(then[0], 1e-3) > s.model_band or (
        abs(now[1] - then[1]) / scale > s.model_band
    )


def _in_instance(f: Measures) -> float:
    """Requests in service and queued: the recent polls' means."""
    return (f.l_recent or 0.0) + (f.queue or 0.0)


def _demand_grew(f: Measures, st: TunerState, s: TunerSettings) -> bool:
    """More requests in service and queued than when the plateaus were learned, by more than
    a probe's step and a small queue: more clients, a new load. The ceiling of a climb held
    for the old one (16 clients on 17 workers learned it; 32 then queued 16 behind it, for
    the whole phase, at a throughput the pool bounded)."""
    then = st.learned_demand
    if then is None:
        return False
    grew = _in_instance(f) - then
    return grew > max(SMALL_QUEUE * max(f.latest.threads, 1), s.probe_step * then)


def propose(f: Measures, st: TunerState, s: TunerSettings) -> tuple[TunerState, Proposal]:
    # What probing learned holds for this load only: forget it when demand fell below
    # capacity, or a request's CPU or IO time moved (a new release, a slower database).
    if st.learned and _load_changed(f, st, s):
        st = st.unlearned()
    elif st.plateau_up is not None and (not f.saturated or _demand_grew(f, st, s)):
        # Demand fell below capacity, or grew past what the climb ended at: a later climb
        # starts afresh. A descent that hurt stays learned: the larger pool it came back to
        # is rarely saturated.
        st = replace(st, plateau_up=None)
    if st.learned and st.learned_request is None:
        # the cost and the demand at the count it settled on
        st = replace(st, learned_request=_request(f), learned_demand=_in_instance(f))
    st, revert = judge(f, st, s)
    if revert is not None:
        return st, revert
    for _name, rule in RULES:
        prop = rule(f, st, s)
        if prop is not None:
            return st, prop
    raise AssertionError("littles_law always proposes")  # pragma: no cover
