"""Properties of `decide` over arbitrary frames: bounds always hold; stale stats never act."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from uwsgitune.core.frame import Frame, SocketView
from uwsgitune.tuner import TunerSettings, TunerState, decide

floats = st.floats(min_value=0, max_value=64, allow_nan=False)


@st.composite
def frames(draw: st.DrawFn) -> list[Frame]:
    workers_max = draw(st.integers(1, 32))
    out = []
    for i in range(draw(st.integers(1, 12))):
        live = draw(st.integers(0, workers_max))
        queue = draw(st.none() | st.integers(0, 200))
        out.append(
            Frame(
                source="p",
                t=1e9 + i,
                mono=float(i),
                kind=draw(st.sampled_from(["ok", "ok", "ok", "reload", "error", "first"])),
                workers_max=workers_max,
                live=live,
                busy=draw(st.integers(0, live)),
                idle=0,
                rps=draw(st.none() | floats),
                mean_rt_ms=draw(st.none() | floats),
                littles_l=draw(st.none() | st.floats(0, float(live) + 1)),
                busy_ratio=draw(st.none() | st.floats(0, 1)),
                sockets=(SocketView("h:1", "http", False, queue, 100, "stats"),),
                effective_cpus=draw(st.none() | st.floats(0.5, 8)),
                instance_cpu_cores=draw(st.none() | st.floats(0, 8)),
                mem_per_worker=draw(st.none() | st.integers(1, 2**30)),
                mem_available=draw(st.none() | st.integers(0, 2**34)),
            )
        )
    return out


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
