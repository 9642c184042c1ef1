"""Built-in warnings and the rules-engine bridge."""

from __future__ import annotations

from dataclasses import dataclass, replace

from tests.tui.frames import T0, frame, history
from uwsgitune.rules import evaluate
from uwsgitune.tui.rules_bridge import RulesAnnotator, annotation_from_finding
from uwsgitune.tui.warnings import builtin_warnings


def keys(frames: tuple) -> list[str]:
    return [a.key for a in builtin_warnings(frames)]


def test_healthy_has_no_warnings() -> None:
    assert keys(history(10)) == []
    assert builtin_warnings(()) == []


def findings(frames: tuple) -> list:  # type: ignore[type-arg]
    return [a for a in RulesAnnotator(evaluate)(frames) if a.origin == "rules"]


def test_queue_full_is_a_finding_with_since_and_evidence() -> None:
    # A full listen queue is the rules' finding now, not a built-in warning (issue 13).
    frames = tuple(frame(i, queue=16 if i >= 5 else 2) for i in range(30))
    assert keys(frames) == []
    [a] = [a for a in findings(frames) if a.key.startswith("listen_queue.")]
    assert a.key == "listen_queue.saturated" and a.severity == "warning"
    assert a.since is not None and "peak_queue=16" in a.evidence and "backlog=16" in a.evidence


def test_all_busy_cpu_saturated_sorted_by_severity() -> None:
    # Queue full, all busy and CPU saturated: one critical finding names them together.
    frames = history(30, busy=4, cpu=1.9, queue=16)
    assert keys(frames) == []
    items = findings(frames)
    assert items[0].key == "listen_queue.cpu_saturated"
    assert items[0].severity == "critical" and "all_busy_share=1" in items[0].evidence


def test_reload_detected_for_a_minute() -> None:
    frames = (
        *history(3),
        replace(frame(3), kind="reload", reloads_seen=1),
        *(frame(i) for i in range(4, 30)),
    )
    assert keys(frames) == ["reload"]
    later = (*frames, *(frame(i) for i in range(30, 70)))
    assert keys(later) == []


def test_disconnected() -> None:
    f = replace(frame(3), kind="error", error="refused", disconnected_since=T0)
    [a] = builtin_warnings((f,))
    assert a.key == "disconnected" and a.evidence == "refused"


@dataclass(frozen=True)
class Ev:
    name: str
    value: float
    unit: str = ""


@dataclass(frozen=True)
class Rec:
    setting: str = "processes"
    value: int = 8
    current: int = 4
    apply: str = "reload"
    effect: str = "more capacity"


@dataclass(frozen=True)
class FakeFinding:
    id: str = "workers.too_few"
    severity: str = "warning"
    reason: str = "too few workers"
    evidence: tuple = (Ev("busy_ratio", 0.97, "ratio"),)
    recommendation: Rec | None = Rec()
    since: float | None = T0


def test_finding_becomes_an_annotation() -> None:
    a = annotation_from_finding(FakeFinding())
    assert (a.key, a.severity, a.origin) == ("workers.too_few", "warning", "rules")
    assert a.evidence == "busy_ratio=0.97 ratio"
    assert a.recommendation == "processes 4 → 8 (reload): more capacity"


def test_rules_annotator_keeps_state_and_survives_failures() -> None:
    calls = []

    def evaluate(frames, facts, settings, state):  # type: ignore[no-untyped-def]
        calls.append(state)
        return (FakeFinding(),), (state or 0) + 1

    ann = RulesAnnotator(evaluate)
    ann(history(3))
    items = ann(history(3, queue=16))
    assert calls == [None, 1]
    assert [a.key for a in items] == ["workers.too_few"]  # queue_full is a finding now

    def broken(*_a):  # type: ignore[no-untyped-def]
        raise ValueError("boom")

    items = RulesAnnotator(broken)(history(3))
    assert [a.key for a in items] == ["rules.error"] and "boom" in items[0].reason
