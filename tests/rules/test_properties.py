"""Property tests: random windows never crash the engine, and its answers are deterministic."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.frames import play
from tests.support.instances import Load
from uwsgitune.core.frame import Frame, RequestView, SocketView
from uwsgitune.rules import ConfigFacts, Facts, evaluate, finding_to_dict

pos = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)
ratio = st.floats(min_value=0, max_value=1, allow_nan=False)

requests = st.builds(
    RequestView,
    core=st.just(0),
    method=st.sampled_from(["GET", "POST", ""]),
    path=st.text(
        st.characters(blacklist_categories=("Cs",), blacklist_characters="=\x00"), max_size=8
    ),
    age=st.floats(0, 1e5, allow_nan=False),
)
sockets = st.one_of(
    st.builds(
        SocketView,
        name=st.just("127.0.0.1:1"),
        proto=st.just("http"),
        unix=st.just(False),
        queue=st.integers(0, 5000),
        backlog=st.integers(0, 5000),
        source=st.just("stats"),
    ),
    st.builds(
        SocketView,
        name=st.sampled_from(["/s.sock", "/t.sock"]),
        proto=st.just("uwsgi"),
        unix=st.just(True),
        queue=st.integers(0, 5000),
        backlog=st.integers(0, 5000),
        source=st.just("kernel"),
    ),
    st.just(SocketView("/n.sock", "uwsgi", True, None, None, "none")),
)


@st.composite
def loads(draw: st.DrawFn, slots: int, spawned: float) -> Load:
    live = draw(st.integers(0, slots))
    return Load(
        live=live,
        cheap=slots - live,  # a new slot count is a new instance: the Tracker sees a reload
        threads=draw(st.integers(1, 8)),
        busy=draw(st.integers(0, live)),
        rps=draw(pos),
        eps=draw(pos),
        in_service=draw(pos),
        static_share=draw(ratio),
        worker_cpu=draw(st.floats(0, 8)),
        runq=draw(st.none() | st.floats(0, 8)),
        host_busy=draw(st.none() | st.floats(0, 64)),
        host_nice=draw(st.floats(0, 8)),
        cpus=draw(st.integers(1, 64)),
        effective_cpus=draw(st.floats(0, 64)),
        somaxconn=draw(st.none() | st.integers(0, 65535)),
        rss=draw(st.integers(0, 1 << 40)),
        memory_report=draw(st.booleans()),
        mem_available=draw(st.integers(0, 1 << 40)),
        sockets=tuple(draw(st.lists(sockets, max_size=2))),
        harakiri=draw(st.integers(0, 50)),
        respawns=draw(st.integers(0, 50)),
        signal_queue=draw(st.integers(0, 1000)),
        listen_overflows=draw(st.integers(0, 1 << 20)),
        request=draw(st.none() | requests),
        host=draw(st.booleans()),
        spawned=spawned,
    )


@st.composite
def frames(draw: st.DrawFn) -> list[Frame]:
    """Up to 40 polls of one instance, at random intervals under random loads, through the
    real Tracker: every kind of poll (first, ok, reload, restart, error)."""
    steps = []
    mono = 0.0
    slots, spawned = draw(st.integers(0, 16)), draw(pos)
    for _ in range(draw(st.integers(0, 40))):
        mono += draw(st.floats(0.01, 5))
        kind = draw(st.sampled_from(["ok", "ok", "ok", "first", "reload", "restart", "error"]))
        steps.append((kind, mono, draw(loads(slots, spawned))))
    return play(steps, "p")


facts = st.builds(
    Facts,
    config=st.builds(
        ConfigFacts,
        cheaper=st.none() | st.integers(0, 8),
        cheaper_algo=st.none() | st.sampled_from(["spare", "manual", "busyness"]),
        offload_threads=st.none() | st.integers(0, 4),
    ),
    stats_kind=st.none() | st.sampled_from(["unix", "tcp", "http"]),
)


@settings(max_examples=150, deadline=None)
@given(frames(), facts)
def test_random_windows_never_crash_and_are_deterministic(window: list[Frame], fx: Facts) -> None:
    first, _ = evaluate(window, fx)
    second, _ = evaluate(list(window), fx)
    assert first == second
    for f in first:
        json.dumps(finding_to_dict(f), allow_nan=False)
        assert f.severity in ("info", "warning", "critical") and f.reason


@settings(max_examples=40, deadline=None)
@given(frames())
def test_stepping_with_state_never_crashes(window: list[Frame]) -> None:
    state = None
    for i in range(len(window)):
        findings, state = evaluate(window[: i + 1], state=state)
        assert len({f.id for f in findings}) == len(findings)
