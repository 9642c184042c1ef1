"""Instance states for the sinks' tests: typed findings and tuner results, as a pipeline
would publish them."""

from __future__ import annotations

from uwsgitune.rules.finding import EvidenceWindow, Finding, Recommendation
from uwsgitune.tuner.decision import Decision
from uwsgitune.tuner.result import AuditRecord, StepResult


def finding(
    fid: str, severity: str, setting: str | None = None, value: int | str | None = None
) -> Finding:
    rec = None
    if setting is not None:
        rec = Recommendation(setting, "set", value, "reload", "effect")
    return Finding(fid, severity, "why", (), EvidenceWindow(0.0, 0.0, 1), rec)  # type: ignore[arg-type]


def decided(action: str, code: str, desired: int, live: int = 4) -> StepResult:
    d = Decision(action, code, desired, live, "reason")  # type: ignore[arg-type]
    return StepResult(d, "apply")


def change(via: str, result: str, detail: str = "") -> AuditRecord:
    return AuditRecord("change", 0.0, "app", "apply", via=via, result=result, detail=detail)
