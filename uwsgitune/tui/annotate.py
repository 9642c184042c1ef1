"""The annotations pane's items for one instance state. Pure.

The rules' findings (run once per poll by the pipeline), the tuner's advice, and the only
built-in warnings the rules cannot give (the instance is unreachable, it just reloaded)
become the same `Annotation`, so the pane does not care where an item comes from.
"""

from __future__ import annotations

from uwsgitune.pipeline.state import InstanceState
from uwsgitune.rules.finding import Finding
from uwsgitune.rules.render import evidence_text, recommendation_text
from uwsgitune.tui.warnings import Annotation, builtin_warnings, sort_annotations
from uwsgitune.tuner.decision import Decision


def annotation_from_finding(f: Finding) -> Annotation:
    rec = f.recommendation
    return Annotation(
        key=f.id,
        severity=f.severity,
        reason=f.reason + (" (clearing)" if f.clearing else ""),
        evidence=evidence_text(f.evidence),
        recommendation="" if rec is None else recommendation_text(rec),
        since=f.since,
        origin="rules",
    )


def tuner_annotation(d: Decision) -> Annotation:
    if d.is_change:
        return Annotation(
            key="tuner",
            severity="warning",
            reason=f"tuner advises {d.headline()} [{d.code}]: {d.reason}",
            evidence=d.evidence_text(),
            recommendation="press a to apply (asks first)",
            origin="tuner",
        )
    return Annotation(
        key="tuner",
        severity="info",
        reason=f"tuner: {d.headline()} [{d.code}]: {d.reason}",
        origin="tuner",
    )


def annotations_for(state: InstanceState) -> tuple[Annotation, ...]:
    """The tuner's advice first, then every item by severity."""
    items = builtin_warnings(state.frames)
    items += [annotation_from_finding(f) for f in state.findings]
    if state.rules_error is not None:
        items.append(Annotation("rules.error", "info", state.rules_error))
    ordered = sort_annotations(items)
    d = state.tuning.decision if state.tuning is not None else None
    return tuple([tuner_annotation(d), *ordered] if d is not None else ordered)
