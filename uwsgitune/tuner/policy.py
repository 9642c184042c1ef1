"""`decide`: one step of the tuner, from the window of frames to a Decision. Pure.

Theory of operation
-------------------
1. Guards (`GUARDS`, in order) decide whether the stats may be acted on at all: none at all,
   unreachable, stale (older than `stale_intervals` polls at the caller's `now`), an
   Emperor, paused by someone (`p`: a reload would resume it), no rates yet (first poll or
   a reload reset the counters), settling after a reload, or a change still in flight (the
   live count has not reached what was sent). Any guard that fires gives a `wait` with its
   reason: no action on doubtful numbers.
2. Sizing (`sizing.RULES`) proposes a live count with a reason (see sizing.py). With a
   latency target, `targeting.constrain` then holds that proposal to it, from the request
   log's view: the fewest workers whose p99 of real traffic stays under the target, grown
   on queue-wait misses only, never shrunk within 20% of it, and a move down waits while
   the latency data cannot be judged (see targeting.py). Without one, nothing changes.
3. Bounds: never below the floor, above the ceiling, or above the memory cap when adding;
   never add while the instance's CPUs are saturated.
4. Pacing: up after `cooldown_up`, down after `cooldown_down` (scale up fast, down slowly;
   a load that fell and settled goes down after `cooldown_up`), at most
   `max_changes_per_hour`. Floor, ceiling and memory moves, and the revert of a
   step that made things worse, skip the cool-down.
5. The route: `+` through the FIFO up to the slots uWSGI has (`workers_max`), a reload
   beyond; `-` through the FIFO only when workers are idle and the new count still holds
   every request in service, since uWSGI's `-` stays pending on busy workers; a reload with
   a lower `cheaper-initial` otherwise (one reload, however far the count moves).

The caller passes `now` (its monotonic clock) and the frames; nothing here reads a clock.
The returned Decision carries the next state, to adopt once the change was sent.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace

from uwsgitune.core.frame import Frame
from uwsgitune.core.latencyreport import LatencyView
from uwsgitune.core.staffing import workers_holding
from uwsgitune.tuner.decision import Action, Decision, Evidence, Probe, Proposal, TunerState, Via
from uwsgitune.tuner.measures import Measures, gather
from uwsgitune.tuner.propose import propose
from uwsgitune.tuner.sizing import cpu_hot
from uwsgitune.tuner.targeting import constrain
from uwsgitune.tuner.tunersettings import TunerSettings

Guard = Callable[[Frame, TunerState, TunerSettings, float], str | None]
HOUR = 3600.0  # the window of `max_changes_per_hour`


def _unreachable(f: Frame, st: TunerState, s: TunerSettings, now: float) -> str | None:
    return f"stats unreachable: {f.error}" if f.kind == "error" else None


def _stale(f: Frame, st: TunerState, s: TunerSettings, now: float) -> str | None:
    age = now - f.mono
    return f"stats are {age:.1f}s old (> {s.stale_after:g}s)" if age > s.stale_after else None


def _emperor(f: Frame, st: TunerState, s: TunerSettings, now: float) -> str | None:
    return (
        "an Emperor, not an instance: tune its vassals" if f.emperor or not f.workers_max else None
    )


def _paused(f: Frame, st: TunerState, s: TunerSettings, now: float) -> str | None:
    n = f.paused
    return f"paused ({n} workers read `pause`): resume it with `p` on its FIFO" if n else None


def _no_rates(f: Frame, st: TunerState, s: TunerSettings, now: float) -> str | None:
    if f.kind != "ok" or f.rps is None or f.littles_l is None:
        return f"no rates in a '{f.kind}' poll (counters just started or reset)"
    return None


def _settling(f: Frame, st: TunerState, s: TunerSettings, now: float) -> str | None:
    since = f.since_reload
    if st.last_reload is not None and now - st.last_reload < s.settle_after_reload:
        since = now - st.last_reload
    if since is not None and since < s.settle_after_reload:
        return f"reloaded {since:.1f}s ago; metrics settle for {s.settle_after_reload:g}s"
    return None


def _in_flight(f: Frame, st: TunerState, s: TunerSettings, now: float) -> str | None:
    if st.expect_live is not None and f.live != st.expect_live:
        return f"waiting for {st.expect_live} live workers ({f.live} now)"
    return None


GUARDS: tuple[tuple[str, Guard], ...] = (
    ("unreachable", _unreachable),
    ("stale", _stale),
    ("emperor", _emperor),
    ("paused", _paused),
    ("no-rates", _no_rates),
    ("settling", _settling),
    ("in-flight", _in_flight),
)


def _bound(p: Proposal, f: Measures, s: TunerSettings) -> Proposal:
    desired = min(max(p.desired, s.min_workers), s.max_workers)
    if desired == f.live and p.desired > f.live:
        return replace(p, desired=desired, reason=f"{p.reason}; at the ceiling {s.max_workers}")
    if desired > f.live and f.live >= s.min_workers:
        # Every step up waits for a CPU to spare, but those that say otherwise (a revert,
        # GIL-bound processes: Proposal.past_hot_cpu).
        if cpu_hot(f, s) and not p.past_hot_cpu:
            return Proposal(f.live, "cpu-saturated", f"{p.reason}; but CPU {f.cpu_sat:.0%} used")
        cap = max(f.mem_cap if f.mem_cap is not None else desired, f.live)
        if desired > cap:
            return replace(p, desired=cap, reason=f"{p.reason}; memory allows {cap}")
    return replace(p, desired=desired)


def _route(p: Proposal, f: Measures) -> Via:
    if p.desired > f.live:
        return "fifo" if p.desired <= f.latest.workers_max else "reload"
    # uWSGI's `-` cheaps only a worker idle at its check, else it stays pending: the FIFO
    # serves a shrink that keeps at least the requests in service (the peak of the window).
    held = f.l_window if p.in_service is None else p.in_service
    in_service = max(f.l_recent or 0.0, held or 0.0)
    # (a reload was once sent for 16 clients on 16 workers at L = 16.02: L's noise)
    holding = workers_holding(in_service, f.latest.threads)
    idle = f.latest.idle > 0 and not f.all_busy and p.desired >= holding
    return "fifo" if idle else "reload"


def last_hour(changes: Sequence[float], now: float) -> tuple[float, ...]:
    """The changes within the hour before `now`: what the hourly limit counts."""
    return tuple(c for c in changes if now - c < HOUR)


def hour_full(changes: Sequence[float], now: float, s: TunerSettings) -> int | None:
    """How many changes the last hour had when that reached `max_changes_per_hour`, else None."""
    n = len(last_hour(changes, now))
    return n if n >= s.max_changes_per_hour else None


def cooling(last: float | None, now: float, cool: float) -> float | None:
    """Seconds since `last` while that is within the cool-down `cool`; else None."""
    if last is None or now - last >= cool:
        return None
    return now - last


def _paced(p: Proposal, f: Measures, st: TunerState, s: TunerSettings) -> str | None:
    full = hour_full(st.changes, f.now, s)
    if full is not None:
        return f"{full} changes in the last hour (max {s.max_changes_per_hour})"
    if p.urgent:
        return None
    cool = s.cooldown_up if p.desired > f.live or p.quick else s.cooldown_down
    since = cooling(st.last_change, f.now, cool)
    if since is not None:
        return f"last change {since:.0f}s ago, cool-down {cool:g}s"
    return None


def _wait(code: str, why: str, live: int, st: TunerState, ev: Evidence | None = None) -> Decision:
    return Decision("wait", code, live, live, why, evidence=ev or {"live": live}, state=st)


def decide(
    frames: Sequence[Frame],
    state: TunerState,
    settings: TunerSettings,
    now: float | None = None,
    latency: LatencyView | None = None,
) -> Decision:
    """One step: guards, sizing, the latency target (with `settings.latency_target`, read
    from `latency`: tuner/targeting.py), bounds, pacing. `now` defaults to the latest
    frame's time."""
    if not frames:
        return _wait("no-stats", "no stats yet", 0, state)
    latest = frames[-1]
    now = latest.mono if now is None else now
    if state.expect_live is not None and latest.live == state.expect_live and latest.ok:
        state = state.confirmed()
    for code, guard in GUARDS:
        why = guard(latest, state, settings, now)
        if why:
            return _wait(code, why, latest.live, state)
    st = state.forget(now, settings)
    f = gather(frames, settings, now, st.regime_start(settings))
    ev = f.evidence()
    if len(f.regime) < 2 or (st.probe is not None and f.x is None and st.probe.to_live == f.live):
        return _wait(
            "measuring", f"measuring {f.live} workers ({len(f.regime)} polls)", f.live, st, ev
        )
    before = st
    st, prop = propose(f, st, settings)
    if settings.latency_target is not None:
        target = constrain(prop, f, st, settings, latency, frames)
        st, prop, ev = target.state, target.proposal, {**ev, **target.evidence}
        if target.wait is not None:
            return _wait("latency-unknown", target.wait, f.live, st, ev)
    prop = _bound(prop, f, settings)
    # Pacing holds a change back: a verdict's move is judged again at the next poll; any
    # other keeps the verdict reached now (judged later, a probe would be compared with a
    # measurement up to a cool-down old: 64 -> 11 was judged 27 s late, and reverted).
    held = before if prop.verdict else st
    if prop.desired == f.live:
        return Decision("hold", prop.code, f.live, f.live, prop.reason, evidence=ev, state=st)
    if prop.probe and f.x is None and not prop.fast:
        return _wait("measuring", f"{prop.reason}; measuring {f.live} first", f.live, held, ev)
    why = _paced(prop, f, st, settings)
    if why:
        return _wait("cooldown", f"wants {prop.desired} ({prop.code}) but {why}", f.live, held, ev)
    return _change(prop, f, st, settings, ev)


def _change(p: Proposal, f: Measures, st: TunerState, s: TunerSettings, ev: Evidence) -> Decision:
    via = _route(p, f)
    x, noise = (f.x, f.noise) if f.x else (f.x_part, f.noise_part)
    cpus = f.model.cpus if f.model is not None else None
    hot = cpu_hot(f, s)
    queue = f.queue if f.queue is None or f.queue_now is None else max(f.queue, f.queue_now)
    probe = Probe(f.live, p.desired, x, noise, f.now, cpus, hot, queue) if p.probe and x else None
    nxt = replace(
        st,
        last_change=f.now,
        changes=(*last_hour(st.changes, f.now), f.now),
        expect_live=p.desired,
        expect_since=f.now,
        last_reload=f.now if via == "reload" else st.last_reload,
        probe=probe,
    )
    action: Action = "up" if p.desired > f.live else "down"
    return Decision(action, p.code, p.desired, f.live, p.reason, via, ev, nxt)


def settle_horizon(settings: TunerSettings) -> float:
    """Seconds of frames the policy looks back on (for the caller's window)."""
    return math.ceil(max(settings.down_window, settings.measure_frames * settings.interval) * 2)
