"""Plug the rules engine into the annotations pane, defensively.

`default_annotator()` returns the function the poll threads call on each window of frames:
the built-in warnings, plus the rules engine's findings when `uwsgitune.rules` exposes
`evaluate(frames, facts, settings, state) -> (findings, state)`. A finding becomes an
`Annotation` by duck typing (id, severity, reason, evidence, recommendation), so a change in
the engine's types costs a line here, not a change in the pane. Any failure of the engine
falls back to the built-in warnings for that poll and is shown as one info item.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

from uwsgitune.core.frame import Frame
from uwsgitune.tui.warnings import Annotation, builtin_warnings, sort_annotations

Evaluate = Callable[..., Any]


def _evidence_text(evidence: Any) -> str:
    parts = []
    for e in evidence or ():
        name, value, unit = (getattr(e, k, None) for k in ("name", "value", "unit"))
        if name is None:
            parts.append(str(e))
            continue
        shown = f"{value:.3g}" if isinstance(value, float) else str(value)
        parts.append(f"{name}={shown}{' ' + unit if unit else ''}")
    return ", ".join(parts)


def _recommendation_text(rec: Any) -> str:
    if rec is None:
        return ""
    if isinstance(rec, str):
        return rec
    setting = getattr(rec, "setting", "?")
    value, current = getattr(rec, "value", None), getattr(rec, "current", None)
    apply, effect = getattr(rec, "apply", ""), getattr(rec, "effect", "")
    change = f"{setting} {current} → {value}" if current is not None else f"{setting} → {value}"
    return f"{change} ({apply}): {effect}".strip()


def annotation_from_finding(f: Any) -> Annotation:
    severity = str(getattr(f, "severity", "info"))
    return Annotation(
        key=str(getattr(f, "id", "finding")),
        severity=severity if severity in ("info", "warning", "critical") else "info",  # type: ignore[arg-type]
        reason=str(getattr(f, "reason", ""))
        + (" (clearing)" if getattr(f, "clearing", False) else ""),
        evidence=_evidence_text(getattr(f, "evidence", ())),
        recommendation=_recommendation_text(getattr(f, "recommendation", None)),
        since=getattr(f, "since", None),
        origin="rules",
    )


class RulesAnnotator:
    """Built-in warnings plus the engine's findings, keeping the engine's state per instance."""

    def __init__(self, evaluate: Evaluate, settings: Any = None, facts: Any = None) -> None:
        self.evaluate = evaluate
        self.settings = settings
        self.facts = facts
        self.state: Any = None

    def __call__(self, frames: Sequence[Frame]) -> list[Annotation]:
        items = builtin_warnings(frames)
        try:
            findings, self.state = self.evaluate(frames, self.facts, self.settings, self.state)
            items += [annotation_from_finding(f) for f in findings]
        except Exception as exc:  # the engine is young; never let it take the screen down
            items.append(Annotation("rules.error", "info", f"rules engine failed: {exc}"))
        return sort_annotations(items)


def _find_engine() -> tuple[Evaluate, Any] | None:
    try:
        rules = importlib.import_module("uwsgitune.rules")
        evaluate = getattr(rules, "evaluate", None)
        if not callable(evaluate):
            return None
        settings_cls = getattr(
            importlib.import_module("uwsgitune.rules.settings"), "RuleSettings", None
        )
        return evaluate, (settings_cls() if settings_cls is not None else None)
    except Exception:
        return None


def default_annotator() -> Callable[[Sequence[Frame]], list[Annotation]]:
    """Built-in warnings, with the rules engine when it is installed and answers."""
    engine = _find_engine()
    if engine is None:
        return builtin_warnings
    return RulesAnnotator(engine[0], engine[1])
