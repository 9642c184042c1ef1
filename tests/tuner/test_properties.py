"""Properties of `decide` over arbitrary frames: bounds always hold; stale stats never act."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.frames import play
from tests.support.instances import Load
from uwsgitune.core.frame import Frame, SocketView
from uwsgitune.tuner import TunerSettings, TunerState, decide

floats = st.floats(min_value=0, max_value=64, allow_nan=False)


@st.composite
def frames(draw: st.DrawFn) -> list[Frame]:
    """Up to 12 polls, 1 s apart, of an instance with `workers_max` slots under random loads,
    through the real Tracker (ok, reload, error and first polls)."""
    workers_max = draw(st.integers(1, 32))
    steps = []
    for i in range(draw(st.integers(1, 12))):
        live = draw(st.integers(0, workers_max))
        queue = draw(st.none() | st.integers(0, 200))
        # an unknown queue: a unix socket the kernel was not asked about
        socket = (
            SocketView("/s.sock", "uwsgi", True, None, None, "none")
            if queue is None
            else SocketView("h:1", "http", False, queue, 100, "stats")
        )
        load = Load(
            live=live,
            cheap=workers_max - live,
            busy=draw(st.integers(0, live)),
            rps=draw(floats),
            in_service=draw(st.floats(0, float(live) + 1)),
            worker_cpu=draw(st.floats(0, 8)) / max(live, 1),
            host_busy=draw(st.none() | st.floats(0, 8)),
            cpus=8,
            effective_cpus=draw(st.floats(0.5, 8)),
            rss=draw(st.integers(1, 2**30)),
            mem_available=draw(st.integers(0, 2**34)),
            sockets=(socket,),
            host=draw(st.booleans()),
        )
        kind = draw(st.sampled_from(["ok", "ok", "ok", "reload", "error", "first"]))
        steps.append((kind, float(i), load))
    return play(steps, "p")


bounds = st.tuples(st.integers(1, 8), st.integers(0, 24)).map(lambda t: (t[0], t[0] + t[1]))
states = st.builds(
    TunerState,
    last_change=st.none() | st.floats(-100, 12),
    plateau_up=st.none() | st.integers(1, 32),
    plateau_down=st.none() | st.integers(1, 32),
)


@settings(max_examples=150, deadline=None)
@given(frames(), bounds, states)
def test_a_change_stays_within_floor_and_ceiling(
    fs: list[Frame], b: tuple[int, int], s: TunerState
) -> None:
    cfg = TunerSettings(min_workers=b[0], max_workers=b[1])
    d = decide(fs, s, cfg, now=fs[-1].mono)
    if d.is_change:
        assert cfg.min_workers <= d.desired <= cfg.max_workers
        assert d.desired != d.live
        assert fs[-1].kind == "ok"
    assert d.reason


@settings(max_examples=100, deadline=None)
@given(frames(), st.floats(2.001, 1000), states)
def test_never_acts_on_stale_stats(fs: list[Frame], age: float, s: TunerState) -> None:
    cfg = TunerSettings()
    d = decide(fs, s, cfg, now=fs[-1].mono + age * cfg.interval)
    assert not d.is_change
    assert d.action == "wait"
