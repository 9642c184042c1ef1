"""Built-in warnings and the rules-engine bridge."""

from __future__ import annotations

import pytest

from tests.tui.frames import T0, disconnected, frame, history
from uwsgitune.pipeline import InstanceState, RulesRunner
from uwsgitune.pipeline import rules as rules_module
from uwsgitune.rules import EngineState, Evidence, EvidenceWindow, Finding, Recommendation
from uwsgitune.tui.annotate import annotation_from_finding, annotations_for
from uwsgitune.tui.warnings import builtin_warnings


def keys(frames: tuple) -> list[str]:
    return [a.key for a in builtin_warnings(frames)]


def test_healthy_has_no_warnings() -> None:
    assert keys(history(10)) == []
    assert builtin_warnings(()) == []


def findings(frames: tuple) -> list:  # type: ignore[type-arg]
    """The rules' findings of the frames, as the annotations pane shows them."""
    return [annotation_from_finding(f) for f in RulesRunner().run(frames)]


def test_queue_full_is_a_finding_with_since_and_evidence() -> None:
    # A full listen queue is the rules' finding now, not a built-in warning (issue 13).
    frames = tuple(frame(i, queue=16 if i >= 5 else 2) for i in range(30))
    assert keys(frames) == []
    [a] = [a for a in findings(frames) if a.key.startswith("listen_queue.")]
    assert a.key == "listen_queue.saturated" and a.severity == "warning"
    assert a.since is not None and "peak_queue 16 connections" in a.evidence
    assert "backlog 16 connections" in a.evidence


def test_all_busy_cpu_saturated_sorted_by_severity() -> None:
    # Queue full, all busy and CPU saturated: one critical finding names them together.
    frames = history(30, busy=4, cpu=1.9, queue=16)
    assert keys(frames) == []
    items = findings(frames)
    assert items[0].key == "listen_queue.cpu_saturated"
    assert items[0].severity == "critical" and "all_busy_share 100%" in items[0].evidence


def test_reload_detected_for_a_minute() -> None:
    frames = history(30, reload_at=3)
    assert frames[3].kind == "reload" and frames[3].reloads_seen == 1
    assert keys(frames) == ["reload"]
    later = history(70, reload_at=3)
    assert keys(later) == []


def test_disconnected() -> None:
    f = disconnected(3, "refused")[-1]
    [a] = builtin_warnings((f,))
    assert a.key == "disconnected" and a.evidence == "refused"


FINDING = Finding(
    id="workers.too_few",
    severity="warning",
    reason="too few workers",
    evidence=(Evidence("busy_ratio", 0.97, "ratio"),),
    window=EvidenceWindow(T0, T0, 1),
    recommendation=Recommendation("processes", "raise", 8, "reload", "more capacity", current=4),
    since=T0,
)


def test_finding_becomes_an_annotation() -> None:
    a = annotation_from_finding(FINDING)
    assert (a.key, a.severity, a.origin) == ("workers.too_few", "warning", "rules")
    assert a.evidence == "busy_ratio 97%"
    assert a.recommendation == "processes 4 → 8 (reload): more capacity"


def test_rules_keep_state_and_survive_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def evaluate(frames, facts, settings, state, memo=None, latency=None):  # type: ignore[no-untyped-def]
        calls.append(state)
        return (FINDING,), (1 if isinstance(state, EngineState) else state + 1)

    monkeypatch.setattr(rules_module, "evaluate", evaluate)
    runner = RulesRunner()
    runner.run(history(3))
    frames = history(3, queue=16)
    found = runner.run(frames)
    assert isinstance(calls[0], EngineState) and calls[1] == 1
    items = annotations_for(InstanceState("s", frame=frames[-1], frames=frames, findings=found))
    assert [a.key for a in items] == ["workers.too_few"]  # queue_full is a finding now

    def broken(*_a):  # type: ignore[no-untyped-def]
        raise ValueError("boom")

    monkeypatch.setattr(rules_module, "evaluate", broken)
    assert runner.run(frames) == () and runner.error is not None
    items = annotations_for(InstanceState("s", frames=history(3), rules_error=runner.error))
    assert [a.key for a in items] == ["rules.error"] and "boom" in items[0].reason
