"""Property tests: random windows never crash the engine, and its answers are deterministic."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from uwsgitune.core.frame import Frame, RequestView, SocketView, WorkerView
from uwsgitune.rules import ConfigFacts, Facts, evaluate, finding_to_dict

pos = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)
ratio = st.floats(min_value=0, max_value=1, allow_nan=False)
opt_pos = st.none() | pos
opt_int = st.none() | st.integers(min_value=0, max_value=1 << 40)

requests = st.builds(
    RequestView,
    core=st.integers(0, 4),
    method=st.sampled_from(["GET", "POST", ""]),
    path=st.text(max_size=8),
    age=st.none() | st.floats(0, 1e5, allow_nan=False),
)
workers = st.builds(
    WorkerView,
    slot=st.integers(0, 64),
    id=st.integers(0, 64),
    pid=st.integers(0, 1 << 20),
    status=st.sampled_from(["idle", "busy", "cheap", "pause", "sig9"]),
    requests=st.integers(0, 10**6),
    exceptions=st.integers(0, 10**6),
    signals=st.integers(0, 100),
    tx=st.integers(0, 10**9),
    avg_rt_us=st.integers(0, 10**8),
    running_time_us=st.integers(0, 10**12),
    rss=opt_int,
    vsz=opt_int,
    respawn_count=st.integers(0, 100),
    harakiri_count=st.integers(0, 100),
    last_spawn=pos,
    rps=opt_pos,
    eps=opt_pos,
    busy_pct=st.none() | st.floats(0, 100),
    cpu_pct=st.none() | st.floats(0, 400),
    mean_rt_ms=opt_pos,
    request_age=opt_pos,
    requests_in_flight=st.lists(requests, max_size=2).map(tuple),
)
sockets = st.builds(
    SocketView,
    name=st.sampled_from(["127.0.0.1:1", "/s.sock"]),
    proto=st.just("http"),
    unix=st.booleans(),
    queue=st.none() | st.integers(0, 5000),
    backlog=st.none() | st.integers(0, 5000),
    source=st.sampled_from(["stats", "kernel", "none"]),
)


@st.composite
def frames(draw: st.DrawFn) -> list[Frame]:
    n = draw(st.integers(0, 40))
    out = []
    mono = 0.0
    for _ in range(n):
        mono += draw(st.floats(0.01, 5))
        live = draw(st.integers(0, 8))
        out.append(
            Frame(
                source="p",
                t=1e9 + mono,
                mono=mono,
                kind=draw(
                    st.sampled_from(["ok", "ok", "ok", "first", "reload", "restart", "error"])
                ),
                dt=draw(st.none() | st.floats(0, 5)),
                workers_max=draw(st.integers(0, 16)),
                live=live,
                busy=draw(st.integers(0, 8)),
                cheap=draw(st.integers(0, 8)),
                threads=draw(st.integers(0, 8)),
                workers=tuple(draw(st.lists(workers, max_size=4))),
                requests_total=draw(st.integers(0, 10**6)),
                rps=draw(opt_pos),
                eps=draw(opt_pos),
                mean_rt_ms=draw(opt_pos),
                littles_l=draw(opt_pos),
                busy_ratio=draw(st.none() | ratio),
                static_share=draw(st.none() | ratio),
                sockets=tuple(draw(st.lists(sockets, max_size=2))),
                listen_overflows_delta=draw(opt_int),
                cpu_count=draw(st.none() | st.integers(0, 64)),
                effective_cpus=draw(st.none() | st.floats(0, 64)),
                host_cpu_pct=draw(st.none() | st.floats(0, 100)),
                instance_cpu_cores=draw(st.none() | st.floats(0, 64)),
                somaxconn=draw(st.none() | st.integers(0, 65535)),
                mem_total_rss=draw(opt_int),
                mem_per_worker=draw(opt_int),
                mem_available=draw(opt_int),
                mem_limit=draw(opt_int),
                memory_report=draw(st.booleans()),
                harakiri_delta=draw(st.none() | st.integers(0, 50)),
                respawns_delta=draw(st.none() | st.integers(0, 50)),
                signal_queue=draw(st.integers(0, 1000)),
            )
        )
    return out


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
