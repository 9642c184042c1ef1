"""Recorded scenarios: real uWSGI under real load (bench/record_scenarios.py), replayed.

Each recording must raise its finding with a recommendation in the right direction; the
healthy one must raise nothing. Re-record with `.venv/bin/python bench/record_scenarios.py`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.instances import replayed
from uwsgitune.cli.recommend import settings_for
from uwsgitune.core.address import parse_address
from uwsgitune.core.frame import Frame
from uwsgitune.rules import EngineState, Facts, Finding, evaluate

RECORDINGS = Path(__file__).resolve().parent.parent / "data" / "recordings"

# scenario -> (finding id, recommended setting, direction); setting None = no recommendation
EXPECTED: dict[str, list[tuple[str, str | None, str | None]]] = {
    "listen_capacity_short": [("listen_queue.capacity_short", "processes", "raise")],
    "listen_cpu_saturated": [("listen_queue.cpu_saturated", "outside:cpu", "raise")],
    "listen_bursts": [("listen_queue.bursts", "listen", "raise")],
    "oversubscribed_cpu": [("oversubscribed_cpu", "processes", "lower")],
    "underprovisioned_io": [("underprovisioned_io", "processes", "raise")],
    "idle_overprovisioned": [("idle_overprovisioned", "processes", "lower")],
    "memory_leak": [("memory.rss_growth", "reload-on-rss", "set")],
    "threads_gil": [("threads_gil", "threads", "lower")],
    "health_errors": [
        ("health.exceptions", None, None),
        ("health.harakiri", None, None),
        ("health.respawn_storm", None, None),
    ],
    "stuck_request": [("health.stuck_requests", "harakiri", "set")],
    "static_files": [("static_files", "offload-threads", "set")],
    "config_hazards": [
        ("config.stats_http", "stats-http", "disable"),
        ("config.no_memory_report", "memory-report", "enable"),
        ("config.default_listen", "listen", "raise"),
    ],
}
# findings that must NOT appear: the other causes of the same symptom
EXCLUDED: dict[str, set[str]] = {
    "listen_capacity_short": {"listen_queue.cpu_saturated", "listen_queue.bursts"},
    "listen_cpu_saturated": {"listen_queue.capacity_short", "underprovisioned_io"},
    "listen_bursts": {"listen_queue.capacity_short", "listen_queue.cpu_saturated"},
    "oversubscribed_cpu": {"underprovisioned_io", "idle_overprovisioned"},
    "underprovisioned_io": {"oversubscribed_cpu", "idle_overprovisioned"},
    "idle_overprovisioned": {"underprovisioned_io", "oversubscribed_cpu"},
}


def frames_of(name: str) -> list[Frame]:
    return replayed(RECORDINGS / f"{name}.jsonl")


def one_shot(name: str) -> tuple[Finding, ...]:
    """What `uwsgitune recommend --replay` does: the whole recording is the window."""
    frames = frames_of(name)
    facts = Facts(stats_kind=parse_address(frames[0].source).kind)
    return evaluate(frames, facts, settings_for(frames[-1].mono - frames[0].mono))[0]


def test_healthy_recording_raises_nothing() -> None:
    assert one_shot("healthy") == ()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_scenario_raises_its_finding(name: str) -> None:
    findings = {f.id: f for f in one_shot(name)}
    for fid, setting, direction in EXPECTED[name]:
        assert fid in findings, f"{name}: {fid} missing; got {sorted(findings)}"
        rec = findings[fid].recommendation
        if setting is None:
            continue
        assert rec is not None and rec.setting == setting and rec.direction == direction
    assert not EXCLUDED.get(name, set()) & set(findings)


@pytest.mark.parametrize(
    "name", ["listen_capacity_short", "oversubscribed_cpu", "underprovisioned_io"]
)
def test_daemon_style_stepping_raises_once_and_holds(name: str) -> None:
    """Evaluated after every poll with default settings and state: raised once, never dropped."""
    frames = frames_of(name)
    fid = EXPECTED[name][0][0]
    state: EngineState | None = None
    seen = []
    for i in range(len(frames)):
        findings, state = evaluate(frames[: i + 1], state=state)
        seen.append(any(f.id == fid and not f.clearing for f in findings))
    assert True in seen
    assert all(seen[seen.index(True) :])
